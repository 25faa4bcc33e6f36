"""Concurrent submits (hardening round three, issue 25): submits started together each
claim their own record folder and batch script; a second submit into the same output folder is
refused, and a refused submit leaves no runs folder (nor the folder it claimed). Each refusal is
one line, exit 2, no traceback, nothing written."""

from __future__ import annotations

import subprocess
import sys

import pytest
from refusal_helpers import SITE, one_line_refusal

pytestmark = pytest.mark.hostile


def test_ten_concurrent_submits_give_ten_records_each_with_its_own_script(tmp_path):
    argv = [sys.executable, "-m", "hpcai", "submit", "--no-submit", *SITE, "sanity"]
    procs = [subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(10)]
    results = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
    assert all(code == 0 for code, _, _ in results), [err for _, _, err in results]
    scripts = sorted(out.strip() for _, out, _ in results)
    folders = sorted(p for p in (tmp_path / "runs").iterdir())
    assert len(set(scripts)) == 10 and len(folders) == 10
    assert scripts == sorted(str(f / "submit.sbatch") for f in folders)
    for folder in folders:
        text = (folder / "submit.sbatch").read_text()
        assert text.endswith("sanity\n") and f"#SBATCH --output={folder}/slurm-%j.out" in text
        assert f"--output-dir {folder} " in text  # the job writes its record into its own folder
        assert not [p for p in folder.iterdir() if p.name != "submit.sbatch"]  # no temporary left


def test_a_second_submit_into_the_same_output_dir_is_refused(hpcai, tmp_path):
    out = tmp_path / "r"
    first = hpcai("submit", "--no-submit", *SITE, "-o", str(out), "sanity")
    assert first.exit_code == 0, first.stderr
    before = (out / "submit.sbatch").read_text()
    second = hpcai("submit", "--no-submit", *SITE, "-o", str(out), "-N", "3", "sanity")
    one_line_refusal(second, "already holds a batch script (submit.sbatch) of another submit")
    assert (out / "submit.sbatch").read_text() == before and sorted(p.name for p in out.iterdir()) == ["submit.sbatch"]


def test_a_refused_submit_leaves_no_runs_folder(hpcai, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one_line_refusal(hpcai("submit", "--no-submit", "--site", "local", "--image", "x", "sanity"),
                     "submit needs a Slurm, PBS Pro or Flux site")
    assert not list(tmp_path.iterdir())


@pytest.mark.docker
def test_a_refused_real_submit_gives_its_claimed_folder_back(hpcai, tmp_path, monkeypatch):
    """A real submit (no --no-submit) claims its record folder while planning; a refusal after
    that (a site without Slurm) must leave neither the folder nor the runs folder behind."""
    monkeypatch.chdir(tmp_path)
    one_line_refusal(hpcai("submit", "--site", "local", "--image", "debian:bookworm-slim", "sanity"),
                     "submit needs a Slurm, PBS Pro or Flux site")
    assert not list(tmp_path.iterdir())
