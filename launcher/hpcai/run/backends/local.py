"""local: N ranks as processes on this machine, with the variables a scheduler would set.

No prefix: `execute` starts each rank's command itself, in its own session with its own log
files, and ends the others as soon as one fails. A rank sees RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR=127.0.0.1 and MASTER_PORT (a free port), which is what
torch.distributed's env:// needs; with --per-gpu every copy is its own world of 1 and sees one GPU.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from hpcai.errors import HpcaiError
from hpcai.run.model import Geometry
from hpcai.run.processes import Outcome, Signals, failed_by_code, stop

TYPE_CHECKING = False  # the plan's type only
if TYPE_CHECKING:
    from hpcai.run.model import LaunchPlan


class LocalBackend:
    name = "local"
    binary = ""  # hpcai starts the ranks itself
    doctor_hint = ""
    per_rank = True
    slurm = False
    batch = ""
    allocation_var = ""
    shim_logs = False  # hpcai opens each rank's log files itself

    def prefix(self, geom: Geometry) -> list[str]:
        return []

    def execute(self, plan: LaunchPlan, logs: Path, sig: Signals, started: Callable[[], None]) -> Outcome:
        return run_ranks(plan, logs, sig, started)


def rank_env(rank: int, world: int, port: int, per_gpu: bool = False,
             gpu: str = "none") -> dict[str, str]:
    if per_gpu:
        env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
               "NODE_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port + rank),
               "HPCAI_COPY": str(rank)}
        if gpu == "nvidia":
            env["CUDA_VISIBLE_DEVICES"] = str(rank)
        elif gpu == "amd":
            env["ROCR_VISIBLE_DEVICES"] = str(rank)
        return env
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world), "NODE_RANK": "0",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}


def run_ranks(plan: LaunchPlan, logs: Path, sig: Signals, started: Callable[[], None]) -> Outcome:
    """Start plan.rank_argvs, one process each with logs/rank-N.out|err; wait for all of them,
    ending the rest at the first failure or signal."""
    engine = plan.runtime.name if plan.runtime.engine else None
    procs: list[subprocess.Popen] = []
    for rank, argv in enumerate(plan.rank_argvs):
        try:  # a log that cannot be made (full disk) or a binary that cannot start: no orphans
            with open(logs / f"rank-{rank}.out", "wb") as out, open(logs / f"rank-{rank}.err", "wb") as err:
                # own session: hpcai alone decides how ranks are ended
                procs.append(subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                              env={**os.environ, **plan.secret_env,
                                                   **plan.rank_envs[rank]},
                                              start_new_session=True))
        except OSError as exc:
            stop(procs, plan.container_names, engine)
            raise HpcaiError(f"cannot start rank {rank} ({argv[0]}): {exc}") from None
    started()
    state = "completed"
    while [p.poll() for p in procs].count(None):  # poll every rank, not only the first running
        if sig.received or any(p.returncode not in (None, 0) for p in procs):
            state = "cancelled" if sig.received else "failed"
            stop(procs, plan.container_names, engine)
            break
        time.sleep(0.05)
    codes = {r: (128 - p.wait() if p.wait() < 0 else p.returncode) for r, p in enumerate(procs)}
    if engine and plan.container_names:  # a client killed hard cannot remove its container
        subprocess.run([engine, "rm", "-f", *plan.container_names], capture_output=True, check=False)
    if state == "completed" and any(codes.values()):
        state = "failed"
    return Outcome(state=state, codes=codes, failed=failed_by_code(codes) if state == "failed" else {})
