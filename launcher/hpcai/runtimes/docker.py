"""Docker and Podman: one named container per rank, host network and IPC, removed on exit.

The image's ENTRYPOINT is already hpcai-entrypoint, so only the command is passed. Under srun
every task gets the same argv, so the name is left out here and the rank shim inserts
`--name=…-<rank>` and `-e NAME` for the per-rank variables (see hpcai.shim).
"""

from __future__ import annotations

import functools

from hpcai.runtimes import ContainerSpec


class DockerRuntime:
    name = "docker"
    binary = "docker"
    image_is_file = False
    gpu_flags = {"nvidia": ["--gpus", "all"],
                 "amd": ["--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video"]}

    def argv(self, spec: ContainerSpec) -> list[str]:
        # Format: docker run --rm --init --network host --ipc host --name N -v S:D -e K=V IMG CMD…
        argv = [self.binary, "run", "--rm", "--init", "--network", "host", "--ipc", "host"]
        if spec.name:
            argv.append(f"--name={spec.name}")
        for key, value in spec.labels:
            argv += ["--label", f"{key}={value}"]
        argv += self.gpu_flags.get(spec.gpu, [])
        for src, dst in spec.binds:
            argv += ["-v", f"{src}:{dst}"]
        for key, value in spec.env:
            argv += ["-e", f"{key}={value}"]
        for key in spec.secret_names:
            argv += ["-e", key]  # value from the environment
        if not spec.entrypoint:
            argv += ["--entrypoint", spec.command[0]] if spec.command else []
            return argv + list(spec.extra) + [spec.image, *spec.command[1:]]
        return argv + list(spec.extra) + [spec.image, *spec.command]


class PodmanRuntime(DockerRuntime):
    name = "podman"
    binary = "podman"
    gpu_flags = {**DockerRuntime.gpu_flags, "nvidia": ["--device", "nvidia.com/gpu=all"]}


@functools.lru_cache(maxsize=8)
def _inspect(binary: str, image: str) -> dict | None:
    """The engine's image inspect data, or None when the image is not there.

    The CLI, not the docker SDK: `docker image inspect` answers in ~20 ms where importing the SDK
    alone takes ~0.2 s, and it is the same call for podman.
    """
    import json
    import subprocess

    try:
        res = subprocess.run([binary, "image", "inspect", image], capture_output=True, text=True,
                             timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        from hpcai.errors import HpcaiError

        raise HpcaiError(f"{binary} is not usable here: {exc}") from None
    if res.returncode != 0:
        if "no such image" in res.stderr.lower() or "image not known" in res.stderr.lower():
            return None
        from hpcai.errors import HpcaiError

        raise HpcaiError(f"{binary} image inspect {image} failed: {res.stderr.strip()}")
    return (json.loads(res.stdout) or [None])[0]


def _local_images(binary: str) -> list[str]:
    import subprocess

    res = subprocess.run([binary, "images", "--format", "{{.Repository}}:{{.Tag}}"],
                         capture_output=True, text=True, check=False)
    return sorted({t for t in res.stdout.split() if "<none>" not in t})


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
