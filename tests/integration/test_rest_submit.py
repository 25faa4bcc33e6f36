"""`hpcai submit --rest URL` through a real slurmrestd (Debian's 22.05, rest_auth/jwt, in front of
cluster alpha of tests/infra/slurm-multi-up.sh; issue 31 item 2): the same batch script, its
options as a job description, the token from SLURM_JWT and nowhere else, and --wait through the
REST API until the job has ended."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from engines import CLUSTER_MPI_OPTIONS, multi_env

pytestmark = [pytest.mark.slurm, pytest.mark.multicluster, pytest.mark.docker, pytest.mark.timeout(600)]

URL = "http://127.0.0.1:6820"


@pytest.fixture(scope="module")
def token() -> str:
    res = subprocess.run(["scontrol", "token", "lifespan=900"], capture_output=True, text=True,
                         env=multi_env("alpha"), check=True)
    return res.stdout.strip().removeprefix("SLURM_JWT=")


def submit(hpcai_exe, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*hpcai_exe, "submit", "--rest", URL, "--site", "generic-slurm", *args],
                          capture_output=True, text=True, timeout=400, env=env)


def test_a_job_through_slurmrestd_runs_as_planned_and_is_waited_for(tmp_path, hpcai_exe, pytorch_cpu_image, token):
    run = tmp_path / "rest"
    env = {**multi_env("alpha"), "SLURM_JWT": token}
    res = submit(hpcai_exe, env, "--wait", "--wait-timeout", "300", "--runtime", "docker", "--image",
                 pytorch_cpu_image, "-N", "2", "--time", "0:10:00", *CLUSTER_MPI_OPTIONS, "-o", str(run), "sanity")
    assert res.returncode == 0, res.stdout + res.stderr
    job_id = res.stdout.split()[0]
    assert job_id.isdigit() and f"job {job_id}: completed" in res.stderr, res.stderr
    plan = json.loads((run / "plan.json").read_text())
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "completed" and plan["job_id"] == job_id and plan["cluster"] == "alpha"
    assert plan["nodes"] == 2 and status.get("ranks", 2) == 2  # the job description carried the geometry
    assert (run / "slurmrestd").read_text() == URL + "\n" and (run / "job_id").read_text() == job_id + "\n"
    # the token is nowhere hpcai writes or prints
    assert token not in res.stdout + res.stderr
    for path in run.rglob("*"):
        if path.is_file():
            assert token not in path.read_text(errors="replace"), path
    accounting = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True,
                                env=multi_env("alpha"))
    assert "TimeLimit=00:10:00" in accounting.stdout, accounting.stdout


def test_no_token_a_bad_token_and_what_rest_cannot_carry_are_one_line(tmp_path, hpcai_exe, token):
    sif = tmp_path / "x.sif"
    sif.write_bytes(b"")
    common = ("--runtime", "apptainer", "--userns", "--image", str(sif))
    env = {k: v for k, v in multi_env("alpha").items() if k != "SLURM_JWT"}
    for extra_env, args, said, code in (
        ({}, ("-o", str(tmp_path / "a")), "--rest needs a token in SLURM_JWT", 2),
        ({"SLURM_JWT": token}, ("-o", str(tmp_path / "b"), "--nodelist", "a01,a02"),
         "--rest: --nodelist (a01,a02) cannot go through slurmrestd's job description", 2),
        ({"SLURM_JWT": token}, ("-o", str(tmp_path / "c"), "--clusters", "beta"), "--rest: --clusters (beta)", 2),
        ({"SLURM_JWT": token[:-4] + "AAAA"}, ("-o", str(tmp_path / "d")), "is SLURM_JWT current?", 1),
    ):
        res = submit(hpcai_exe, {**env, **extra_env}, *common, *args, "--cmd", "--", "true")
        assert res.returncode == code and said in res.stderr, (args, res.stderr)
        assert res.stderr.splitlines()[-1].startswith("error: ") and "Traceback" not in res.stderr, res.stderr
        assert token[:-4] not in res.stderr
        if code == 2:
            assert res.stderr.count("\n") == 1 and not Path(args[1]).exists()  # refused before anything was written
