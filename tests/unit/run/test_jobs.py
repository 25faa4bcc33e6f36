"""`--wait` for submitted jobs: how an ended job's record is read, and the options' bad uses.
Waiting on squeue itself runs on the real Slurm cluster (tests/integration/test_sweep_submit.py)."""

from __future__ import annotations

import json

import pytest

from hpcai.run import jobs


@pytest.mark.parametrize("status, state, says", [
    ({"state": "completed", "message": "completed"}, "completed", "completed"),
    ({"state": "failed", "message": "rank 1 (exit code 3) failed; log: x"}, "failed", "rank 1 (exit code 3)"),
    ({"state": "running"}, "ended", "without a final status"),  # killed at its time limit
    (None, "ended", "without a final status"),                  # never started hpcai launch
])
def test_final_state_from_the_record(tmp_path, status, state, says):
    if status is not None:
        (tmp_path / "status.json").write_text(json.dumps(status))
    (tmp_path / "slurm-42.out").write_text("slurmstepd: error: *** JOB 42 CANCELLED DUE TO TIME LIMIT ***\n")
    got, message = jobs.final_state(tmp_path)
    assert got == state and says in message
    if state == "ended":
        assert str(tmp_path / "slurm-42.out") in message


@pytest.mark.parametrize("argv, message", [
    (["submit", "--image", "img", "--no-submit", "--wait", "--cmd", "--", "true"],
     "--wait needs a submitted job; drop --no-submit"),
    (["sweep", "--nodes", "1,2", "--image", "img", "--wait", "sanity"],
     "--wait waits for submitted jobs: use it with --submit"),
    (["sweep", "--nodes", "1", "--image", "img", "--no-submit", "--wait-timeout", "5", "sanity"],
     "--wait waits for submitted jobs: use it with --submit"),
])
def test_wait_without_a_submitted_job_is_a_usage_error(hpcai, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    res = hpcai(*argv)
    assert res.exit_code == 2 and message in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "runs").exists()  # nothing written
