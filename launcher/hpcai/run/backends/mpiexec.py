"""mpiexec for PBS Pro + Cray PALS systems (ALCF Polaris), where srun does not exist.

Format: mpiexec -n 8 -ppn 4 --cpu-bind depth -d 16 --hostfile $PBS_NODEFILE
PALS has no per-rank output files, so the rank shim writes logs/rank-N.out|err itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from hpcai.run.model import Geometry
from hpcai.run.processes import Outcome, Signals

TYPE_CHECKING = False  # the plan's type only
if TYPE_CHECKING:
    from hpcai.run.model import LaunchPlan


def argv(g: Geometry) -> list[str]:
    out = ["mpiexec", "-n", str(g.ntasks), "-ppn", str(g.ntasks_per_node)]
    if g.cpu_bind:
        out += ["--cpu-bind", g.cpu_bind]
    if g.cpus_per_task:
        out += ["-d", str(g.cpus_per_task)]
    hostfile = g.nodelist or os.environ.get("PBS_NODEFILE", "")
    if hostfile:
        out += ["--hostfile", hostfile]
    return out + list(g.extra)


class MpiexecBackend:
    name = "mpiexec"
    binary = "mpiexec"
    doctor_hint = "only PBS/PALS sites (ALCF Polaris) need it: --backend mpiexec"
    per_rank = False
    slurm = False
    batch = "pbs"  # PALS's mpiexec runs inside PBS Pro jobs (run/pbs.py)
    allocation_var = "PBS_JOBID"
    shim_logs = True

    def prefix(self, geom: Geometry) -> list[str]:
        return argv(geom)

    def execute(self, plan: LaunchPlan, logs: Path, sig: Signals, started: Callable[[], None]) -> Outcome:
        # Run as an srun step is: one launcher process for every rank, its stderr shown and kept,
        # each rank's code from the shim's exit files, the same two SIGINTs to cancel. srun's
        # stderr format and its cleanup hop to the nodes find nothing under PALS (no srun), so
        # failed ranks come from the exit files alone.
        from hpcai.run.backends.srun import run_step

        return run_step(plan, logs, sig, started)
