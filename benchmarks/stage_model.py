"""A model of image start-up on N nodes, direct from the shared file system and staged (hpcai
stage: one read of the site copy, sbcast's tree to node-local storage), calibrated on the 4-node
measurement of benchmarks/stage_scaling.py and used to predict 64 … 4,096 nodes.

Direct: every node reads what its ranks touch of the image (R bytes) from a file system whose
bandwidth B_fs is shared by the N readers, each also capped by its own client bandwidth B_node;
t_run is a launch's own time to ready ranks when the image is on local storage (allocation,
launch, container start, the touched bytes read locally):

    t_direct(N)   = t_run + R / min(B_node, B_fs / N)             bytes from the FS: N × R

Staged: a check step on every node (srun's own tree starts it: t_srun plus a hop per level), and
when cold sbcast, which reads the whole image (S bytes) once and forwards it down a tree of
fan-out F, blocks pipelined, so a level adds a hop and not a copy, then a publish step:

    t_warm(N)     = t_step(N) + t_run                              bytes from the FS: 0
    t_cold(N)     = 2 t_step(N) + S / B_cast + depth(N) × t_hop + t_run        bytes: S
    t_step(N)     = t_srun + depth(N) × t_hop,    depth(N) = ceil(log_F N)

The parameters come from the measurement (fit below); `--fs-bandwidth` etc. replace any of them
to model another site. What the model leaves out: metadata load on the file system (N clients
opening one file), network contention inside the tree, and client caches (a node that read the
image before reads less): it is a bound to compare the paths by, not a prediction of one site.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

SCALES = (64, 128, 256, 512, 1024, 2048, 4096)


@dataclass(frozen=True)
class Params:
    image_bytes: float        # S
    touched_bytes: float      # R: what one node's ranks read of the image to start
    fs_bandwidth: float       # B_fs, bytes/s shared by all readers
    node_bandwidth: float     # B_node, one client's read bandwidth from the FS (beyond a local read)
    cast_bandwidth: float     # B_cast, sbcast's pipeline bandwidth
    run_s: float              # t_run: ready ranks from an image on local storage
    srun_s: float             # t_srun: a one-task-per-node step's start and end
    hop_s: float              # t_hop: one tree level (srun's and sbcast's)
    fanout: int = 8


def depth(nodes: int, fanout: int) -> int:
    """Levels of a tree of FANOUT children per node that reaches NODES nodes below the root."""
    return 0 if nodes <= 1 else math.ceil(math.log(nodes, fanout))


def step_s(p: Params, nodes: int) -> float:
    return p.srun_s + depth(nodes, p.fanout) * p.hop_s


def direct(p: Params, nodes: int) -> tuple[float, float]:
    """(seconds to all ranks, bytes read from the FS)."""
    return p.run_s + p.touched_bytes / min(p.node_bandwidth, p.fs_bandwidth / nodes), nodes * p.touched_bytes


def staged(p: Params, nodes: int, warm: bool) -> tuple[float, float]:
    """(seconds to all ranks, bytes read from the FS), staging included."""
    if warm:
        return step_s(p, nodes) + p.run_s, 0.0
    cast = p.image_bytes / p.cast_bandwidth + depth(nodes, p.fanout) * p.hop_s
    return 2 * step_s(p, nodes) + cast + p.run_s, p.image_bytes


def predict(p: Params, scales: tuple[int, ...] = SCALES) -> list[dict[str, float]]:
    rows = []
    for n in scales:
        d_s, d_b = direct(p, n)
        c_s, c_b = staged(p, n, warm=False)
        w_s, _ = staged(p, n, warm=True)
        rows.append({"nodes": n, "direct_s": d_s, "direct_bytes": d_b, "cold_s": c_s, "cold_bytes": c_b,
                     "warm_s": w_s})
    return rows


def with_overrides(p: Params, **values: float | None) -> Params:
    return replace(p, **{k: v for k, v in values.items() if v is not None})
