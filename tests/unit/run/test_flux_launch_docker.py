"""Real ranks through the flux backend (marker docker): `hpcai launch --backend flux` plans a
`flux run`, and the tasks it starts run the real rank shim and real docker containers. Flux is not
in Debian and cannot be installed here, so `flux` is the STAND-IN of tests/fixtures/flux/flux: it
starts the tasks on this machine with the variables flux-shell sets (FLUX_TASK_RANK, …) and names
a first host for `flux hostlist`. What is checked is hpcai's side: the token list Flux gets, the
rank variables the shim derives from Flux's, a failing task ending the others, and the record; and
`hpcai submit --scheduler flux --wait`, whose script the stand-in's `flux batch` runs as Flux
would, inside an "allocation": the job's `hpcai launch` starts the ranks and writes the record.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

IMAGE = "debian:bookworm-slim"
STANDIN = Path(__file__).parents[2] / "fixtures" / "flux"


def launch(hpcai_exe, run, log, *args):
    env = {**os.environ, "PATH": f"{STANDIN}:{os.environ['PATH']}", "FLUX_STANDIN_LOG": str(log),
           "FLUX_STANDIN_HOST": "tuolumne1001"}
    env.pop("FLUX_URI", None)
    argv = [*hpcai_exe, "launch", "--site", "local", "--backend", "flux", "--runtime", "docker", "--image", IMAGE,
            "--no-entrypoint", "-o", str(run), "-N", "2", "--ntasks-per-node", "2", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False, env=env)


def test_flux_tasks_get_their_rank_variables(hpcai_exe, tmp_path):
    run, log = tmp_path / "ranks", tmp_path / "flux.log"
    res = launch(hpcai_exe, run, log, "--cmd", "--", "sh", "-c",
                 'echo "$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $NODE_RANK $MASTER_ADDR $MASTER_PORT"')
    assert res.returncode == 0, res.stderr
    for rank in range(4):  # two "nodes" of two, in blocks
        out = (run / "logs" / f"rank-{rank}.out").read_text().split()
        assert out == [str(rank), str(rank % 2), "4", "2", str(rank // 2), "tuolumne1001", "29500"]
    calls = log.read_text().splitlines()
    assert calls[0].startswith("run -N 2 -n 4 --exclusive -o exit-on-error /bin/sh ")
    assert calls.count("hostlist --nth=0 local") == 4  # each rank asked for the first host
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "completed" and json.loads((run / "plan.json").read_text())["backend"] == "flux"


def test_a_failing_flux_task_ends_the_others_and_is_named(hpcai_exe, tmp_path):
    run = tmp_path / "fail"
    start = time.monotonic()
    res = launch(hpcai_exe, run, tmp_path / "flux.log", "--cmd", "--", "sh", "-c",
                 'if [ "$RANK" = 1 ]; then echo boom >&2; exit 3; fi; exec sleep 120')
    assert res.returncode == 1
    assert f"rank 1 (exit code 3) failed; log: {run}/logs/rank-1.err" in res.stderr
    assert time.monotonic() - start < 90  # exit-on-error stopped the sleepers
    assert json.loads((run / "status.json").read_text())["state"] == "failed"


def test_submit_runs_its_flux_batch_script_and_waits_for_it(hpcai_exe, tmp_path):
    run, log, jobs = tmp_path / "job", tmp_path / "flux.log", tmp_path / "jobs"
    jobs.mkdir()
    env = {**os.environ, "PATH": f"{STANDIN}:{os.environ['PATH']}", "FLUX_STANDIN_LOG": str(log),
           "FLUX_STANDIN_DIR": str(jobs)}
    env.pop("FLUX_URI", None)
    argv = [*hpcai_exe, "submit", "--site", "local", "--scheduler", "flux", "--runtime", "docker", "--image", IMAGE,
            "--no-entrypoint", "-o", str(run), "-N", "2", "--ntasks-per-node", "2", "-t", "10", "--wait",
            "--cmd", "--", "sh", "-c", 'echo "$RANK $WORLD_SIZE $NODE_RANK $MASTER_ADDR"']
    res = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert res.returncode == 0, (res.stderr, (jobs / "fStandIn1.out").read_text())
    assert res.stdout.strip() == "fStandIn1" and "job fStandIn1: completed" in res.stderr
    for rank in range(4):
        assert (run / "logs" / f"rank-{rank}.out").read_text().split() == [str(rank), "4", str(rank // 2),
                                                                           "flux-node0"]
    calls = log.read_text().splitlines()
    step = next(c for c in calls if c.startswith("run "))
    # inside the allocation: the time limit is the batch job's, not the step's
    assert step.startswith("run -N 2 -n 4 --exclusive -o exit-on-error ") and "--time-limit" not in step
    assert "# flux: --time-limit=600s" in (run / "submit.flux").read_text()
    assert json.loads((run / "status.json").read_text())["state"] == "completed"
