"""`hpcai sweep --submit` for real on the Slurm test cluster (tests/infra/slurm-up.sh): one sbatch
job per point, each writing its record into the sweep folder, then `hpcai results` reads the
series exactly as after a run sweep. Image: the build engineer's `pytorch_cpu_image` fixture."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import time
from pathlib import Path

import pytest


@pytest.mark.slurm
@pytest.mark.docker
@pytest.mark.timeout(600)
def test_sweep_submit_then_results(tmp_path, hpcai_exe, pytorch_cpu_image):
    image = pytorch_cpu_image
    sweep_dir = tmp_path / "sweep"
    started = time.monotonic()
    sub = subprocess.run([*hpcai_exe, "sweep", "--submit", "--wait", "--wait-timeout", "240",
                          "--nodes", "1,2", "--ntasks-per-node", "1",
                          "--site", "generic-slurm", "--runtime", "docker", "--mpi", "pmix", "--image", image,
                          "--var", "max_bytes=65536", "--var", "iters=5", "--var", "warmup=1",
                          "-o", str(sweep_dir), "mpi-allreduce"], capture_output=True, text=True, timeout=300)
    assert sub.returncode == 0, sub.stderr
    job_ids = sub.stdout.split()[:2]  # the job ids come first, then the tables --wait prints
    assert all(j.isdigit() for j in job_ids), sub.stdout
    assert "busbw_max_size" in sub.stdout and "scaling" in sub.stdout, sub.stdout
    assert subprocess.run(["squeue", "--noheader", "--jobs", ",".join(job_ids)],
                          capture_output=True, text=True).stdout.strip() == ""  # really over
    runs = json.loads((sweep_dir / "sweep.json").read_text())["runs"]
    assert [(r["nodes"], r["job_id"]) for r in runs] == list(zip([1, 2], job_ids))

    for r in runs:
        run_dir = Path(r["run_dir"])
        assert run_dir.parent == sweep_dir and (run_dir / "submit.sbatch").is_file()
        status = json.loads((run_dir / "status.json").read_text())
        assert status["state"] == "completed", (status, list(run_dir.glob("slurm-*.out")))
        metrics = json.loads((run_dir / "metrics.json").read_text())
        head = next(m for m in metrics["metrics"] if m["headline"])
        assert head["name"] == "busbw_max_size" and head["value"] > 0
        plan = json.loads((run_dir / "plan.json").read_text())
        assert plan["nodes"] == r["nodes"]

    show = subprocess.run([*hpcai_exe, "results", "show", str(sweep_dir)], capture_output=True, text=True)
    assert show.returncode == 0 and "busbw_max_size" in show.stdout and "scaling" in show.stdout, show.stdout
    export = subprocess.run([*hpcai_exe, "results", "export", "--csv", str(sweep_dir)], capture_output=True, text=True)
    rows = list(csv.DictReader(io.StringIO(export.stdout)))
    assert [r["Nodes"] for r in rows] == ["1", "2"] and all(r["Metric"] == "busbw_max_size" for r in rows)
    assert time.monotonic() - started < 120


@pytest.mark.slurm
@pytest.mark.docker
@pytest.mark.timeout(300)
def test_submit_wait_reports_the_failed_rank(tmp_path, hpcai_exe, pytorch_cpu_image):
    """`hpcai submit --wait`: returns once the job has left squeue, with the launch's verdict."""
    run_dir = tmp_path / "run"
    res = subprocess.run([*hpcai_exe, "submit", "--wait", "--wait-timeout", "200", "--image", pytorch_cpu_image,
                          "--site", "generic-slurm", "--runtime", "docker",
                          "-N", "2", "--ntasks-per-node", "1", "-o", str(run_dir), "--cmd", "--",
                          "sh", "-c", 'exit $((SLURM_PROCID * 3))'], capture_output=True, text=True, timeout=260)
    assert res.returncode == 1, res.stderr
    job_id = res.stdout.split()[0]
    assert f"job {job_id}: rank 1 (exit code 3) failed" in res.stderr
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "failed" and status["failed_ranks"] == [1]
    from hpcai.run import jobs

    assert jobs.queued([job_id, "999999"]) == []  # ended and unknown ids alike: nothing queued
