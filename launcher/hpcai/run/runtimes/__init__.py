"""Container runtimes: each turns a `ContainerSpec` into the token list that starts one rank.

Runtimes are tiny and registered by name; `singularity` subclasses `apptainer` and `podman`
subclasses `docker`, changing only the binary and the flags that differ. `pyxis` is srun's own
plugin: it adds options to srun (`step`) instead of wrapping the command.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

ENTRYPOINT = "/opt/hpcai/bin/hpcai-entrypoint"
BENCH = "/opt/hpcai/bin/hpcai-bench"


@dataclass(frozen=True)
class ContainerSpec:
    """What runs in the container, independent of the runtime.

    command:    argv after the entrypoint (`hpcai-bench <payload> var=value…`, or the raw --cmd)
    entrypoint: hpcai-entrypoint path, or "" when the image has none (--no-entrypoint)
    payload:    payload name and its args, for runtimes that can use the image's runscript
    name:       container name (docker/podman); "" under srun, where the rank shim names it
    peers:      ranks of one MPI world started on one node (charliecloud puts them in one
                container, whose name the rank shim gives: see there)
    secret_names: TOKEN/KEY/SECRET/PASSWORD variables; the backend that runs the ranks puts their
                values in the environment of the runtime process (docker `-e NAME`,
                APPTAINERENV_NAME, ch-run inherits), so they never appear in argv, `ps`, logs or
                records
    """

    image: str
    command: tuple[str, ...]
    entrypoint: str = ENTRYPOINT
    payload: tuple[str, ...] = ()
    binds: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    secret_names: tuple[str, ...] = ()  # values travel in the process environment, never in argv
    gpu: str = "none"
    name: str = ""
    peers: int = 1
    labels: tuple[tuple[str, str], ...] = ()
    containall: bool = True
    cleanenv: bool = True
    apptainer_command: str = "exec"
    userns: bool = False  # apptainer --userns (the site's apptainer_userns, or --userns)
    image_env: bool = True  # charliecloud: apply the image's /ch/environment (bare --set-env)
    fabric_hooks: bool = False  # ce: its own hooks bring the host fabric (the site's fabric_hooks)
    mpi: str = ""  # the image's MPI (hpcai.mpi label): podman-hpc/sarus --mpi swap in MPICH only
    run_dir: str = ""  # the run record, where a plugin runtime's files go (ce: its EDF)
    extra: tuple[str, ...] = field(default=())


class Runtime(Protocol):
    name: str
    binary: str
    env_prefix: str      # secrets reach the container as PREFIX+NAME in the runtime's environment
    image_is_file: bool  # the image is a path (SIF, SquashFS, folder), not an engine's image name
    engine: bool         # a container engine: one named, labelled container per rank, killed and
                         # removed through the engine, the image Id asked from it (docker, podman)

    def clean_env(self, site: Any) -> bool:
        """The container starts with a clean environment, so the rank shim forwards the site's
        pass_env variables into it."""
        ...

    def prefetch(self, image: str) -> None:
        """Start asking for the image's labels now (an engine answers while planning goes on)."""
        ...

    def labels(self, image: str) -> dict[str, str]: ...

    def argv(self, spec: ContainerSpec) -> list[str]: ...

    # Optional, for a runtime that is a plugin of the launcher rather than a command around the
    # payload (pyxis: `srun --container-image=… CMD`): `step(spec)` gives the options it adds to
    # srun's own, and argv() is then the command srun runs inside the container. See step().
    # Optional too: `launcher_env`, a dict of settings the runtime's own program reads from the
    # environment of the launcher process (enroot's ENROOT_*), never put in argv.


@dataclass(frozen=True)
class StepOptions:
    """What a plugin runtime adds to the launcher: `options` go after srun's own (the rank shim,
    if any, comes after them, inside the container); `env` is set in srun's environment, where
    the plugin reads values from (pyxis's --container-env names them), never in argv."""

    options: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, str], ...] = ()  # (name in the run record, text): written before the step


def step(runtime: Runtime, spec: ContainerSpec) -> StepOptions | None:
    """The runtime's StepOptions when it is a launcher plugin (it has `step`), else None: the
    wrapping runtimes (apptainer, charliecloud, docker…) put everything in argv()."""
    method = getattr(runtime, "step", None)
    return method(spec) if method else None


# name -> "module:class" (imported when used): singularity subclasses apptainer, podman docker
_REGISTRY = {"apptainer": "apptainer:ApptainerRuntime", "singularity": "apptainer:SingularityRuntime",
             "charliecloud": "charliecloud:CharliecloudRuntime", "docker": "docker:DockerRuntime",
             "podman": "docker:PodmanRuntime", "pyxis": "pyxis:PyxisRuntime", "enroot": "enroot:EnrootRuntime",
             "ce": "ce:CeRuntime", "podman-hpc": "podman_hpc:PodmanHpcRuntime", "sarus": "sarus:SarusRuntime"}
RUNTIMES = tuple(_REGISTRY)


def get_runtime(name: str) -> Runtime:
    from hpcai.run.registry import instance

    runtime: Runtime = instance("runtime", __name__, _REGISTRY, name)
    return runtime
