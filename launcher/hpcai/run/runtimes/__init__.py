"""Container runtimes: each turns a `ContainerSpec` into the token list that starts one rank.

Runtimes are tiny and registered by name; `singularity` subclasses `apptainer` and `podman`
subclasses `docker`, changing only the binary and the flags that differ. `pyxis` is srun's own
plugin: it adds options to srun (`step`) instead of wrapping the command.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from hpcai.paths import ENTRYPOINT


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


class Runtime:
    """What every runtime declares: the required parts (name, binary, clean_env, prefetch, labels,
    argv) and every optional capability with its default, so planning asks each runtime the same
    questions and never probes for a name (`hasattr`)."""

    name: str = ""
    binary: str = ""
    env_prefix: str = ""         # secrets reach the container as PREFIX+NAME in the runtime's environment
    image_is_file: bool = False  # the image is a path (SIF, SquashFS, folder), not an engine's image name
    engine: bool = False         # a container engine: one named, labelled container per rank, killed and
                                 # removed through the engine, the image Id asked from it (docker, podman)
    joins: bool = False          # the ranks on one node join one container, a peer group named per node
    groups_any_ranks: bool = False  # any rank may join the node's group whenever it starts (apptainer's instance)
    fabric_hooks: bool = False   # its own hooks can bring the host fabric (ce, where the site lets them)
    # settings the runtime's own program reads from the launcher's environment (enroot's ENROOT_*),
    # never put in argv
    launcher_env: Mapping[str, str] = MappingProxyType({})
    # how the rank shim hands each rank's variables to the container (entrypoints/hpcai-shim):
    # "flags" (`ENGINE run --name=… -e NAME`), "env" (PREFIXENV_NAME, env_prefix's PREFIX),
    # "join-tag" (ch-run --join-tag=NAME; it inherits the rest), "none" (the command as it is)
    shim_forward: str = "none"
    # what `hpcai doctor` says when the binary is missing; "" for a plugin of srun (pyxis, ce),
    # whose binary is srun's row
    doctor_hint: str = ""

    def doctor_probe(self) -> str:
        """How `hpcai doctor` finds the runtime (cli/doctor.py's probe kinds): its binary on PATH."""
        return f"cmd:{self.binary}"

    def clean_env(self, site: Any) -> bool:
        """The container starts with a clean environment, so the rank shim forwards the site's
        pass_env variables into it."""
        raise NotImplementedError

    def prefetch(self, image: str) -> None:
        """Start asking for the image's labels now (an engine answers while planning goes on)."""
        raise NotImplementedError

    def labels(self, image: str) -> dict[str, str]:
        raise NotImplementedError

    def argv(self, spec: ContainerSpec) -> list[str]:
        raise NotImplementedError

    def step(self, spec: ContainerSpec) -> StepOptions | None:
        """A runtime that is a plugin of the launcher rather than a command around the payload
        (pyxis: `srun --container-image=… CMD`) gives the options it adds to srun's own; argv() is
        then the command srun runs inside the container. The others: None."""
        return None

    def group_start(self, spec: ContainerSpec) -> list[str]:
        """The command that starts a node's shared container, for a runtime that joins ranks into
        one (apptainer's instance); [] when the rank shim needs none (charliecloud)."""
        return []

    def check_mode(self, spec: ContainerSpec) -> None:
        """Refuse, naming the fix, a mode this host cannot run (apptainer: capabilities, --userns)."""

    def prepare(self, image: str) -> list[list[str]]:
        """Commands run once on this host before a Slurm step starts the ranks (sarus pull)."""
        return []


@dataclass(frozen=True)
class StepOptions:
    """What a plugin runtime adds to the launcher: `options` go after srun's own (the rank shim,
    if any, comes after them, inside the container); `env` is set in srun's environment, where
    the plugin reads values from (pyxis's --container-env names them), never in argv."""

    options: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, str], ...] = ()  # (name in the run record, text): written before the step


def step(runtime: Runtime, spec: ContainerSpec) -> StepOptions | None:
    """The runtime's StepOptions when it is a launcher plugin, else None: the wrapping runtimes
    (apptainer, charliecloud, docker…) put everything in argv()."""
    return runtime.step(spec)


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
