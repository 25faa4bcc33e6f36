"""`hpcai stage IMAGE`, part two: inside an allocation, the site copy goes to every node's local
cache by Slurm's tree broadcast, read from the shared file system once whatever the node count.

Three steps, each a token list run here:
1. `srun -N N --ntasks-per-node=1 --overlap python -m hpcai.run.node_cache check …`: every node
   says whether it holds the digest already (and marks it used); when all do, the stage is warm
   and ends here;
2. `sbcast --force --fanout=F SITE_COPY NODE_DIR/.NAME.part-JOB-PID`: Slurm reads the file once
   on this host and forwards it node to node, F children each (at most 8, Slurm's limit);
3. `srun … node_cache publish …`: each node renames the part over the name once whole, and evicts
   its least recently used images beyond the cap.

A broadcast that fails, or is interrupted, has its part removed from every node (`node_cache
discard`): a local disk keeps no half-sent image. A failed one is tried once more first: a node's
slurmd can refuse one transfer and take the next (one CI run saw "REQUEST_FILE_BCAST(nid001):
Unspecified error" once, on a loaded machine, and never again); the error after the second names
the node, whose slurmd log says why.

The node folder is the same path on every node (the local disk: not a shared file system); every
runtime then starts from `NODE_DIR/sha256-<hex>.FORMAT`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpcai.errors import HpcaiError, UsageError, has_control
from hpcai.run.node_cache import CACHED, part_name

NODE_CACHE_ENV = "HPCAI_NODE_CACHE"
MAX_FANOUT = 8  # sbcast(1): "Maximum value is currently eight"
SBCAST_TRIES = 2
DEFAULT_CAP = 100 << 30  # bytes of images a node keeps (LRU beyond it)


@dataclass
class NodeStage:
    path: str                    # the image on every node
    nodes: list[str]
    cold: list[str] = field(default_factory=list)   # nodes that had to receive it
    evicted: dict[str, list[str]] = field(default_factory=dict)
    broadcast_bytes: int = 0     # read from the shared file system by sbcast (0 when warm)
    seconds: float = 0.0


def default_node_cache() -> str:
    """$HPCAI_NODE_CACHE, else /tmp/hpcai-images-<uid> (node-local at most sites; where /tmp is
    wiped per job, name a lasting local disk so the cache survives jobs)."""
    return os.environ.get(NODE_CACHE_ENV) or f"/tmp/hpcai-images-{os.getuid()}"


def check(node_dir: str, fanout: int) -> None:
    """The node cache and fan-out a stage was given, before anything is converted or sent."""
    if not node_dir.startswith("/") or has_control(node_dir) or any(c in node_dir for c in ":,"):
        raise UsageError(f"node cache {node_dir!r}: an absolute path without ':' or ','")
    if not 1 <= fanout <= MAX_FANOUT:
        raise UsageError(f"--fanout {fanout}: from 1 to {MAX_FANOUT} (sbcast's limit)")


def in_allocation(env: dict[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return bool(env.get("SLURM_JOB_ID") and env.get("SLURM_JOB_NODELIST"))


def stage_nodes(site_copy: Path, name: str, node_dir: str, fanout: int = MAX_FANOUT,
                cap: int = DEFAULT_CAP) -> NodeStage:
    """Put SITE_COPY into NODE_DIR/NAME (sha256-<hex>.FORMAT) on every node of this allocation."""
    import hostlist

    if not CACHED.fullmatch(name):
        raise UsageError(f"{name}: not a staged name (sha256-<hex>.sif|sqsh)")
    check(node_dir, fanout)
    start = time.monotonic()
    nodes = hostlist.expand_hostlist(os.environ["SLURM_JOB_NODELIST"])
    size = site_copy.stat().st_size
    stage = NodeStage(f"{node_dir}/{name}", nodes)
    states = _on_nodes(len(nodes), ["check", node_dir, name, str(size)])
    stage.cold = sorted(n for n, words in states.items() if words[:1] != ["have"])
    if stage.cold:
        part = part_name(name, os.environ["SLURM_JOB_ID"], os.getpid())
        _broadcast(site_copy, node_dir, name, part, fanout, len(nodes))
        stage.broadcast_bytes = size
        states = _on_nodes(len(nodes), ["publish", node_dir, name, str(size), str(cap), part])
        failed = sorted(n for n, words in states.items() if words[:1] not in (["staged"], ["have"]))
        if failed:
            raise HpcaiError(f"staging {name} failed on {', '.join(failed)}: the broadcast copy is not whole")
        stage.evicted = {n: words[2:] for n, words in states.items() if words[1:2] == ["evicted"]}
    stage.seconds = time.monotonic() - start
    return stage


def _broadcast(site_copy: Path, node_dir: str, name: str, part: str, fanout: int, count: int) -> None:
    """SITE_COPY to NODE_DIR/PART on every node, tried SBCAST_TRIES times; what a failed or
    interrupted try left on the nodes is removed."""
    from hpcai.output import warn

    discard = ["discard", node_dir, name, part]
    for attempt in range(1, SBCAST_TRIES + 1):
        try:
            # Format: sbcast --force --fanout=F SITE_COPY NODE_DIR/.NAME.part-JOB-PID
            _run(["sbcast", "--force", f"--fanout={fanout}", str(site_copy), f"{node_dir}/{part}"], "sbcast")
            return
        except KeyboardInterrupt:
            _on_nodes(count, discard)
            raise
        except HpcaiError as exc:
            _on_nodes(count, discard)
            if attempt == SBCAST_TRIES:
                raise HpcaiError(f"{exc} (tried {SBCAST_TRIES} times; the parts sent were removed from every "
                                 "node; that node's slurmd log says why)") from None
            warn(f"{exc}; the part sent was removed from every node, trying once more")


def _on_nodes(count: int, args: list[str]) -> dict[str, list[str]]:
    """One node_cache task per node; {node: [state, …]} from their lines."""
    # Format: srun -N N -n N --ntasks-per-node=1 --overlap PYTHON -m hpcai.run.node_cache ARGS
    out = _run(["srun", "-N", str(count), "-n", str(count), "--ntasks-per-node=1", "--overlap",
                sys.executable, "-m", "hpcai.run.node_cache", *args], f"node cache {args[0]}")
    states = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 2:
            states[words[0]] = words[1:]
    if len(states) != count:
        raise HpcaiError(f"node cache {args[0]}: {len(states)} of {count} nodes answered")
    return states


def _run(argv: list[str], what: str) -> str:
    res = subprocess.run(argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    if res.returncode != 0:
        said = [ln.strip() for ln in (res.stderr or res.stdout).splitlines() if ln.strip()][-1:] or ["(no message)"]
        raise HpcaiError(f"{what} failed ({argv[0]} exit {res.returncode}): {said[0]}")
    return res.stdout
