"""Open MPI's single-copy path (CMA: process_vm_readv) between two ranks on one node, under the
docker, podman and charliecloud runtimes on the Slurm test cluster.

Two ranks of one node talk through Open MPI's shared-memory transport (vader); messages above its
32 KiB send size go through CMA, which needs the ranks in one PID namespace and process_vm_readv
allowed by seccomp. Before `--pid host` (and, for docker, the seccomp profile) the same launch
printed `Read -1, expected 1048576, errno = 1` (docker's default profile) or `errno = 3` (podman:
the peer's PID names nothing in a private PID namespace), or crashed in vader. Here CMA is forced
(`btl=vader,self`, `single_copy_mechanism=cma`), so a refused or misdirected read cannot hide
behind another transport; the payload checks the sums it receives.

Charliecloud: each ch-run makes its own user namespace, and the kernel refuses process_vm_readv
between sibling namespaces; Open MPI then warns "CMA is not available due to different user
namespaces" and falls back to copying through shared memory (a 4 MiB bandwidth loop did not finish
in 60 s). hpcai makes the ranks of a node join one container (`ch-run --join-ct --join-tag`).

Apptainer: each `apptainer exec` makes its own user, PID and IPC namespaces (with --containall a
private /tmp and /dev/shm too); two ranks of a node then crashed in vader after PMIx's dstore lock
failed. hpcai runs a node's ranks in one instance (`apptainer exec instance://…`), with the PMIx
server's folder bound; both SIF origins are checked, in user-namespace mode (--userns).

One node only: the test cluster's fake nodes share this machine's /dev/shm and host name, which
vader cannot tell apart (tests/engines.py). Each launch takes a few seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CMA_ENV = ("OMPI_MCA_btl=vader,self", "OMPI_MCA_btl_vader_single_copy_mechanism=cma",
           "OMPI_MCA_mpi_yield_when_idle=1")
PAYLOAD = ("mpi-allreduce", "min_bytes=1048576", "max_bytes=4194304", "iters=5", "warmup=1")


def _launch(image: str, runtime: str, run_dir: Path, *options: str) -> subprocess.CompletedProcess:
    env_opts = [a for e in CMA_ENV for a in ("--env", e)]
    argv = [sys.executable, "-m", "hpcai", "launch", "--image", image, "--runtime", runtime,
            "--site", "generic-slurm", "-N", "1", "--ntasks-per-node", "2", "--mpi", "pmix",
            "--output-dir", str(run_dir), *options, *env_opts, *PAYLOAD]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "USER": os.environ.get("USER") or "root"})


def _check(res: subprocess.CompletedProcess, run_dir: Path) -> None:
    logs = "".join(p.read_text(errors="replace") for p in sorted((run_dir / "logs").glob("rank-*.*")))
    assert res.returncode == 0, f"exit {res.returncode}\n{res.stderr[-2000:]}\n{logs[-3000:]}"
    assert "errno" not in logs and "Segmentation fault" not in logs, logs[-3000:]
    assert "CMA is" not in logs, logs[-3000:]  # "… not available due to different user namespaces"
    out = (run_dir / "logs" / "rank-0.out").read_text()
    assert "# mpi-allreduce: done, 2 ranks" in out, out
    assert any(line.startswith("4194304 ") for line in out.splitlines()), out  # the largest size ran


@pytest.mark.slurm
@pytest.mark.docker
def test_cma_between_docker_ranks(pytorch_cpu_image, tmp_path):
    run_dir = tmp_path / "docker"
    _check(_launch(pytorch_cpu_image, "docker", run_dir), run_dir)


@pytest.mark.slurm
@pytest.mark.podman
def test_cma_between_podman_ranks(podman_pytorch_image, tmp_path):
    run_dir = tmp_path / "podman"
    _check(_launch(podman_pytorch_image, "podman", run_dir), run_dir)


@pytest.mark.slurm
@pytest.mark.docker
@pytest.mark.charliecloud
def test_cma_between_charliecloud_ranks(pytorch_cpu_image, ch_squashfs, tmp_path):
    run_dir = tmp_path / "charliecloud"
    _check(_launch(ch_squashfs(pytorch_cpu_image), "charliecloud", run_dir), run_dir)


@pytest.mark.slurm
@pytest.mark.docker
@pytest.mark.apptainer
@pytest.mark.parametrize("origin", ["pytorch_cpu_sif", "pytorch_cpu_def_sif"])
def test_cma_between_apptainer_ranks(origin, request, tmp_path):
    run_dir = tmp_path / "apptainer"
    _check(_launch(request.getfixturevalue(origin), "apptainer", run_dir, "--userns"), run_dir)
    assert "instance://{group}" in (run_dir / "plan.json").read_text()  # one instance for the node
