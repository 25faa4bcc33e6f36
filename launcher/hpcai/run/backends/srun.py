"""srun: one step, inside an allocation or creating one.

Format: srun --nodes=2 --ntasks-per-node=4 --cpus-per-task=72 --gpus-per-node=4 --mpi=pmi2
             --kill-on-bad-exit=1 --distribution=*:block --cpu-bind=socket
             --output=RUN/logs/rank-%t.out --error=RUN/logs/rank-%t.err
`--kill-on-bad-exit=1` ends the whole step as soon as one rank fails, so a dead rank never
leaves the others waiting in a collective until the time limit.
"""

from __future__ import annotations

from hpcai.run.backends import Geometry


def argv(g: Geometry) -> list[str]:
    out = ["srun", f"--nodes={g.nodes}", f"--ntasks-per-node={g.ntasks_per_node}"]
    if g.nodelist:
        out.append(f"--nodelist={g.nodelist}")
    if g.cpus_per_task:
        out.append(f"--cpus-per-task={g.cpus_per_task}")
    if g.per_gpu and g.gpus_per_node:
        out.append("--gpus-per-task=1")  # each copy sees exactly one GPU
    elif g.gpus_per_node:
        out.append(f"--gpus-per-node={g.gpus_per_node}")
    if g.mpi:
        out.append(f"--mpi={g.mpi}")
    out.append("--kill-on-bad-exit=1")
    if g.distribution:
        out.append(f"--distribution={g.distribution}")
    if g.cpu_bind:
        out.append(f"--cpu-bind={g.cpu_bind}")
    if not g.in_allocation:
        out += [f"--{k}={v}" for k, v in (("partition", g.partition), ("account", g.account),
                                          ("time", g.time)) if v]
    if g.log_dir:
        out += [f"--output={g.log_dir}/rank-%t.out", f"--error={g.log_dir}/rank-%t.err"]
    return out + list(g.extra)


class SrunBackend:
    name = "srun"
    per_rank = False
    slurm = True
    shim_logs = False  # srun --output/--error write logs/rank-%t.*

    def prefix(self, geom: Geometry) -> list[str]:
        return argv(geom)
