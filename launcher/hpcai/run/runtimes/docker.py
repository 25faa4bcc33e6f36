"""Docker and Podman: one named container per rank, host network, IPC and PID namespace, removed on exit.

The image's ENTRYPOINT is already hpcai-entrypoint, so only the command is passed. Under srun
every task gets the same argv, so the name is left out here and the rank shim inserts
`--name=…-<rank>` and `-e NAME` for the per-rank variables (see entrypoints/hpcai-shim).

Ranks on one node must see each other as HPC runtimes (Apptainer, enroot, Charliecloud) let them:
Open MPI's shared-memory transport copies large messages once with process_vm_readv (CMA), which
names the peer by its PID. In a private PID namespace per container that PID is another process
(ESRCH, EFAULT, or a silent read of the wrong memory), so ranks share the host's PID namespace
(`--pid host`; no process is PID 1 then, so no `--init`). Docker before 23.0 also refuses
process_vm_readv/writev in its default seccomp profile unless CAP_SYS_PTRACE is added; instead
of that capability (which with `--pid host` could trace any process on the node) docker gets the
seccomp profile Podman applies by default (`seccomp-ranks.json`, containers/common 0.50.1 as
Debian ships it: default deny; process_vm_readv/writev and ptrace allowed, as Docker 23+ allows
them, still under the kernel's ptrace checks). See docs/launching.md for what else it allows.
"""

from __future__ import annotations

from pathlib import Path

from hpcai.errors import operand
from hpcai.run.runtimes import ContainerSpec, Runtime

# Debian's /usr/share/containers/seccomp.json (golang-github-containers-common 0.50.1+ds1-4), unchanged.
SECCOMP_PROFILE = Path(__file__).with_name("seccomp-ranks.json")


class DockerRuntime(Runtime):
    name = "docker"
    shim_forward = "flags"
    doctor_hint = "install docker (workstations, --site local)"
    binary = "docker"
    env_prefix = ""  # `-e NAME`: the value comes from docker's own environment
    image_is_file = False
    engine = True
    gpu_flags = {"nvidia": ["--gpus", "all"],
                 "amd": ["--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video"]}

    def clean_env(self, site) -> bool:
        return True  # a container sees only what `-e` passes

    def run_flags(self) -> list[str]:
        """Namespaces shared with the host (and the seccomp profile) every rank gets."""
        return ["--network", "host", "--ipc", "host", "--pid", "host",
                "--security-opt", f"seccomp={SECCOMP_PROFILE}"]

    def argv(self, spec: ContainerSpec) -> list[str]:
        # Format: docker run --rm --network host --ipc host --pid host --security-opt seccomp=F --name N … IMG CMD…
        argv = [self.binary, "run", "--rm", *self.run_flags()]
        if spec.name:
            argv.append(f"--name={spec.name}")
        for key, value in spec.labels:
            argv += ["--label", f"{key}={value}"]
        argv += self.gpu_flags.get(spec.gpu, [])
        return argv + self.container(spec)

    def container(self, spec: ContainerSpec) -> list[str]:
        """What follows the run options: binds, environment, secrets by name, the image and the
        command (the image's ENTRYPOINT replaced by the command's first word without an entrypoint).
        Format: -v S:D -e K=V -e SECRET [--entrypoint CMD0] EXTRA… IMG CMD…"""
        image = operand("--image", spec.image)  # `docker run` reads options up to the image
        argv: list[str] = []
        for src, dst in spec.binds:
            argv += ["-v", f"{src}:{dst}"]
        for key, value in spec.env:
            argv += ["-e", f"{key}={value}"]
        for key in spec.secret_names:
            argv += ["-e", key]  # value from the environment
        if not spec.entrypoint:
            argv += ["--entrypoint", spec.command[0]] if spec.command else []
            return argv + list(spec.extra) + [image, *spec.command[1:]]
        return argv + list(spec.extra) + [image, *spec.command]

    def prefetch(self, image: str) -> None:
        from hpcai.image.engine import prefetch

        prefetch(self.binary, image)

    def labels(self, image: str) -> dict[str, str]:
        """The local image's labels; exit 2 (listing the local images) when it is not there."""
        from hpcai.image.engine import image_labels

        return image_labels(self.binary, operand("--image", image))


class PodmanRuntime(DockerRuntime):
    name = "podman"
    doctor_hint = "only needed for --runtime podman"
    binary = "podman"
    gpu_flags = {**DockerRuntime.gpu_flags, "nvidia": ["--device", "nvidia.com/gpu=all"]}

    def run_flags(self) -> list[str]:
        # Podman's default seccomp profile already allows process_vm_readv/writev.
        return ["--network", "host", "--ipc", "host", "--pid", "host"]
