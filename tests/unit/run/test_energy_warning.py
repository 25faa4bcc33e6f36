"""`--energy` says when nothing can be measured: without a power source the plan warns (on
stderr, never stdout) and the run continues; with a power source and jpwr it is silent."""

from __future__ import annotations

from plan_helpers import FakeHost, _opts

import hpcai.run.energy as energy
from hpcai.run.plan import plan_launch


def test_energy_without_power_source_is_a_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(energy, "detect_power_source", lambda: [])
    plan = plan_launch(_opts(tmp_path, site="generic-slurm", energy=True), host=FakeHost(), check=False)
    assert any("no power source" in w and "the run continues" in w for w in plan.warnings)


def test_energy_with_power_source_and_jpwr_is_silent(tmp_path, monkeypatch):
    monkeypatch.setattr(energy, "detect_power_source", lambda: ["pynvml"])
    monkeypatch.setattr(energy, "jpwr_command", lambda: ["jpwr"])
    plan = plan_launch(_opts(tmp_path, site="generic-slurm", energy=True), host=FakeHost(), check=False)
    assert not any("--energy" in w for w in plan.warnings)


def test_energy_notice_reaches_stderr(hpcai, tmp_path, monkeypatch):
    monkeypatch.setattr(energy, "detect_power_source", lambda: [])
    res = hpcai("launch", "--dry-run", "--energy", "--site", "generic-slurm", "--image", "x.sif",
                "-o", str(tmp_path / "r"), "sanity")
    assert res.exit_code == 0
    assert "# warning: --energy: no power source on this host" in res.stderr
    assert "no power source" not in res.stdout
