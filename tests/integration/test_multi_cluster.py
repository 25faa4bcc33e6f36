"""`hpcai submit --clusters` on two real Slurm clusters joined by one slurmdbd over MariaDB
(tests/infra/slurm-multi-up.sh: alpha and beta, two nodes each, issue 31 item 1). The client is
alpha's (SLURM_CONF), as a user on one cluster's login node; a job sent to beta is one alpha's own
squeue never lists. Before the fix `--wait` read that as ended at once: it must follow the job on
its cluster until it has ended, and the record must name the cluster it ran on."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from engines import CLUSTER_MPI_OPTIONS, multi_env

pytestmark = [pytest.mark.slurm, pytest.mark.multicluster, pytest.mark.docker, pytest.mark.timeout(600)]

ALPHA = multi_env("alpha")


def submit(hpcai_exe, image: str, out: Path, clusters: str, *payload: str) -> subprocess.CompletedProcess:
    return subprocess.run([*hpcai_exe, "submit", "--clusters", clusters, "--wait", "--wait-timeout", "300",
                           "--site", "generic-slurm", "--runtime", "docker", "--image", image, "-N", "2",
                           *CLUSTER_MPI_OPTIONS, "-o", str(out), *payload],
                          capture_output=True, text=True, timeout=400, env=ALPHA)


def queued_on(cluster: str, job_id: str) -> bool:
    res = subprocess.run(["squeue", "-M", cluster, "--noheader", "--format=%i", "--jobs", job_id],
                         capture_output=True, text=True, env=ALPHA, check=False)
    return job_id in res.stdout.split()


def test_a_job_sent_to_the_other_cluster_is_followed_there_and_recorded(tmp_path, hpcai_exe, pytorch_cpu_image):
    run = tmp_path / "on-beta"
    started = time.monotonic()
    res = submit(hpcai_exe, pytorch_cpu_image, run, "beta", "sanity")
    assert res.returncode == 0, res.stdout + res.stderr
    job = res.stdout.split()[0]
    job_id, _, cluster = job.partition(";")
    assert cluster == "beta" and job_id.isdigit(), res.stdout
    assert f"job {job_id} on cluster beta: completed" in res.stderr, res.stderr
    assert not queued_on("beta", job_id)  # --wait returned once the job had really ended there
    status = json.loads((run / "status.json").read_text())
    plan = json.loads((run / "plan.json").read_text())
    assert status["state"] == "completed" and plan["cluster"] == "beta" and plan["job_id"] == job_id
    assert (run / "cluster").read_text() == "beta\n"
    assert time.monotonic() - started < 300

    show = subprocess.run([*hpcai_exe, "results", "show", str(run)], capture_output=True, text=True, env=ALPHA)
    assert show.returncode == 0 and "generic-slurm:* on beta" in show.stdout, show.stdout
    diff_against = tmp_path / "on-alpha"
    again = submit(hpcai_exe, pytorch_cpu_image, diff_against, "alpha", "sanity")
    assert again.returncode == 0 and again.stdout.split()[0].endswith(";alpha"), again.stdout + again.stderr
    diff = subprocess.run([*hpcai_exe, "results", "diff", str(diff_against), str(run), "--json"],
                          capture_output=True, text=True, env=ALPHA)
    changed = {(d["area"], d["key"]): (d["a"], d["b"]) for d in json.loads(diff.stdout)["differences"]}
    assert changed[("launch", "cluster")] == ("alpha", "beta"), changed
    history = subprocess.run([*hpcai_exe, "results", "show", "history:sanity,cluster=beta"],
                             capture_output=True, text=True, env=ALPHA)
    assert history.returncode == 0 and run.name in history.stdout and diff_against.name not in history.stdout


def test_either_cluster_may_take_it_and_the_wait_follows_that_one(tmp_path, hpcai_exe, pytorch_cpu_image):
    run = tmp_path / "either"
    res = submit(hpcai_exe, pytorch_cpu_image, run, "alpha,beta", "--cmd", "--", "sh", "-c", "sleep 8; hostname")
    assert res.returncode == 0, res.stdout + res.stderr
    job_id, _, cluster = res.stdout.split()[0].partition(";")
    assert cluster in ("alpha", "beta")
    assert json.loads((run / "plan.json").read_text())["cluster"] == cluster
    assert json.loads((run / "status.json").read_text())["state"] == "completed"
    assert not queued_on(cluster, job_id)
