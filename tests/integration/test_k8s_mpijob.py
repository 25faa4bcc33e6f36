"""`hpcai export k8s` for real, short of a Kubernetes cluster: the -ssh images (`--ssh 1`) built by
the real `hpcai build`, the MPIJob the real CLI writes, and that job run on docker by the
mpi-operator stand-in (tests/mpijob_standin.py: the operator's hostfile, key pair, launcher
environment and worker names, as its controller makes them). A cluster, kind or k3s cannot run
here (their node images and binaries come from registries and GitHub this machine cannot reach):
the stand-in replaces the control plane only. The launcher's mpirun (Debian's Open MPI 4.1) or
mpiexec (MPICH's Hydra) starts every rank on the worker containers over ssh, through hpcai-sshd.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mpijob_standin import run_mpijob

pytestmark = pytest.mark.docker


def export(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcai", "export", "k8s", *args], capture_output=True, text=True,
                          timeout=120, check=False)


def run_job(tmp_path: Path, *args: str):
    res = export(*args)
    assert res.returncode == 0, res.stderr
    assert "not in a local engine" not in res.stderr  # the labels were read and checked
    job = yaml.safe_load(res.stdout)
    return job, run_mpijob(job, tmp_path)


def sanity_lines(stdout: str) -> dict[int, str]:
    """rank -> its `hpcai-sanity: rank=R local_rank=L world_size=W host=H … master=M` line."""
    found = {}
    for line in stdout.splitlines():
        if line.startswith("hpcai-sanity: rank=") and " local_rank=" in line:
            found[int(line.split("rank=")[1].split()[0])] = line
    return found


@pytest.mark.parametrize("image_fixture,launcher", [("ssh_cpu_image", "mpirun"), ("ssh_mpich_image", "mpiexec")])
def test_two_workers_run_four_ranks_over_ssh(request, tmp_path, image_fixture, launcher):
    image = request.getfixturevalue(image_fixture)
    job, run = run_job(tmp_path, "sanity", "--image", image, "-N", "2", "--ranks-per-node", "2")
    assert job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"] == [launcher]
    assert run.returncode == 0, run.stderr[-3000:] + "\n".join(run.worker_logs)
    lines = sanity_lines(run.stdout)
    assert sorted(lines) == [0, 1, 2, 3], run.stdout[-3000:]
    for rank, line in lines.items():
        # block placement: ranks 0-1 on worker 0, 2-3 on worker 1; MASTER_ADDR is worker 0's name
        assert f"local_rank={rank % 2} world_size=4 host=hpcai-sanity-worker-{rank // 2} " in line, line
        assert "master=hpcai-sanity-worker-0.hpcai-sanity:29500" in line, line
    assert '"status": "PASS"' in run.stdout
    # the job's key, as the operator mounts it, logged each worker in
    assert all("Accepted publickey for root" in log for log in run.worker_logs), run.worker_logs


def test_ddp_ranks_meet_at_worker_zero(ssh_cpu_image, tmp_path):
    """torch.distributed across two pods: the ranks rendezvous at MASTER_ADDR (worker 0's name)."""
    _, run = run_job(tmp_path, "ddp-bench", "iters=3", "--image", ssh_cpu_image, "-N", "2", "--ranks-per-node", "2")
    assert run.returncode == 0, run.stderr[-3000:]
    result = next(line for line in run.stdout.splitlines() if line.startswith("HPCAI_RESULT "))
    assert '"status": "PASS"' in result and '"world_size": 4' in result, result


def test_the_image_has_no_host_keys_and_each_worker_makes_its_own(ssh_cpu_image):
    """A host key baked into the image would be one private key shared by every container of it."""
    sh = ["docker", "run", "--rm", "--entrypoint", "bash", ssh_cpu_image, "-c"]
    res = subprocess.run([*sh, "ls /etc/ssh/ssh_host_* 2>&1; true"], capture_output=True, text=True, timeout=120)
    assert "No such file" in res.stdout, res.stdout
    env_file = "/run/hpcai-sshd/environment"
    start = (f"/opt/hpcai/bin/hpcai-sshd & sleep 1; stat -c %a {env_file}; grep -c '^export PATH=' {env_file}; "
             f"tail -n1 {env_file}; ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub")
    first, second = (subprocess.run([*sh, start], capture_output=True, text=True, timeout=120) for _ in range(2))
    # root's alone; the image's PATH; and last the mark that a session has read it (read once)
    assert first.stdout.splitlines()[:3] == ["600", "1", f"export HPCAI_SSHD_ENVIRONMENT={env_file}"], \
        first.stdout + first.stderr
    assert first.stdout.splitlines()[3] != second.stdout.splitlines()[3]  # a new host key at each start


def test_a_rank_sees_the_pods_environment_over_ssh(ssh_cpu_image, tmp_path):
    """sshd starts sessions with a bare environment; hpcai-sshd's file gives them the container's:
    the image's PATH (the venv's python) and the worker pod's env (MASTER_ADDR)."""
    job = yaml.safe_load(export("sanity", "--image", ssh_cpu_image, "-N", "1").stdout)
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    launcher["args"] = launcher["args"][:launcher["args"].index("--bind-to") + 2] + [
        "bash", "-c", 'echo "path=$PATH master=$MASTER_ADDR python=$(command -v python) umask=$(umask)"']
    run = run_mpijob(job, tmp_path)
    assert run.returncode == 0, run.stderr
    assert "path=/opt/hpcai/bin:/opt/hpcai/venv/bin:" in run.stdout, run.stdout
    assert "master=hpcai-sanity-worker-0.hpcai-sanity " in run.stdout
    assert "python=/opt/hpcai/venv/bin/python" in run.stdout
    assert "umask=0022" in run.stdout  # hpcai-sshd's own 077 (its keys, the file) does not reach the ranks


def test_an_image_without_ssh_server_is_refused(pytorch_cpu_image):
    res = export("sanity", "--image", pytorch_cpu_image)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip().splitlines() == [
        f"error: image {pytorch_cpu_image} has no ssh server (label hpcai.ssh=0), which the MPIJob's workers run: "
        "build it with --ssh 1 (WITH_SSH=1)"]
