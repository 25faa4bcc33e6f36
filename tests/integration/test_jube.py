"""`hpcai sweep --jube` for real: the exported benchmark run by JUBE 2.7.1 (tests/infra/jube-up.sh)
on the Slurm test cluster (tests/infra/slurm-up.sh) with the real pytorch-cpu image. `jube run`
submits each point's job from its workpackage and returns (asynchronous, as CARAML's steps are:
the step's `do` has done_file="ready", which the job's `hpcai launch --done-file` writes once its
record is final), `jube continue` runs each finished point's export until `jube status` says
FINISHED, and `jube result` fills its table from each point's record, which must say what
`hpcai results` says of that record."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.docker]


def jube_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "jube"  # installed into the test venv by tests/infra/jube-up.sh
    if not exe.is_file():
        pytest.skip(f"JUBE is not installed ({exe}); tests/infra/jube-up.sh installs it")
    return [sys.executable, str(exe)]


@pytest.mark.timeout(600)
def test_jube_runs_the_exported_sweep_and_fills_its_table(tmp_path, hpcai_exe, pytorch_cpu_image):
    jube = jube_cmd()
    bench_file, out = tmp_path / "allreduce.xml", tmp_path / "jube-runs"
    exp = subprocess.run([*hpcai_exe, "sweep", "--jube", str(bench_file), "--nodes", "1,2", "--ntasks-per-node", "1",
                          "--site", "generic-slurm", "--runtime", "docker", "--mpi", "pmix",
                          "--image", pytorch_cpu_image,
                          "--var", "max_bytes=65536", "--var", "iters=5", "--var", "warmup=1", "mpi-allreduce"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert exp.returncode == 0, exp.stderr
    assert not list(tmp_path.glob("runs*")) and not out.exists()  # an export runs nothing

    run = subprocess.run([*jube, "run", str(bench_file), "-o", str(out)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    status = subprocess.run([*jube, "status", str(out)], capture_output=True, text=True, timeout=60)
    assert status.stdout.strip() != "FINISHED"  # submitted only: the jobs have not ended yet
    deadline = time.monotonic() + 300
    while status.stdout.strip() != "FINISHED" and time.monotonic() < deadline:  # as a user polls
        time.sleep(5)
        cont = subprocess.run([*jube, "continue", str(out)], capture_output=True, text=True, timeout=120)
        assert cont.returncode == 0, cont.stdout[-3000:] + cont.stderr[-3000:]
        status = subprocess.run([*jube, "status", str(out)], capture_output=True, text=True, timeout=60)
    assert status.stdout.strip() == "FINISHED", status.stdout

    res = subprocess.run([*jube, "result", "-a", "-s", "csv", str(out)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO(res.stdout.strip().split("\n\n")[0])))
    assert [(int(r["nodes"]), r["iters"], r["max_bytes"]) for r in rows] == [(1, "5", "65536"), (2, "5", "65536")]

    from hpcai.cli.results_tables import fmt as _fmt  # the value as `hpcai results show` prints it

    for row in rows:
        record = out / "000000" / f"{int(row['jube_wp_id']):06d}_run" / "work" / "record"
        assert json.loads((record / "status.json").read_text())["state"] == "completed"
        assert (record.parent / "ready").read_text() == "completed\n"  # the job's launch wrote JUBE's done_file
        assert json.loads((record / "plan.json").read_text())["nodes"] == int(row["nodes"])
        head = next(m for m in json.loads((record / "metrics.json").read_text())["metrics"] if m["headline"])
        assert (row["status"], row["metric"], row["unit"]) == ("completed", head["name"], head["unit"])
        assert float(row["value"]) == head["value"] > 0
        assert row["job_id"] == (record / "job_id").read_text().strip()
        show = subprocess.run([*hpcai_exe, "results", "show", str(record)], capture_output=True, text=True,
                              timeout=60)
        assert show.returncode == 0, show.stderr
        line = next(ln for ln in show.stdout.splitlines() if head["name"] in ln)
        assert f" {_fmt(head['value'])} " in line and f" {row['nodes']}×1 " in line, show.stdout
