"""`hpcai export k8s`: a payload as a Kubeflow MPIJob (kubeflow.org/v2beta1, the mpi-operator).

The operator runs one launcher pod and N worker pods. It writes the workers' host names into
/etc/mpi/hostfile on the launcher, mounts a generated key pair at `sshAuthMountPath` in every
pod, and the launcher's mpirun (Open MPI) or mpiexec (MPICH's Hydra) starts the ranks on the
workers over ssh. So the workers run an ssh server: an -ssh image (`hpcai build FLAVOR --ssh 1`)
has one, started by $PREFIX/bin/hpcai-sshd, and the launcher takes the same image (its ssh
client and MPI). Each rank runs the image's entrypoint and runner, as `hpcai launch` starts it:
the rank variables come from the MPI (30-ranks), MASTER_ADDR is worker 0's name.

What the operator does is read in kubeflow/mpi-operator's controller (pkg/controller/
mpi_job_controller.go) and API (pkg/apis/kubeflow/v2beta1: types.go, default.go; validation):
worker pods are NAME-worker-I in the headless service NAME, so worker 0 is
NAME-worker-0.NAME (.NAMESPACE.svc); the launcher must be 1 replica, the workers at least 1, each
restartPolicy Never or OnFailure, and NAME-worker-<last> a DNS label.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hpcai import labels as label
from hpcai.errors import UsageError, unknown
from hpcai.paths import PREFIX

API_VERSION = "kubeflow.org/v2beta1"
SSHD = f"{PREFIX}/bin/hpcai-sshd"
HOSTFILE = "/etc/mpi/hostfile"  # the operator's ConfigMap, mounted on the launcher
SSH_PORT = 22
MASTER_PORT = "29500"  # torch's default; the pods are the job's own, so no other job shares it
# mpiImplementation, and the launcher's command for each image MPI (hpcai.mpi label / --mpi).
MPI = {"ompi": "OpenMPI", "mpich": "MPICH"}
GPU_RESOURCES = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}  # the device plugins' resource names
FAMILY_VENDOR = {"cuda": "nvidia", "rocm": "amd"}
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_LABEL_MAX = 63


@dataclass(frozen=True)
class MpiJobRequest:
    """What `hpcai export k8s` was asked, checked (check_request)."""

    name: str
    image: str
    rank_command: tuple[str, ...]  # entrypoint, runner, payload and its variables
    payload: str
    workers: int
    slots: int  # ranks per worker (slotsPerWorker)
    gpus: int  # GPUs per worker pod
    vendor: str  # nvidia | amd
    mpi: str  # ompi | mpich
    namespace: str = ""
    deadline: int = 0  # seconds (runPolicy.activeDeadlineSeconds); 0: none

    @property
    def ranks(self) -> int:
        return self.workers * self.slots

    def worker_host(self, index: int) -> str:
        """A worker pod's name in the job's headless service: HOSTNAME.SUBDOMAIN, which every pod
        of the job resolves through its namespace's DNS search path, in whichever namespace the
        job is applied."""
        return f"{self.name}-worker-{index}.{self.name}"


def check_name(name: str, workers: int) -> None:
    """The job's name makes the pods' host names: NAME-worker-<last> must be a DNS label (the
    operator's validation refuses the job otherwise)."""
    last = f"{name}-worker-{workers - 1}"
    if not DNS_LABEL.fullmatch(name) or len(last) > DNS_LABEL_MAX:
        raise UsageError(f"--name {name!r}: the worker pods' names ({last}) must be DNS labels: lower-case "
                         f"letters, digits and '-', starting and ending with a letter or digit, at most "
                         f"{DNS_LABEL_MAX} characters")


def default_name(payload: str) -> str:
    """hpcai-PAYLOAD, made a DNS label (payload names may hold '_' or '.')."""
    return re.sub(r"[^a-z0-9-]+", "-", f"hpcai-{payload}".lower()).strip("-")


def image_facts(labels: dict[str, str], image: str, mpi: str | None, vendor: str | None) -> tuple[str, str]:
    """(mpi, vendor) for the job: from the image's labels when the local engine has the image
    (it must have the ssh server and an MPI), else from --mpi/--gpu-vendor (defaults ompi, nvidia)."""
    if labels:
        if labels.get(label.SSH) != "1":
            raise UsageError(f"image {image} has no ssh server (label {label.SSH}={labels.get(label.SSH, 'unset')}), "
                             "which the MPIJob's workers run: build it with --ssh 1 (WITH_SSH=1)")
        found = labels.get(label.MPI, "")
        if found not in MPI:
            raise UsageError(f"image {image} has MPI {found or 'none'}; an MPIJob needs one of: {', '.join(MPI)}")
        if mpi and mpi != found:
            raise UsageError(f"--mpi {mpi}: image {image} was built with {found}")
        family_vendor = FAMILY_VENDOR.get(labels.get(label.FAMILY, ""))
        if vendor and family_vendor and vendor != family_vendor:
            raise UsageError(f"--gpu-vendor {vendor}: image {image} is built for {family_vendor} GPUs")
        return found, vendor or family_vendor or "nvidia"
    if mpi is not None and mpi not in MPI:
        raise unknown("MPI", mpi, MPI)
    return mpi or "ompi", vendor or "nvidia"


def launcher_argv(req: MpiJobRequest) -> list[str]:
    """mpirun/mpiexec on the launcher: every rank on the workers (the hostfile names them), the
    hostfile given as an option (Open MPI 5's prterun ignores the operator's
    OMPI_MCA_orte_default_hostfile), and no CPU binding: the pod's CPU limit is the binding, as
    in the operator's GPU examples (-bind-to none)."""
    if req.mpi == "ompi":
        head = ["mpirun", "--hostfile", HOSTFILE, "-np", str(req.ranks), "--map-by", f"ppr:{req.slots}:node",
                "--bind-to", "none"]
    else:
        head = ["mpiexec", "-f", HOSTFILE, "-n", str(req.ranks), "-ppn", str(req.slots), "-bind-to", "none"]
    return [*head, *req.rank_command]


def _container(name: str, image: str, command: list[str], env: dict[str, str], **extra) -> dict:
    return {"name": name, "image": image, "command": command,
            "env": [{"name": k, "value": v} for k, v in env.items()], **extra}


def mpijob(req: MpiJobRequest) -> dict:
    """The MPIJob, as a dict in the CRD's shape (kubeflow.org_mpijobs.yaml, v2beta1)."""
    rank_env = {"MASTER_ADDR": req.worker_host(0), "MASTER_PORT": MASTER_PORT}
    launcher_env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"} if req.mpi == "ompi" else {}
    limits = {GPU_RESOURCES[req.vendor]: req.gpus} if req.gpus else {}
    worker = _container(
        "worker", req.image, [SSHD], rank_env,
        # Ready once sshd listens: the launcher waits for every worker (WaitForWorkersReady).
        readinessProbe={"tcpSocket": {"port": SSH_PORT}, "periodSeconds": 2},
        # NCCL/RCCL and torch's data loaders share memory through /dev/shm, 64 MiB by default.
        volumeMounts=[{"name": "dshm", "mountPath": "/dev/shm"}],
        **({"resources": {"limits": limits}} if limits else {}))
    labels = {"app.kubernetes.io/managed-by": "hpcai", "hpcai.payload": req.payload}
    metadata = {"name": req.name, **({"namespace": req.namespace} if req.namespace else {}), "labels": labels}
    run_policy: dict = {"cleanPodPolicy": "Running", "backoffLimit": 0}
    if req.deadline:
        run_policy["activeDeadlineSeconds"] = req.deadline
    return {
        "apiVersion": API_VERSION, "kind": "MPIJob", "metadata": metadata,
        "spec": {
            "slotsPerWorker": req.slots,
            "runPolicy": run_policy,
            "sshAuthMountPath": "/root/.ssh",
            "mpiImplementation": MPI[req.mpi],
            "launcherCreationPolicy": "WaitForWorkersReady",
            "mpiReplicaSpecs": {
                # Never and backoffLimit 0: a failed benchmark ends the job, not a silent retry.
                "Launcher": {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [
                    _container("launcher", req.image, launcher_argv(req)[:1], launcher_env,
                               args=launcher_argv(req)[1:])]}}},
                "Worker": {"replicas": req.workers, "restartPolicy": "Never", "template": {"spec": {
                    "containers": [worker],
                    "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]}}},
            },
        },
    }


def to_yaml(job: dict) -> str:
    import yaml

    return "# hpcai export k8s: a Kubeflow MPIJob (kubectl apply -f FILE; the mpi-operator runs it)\n" \
        + yaml.safe_dump(job, sort_keys=False, default_flow_style=False, width=1000)
