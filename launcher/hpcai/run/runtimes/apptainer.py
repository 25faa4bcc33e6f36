"""Apptainer and SingularityCE: `apptainer exec|run [--userns] [--containall] [--cleanenv] --nv|--rocm --bind … IMG …`.

The container environment is passed as `APPTAINERENV_<NAME>=<value>` through `env`, not with
`--env`: Apptainer parses `--env` as a comma-separated list, which would split values such as
`NCCL_SOCKET_IFNAME=hsn0,hsn1`; `APPTAINERENV_*` survives `--cleanenv` and any character.

User-namespace mode (`--userns`, the site's `apptainer_userns`): an Apptainer installed without
its setuid starter (common at sites, and Debian's build) runs unprivileged users in a user
namespace by itself, but root only with `--userns`; `check_mode` says before any rank starts when
the mode asked for cannot run on this host.

Ranks that share a node share one container (the node's peer group, for every launch with several
ranks per node under srun or mpiexec, MPI or not): every `apptainer exec`
otherwise makes its own user, mount, PID and IPC namespaces (with `--containall` also a private
/tmp and /dev/shm), so Open MPI's shared-memory transport between two ranks of a node finds
neither the other's segments nor its PID, and the kernel refuses process_vm_readv between sibling
user namespaces ("CMA is not available due to different user namespaces"; PMIx's dstore lock
failed and the vader BTL crashed). The rank shim starts one instance per node and run
(`apptainer instance start … IMG NAME`, `group_start`), every rank of the node runs in it
(`apptainer exec instance://NAME …`), and the node's last rank to end stops it. Apptainer's own
`--sharens` keys its shared instance by the parent process (the shim is a different one per rank)
and kills the other ranks when the first one ends, so it does not fit MPI ranks.
"""

from __future__ import annotations

import os

from hpcai.errors import UsageError, operand
from hpcai.run.runtimes import ContainerSpec, Runtime

GROUP = "instance://{group}"  # the rank shim puts the node's instance name here (entrypoints/hpcai-shim)
# The capabilities Apptainer asks for as root outside a user namespace (0 to 40, CAP_CHECKPOINT_RESTORE).
ROOT_CAPS = (1 << 41) - 1
CAP_NAMES = ("CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
             "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
             "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE",
             "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT",
             "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
             "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN",
             "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
             "CAP_CHECKPOINT_RESTORE")


