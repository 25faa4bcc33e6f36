"""The image each runtime of container_parity.py runs: the docker image as a SIF, an enroot
SquashFS, or a copy in podman's storage, each made once per image Id and cached."""

from __future__ import annotations

import os
from pathlib import Path

from launch_overhead import hpcai_argv


def run(argv: list[str], env: dict[str, str], timeout: float = 600):
    import subprocess

    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, check=False)


def sif(image: str, env: dict[str, str]) -> str:
    """The docker image as a SIF made by `hpcai sif`, once per image Id (HPCAI_APPTAINER_CACHE)."""
    from hpcai.image.sif import sif_name

    cache = Path(os.environ.get("HPCAI_APPTAINER_CACHE", "/var/tmp/hpcai-sif"))
    return converted(image, env, "sif", cache, lambda short_id: sif_name(f"bench-{image}-{short_id}"))


def sqsh(image: str, env: dict[str, str]) -> str:
    """The docker image as an enroot SquashFS for pyxis, made by `hpcai sqsh` once per image Id (in
    the cache the pyxis tests use)."""
    from hpcai.image.sqsh import sqsh_name

    cache = Path(os.environ.get("HPCAI_SQSH_CACHE", "/var/tmp/hpcai-sqsh"))
    return converted(image, env, "sqsh", cache, lambda short_id: sqsh_name(f"{image}-{short_id}"))


def converted(image: str, env: dict[str, str], command: str, cache: Path, name) -> str:
    """CACHE/name(short image Id), made by `hpcai COMMAND IMAGE -o …` unless it is there."""
    image_id = run(["docker", "image", "inspect", "-f", "{{.Id}}", image], env).stdout.strip()
    out = cache / name(image_id.removeprefix("sha256:")[:12])
    if not out.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        res = run([*hpcai_argv(), command, image, "-o", str(out)], env, timeout=1800)
        if res.returncode:
            raise SystemExit(f"container_parity: hpcai {command} {image} failed:\n{res.stderr[-1500:]}")
    return str(out)


def podman_copy(image: str, env: dict[str, str]) -> str:
    """The docker image in podman's storage (copied once: podman pull docker-daemon:TAG)."""
    name = "localhost/" + image if "/" in image and not image.startswith("localhost/") else image
    if run(["podman", "image", "exists", name], env).returncode != 0:
        res = run(["podman", "pull", "-q", f"docker-daemon:{image}"], env, timeout=1800)
        if res.returncode or run(["podman", "tag", res.stdout.strip(), name], env).returncode:
            raise SystemExit(f"container_parity: cannot copy {image} into podman:\n{res.stderr[-1500:]}")
    return name
