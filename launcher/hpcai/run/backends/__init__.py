"""Backends: how ranks are started. srun and mpiexec return the token list put in front of each
rank's command and run it as one process; local starts every rank itself.

Each backend is one small module with a class the registry names, holding both its command and
how it is executed; what differs between them is said by its attributes and methods, so no other
module tests a backend's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

TYPE_CHECKING = False  # types only: hpcai.run.plan imports this module
if TYPE_CHECKING:
    from hpcai.run.plan import LaunchPlan
    from hpcai.run.processes import Outcome, Signals


@dataclass(frozen=True)
class Geometry:
    """Where and how many ranks run; the backend-independent half of a plan."""

    nodes: int = 1
    ntasks_per_node: int = 1
    cpus_per_task: int = 0       # 0: not passed
    gpus_per_node: int = 0
    per_gpu: bool = False        # independent single-GPU copies (--gpus-per-task=1)
    mpi: str = ""
    distribution: str = ""
    cpu_bind: str = ""
    partition: str = ""
    account: str = ""
    time: str = ""
    nodelist: str = ""
    in_allocation: bool = False  # inside salloc/sbatch: a step, no partition/account/time
    log_dir: str = ""            # per-rank logs: <log_dir>/rank-%t.out|err
    extra: tuple[str, ...] = ()  # site srun_options

    @property
    def ntasks(self) -> int:
        return self.nodes * self.ntasks_per_node


class Backend(Protocol):
    name: str
    per_rank: bool   # hpcai starts every rank itself, one argv each (no launcher process)
    slurm: bool      # a Slurm step: the job id, srun's options, --mpi and per-rank log files apply
    shim_logs: bool  # the launcher writes no per-rank files: the rank shim writes logs/rank-N.*

    def prefix(self, geom: Geometry) -> list[str]:
        """The tokens put in front of every rank's command ([] when hpcai starts the ranks)."""
        ...

    def execute(self, plan: LaunchPlan, logs: Path, sig: Signals, started: Callable[[], None]) -> Outcome:
        """Start the plan's ranks (their logs in `logs`), call `started` once they are, and wait
        for them; a signal in `sig` cancels them, and a failed rank ends the others."""
        ...


# name -> "module:class" (imported when used)
_REGISTRY = {"srun": "srun:SrunBackend", "mpiexec": "mpiexec:MpiexecBackend", "local": "local:LocalBackend"}
BACKENDS = tuple(_REGISTRY)


def get_backend(name: str) -> Backend:
    from hpcai.run.registry import instance

    backend: Backend = instance("backend", __name__, _REGISTRY, name)
    return backend
