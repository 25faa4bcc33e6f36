"""Convert a built image into a SIF with apptainer (or singularity), from a conversion def.

The conversion is a def build (apptainer/convert.def.j2, render.render_conversion): the image as
it is, plus the %runscript, %test and %help that a SIF built from hpcai.def gets, so `apptainer
run|test|run-help` behave the same whichever way a SIF was made. Docker images are read straight
from the daemon (Bootstrap: docker-daemon); Podman has no daemon, so its image is saved to a
docker-archive first (Bootstrap: docker-archive). Built with --notest: %test would need
--fakeroot where Apptainer is not setuid (root included), and the image was checked when it was
built; `apptainer test X.sif` runs it at any time. The SIF is written into a private folder of
its own beside OUT (hpcai.files.aside_dir: `.OUT.XXXXXXXX.part/OUT`, unique to the conversion) and
renamed once complete, so the final name never holds a half-written file, two conversions to one
OUT never share a temp file, and a user's own OUT.part is never touched; the def goes in a work
folder unique to the conversion too. (--dry-run shows the steps with OUT.part standing for that
name.) OUT must be a regular file or nothing: a folder, device or FIFO there is refused. SIF file
names never contain ':' (Slurm's and Apptainer's own argument syntax splits on it).
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

from hpcai import labels as label
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


def labels(image: str, binary: str = "apptainer") -> dict[str, str]:
    """A SIF's labels (kept from the Docker image by `hpcai sif`), by `apptainer inspect --json
    --labels`: {"data": {"attributes": {"labels": {…}}}}. {} where the binary is not installed
    (a dry-run elsewhere) or cannot read the image: a launch then goes on without them."""
    import json
    import subprocess

    if not shutil.which(binary):
        return {}
    res = subprocess.run([binary, "inspect", "--json", "--labels", image], capture_output=True,
                         text=True, check=False, stdin=subprocess.DEVNULL)
    try:
        found = json.loads(res.stdout)["data"]["attributes"].get("labels") or {}
    except (ValueError, KeyError, TypeError):
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def sif_name(image: str) -> str:
    """`hpcai/pytorch-cpu-hpc:bookworm-slim-abc` -> `hpcai_pytorch-cpu-hpc_bookworm-slim-abc.sif`."""
    return re.sub(r"[/:@]+", "_", image).strip("_") + ".sif"


def work_folder(output: Path) -> Path:
    """The conversion's folder (the def, Podman's archive) as --dry-run shows it: build/sif/<SIF
    name>. A conversion makes its own, unique, beside it (new_work_folder)."""
    from hpcai.image.build import work_dir

    return work_dir() / "sif" / output.name


def new_work_folder(output: Path) -> Path:
    """A new folder for one conversion: build/sif/<SIF name>.XXXXXXXX (mkdtemp), so two
    conversions to one name never remove each other's def or archive; removed after."""
    import tempfile

    base = work_folder(output).parent
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{output.name}.", dir=base))


def commands(image: str, output: Path, builder: str, tool: str, folder: Path,
             part: Path | None = None) -> list[list[str]]:
    """The token lists that produce `output` from `image`, written as PART (the conversion's
    private temp file; default, as --dry-run shows it: output.part), with the def in `folder`
    (and Podman's archive there too)."""
    from hpcai.image.build import part_path

    # Format: apptainer build --notest --force OUT.sif.part DEF   (paths made never to read as options)
    build = [tool, "build", "--notest", "--force", operand("-o/--output", part or part_path(output)),
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
    if not labels.get(label.FLAVOR):
        raise UsageError(f"{image} is not an hpcai image (no hpcai.flavor label), so it has no hpcai-entrypoint "
                         f"to run; convert it as it is with: apptainer build OUT.sif docker-daemon://{image}")
    archive = str(folder / "image.tar") if builder == "podman" else None
    return render_conversion(image, labels, archive)


def convert(image: str, output: Path | None, builder: str, dry_run: bool = False) -> Path:
    from hpcai.console import out
    from hpcai.image.build import check_engine, part_path

    from hpcai.errors import shaped
    from hpcai.image.values import IMAGE_REF, REF_SHAPE

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
    folder = new_work_folder(output)
    try:
        definition = conversion_def(image, builder, folder)  # refuses bad input before anything is written
        _run(image, output, builder, tool, folder, definition)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    out.print(str(output), markup=False)
    return output


def _run(image: str, output: Path, builder: str, tool: str, folder: Path, definition: str) -> None:
    """Write the def into FOLDER, run the commands (their output into build/logs/<SIF name>.log,
    a status line on stderr) writing the SIF into a private folder beside OUT (files.aside_dir),
    renamed to OUT once complete; that folder goes whatever happens (a failed step, Ctrl-C)."""
    from hpcai import files
    from hpcai.console import err
    from hpcai.image.build import log_path, stream

    log = log_path(output.name)
    with files.aside_dir(output, "-o/--output") as part:  # a folder, device or FIFO at OUT: refused here
        (folder / DEF_NAME).write_text(definition)
        for i, argv in enumerate(commands(image, output, builder, tool, folder, part)):
            err.print(f"$ {shlex.join(argv)}", markup=False, highlight=False)
            rc, tail, _ = stream(argv, log, output.name, lambda line: line, append=i > 0)
            if rc != 0:
                for line in tail:
                    err.print(line, markup=False, highlight=False, soft_wrap=True)
                raise HpcaiError(f"{argv[0]} failed converting {image}; full log: {log}")
