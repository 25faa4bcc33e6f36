"""A stand-in for Kubeflow's mpi-operator, on docker: runs an MPIJob (v2beta1) that `hpcai export
k8s` wrote, as the operator would run it on Kubernetes, which cannot run on this machine (no
kubelet, no cluster images). It is a stand-in for the control plane only: the containers, their
images, commands, environment, ssh server, MPI and payload are the real ones.

What it does is what kubeflow/mpi-operator's controller does (pkg/controller/mpi_job_controller.go):
- one ECDSA P-521 key pair, mounted at spec.sshAuthMountPath as id_rsa (mode 0600), id_rsa.pub
  and authorized_keys, in the launcher and every worker;
- worker pods NAME-worker-I (hostname) in the headless service NAME: here a docker network on
  which each worker answers to NAME-worker-I.NAME and NAME-worker-I.NAME.default.svc;
- the hostfile at /etc/mpi/hostfile on the launcher, one line per worker, `HOST slots=N` for
  OpenMPI and `HOST:N` for MPICH (and Intel);
- the launcher's environment for each mpiImplementation (K_MPI_JOB_ROLE, OMPI_MCA_* or HYDRA_*);
- a worker with no command runs `/usr/sbin/sshd -De`;
- launcherCreationPolicy WaitForWorkersReady: the launcher starts once every worker's readiness
  probe (tcpSocket) answers.
Left out: the pods' DNS search path (docker's network aliases give the same names), the Secret's
mount through links (a read-only bind mount of the key files here), and the empty
NVIDIA_VISIBLE_DEVICES the operator sets on a launcher (no GPU here).
"""

from __future__ import annotations

import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

HOSTFILE = "/etc/mpi/hostfile"
ATTEMPTS = "-o ConnectionAttempts=10"


def _launcher_env(impl: str, slots: int) -> dict[str, str]:
    env = {"K_MPI_JOB_ROLE": "launcher"}
    if impl == "OpenMPI":
        env.update({"OMPI_MCA_orte_keep_fqdn_hostnames": "true", "OMPI_MCA_orte_default_hostfile": HOSTFILE,
                    "OMPI_MCA_plm_rsh_args": ATTEMPTS, "OMPI_MCA_orte_set_default_slots": str(slots)})
    elif impl == "MPICH":
        env.update({"HYDRA_HOST_FILE": HOSTFILE, "HYDRA_LAUNCH_EXTRA_ARGS": ATTEMPTS})
    else:  # Intel
        env.update({"I_MPI_HYDRA_HOST_FILE": HOSTFILE, "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS": ATTEMPTS,
                    "I_MPI_PERHOST": str(slots)})
    return env


def _run(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)


