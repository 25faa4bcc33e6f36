"""local: N ranks as processes on this machine, with the variables a scheduler would set.

No prefix: hpcai.run.launch starts each rank's command itself. A rank sees RANK, LOCAL_RANK,
WORLD_SIZE, LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR=127.0.0.1 and MASTER_PORT (a free port),
which is what torch.distributed's env:// needs; with --per-gpu every copy is its own world of 1
and sees one GPU.
"""

from __future__ import annotations

from hpcai.run.backends import Geometry


class LocalBackend:
    name = "local"
    per_rank = True
    slurm = False
    shim_logs = False  # hpcai opens each rank's log files itself

    def prefix(self, geom: Geometry) -> list[str]:
        return []


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
