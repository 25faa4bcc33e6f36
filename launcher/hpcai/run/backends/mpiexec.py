"""mpiexec for PBS Pro + Cray PALS systems (ALCF Polaris), where srun does not exist.

Format: mpiexec -n 8 -ppn 4 --cpu-bind depth -d 16 --hostfile $PBS_NODEFILE
PALS has no per-rank output files, so the rank shim writes logs/rank-N.out|err itself.
"""

from __future__ import annotations

import os

from hpcai.run.backends import Geometry


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
    per_rank = False
    slurm = False
    shim_logs = True

    def prefix(self, geom: Geometry) -> list[str]:
        return argv(geom)