def _docker_args(container: dict, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """`docker run` options and the command for one pod template's first container, and its
    environment (the template's, then the operator's)."""
    env = {**{e["name"]: e["value"] for e in container.get("env", [])}, **env}
    command = container.get("command") or ["/usr/sbin/sshd", "-De"]
    out = [f"--entrypoint={command[0]}"]
    for key in env:
        out += ["-e", key]
    return out + [container["image"], *command[1:], *container.get("args", [])], env


@dataclass
class MpiJobRun:
    """The result: the launcher's exit code and output, and each worker's log."""

    returncode: int
    stdout: str
    stderr: str
    worker_logs: list[str] = field(default_factory=list)


def run_mpijob(job: dict, work: Path, timeout: float = 600) -> MpiJobRun:
    assert job["apiVersion"] == "kubeflow.org/v2beta1" and job["kind"] == "MPIJob", job.get("kind")
    name, spec = job["metadata"]["name"], job["spec"]
    impl, slots = spec.get("mpiImplementation", "OpenMPI"), spec.get("slotsPerWorker", 1)
    ssh_path = spec.get("sshAuthMountPath", "/root/.ssh")
    launcher_t = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    worker_spec = spec["mpiReplicaSpecs"]["Worker"]
    worker_t, workers = worker_spec["template"]["spec"], worker_spec["replicas"]
    tag = uuid.uuid4().hex[:8]
    net = f"hpcai-mpijob-{tag}"

    keys = work / "ssh"
    keys.mkdir(parents=True)
    res = _run("ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-m", "PEM", "-N", "", "-f", str(keys / "id_rsa"))
    assert res.returncode == 0, res.stderr
    (keys / "authorized_keys").write_text((keys / "id_rsa.pub").read_text())
    (keys / "id_rsa").chmod(0o600)
    hosts = [f"{name}-worker-{i}.{name}.default.svc" for i in range(workers)]
    line = "{host} slots={n}\n" if impl == "OpenMPI" else "{host}:{n}\n"
    hostfile = work / "hostfile"
    hostfile.write_text("".join(line.format(host=h, n=slots) for h in hosts))
    ssh_mount = ["-v", f"{keys}:{ssh_path}:ro"]
    shm = ["--shm-size=256m"] if any(v.get("emptyDir", {}).get("medium") == "Memory"
                                     for v in worker_t.get("volumes", [])) else []

    started: list[str] = []
    _run("docker", "network", "create", net)
    try:
        worker_args, worker_env = _docker_args(worker_t["containers"][0], {"K_MPI_JOB_ROLE": "worker"})
        for i in range(workers):
            cname = f"{name}-worker-{i}-{tag}"
            # The values reach docker through its environment (-e NAME), never its argv.
            res = subprocess.run(
                ["docker", "run", "-d", "--name", cname, "--hostname", f"{name}-worker-{i}", "--network", net,
                 "--network-alias", f"{name}-worker-{i}.{name}", "--network-alias", hosts[i],
                 *ssh_mount, *shm, *worker_args], capture_output=True, text=True, timeout=120, check=False,
                env={**_host_env(), **worker_env})
            assert res.returncode == 0, res.stderr
            started.append(cname)
        _wait_ready(started, worker_t["containers"][0], timeout=120)
        launcher_args, launcher_env = _docker_args(launcher_t["containers"][0], _launcher_env(impl, slots))
        # the launcher is in the job's service too (MPICH's proxies connect back to it by name)
        res = subprocess.run(["docker", "run", "--rm", "--name", f"{name}-launcher-{tag}", "--hostname",
                              f"{name}-launcher", "--network", net, "--network-alias", f"{name}-launcher.{name}",
                              "--network-alias", f"{name}-launcher", *ssh_mount, "-v", f"{hostfile}:{HOSTFILE}:ro",
                              *launcher_args], capture_output=True, text=True, timeout=timeout, check=False,
                             env={**_host_env(), **launcher_env})
        logs = [_run("docker", "logs", c).stderr for c in started]
        return MpiJobRun(res.returncode, res.stdout, res.stderr, logs)
    finally:
        for c in started:
            _run("docker", "rm", "-f", c)
        _run("docker", "network", "rm", net)


def _host_env() -> dict[str, str]:
    import os

    return {k: os.environ[k] for k in ("PATH", "HOME", "DOCKER_HOST") if k in os.environ}


def _wait_ready(containers: list[str], template: dict, timeout: float) -> None:
    """The readiness probe (tcpSocket PORT), asked from inside each worker as the kubelet would."""
    port = template.get("readinessProbe", {}).get("tcpSocket", {}).get("port", 22)
    probe = f"exec 3<>/dev/tcp/127.0.0.1/{port}"
    deadline = time.monotonic() + timeout
    waiting = list(containers)
    while waiting and time.monotonic() < deadline:
        waiting = [c for c in waiting if _run("docker", "exec", c, "bash", "-c", probe).returncode != 0]
        if waiting:
            time.sleep(0.5)
    assert not waiting, f"workers not ready after {timeout} s: {waiting}: " + \
        "".join(_run("docker", "logs", c).stderr for c in waiting)
