"""Sarus: `sarus run [--mpi] --mount=type=bind,source=S,destination=D[,readonly] -e K=V IMG CMD…`.

Sarus (CSCS; other Cray sites) runs OCI images from its own repository, so the image is pulled
once before the step (`sarus pull IMG`, `prepare`). The container inherits the host environment
(SLURM_*, secrets from the launcher's process environment), then the image's ENV, then `-e`,
which wins (Sarus user guide, "Environmental Transfer"): no rank shim is needed. `--mpi` swaps
the host's MPICH-ABI MPI in through Sarus's MPI hook, which fails on an image without MPICH, so it
is passed only for MPICH images. The image's ENTRYPOINT (hpcai-entrypoint) runs unless
--no-entrypoint, which gives `--entrypoint` with no value. Sources: eth-cscs/sarus
doc/user/user_guide.rst and config docs (1.7); docs/sites.md, "Other container paths".
"""

from __future__ import annotations

from hpcai.errors import operand
from hpcai.run.runtimes import ContainerSpec, Runtime


class SarusRuntime(Runtime):
    name = "sarus"
    doctor_hint = "only needed for --runtime sarus"
    binary = "sarus"
    env_prefix = ""  # the host environment is transferred
    image_is_file = False  # REPOSITORY[:TAG] as `sarus images` shows it
    engine = False

    def clean_env(self, site) -> bool:
        return False

    def prefetch(self, image: str) -> None:
        """Sarus pulls on the node (prepare): nothing to start here."""

    def labels(self, image: str) -> dict[str, str]:
        """Sarus shows no image labels: the launch goes on without them (an option-like image is
        refused here, before anything is planned)."""
        operand("--image", image)
        return {}

    def prepare(self, image: str) -> list[list[str]]:
        """Once, before the step: the image into Sarus's repository."""
        # Format: sarus pull IMG
        return [[self.binary, "pull", operand("--image", image)]]

    def argv(self, spec: ContainerSpec) -> list[str]:
        # Format: sarus run [--mpi] --mount=type=bind,source=S,destination=D[,readonly] -e K=V IMG CMD…
        image = operand("--image", spec.image)  # `sarus run` reads options up to the image
        argv = [self.binary, "run"]
        if spec.mpi == "mpich":
            argv.append("--mpi")
        for src, dst in spec.binds:
            path, _, option = dst.partition(":")
            argv.append(f"--mount=type=bind,source={src},destination={path}" + (",readonly" if option == "ro" else ""))
        argv += [f"--env={key}={value}" for key, value in spec.env]
        if not spec.entrypoint:
            argv.append("--entrypoint")  # no value: the image's entrypoint removed
        return argv + list(spec.extra) + [image, *spec.command]