class ApptainerRuntime(Runtime):
    name = "apptainer"
    shim_forward = "env"  # APPTAINERENV_NAME (singularity: SINGULARITYENV_NAME)
    doctor_hint = "module load apptainer, or use --runtime singularity/charliecloud"
    binary = "apptainer"
    env_prefix = "APPTAINERENV_"
    image_is_file = True
    engine = False
    joins = True  # the ranks on a node share an instance (see above)
    groups_any_ranks = True  # a rank may enter the instance whenever it starts (not only an MPI world's)

    def clean_env(self, site) -> bool:
        return site.cleanenv  # --cleanenv per site (pass_env is forwarded explicitly)

    def doctor_probe(self) -> str:
        return f"apptainer:{self.binary}"  # its version and the modes this host can run it in

    def prefetch(self, image: str) -> None:
        """A file's labels are read when asked: nothing to start early."""

    def labels(self, image: str) -> dict[str, str]:
        """The SIF's labels (hpcai.image.sif.labels); {} where they cannot be read."""
        from hpcai.image.sif import labels

        return labels(operand("--image", image), self.binary)  # refused wherever apptainer is missing too

    def check_mode(self, spec: ContainerSpec) -> None:
        """Exit 2, naming the fix, when this host cannot run Apptainer in the mode asked for: root
        without --userns needs every capability in its bounding set (a VM or container that drops
        one fails each rank with "Requesting capability set … while permitted capability set is …"),
        and --userns needs user namespaces. (The ranks run on the nodes; this host is the usual
        model of them, and a node that differs still fails in each rank's log.)"""
        import shutil

        if not shutil.which(self.binary):
            return  # a module on the nodes, perhaps: srun reports a missing one per rank
        if spec.userns:
            why = userns_problem()
            if why:
                raise UsageError(f"{self.binary} --userns (user-namespace mode) cannot run here: {why}; ask for "
                                 "setuid mode instead (--no-userns, or apptainer_userns = false in the site file)")
            return
        missing = root_caps_missing()
        if missing:
            raise UsageError(f"{self.binary} as root without --userns needs every capability, and this host's "
                             f"bounding set lacks {', '.join(missing)}: run in user-namespace mode with --userns "
                             "(or apptainer_userns = true in the site file)")

    def options(self, spec: ContainerSpec) -> list[str]:
        """What sets up the container: mode, isolation, environment policy, GPUs, binds."""
        argv = ["--userns"] if spec.userns else []
        if spec.containall:
            argv.append("--containall")
        if spec.cleanenv:
            argv.append("--cleanenv")
        argv += {"nvidia": ["--nv"], "amd": ["--rocm"]}.get(spec.gpu, [])
        for src, dst in spec.binds:
            argv += ["--bind", src if src == dst else f"{src}:{dst}"]
        return argv + list(spec.extra)

    def group_start(self, spec: ContainerSpec) -> list[str]:
        """The command that starts a node's peer group; the rank shim appends the instance's name.
        Format: apptainer -q instance start [--userns] [--containall] [--cleanenv] --nv --bind S:D IMG"""
        return [self.binary, "-q", "instance", "start", *self.options(spec),
                operand("--image", spec.image)]  # -q: no INFO lines

    def argv(self, spec: ContainerSpec) -> list[str]:
        # Format: env APPTAINERENV_K=V … apptainer exec --cleanenv --nv --bind S:D IMG ENTRY CMD…
        #         (a peer group: … apptainer exec [--userns] [--cleanenv] instance://{group} ENTRY CMD…)
        image = operand("--image", spec.image)  # refused here even for a peer group (group_start takes it)
        prefix = ["env", *(f"{self.env_prefix}{k}={v}" for k, v in spec.env)] if spec.env else []
        run = spec.apptainer_command == "run" and bool(spec.payload) and bool(spec.entrypoint)
        argv = [self.binary, "run" if run else "exec"]
        if spec.peers > 1:  # binds, isolation and GPUs were set when the group's instance started
            argv += [*(["--userns"] if spec.userns else []), *(["--cleanenv"] if spec.cleanenv else []), GROUP]
        else:
            argv += [*self.options(spec), image]
        if run:  # the image's %runscript is hpcai-entrypoint "$@" (a payload name runs hpcai-bench)
            return prefix + argv + list(spec.payload)
        return prefix + argv + ([spec.entrypoint] if spec.entrypoint else []) + list(spec.command)


class SingularityRuntime(ApptainerRuntime):
    name = "singularity"
    doctor_hint = "only needed for --runtime singularity"
    binary = "singularity"
    env_prefix = "SINGULARITYENV_"

    def doctor_probe(self) -> str:
        return f"cmd:{self.binary}"  # SingularityCE's modes are its own: found on PATH is what is told


def root_caps_missing(status: str = "/proc/self/status") -> list[str]:
    """The capabilities Apptainer needs as root without --userns that this process's bounding set
    lacks ([] for a non-root user, who gets setuid or user-namespace mode from Apptainer itself)."""
    if os.geteuid() != 0:
        return []
    try:
        with open(status) as fh:
            bounding = next(int(line.split()[1], 16) for line in fh if line.startswith("CapBnd:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return []
    lacking = ROOT_CAPS & ~bounding
    return [CAP_NAMES[bit] for bit in range(len(CAP_NAMES)) if lacking >> bit & 1]


def userns_problem(proc: str = "/proc/sys") -> str:
    """Why user namespaces cannot be made here, or ""."""
    def read(name: str) -> str | None:
        try:
            with open(os.path.join(proc, name)) as fh:
                return fh.read().strip()
        except OSError:
            return None

    if read("user/max_user_namespaces") == "0":
        return "user namespaces are switched off (sysctl user.max_user_namespaces = 0)"
    if os.geteuid() != 0 and read("kernel/unprivileged_userns_clone") == "0":
        return "unprivileged user namespaces are switched off (sysctl kernel.unprivileged_userns_clone = 0)"
    return ""
