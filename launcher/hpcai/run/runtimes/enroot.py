"""enroot: `enroot start --mount SRC:DST:none:x-create=auto,rbind --env K=V IMAGE CMD…`, for the
local and mpiexec backends (under srun, pyxis drives enroot: see pyxis.py).

The image is a SquashFS file (`hpcai sqsh` makes one), started straight from the file: enroot
mounts it read-only with a writable layer, so N ranks on a node need no N unpacked copies; or the
name of a container made once with `enroot create --name NAME FILE.sqsh`. `enroot start` runs the
image's own entrypoint (its /etc/rc, written by `enroot import`: hpcai-entrypoint for hpcai
images) before the command, as `docker run` does, with the image's ENV (ENROOT_LOGIN_SHELL=n in
enroot's environment: a login shell would let Debian's /etc/profile reset PATH). The container starts with the image's
environment and `--env` only, so the rank shim forwards the site's pass_env (`-e NAME`, the value
from its own environment) as for docker.

The helpers here are also pyxis's: both take the same image argument and mounts.
"""

from __future__ import annotations

import os
import re

from hpcai.errors import UsageError, has_control, one_line, operand
from hpcai.image.sqsh import SUFFIXES
from hpcai.run.runtimes import ContainerSpec, Runtime

# enroot's settings from the environment: no login shell, so the image's ENV (its PATH to the
# venv) is the container's, as under docker; a login shell runs the image's /etc/profile, and
# Debian's resets PATH.
LAUNCHER_ENV = {"ENROOT_LOGIN_SHELL": "n"}
# A container name for `enroot start NAME` (enroot refuses '/'), or an image reference pyxis imports.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


def is_file(image: str) -> bool:
    """A SquashFS path rather than a name: pyxis's own rule (it starts with '/' or '.'), a
    .sqsh/.squashfs name, or a file that exists."""
    return "://" not in image and (image.startswith(("/", ".")) or image.endswith(SUFFIXES)
                                   or os.path.isfile(image))


def image_arg(image: str) -> str:
    """The image as the runtime is given it: a file as an absolute path (pyxis would take
    `x.sqsh` for a registry image, and a relative path means another folder on the node). One
    starting with '-' is refused even as a file: `enroot start` reads it as an option."""
    image = operand("--image", image)
    return os.path.abspath(image) if is_file(image) else image


def image_labels(runtime: str, image: str) -> dict[str, str]:
    """Labels of a SquashFS image (exit 2 when the file is missing); {} for a name."""
    from hpcai.image import sqsh

    operand("--image", image)  # refused before any file is looked at or read
    if not is_file(image):
        return {}
    if not os.path.isfile(image):
        raise UsageError(f"image not found: {image} (the {runtime} runtime takes a SquashFS file from "
                         "`hpcai sqsh`, or an image name)")
    return sqsh.labels(image)


def check_path(what: str, path: str) -> str:
    """Mount paths become fields of an fstab line (enroot's --mount, pyxis's --container-mounts):
    whitespace or a backslash would split or escape one, so they are refused."""
    if has_control(path) or re.search(r"[\s\\]", path):
        raise UsageError(f"{what} {path!r}: enroot and pyxis mount paths may not hold spaces, tabs or "
                         "backslashes; bind a folder whose path has none")
    return path


def fstab_mount(src: str, dst: str) -> str:
    """`SRC:DST[:ro]` -> enroot's colon-separated fstab entry SRC:DST:none:x-create=auto,rbind[,ro]."""
    path, _, mode = dst.partition(":")
    check_path("bind", src)
    check_path("bind", path)
    return f"{src}:{path}:none:x-create=auto,rbind{',ro' if mode == 'ro' else ''}"


class EnrootRuntime(Runtime):
    name = "enroot"
    shim_forward = "flags"  # enroot start -e NAME
    doctor_hint = "only needed for --runtime enroot/pyxis (and `hpcai sqsh`)"
    binary = "enroot"
    env_prefix = ""  # `--env NAME`: the value comes from enroot's own environment
    image_is_file = False  # a SquashFS file or a container name (checked in labels)
    engine = False
    launcher_env = LAUNCHER_ENV

    def clean_env(self, site) -> bool:
        return True  # the container sees the image's environment and --env only

    def prefetch(self, image: str) -> None:
        """A file's labels are read when asked: nothing to start early."""

    def labels(self, image: str) -> dict[str, str]:
        if not is_file(image) and not _NAME.fullmatch(image):
            raise UsageError(f"image {image!r}: the enroot runtime takes a SquashFS file (*.sqsh) or the "
                             "name of a container made with `enroot create`")
        return image_labels(self.name, image)

    def argv(self, spec: ContainerSpec) -> list[str]:
        # Format: enroot start --rw --mount S:D:none:x-create=auto,rbind --env K=V --env SECRET IMG CMD…
        if not spec.entrypoint:
            raise UsageError("--no-entrypoint: `enroot start` always runs the image's own entrypoint "
                             "(its /etc/rc); use --runtime pyxis, docker or apptainer for an image without one")
        argv = [self.binary, "start", "--rw"]  # writable like docker's container; the layer goes with it
        for src, dst in spec.binds:
            argv += ["--mount", fstab_mount(src, dst)]
        for key, value in spec.env:  # one line each of enroot's environ file
            argv += ["--env", f"{key}={one_line(f'--env {key}', value)}"]
        for key in spec.secret_names:
            argv += ["--env", key]  # value from the environment
        return argv + list(spec.extra) + [image_arg(spec.image), *spec.command]
