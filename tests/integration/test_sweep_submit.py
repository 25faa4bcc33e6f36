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


def _wait_for_jobs(job_ids: list[str], timeout: float) -> None:
    """Poll squeue until none of job_ids is pending or running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        q = subprocess.run(["squeue", "--noheader", "--format=%i", "--jobs", ",".join(job_ids)],
                           capture_output=True, text=True)
        # squeue exits non-zero once the ids have left its memory: they ended too.
        if q.returncode != 0 or not q.stdout.split():
            return
        time.sleep(1)
    subprocess.run(["scancel", *job_ids])
    pytest.fail(f"jobs {job_ids} still queued after {timeout} s")


@pytest.mark.slurm
@pytest.mark.docker
@pytest.mark.timeout(600)
def test_sweep_submit_then_results(tmp_path, hpcai_exe, pytorch_cpu_image):
    image = pytorch_cpu_image
    sweep_dir = tmp_path / "sweep"
    started = time.monotonic()
    sub = subprocess.run([*hpcai_exe, "sweep", "--submit", "--nodes", "1,2", "--ntasks-per-node", "1",
                          "--site", "generic-slurm", "--runtime", "docker", "--mpi", "pmix", "--image", image,
                          "--var", "max_bytes=65536", "--var", "iters=5", "--var", "warmup=1",
                          "-o", str(sweep_dir), "mpi-allreduce"], capture_output=True, text=True, timeout=60)
    assert sub.returncode == 0, sub.stderr
    job_ids = sub.stdout.split()
    assert len(job_ids) == 2 and all(j.isdigit() for j in job_ids), sub.stdout
    runs = json.loads((sweep_dir / "sweep.json").read_text())["runs"]
    assert [(r["nodes"], r["job_id"]) for r in runs] == list(zip([1, 2], job_ids))
    _wait_for_jobs(job_ids, timeout=120)

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
    assert time.monotonic() - started < 60
