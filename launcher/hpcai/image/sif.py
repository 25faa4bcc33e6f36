"""Convert a built OCI image into a SIF with apptainer (or singularity).

Docker images are read straight from the daemon (`docker-daemon://`); Podman has no daemon, so
its image is saved to a docker-archive first. SIF file names never contain ':' (Slurm's and
Apptainer's own argument syntax splits on it).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from hpcai.errors import HpcaiError, UsageError

CONVERTERS = ("apptainer", "singularity")


def converter() -> str:
    for name in CONVERTERS:
        if shutil.which(name):
            return name
    raise UsageError("neither apptainer nor singularity is installed; install Apptainer "
                     "(https://apptainer.org/docs/admin/main/installation.html) or convert on a "
                     "machine that has it (docker save IMAGE | apptainer build OUT.sif docker-archive:/dev/stdin)")


def sif_name(image: str) -> str:
    """`hpcai/pytorch-cpu-hpc:bookworm-slim-abc` -> `hpcai_pytorch-cpu-hpc_bookworm-slim-abc.sif`."""
    return re.sub(r"[/:@]+", "_", image).strip("_") + ".sif"


def commands(image: str, output: Path, builder: str, tool: str, archive: Path) -> list[list[str]]:
    """The token lists that produce `output` from `image`."""
    if builder == "podman":
        return [["podman", "save", "--format", "docker-archive", "-o", str(archive), image],
                [tool, "build", "--force", str(output), f"docker-archive://{archive}"]]
    return [[tool, "build", "--force", str(output), f"docker-daemon://{image}"]]


def convert(image: str, output: Path | None, builder: str, dry_run: bool = False) -> Path:
    from hpcai.console import err, out

    output = output or Path(sif_name(image))
    if ":" in output.name:
        raise UsageError(f"SIF name {output.name!r} contains ':'; choose another with -o")
    tool = converter() if not dry_run else (shutil.which("apptainer") and "apptainer"
                                            or shutil.which("singularity") and "singularity"
                                            or "apptainer")
    with tempfile.TemporaryDirectory(prefix="hpcai-sif-") as tmp:
        cmds = commands(image, output, builder, tool, Path(tmp) / "image.tar")
        for argv in cmds:
            if dry_run:
                out.print(shlex.join(argv), markup=False)
                continue
            err.print(f"$ {shlex.join(argv)}", markup=False)
            if subprocess.run(argv, check=False).returncode != 0:
                raise HpcaiError(f"{argv[0]} failed converting {image} (command: {shlex.join(argv)})")
    if not dry_run:
        out.print(str(output), markup=False)
    return output
