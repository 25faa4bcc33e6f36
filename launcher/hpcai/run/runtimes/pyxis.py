"""pyxis, Slurm's SPANK plugin for enroot: the container is one of srun's own options.

Format: srun … --container-image=/abs/IMG.sqsh --container-mounts=/usr/lib64:/host/lib:ro,/scratch:/scratch
             --container-env=NCCL_DEBUG,MASTER_PORT --container-writable --no-container-entrypoint
             [--no-container-mount-home] ENTRY CMD…

So srun's command (ENTRY CMD…) runs inside the container, and the runtime gives `step()` (the
options above) where the wrapping runtimes give a command: the plan puts them after srun's own
options and before anything it runs per rank. pyxis passes the job's environment into the
container (SLURM_*, so the image's hpcai-entrypoint derives the rank variables as under ch-run);
hpcai's variables are set in srun's environment, never in argv, and `--container-env` names them so
their values win over the image's (pyxis's default keeps the image's). hpcai-entrypoint is named
explicitly, as with `apptainer exec`, and `--no-container-entrypoint` keeps pyxis from also running
the image's ENTRYPOINT whatever the site's pyxis default. The container is writable like docker's;
pyxis removes the unnamed container when the step ends. `--no-container-mount-home` follows the
site's containall (Apptainer's --containall leaves the home folder out too).

The image is a SquashFS file (`hpcai sqsh`), as an absolute path, or an enroot URI pyxis imports
on every node (docker://REGISTRY#IMAGE, dockerd://IMAGE). GPUs need no flag: enroot's own hooks
bring the driver in (NVIDIA_VISIBLE_DEVICES, set by NGC images).
"""

from __future__ import annotations

from hpcai.errors import UsageError, operand
from hpcai.run.runtimes import ContainerSpec, Runtime, StepOptions
from hpcai.run.runtimes.enroot import LAUNCHER_ENV, check_path, image_arg, image_labels


def container_mounts(binds: tuple[tuple[str, str], ...]) -> str:
    """`SRC:DST[:ro|rw]` binds -> pyxis's one comma-separated `--container-mounts` value."""
    out = []
    for src, dst in binds:
        path, _, mode = dst.partition(":")
        check_path("bind", src)
        check_path("bind", path)
        out.append(f"{src}:{path}" + (f":{mode}" if mode else ""))
    return ",".join(out)


class PyxisRuntime(Runtime):
    name = "pyxis"
    binary = "srun"  # pyxis has no command of its own
    env_prefix = ""  # secrets: srun's environment, named by --container-env
    image_is_file = False  # a SquashFS file or an enroot URI (checked in labels)
    engine = False
    launcher_env = LAUNCHER_ENV  # pyxis hands srun's environment (ENROOT_* included) to enroot

    def clean_env(self, site) -> bool:
        return False  # pyxis passes the job's environment (SLURM_*, PMI*) into the container

    def prefetch(self, image: str) -> None:
        """A file's labels are read when asked: nothing to start early."""

    def labels(self, image: str) -> dict[str, str]:
        operand("--image", image)
        if "," in image:
            raise UsageError(f"image {image!r}: pyxis takes a SquashFS file or an enroot URI "
                             "(docker://REGISTRY#IMAGE, dockerd://IMAGE) without ','")
        return image_labels(self.name, image)

    def step(self, spec: ContainerSpec) -> StepOptions:
        options = [f"--container-image={image_arg(spec.image)}"]
        if spec.binds:
            options.append(f"--container-mounts={container_mounts(spec.binds)}")
        names = [key for key, _ in spec.env] + list(spec.secret_names)
        if names:
            options.append(f"--container-env={','.join(names)}")
        options += ["--container-writable", "--no-container-entrypoint"]
        if spec.containall:
            options.append("--no-container-mount-home")
        return StepOptions(options=tuple(options) + tuple(spec.extra), env=spec.env)

    def argv(self, spec: ContainerSpec) -> list[str]:
        # Format: ENTRY CMD… (what srun runs inside the container)
        return ([spec.entrypoint] if spec.entrypoint else []) + list(spec.command)
