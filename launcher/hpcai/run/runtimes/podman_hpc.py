"""NERSC podman-hpc: `podman-hpc run --rm [--mpi] [--gpu] -e 'SLURM_*' … -v S:D -e K=V IMG CMD…`.

podman-hpc wraps podman with site modules (/etc/podman_hpc/modules.d): `--gpu` mounts the NVIDIA
driver and devices, `--mpi` mounts the host's Cray MPICH, devices and Slurm spool into an MPICH
image and turns the run into `shared-run` (one container per node, each rank exec'd into it),
so podman-hpc names and removes the containers itself: hpcai names none and needs no rank shim.
Compute nodes see only images `podman-hpc migrate` has squashed onto shared storage (`pull` does
it; a local build needs it): hpcai runs it once before the step (`prepare`). podman passes a
host variable by name (`-e NAME`) or by prefix (`-e 'SLURM_*'`), so the per-rank variables the
entrypoint needs reach the container without a shim. Sources: NERSC podman-hpc 1.2.2
(podman_hpc.py, etc/podman_hpc/modules.d), docs.nersc.gov/machinelearning/launchers; docs/sites.md,
"Other container paths".
"""

from __future__ import annotations

from hpcai.errors import operand
from hpcai.run.runtimes import ContainerSpec
from hpcai.run.runtimes.docker import PodmanRuntime
from hpcai.run.site import DEFAULT_PASS_ENV

# Forwarded by name or prefix (podman's `-e NAME*` takes every host variable starting with NAME):
# what srun sets per task and what hpcai passes, the default pass_env of every site.
FORWARD = DEFAULT_PASS_ENV


class PodmanHpcRuntime(PodmanRuntime):
    name = "podman-hpc"
    doctor_hint = "only needed for --runtime podman-hpc (NERSC)"
    binary = "podman-hpc"
    engine = False  # podman-hpc names, shares and removes the containers itself (shared-run)
    shim_forward = "none"  # FORWARD passes the step's variables by prefix

    def clean_env(self, site) -> bool:
        return False  # FORWARD passes the step's variables by prefix: no shim needed

    def prepare(self, image: str) -> list[list[str]]:
        """Once, before the step: squash the image where compute nodes read it."""
        # Format: podman-hpc migrate IMG
        return [[self.binary, "migrate", operand("--image", image)]]

    def argv(self, spec: ContainerSpec) -> list[str]:
        # Format: podman-hpc run --rm [--mpi] [--gpu] -e 'SLURM_*'… -v S:D -e K=V IMG ENTRY? CMD…
        argv = [self.binary, "run", "--rm"]
        if spec.mpi == "mpich":  # the host's Cray MPICH into an MPICH-ABI image (its mpich module)
            argv.append("--mpi")
        else:  # --mpi brings these itself; without it a rank still needs host network and IPC
            argv += ["--network", "host", "--ipc", "host"]
        if spec.gpu == "nvidia":
            argv.append("--gpu")
        elif spec.gpu == "amd":
            argv += self.gpu_flags["amd"]
        for pattern in FORWARD:
            argv += ["-e", pattern]
        return argv + self.container(spec)
