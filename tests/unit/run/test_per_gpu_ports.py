"""Per-GPU ports stay below 65536 (hostile corpus, round three, issue 25): under
`--per-gpu` a base port from --env or a site whose copies (base + local rank) would pass 65535 is
refused in one line, and a job-id port is moved down to fit, as the shim moves it."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.hostile


@pytest.mark.parametrize("base, ok", [(65528, True), (65529, False), (65535, False)])
def test_per_gpu_ports_stay_below_65536_locally(base, ok, tmp_path, hpcai):
    res = hpcai("launch", "--dry-run", "--site", "local", "--image", "x.sif", "-o", str(tmp_path / "r"),
                "--per-gpu", "--gpus-per-node", "8", "--env", f"MASTER_PORT={base}", "sanity")
    assert (res.exit_code == 0) == ok, res.stderr
    if not ok:
        assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1
        assert "past 65535" in res.stderr and "at most 65528" in res.stderr


def test_per_gpu_ports_from_a_site_or_a_job_id_stay_below_65536(tmp_path, hpcai, site_path, monkeypatch):
    monkeypatch.setenv("HPCAI_SITE_PATH", site_path("high", 'backend = "srun"\nmaster_port = 65535\n'))
    res = hpcai("launch", "--dry-run", "--site", "high", "--image", "x.sif", "-o", str(tmp_path / "r"),
                "--per-gpu", "--gpus-per-node", "4", "sanity")
    assert res.exit_code == 2 and "site high: master_port is 65535" in res.stderr, res.stderr
    # A job-id port (enroot's rule: 61000 + 4535 = 65535) is moved down to fit, as the shim moves
    # it (61000 + id % (4536 - 3)): the plan and the ranks agree, nothing to refuse.
    monkeypatch.setenv("SLURM_JOB_ID", "4535")
    res = hpcai("launch", "--dry-run", "--json", "--site", "generic-slurm", "--image", "x.sif",
                "-o", str(tmp_path / "r2"), "--per-gpu", "--gpus-per-node", "4", "sanity")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["master_port"] == 61000 + 4535 % 4533 == 61002
