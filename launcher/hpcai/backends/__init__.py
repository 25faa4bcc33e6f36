"""Backends: how ranks are started. srun and mpiexec return the token list put in front of each
rank's command; local starts the ranks itself (hpcai.launch)."""

from __future__ import annotations

from dataclasses import dataclass


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


BACKENDS = ("srun", "mpiexec", "local")


def backend_prefix(name: str, geom: Geometry) -> list[str]:
    from hpcai.backends import mpiexec, srun

    if name == "srun":
        return srun.argv(geom)
    if name == "mpiexec":
        return mpiexec.argv(geom)
    return []
