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
# Open MPI's launcher runs as root in the pod; and the hostfile's names are full ones
# (NAME-worker-I.NAME.NAMESPACE.svc), which Open MPI would cut at the first dot: the launcher
# cannot resolve the short name. The operator keeps them for Open MPI 4 only
# (OMPI_MCA_orte_keep_fqdn_hostnames); PRRTE, Open MPI 5's runtime, reads its own variable.
OMPI_LAUNCHER_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                     "PRTE_MCA_prte_keep_fqdn_hostnames": "1"}
GPU_RESOURCES = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}  # the device plugins' resource names
FAMILY_VENDOR = {"cuda": "nvidia", "rocm": "amd"}
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # RFC 1123: pods' host names, namespaces
SERVICE_NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")  # RFC 1035: a Service's name
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


def check_request(req: MpiJobRequest) -> None:
    """What the job names, checked before anything is written: the image reference (it goes into
    the job), the job's name and namespace. NAME is the headless Service's name, a DNS-1035 label
    (a letter first), and NAME-worker-<last> each worker's host name, a DNS label: the operator
    refuses the job, or fails to make its Service, otherwise."""
    from hpcai.errors import shaped
    from hpcai.image.values import IMAGE_REF, REF_SHAPE

    shaped("--image", req.image, IMAGE_REF, REF_SHAPE)
    last = f"{req.name}-worker-{req.workers - 1}"
    if not SERVICE_NAME.fullmatch(req.name) or len(last) > DNS_LABEL_MAX:
        raise UsageError(f"--name {req.name!r}: the job's service and worker pods ({last}) need DNS names: "
                         f"lower-case letters, digits and '-', a letter first, a letter or digit last, at "
                         f"most {DNS_LABEL_MAX} characters")
    if req.namespace and (not DNS_LABEL.fullmatch(req.namespace) or len(req.namespace) > DNS_LABEL_MAX):
        raise UsageError(f"--namespace {req.namespace!r}: not a Kubernetes namespace name (lower-case letters, "
                         f"digits and '-', at most {DNS_LABEL_MAX} characters)")


def deadline(limit: str) -> int:
    """--time as activeDeadlineSeconds; 0 (none) for no limit, or UNLIMITED/infinite as Slurm reads them."""
    from hpcai.run.timelimits import seconds

    return 0 if not limit or limit.lower() in ("unlimited", "infinite") else seconds(limit)


def default_name(payload: str) -> str:
    """hpcai-PAYLOAD, made a DNS label (payload names may hold '_' or '.')."""
    return re.sub(r"[^a-z0-9-]+", "-", f"hpcai-{payload}".lower()).strip("-")


def image_facts(labels: dict[str, str], image: str, mpi: str | None, vendor: str | None) -> tuple[str, str]:
    """(mpi, vendor) for the job: from the image's labels when the local engine has the image
    (it must have the ssh server and an MPI), else from --mpi/--gpu-vendor (defaults ompi, nvidia)."""
    if mpi is not None and mpi not in MPI:
        raise unknown("MPI", mpi, MPI)
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
    launcher_env = OMPI_LAUNCHER_ENV if req.mpi == "ompi" else {}
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
