"""Hostile corpus, round three (issue 25), part E on the Slurm test cluster (nid[001-004]): a
hang-up (SIGHUP) of `hpcai launch` with the srun backend cancels the step as SIGTERM does
(tests/integration/test_launch_slurm.py): every rank is ended, status.json says `cancelled` by a
hang-up. The ranks are docker containers of the local `debian:bookworm-slim` started by the rank
shim in Slurm tasks on two nodes; the local backend's case is tests/unit/run/test_hang_ups.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from hangups import clean_up, containers, nap, run_dir, sleepers, start_on_a_terminal, wait_for

pytestmark = [pytest.mark.hostile, pytest.mark.slurm, pytest.mark.docker]

ENV = {**os.environ, "USER": os.environ.get("USER") or "root"}


@pytest.mark.parametrize("how", ["terminal closed", "kill -HUP"])
def test_a_hang_up_cancels_the_srun_step_and_ends_every_rank(hpcai_exe, tmp_path, how):
    nap_arg = nap()
    run = run_dir(tmp_path, nap_arg)
    argv = [*hpcai_exe, "launch", "--site", "generic-slurm", "--runtime", "docker", "--image", "debian:bookworm-slim",
            "--no-entrypoint", "-N", "2", "--ntasks-per-node", "2", "-o", str(run), "--cmd", "--", "sleep", nap_arg]
    master = None
    if how == "terminal closed":
        proc, master = start_on_a_terminal(argv, tmp_path, env=ENV)
    else:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                                env=ENV, start_new_session=True)
    try:
        assert wait_for(lambda: len(containers(run)) == 4, 90, proc), f"ranks did not start ({proc.poll()})"
        start = time.monotonic()
        if how == "terminal closed":
            os.close(master)
            master = None
        else:
            proc.send_signal(signal.SIGHUP)
        proc.wait(timeout=60)
        elapsed = time.monotonic() - start
        err = "" if how == "terminal closed" else proc.stderr.read()
        # Slurm reaps the step's processes asynchronously
        assert wait_for(lambda: not sleepers(nap_arg) and not containers(run), 30), "ranks left running"
    finally:
        if master is not None:
            os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        clean_up(run, nap_arg)
    assert proc.returncode == 130 and elapsed < 30, (proc.returncode, elapsed, err)
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "cancelled", status
    assert status["message"] == f"cancelled by a hang-up (SIGHUP); logs in {run / 'logs'}"
    if err:
        assert "Traceback" not in err
        assert [ln for ln in err.splitlines() if ln.startswith("error:")] == [f"error: {status['message']}"]
