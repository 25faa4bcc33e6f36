"""Docker and Podman: one named container per rank, host network and IPC, removed on exit.

The image's ENTRYPOINT is already hpcai-entrypoint, so only the command is passed. Under srun
every task gets the same argv, so the name is left out here and the rank shim inserts
`--name=…-<rank>` and `-e NAME` for the per-rank variables (see entrypoints/hpcai-shim).
"""

from __future__ import annotations

from hpcai.run.runtimes import ContainerSpec


class DockerRuntime:
    name = "docker"
    binary = "docker"
    env_prefix = ""  # `-e NAME`: the value comes from docker's own environment
    image_is_file = False
    engine = True
    gpu_flags = {"nvidia": ["--gpus", "all"],
                 "amd": ["--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video"]}

    def clean_env(self, site) -> bool:
        return True  # a container sees only what `-e` passes

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

    def prefetch(self, image: str) -> None:
        from hpcai.image.engine import prefetch

        prefetch(self.binary, image)

    def labels(self, image: str) -> dict[str, str]:
        """The local image's labels; exit 2 (listing the local images) when it is not there."""
        from hpcai.image.engine import image_labels

        return image_labels(self.binary, image)


class PodmanRuntime(DockerRuntime):
    name = "podman"
    binary = "podman"
    gpu_flags = {**DockerRuntime.gpu_flags, "nvidia": ["--device", "nvidia.com/gpu=all"]}
