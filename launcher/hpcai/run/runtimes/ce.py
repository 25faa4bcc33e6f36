"""CSCS Container Engine: `srun --environment=RUN/environment.toml … ENTRY CMD…`.

CE is a Slurm plugin (enroot + pyxis underneath): the container is named in srun's own options
by an EDF file (hpcai.run.edf) and every task's command already runs inside it, so there is no
wrapper binary and no rank shim (a host path would not exist in the container). The container
inherits the host environment (SLURM_*, secrets from the launcher's process environment), the EDF
[env] adds hpcai's variables, and the entrypoint is named in the command (`entrypoint = false`)
as with `apptainer exec`. The EDF is written into the run record when the step starts.
"""

from __future__ import annotations

from pathlib import Path

from hpcai.errors import UsageError, operand
from hpcai.run.runtimes import ContainerSpec, Runtime, StepOptions

EDF_NAME = "environment.toml"


class CeRuntime(Runtime):
    name = "ce"
    binary = "srun"  # no binary of its own: the pyxis-based plugin of srun
    env_prefix = ""  # the container inherits the step's environment
    image_is_file = False  # a registry reference ([USER@][REGISTRY#]IMAGE[:TAG]) or a SquashFS path
    engine = False
    fabric_hooks = True  # its cxi / aws_ofi_nccl hooks can bring the host fabric (site fabric_hooks)

    def clean_env(self, site) -> bool:
        return False  # host environment inherited

    def prefetch(self, image: str) -> None:
        """CE pulls on the nodes: nothing to start early."""

    def labels(self, image: str) -> dict[str, str]:
        """A path must be a SquashFS file here (a SIF is Apptainer's); a registry reference is
        read by CE on the nodes, so its labels are not known here ({})."""
        operand("--image", image)  # as every runtime: CE's srun plugin takes no option-like image either
        if image.startswith(("/", "./", "../")):
            path = Path(image)
            if not path.is_file():
                raise UsageError(f"image not found: {image} (the ce runtime takes a SquashFS file or a registry "
                                 "reference [USER@][REGISTRY#]IMAGE[:TAG])")
            if path.suffix == ".sif":
                raise UsageError(f"{image} is a SIF, which the Container Engine cannot run: use --runtime apptainer, "
                                 "or `hpcai sqsh` for a SquashFS")
        return {}

    def edf(self, spec: ContainerSpec) -> str:
        """The EDF text for this container (hpcai.run.edf validates and writes it)."""
        from hpcai.run import edf

        return edf.render(edf.build(edf.EdfSpec(image=operand("--image", spec.image), mounts=spec.binds, env=spec.env,
                                                gpu=spec.gpu, hooks=spec.fabric_hooks)))

    def step(self, spec: ContainerSpec) -> StepOptions:
        """srun's option that starts the step inside the container, and the EDF file it names,
        written into the run record before the step starts."""
        # Format: srun … --environment=RUN/environment.toml
        return StepOptions(options=(f"--environment={Path(spec.run_dir) / EDF_NAME}",),
                           files=((EDF_NAME, self.edf(spec)),))

    def argv(self, spec: ContainerSpec) -> list[str]:
        # Format: ENTRY CMD… (after srun's options; no wrapper)
        return ([spec.entrypoint] if spec.entrypoint else []) + list(spec.command)
