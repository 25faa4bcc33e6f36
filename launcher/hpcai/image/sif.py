"""Convert a built image into a SIF with apptainer (or singularity), from a conversion def.

The conversion is a def build (apptainer/convert.def.j2, render.render_conversion): the image as
it is, plus the %runscript, %test and %help that a SIF built from hpcai.def gets, so `apptainer
run|test|run-help` behave the same whichever way a SIF was made. Docker images are read straight
from the daemon (Bootstrap: docker-daemon); Podman has no daemon, so its image is saved to a
docker-archive first (Bootstrap: docker-archive). Built with --notest: %test would need
--fakeroot where Apptainer is not setuid (root included), and the image was checked when it was
built; `apptainer test X.sif` runs it at any time. The SIF is written as OUT.sif.part and renamed,
so the final name never holds a half-written file. SIF file names never contain ':' (Slurm's and
Apptainer's own argument syntax splits on it).
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

from hpcai.errors import HpcaiError, UsageError, operand

CONVERTERS = ("apptainer", "singularity")
DEF_NAME = "hpcai-convert.def"


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


def work_folder(output: Path) -> Path:
    """The conversion's own folder (the def, Podman's archive): build/sif/<SIF name>, emptied
    first and removed after, as a build context is."""
    from hpcai.image.build import work_dir

    return work_dir() / "sif" / output.name


def commands(image: str, output: Path, builder: str, tool: str, folder: Path) -> list[list[str]]:
    """The token lists that produce `output` (written as output.part) from `image`, with the def
    in `folder` (and Podman's archive there too)."""
    from hpcai.image.build import part_path

    # Format: apptainer build --notest --force OUT.sif.part DEF   (paths made never to read as options)
    build = [tool, "build", "--notest", "--force", operand("-o/--output", part_path(output)),
             operand("the work folder", folder / DEF_NAME)]
    if builder == "podman":
        return [["podman", "save", "--format", "docker-archive", "-o", operand("the work folder", folder / "image.tar"),
                 operand("IMAGE", image)], build]
    return [build]


def conversion_def(image: str, builder: str, folder: Path) -> str:
    """The def for IMAGE, its %help from the image's labels. The image must be in the engine
    (else exit 2, listing the local images) and be an hpcai image: the runscript runs its
    entrypoint."""
    from hpcai.image.engine import image_labels
    from hpcai.image.render import render_conversion

    labels = image_labels(builder, image)
    if not labels.get("hpcai.flavor"):
        raise UsageError(f"{image} is not an hpcai image (no hpcai.flavor label), so it has no hpcai-entrypoint "
                         f"to run; convert it as it is with: apptainer build OUT.sif docker-daemon://{image}")
    archive = str(folder / "image.tar") if builder == "podman" else None
    return render_conversion(image, labels, archive)


def convert(image: str, output: Path | None, builder: str, dry_run: bool = False) -> Path:
    from hpcai.console import out
    from hpcai.image.build import check_engine, part_path

    from hpcai.errors import shaped
    from hpcai.image.spec import IMAGE_REF, REF_SHAPE

    operand("IMAGE", image)  # the option rule in its own words (the grammar below refuses it too)
    shaped("IMAGE", image, IMAGE_REF, REF_SHAPE)  # before it reaches an engine, a command or the def
    output = output or Path(sif_name(image))
    if ":" in output.name:
        raise UsageError(f"SIF name {output.name!r} contains ':'; choose another with -o")
    folder = work_folder(output)
    if dry_run:
        tool = next((name for name in CONVERTERS if shutil.which(name)), "apptainer")
        source = f"docker-archive://{folder / 'image.tar'}" if builder == "podman" else f"docker-daemon://{image}"
        out.print(f"# def: {folder / DEF_NAME} (the image from {source}, its %help from the image's labels)",
                  markup=False)
        for argv in commands(image, output, builder, tool, folder):
            out.print(shlex.join(argv), markup=False)
        out.print(shlex.join(["mv", operand("-o/--output", part_path(output)), operand("-o/--output", output)]),
                  markup=False)
        return output
    tool = converter()
    check_engine(builder)
    definition = conversion_def(image, builder, folder)  # refuses bad input before anything is written
    _run(image, output, builder, tool, folder, definition)
    out.print(str(output), markup=False)
    return output


def _run(image: str, output: Path, builder: str, tool: str, folder: Path, definition: str) -> None:
    """Write the def, run the commands (their output into build/logs/<SIF name>.log, a status
    line on stderr), rename OUT.part to OUT; the work folder and any .part go whatever happens
    (a failed step, Ctrl-C)."""
    from hpcai.console import err
    from hpcai.image.build import log_path, part_path, stream

    part, log = part_path(output), log_path(output.name)
    shutil.rmtree(folder, ignore_errors=True)  # hpcai's own work folder (a killed run may have left it)
    folder.mkdir(parents=True)
    try:
        (folder / DEF_NAME).write_text(definition)
        for i, argv in enumerate(commands(image, output, builder, tool, folder)):
            err.print(f"$ {shlex.join(argv)}", markup=False, highlight=False)
            rc, tail, _ = stream(argv, log, output.name, lambda line: line, append=i > 0)
            if rc != 0:
                for line in tail:
                    err.print(line, markup=False, highlight=False, soft_wrap=True)
                raise HpcaiError(f"{argv[0]} failed converting {image}; full log: {log}")
        part.replace(output)
    finally:
        part.unlink(missing_ok=True)
        shutil.rmtree(folder, ignore_errors=True)
