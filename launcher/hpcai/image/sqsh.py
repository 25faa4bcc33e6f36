"""enroot SquashFS images: `hpcai sqsh IMAGE` makes one from a local Docker/Podman image with
`enroot import dockerd://IMAGE` (or `podman://IMAGE`), and the labels the launcher reads come back
out of it.

enroot keeps an image's labels as comments at the top of the container's `/etc/rc`
(`# hpcai.mpi ompi`), so they travel in the file: `unsquashfs -cat FILE etc/rc` reads them without
mounting anything. File names follow `hpcai sif`'s rule (no ':', which srun's
`--container-mounts` and enroot's `--mount` split on).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

from hpcai.errors import HpcaiError, UsageError, has_control, operand

SCHEMES = {"docker": "dockerd", "podman": "podman"}  # builder -> enroot's URI scheme
# What enroot's importer accepts after the scheme (docker.sh: [[:alnum:]/._:-]+); no digests.
_REFERENCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9/._:-]*")
SUFFIXES = (".sqsh", ".squashfs")


def sqsh_name(image: str) -> str:
    """`hpcai/pytorch-cpu-hpc:bookworm-slim-abc` -> `hpcai_pytorch-cpu-hpc_bookworm-slim-abc.sqsh`."""
    return re.sub(r"[/:@]+", "_", image).strip("_") + ".sqsh"


def check_reference(image: str) -> str:
    operand("IMAGE", image)  # the option rule first, in its own words (the grammar below refuses it too)
    if has_control(image) or not _REFERENCE.fullmatch(image):
        raise UsageError(f"image {image!r}: enroot imports NAME[:TAG] made of letters, digits and / . _ : - "
                         "(no digest, no spaces)")
    return image


def uri(image: str, builder: str) -> str:
    """The enroot URI of a local image: dockerd://IMAGE or podman://IMAGE."""
    return f"{SCHEMES[builder]}://{check_reference(image)}"


def commands(image: str, part: Path, builder: str) -> list[list[str]]:
    # Format: enroot import -o OUT.sqsh.part dockerd://IMAGE
    return [["enroot", "import", "-o", operand("-o/--output", part), uri(image, builder)]]


def _check_output(output: Path, force: bool) -> None:
    if has_control(str(output)) or ":" in output.name or "," in output.name:
        raise UsageError(f"output {str(output)!r}: a SquashFS name without ':', ',' or control characters "
                         "(srun --container-mounts and enroot --mount split on them)")
    if output.suffix not in SUFFIXES:
        raise UsageError(f"output {output}: name it *.sqsh or *.squashfs (pyxis and hpcai tell an image file "
                         "from an image name by that)")
    from hpcai.files import check_output

    # a link, folder, device, FIFO or socket there, or no folder for it: refused, --force or not
    check_output(output, "-o/--output")
    if output.exists() and not force:
        raise UsageError(f"output {output} exists; remove it, give another -o, or pass --force")


def convert(image: str, output: Path | None, builder: str, force: bool = False, dry_run: bool = False) -> Path:
    """Write OUTPUT (default: sqsh_name(image) here) from the local image, atomically: enroot
    writes into a private folder beside it (hpcai.files.aside_dir: `.OUTPUT.XXXXXXXX.part/OUTPUT`,
    unique to the import; --dry-run shows OUTPUT.part for it), renamed once complete, so a failed
    or interrupted import leaves no half-written image under the final name, two imports to one
    OUTPUT never share a temp file, and a user's own OUTPUT.part is never touched. A folder,
    device or FIFO at OUTPUT is refused, --force or not."""
    from hpcai.console import err, out

    output = output or Path(sqsh_name(image))
    check_reference(image)
    _check_output(output, force)
    part = output.with_name(output.name + ".part")
    cmds = commands(image, part, builder)
    if dry_run:
        for argv in cmds:
            out.print(shlex.join(argv), markup=False)
        return output
    if not shutil.which("enroot"):
        raise UsageError("enroot is not installed; install it (https://github.com/NVIDIA/enroot/blob/main/doc/"
                         "installation.md) or run `hpcai sqsh` where it is (tests/infra/enroot-pyxis-up.sh here)")
    from hpcai import files
    from hpcai.image.engine import image_labels

    image_labels(builder, image)  # exit 2, listing the local images, when it is not there
    with files.aside_dir(output, "-o/--output") as private:  # new and empty: enroot's -o must not exist
        for argv in commands(image, private, builder):
            err.print(f"$ {shlex.join(argv)}", markup=False)
            if subprocess.run(argv, check=False, stdin=subprocess.DEVNULL).returncode != 0:
                raise HpcaiError(f"enroot failed importing {image} (command: {shlex.join(argv)})")
    out.print(str(output), markup=False)
    return output


def labels(path: str) -> dict[str, str]:
    """The image labels enroot kept in the SquashFS's /etc/rc; {} where unsquashfs is missing
    or the file is no enroot image (the launch then goes on without them)."""
    if not shutil.which("unsquashfs"):
        return {}
    try:
        res = subprocess.run(["unsquashfs", "-cat", operand("image", Path(path)), "etc/rc"], capture_output=True,
                             text=True, errors="replace", timeout=60, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    found: dict[str, str] = {}
    for line in res.stdout.splitlines() if res.returncode == 0 else ():
        if not line.startswith("# "):
            break  # the labels are the leading comment block
        key, _, value = line[2:].partition(" ")
        found[key] = value
    return found
