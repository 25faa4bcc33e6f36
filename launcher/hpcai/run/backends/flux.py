"""flux run, for Flux systems (LLNL's El Capitan class), where neither srun nor mpiexec exists.

Format: flux run -N 2 -n 8 -c 24 -g 1 --exclusive -o exit-on-error -o cpu-affinity=per-task
             -o pmi=simple [-q QUEUE --bank=BANK -t 600s] [--requires=host:LIST]
Flux takes its sizes per task (flux-run(1)): -N nodes and -n tasks spread evenly and in blocks,
-c cores and -g GPUs for each task, so a node's GPUs are split between its tasks. `exit-on-error`
ends the job as soon as one task fails, as srun's --kill-on-bad-exit does (Flux's default waits
30 s after the first task exits). Its --output cannot name a file per task, so the rank shim
writes logs/rank-N.out|err, as under PALS. Inside an allocation (`flux batch`, `flux alloc`: their
initial program has FLUX_URI set, flux-environment(7)) the queue, bank and time limit are the
allocation's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hpcai.errors import UsageError
from hpcai.run.model import Geometry
from hpcai.run.processes import Outcome, Signals

TYPE_CHECKING = False  # the plan's type only
if TYPE_CHECKING:
    from hpcai.run.model import LaunchPlan

# The Flux shell's PMI server for each `--mpi` type an MPI of the image needs (run/pmi.py names
# them as Slurm does): MPICH's simple PMI client speaks Flux's own `simple`; Open MPI 5 needs the
# flux-pmix plugin; the host's Cray MPICH (a site's mpi_swap) flux-coral2's `cray-pals`.
PMI = {"pmi2": "simple", "pmix": "pmix", "cray_shasta": "cray-pals", "none": "off"}


def gpus_per_task(g: Geometry) -> int:
    """Flux gives GPUs to tasks, not nodes: the node's GPUs split evenly between its tasks."""
    if g.per_gpu:
        return 1
    if g.gpus_per_node % g.ntasks_per_node:
        raise UsageError(f"Flux gives GPUs per task: {g.gpus_per_node} GPUs per node do not split evenly "
                         f"between {g.ntasks_per_node} ranks; give --gpus-per-node a multiple of "
                         "--ntasks-per-node, or --per-gpu")
    return g.gpus_per_node // g.ntasks_per_node


def argv(g: Geometry) -> list[str]:
    from hpcai.run.timelimits import seconds

    out = ["flux", "run", "-N", str(g.nodes), "-n", str(g.ntasks)]
    if g.cpus_per_task:
        out += ["-c", str(g.cpus_per_task)]
    if g.gpus_per_node and gpus_per_task(g):
        out += ["-g", str(gpus_per_task(g))]
    out += ["--exclusive", "-o", "exit-on-error"]
    if g.cpu_bind:
        out += ["-o", f"cpu-affinity={g.cpu_bind}"]
    if g.per_gpu and g.gpus_per_node:
        out += ["-o", "gpu-affinity=per-task"]  # each copy sees its own GPU only
    if g.mpi:
        if g.mpi not in PMI:
            raise UsageError(f"--mpi {g.mpi} is Slurm's alone; under Flux one of: {', '.join(PMI)}")
        out += ["-o", f"pmi={PMI[g.mpi]}"]
    if not g.in_allocation:
        out += [f for f in (g.partition and f"--queue={g.partition}", g.account and f"--bank={g.account}") if f]
        if g.time:
            out.append(f"--time-limit={seconds(g.time)}s")
    if g.nodelist:
        out.append(f"--requires=host:{g.nodelist}")
    return out + list(g.extra)


class FluxBackend:
    name = "flux"
    binary = "flux"
    doctor_hint = ("only Flux sites (LLNL's El Capitan class, llnl-elcap) need it: `flux run` starts the ranks "
                   "(--backend flux), `flux batch` and `flux jobs` submit and follow jobs (hpcai submit --wait), "
                   "each rank asks `flux hostlist` for MASTER_ADDR")
    per_rank = False
    slurm = False
    batch = "flux"  # `flux batch` scripts (run/flux_batch.py)
    allocation_var = "FLUX_URI"  # set for the initial program of `flux batch`/`flux alloc`
    shim_logs = True

    def prefix(self, geom: Geometry) -> list[str]:
        return argv(geom)

    def execute(self, plan: LaunchPlan, logs: Path, sig: Signals, started: Callable[[], None]) -> Outcome:
        # One `flux run` for every rank, as an srun step: its stderr shown and kept, each rank's
        # code from the shim's exit files, and the same two SIGINTs to cancel (flux run, like
        # srun, passes the first to the tasks and cancels the job on a second within 2 s).
        from hpcai.run.backends.srun import run_step

        return run_step(plan, logs, sig, started)
