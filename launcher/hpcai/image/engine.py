"""Questions to a docker/podman engine, through its CLI: is this image here, its labels and Id.

The CLI, not the docker SDK: `docker image inspect` answers in ~20 ms where importing the SDK
alone takes ~0.2 s, and it is the same call for podman. `hpcai launch` starts the inspect
(`prefetch`) as soon as it has parsed its arguments, so the Go CLI's start-up overlaps hpcai's
own imports and planning; this module imports nothing heavy for that reason.
"""

from __future__ import annotations

import subprocess

_PENDING: dict = {}  # (binary, image) -> running `image inspect`
_SEEN: dict = {}     # (binary, image) -> its answer


def _start(binary: str, image: str) -> subprocess.Popen:
    """`image inspect` of IMAGE, started: after `--`, so an image name never reads as an option."""
    return subprocess.Popen([binary, "image", "inspect", "--", image], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def prefetch(binary: str, image: str) -> None:
    """Start `image inspect` now, so its ~20 ms (a Go CLI start) overlap hpcai's own start-up;
    _inspect collects the answer."""
    if (binary, image) in _PENDING or (binary, image) in _SEEN:
        return
    try:
        _PENDING[(binary, image)] = _start(binary, image)
    except OSError:
        pass  # _inspect runs it again and reports why


def _inspect(binary: str, image: str) -> dict | None:
    """The engine's image inspect data, or None when the image is not there."""
    import json

    from hpcai.errors import HpcaiError

    if (binary, image) in _SEEN:
        return _SEEN[binary, image]
    try:
        proc = _PENDING.pop((binary, image), None) or _start(binary, image)
        out, err = proc.communicate(timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HpcaiError(f"{binary} is not usable here: {exc}") from None
    if proc.returncode != 0:
        if "no such image" in err.lower() or "image not known" in err.lower():
            return None
        raise HpcaiError(f"{binary} image inspect {image} failed: {err.strip()}")
    _SEEN[binary, image] = (json.loads(out) or [None])[0]
    return _SEEN[binary, image]


def _local_images(binary: str) -> list[str]:
    res = subprocess.run([binary, "images", "--format", "{{.Repository}}:{{.Tag}}"],
                         capture_output=True, text=True, check=False)
    return sorted({t for t in res.stdout.split() if "<none>" not in t})


def local_labels(image: str, binaries: tuple[str, ...] = ("docker", "podman")) -> dict[str, str]:
    """IMAGE's labels from the first of BINARIES that has it; {} when none has it, or none runs
    here (`hpcai export k8s` writes for images that may live only in a registry)."""
    import shutil

    from hpcai.errors import HpcaiError

    for binary in binaries:
        try:
            attrs = _inspect(binary, image) if shutil.which(binary) else None
        except HpcaiError:
            attrs = None
        if attrs is not None:
            return dict((attrs.get("Config") or {}).get("Labels") or {})
    return {}


def image_labels(binary: str, image: str) -> dict[str, str]:
    """Labels of a local image (hpcai.payloads, component versions); exit 2 when it is missing."""
    attrs = _inspect(binary, image)
    if attrs is None:
        from hpcai.errors import unknown

        raise unknown(f"{binary} image", image, _local_images(binary)[:30])
    return dict((attrs.get("Config") or {}).get("Labels") or {})


def image_id(binary: str, image: str) -> str | None:
    attrs = _inspect(binary, image)
    return attrs.get("Id") if attrs else None
