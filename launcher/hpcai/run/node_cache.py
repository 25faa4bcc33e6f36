"""The node-local image cache, run on every node of an allocation by hpcai.run.broadcast:
`python -m hpcai.run.node_cache check DIR NAME SIZE | publish DIR NAME SIZE CAP PART | discard DIR
NAME PART`; one line out per node, `NODE STATE [evicted NAME…]`.

The cache is a folder on node-local storage holding one file per image digest and format
(`sha256-<hex>.sif|.sqsh`, the names hpcai.run.stage gives), kept across jobs. A file's mtime is
its last use: `check` touches the file it finds, and `publish` evicts the least recently used
files, never the one just staged, until the folder holds at most CAP bytes. A file arrives by
sbcast under a part name unique to the stager and is renamed over NAME only at its full size, so
a node never starts from half an image; a broadcast that failed or was interrupted has its part
discarded on every node, so none stays on a local disk. A lock per folder keeps two jobs' publish,
discard and eviction on one node from crossing. Files only the cache holds are touched: names that are not a digest's are
left alone.
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import sys
from pathlib import Path

CACHED = re.compile(r"sha256-[0-9a-f]{64}\.(sif|sqsh)")
USAGE = ("usage: python -m hpcai.run.node_cache check DIR NAME SIZE | publish DIR NAME SIZE CAP PART"
         " | discard DIR NAME PART")
OPERANDS = {"check": 3, "publish": 5, "discard": 3}


def part_name(name: str, job: str, pid: int) -> str:
    """Where sbcast writes NAME for one stager (job and process): no two stagers share a part."""
    return f".{name}.part-{job}-{pid}"


def is_part(name: str, part: str) -> bool:
    """PART is a part of NAME as part_name makes one: publish and discard touch nothing else."""
    return re.fullmatch(re.escape(f".{name}.part-") + r"[0-9]+-[0-9]+", part) is not None


def node_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def check(folder: Path, name: str, size: int) -> str:
    """"have" (and touched: used now) or "miss"; the folder made (0700) for the broadcast."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    image = folder / name
    try:
        if image.stat().st_size == size:
            os.utime(image)
            return "have"
    except OSError:
        pass
    return "miss"


def publish(folder: Path, name: str, size: int, cap: int, part: str) -> tuple[str, list[str]]:
    """Rename the broadcast PART over NAME when it is whole; evict down to CAP bytes. The state
    ("staged", "have" where another job got there first, "incomplete") and the files evicted."""
    image, arrived = folder / name, folder / part
    with open(folder / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if image.is_file() and image.stat().st_size == size:
            arrived.unlink(missing_ok=True)
            os.utime(image)
            state = "have"
        elif arrived.is_file() and arrived.stat().st_size == size:
            os.replace(arrived, image)
            os.utime(image)
            state = "staged"
        else:
            arrived.unlink(missing_ok=True)
            return "incomplete", []
        return state, evict(folder, cap, keep=name)


def discard(folder: Path, part: str) -> str:
    """Remove a broadcast's PART, whole, partial or never arrived: "discarded"."""
    if folder.is_dir():
        with open(folder / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            (folder / part).unlink(missing_ok=True)
    return "discarded"


def evict(folder: Path, cap: int, keep: str) -> list[str]:
    """Remove the least recently used cached images (oldest mtime first), never KEEP, until the
    folder's images take at most CAP bytes (0: no cap). A process already running from an evicted
    file keeps it open; only new starts miss it."""
    if cap <= 0:
        return []
    entries = []
    for path in folder.iterdir():
        if CACHED.fullmatch(path.name) and path.is_file():
            st = path.stat()
            entries.append((st.st_mtime_ns, path.name, st.st_size))
    total = sum(size for _, _, size in entries)
    evicted = []
    for _, name, size in sorted(entries):
        if total <= cap:
            break
        if name != keep:
            (folder / name).unlink(missing_ok=True)
            total -= size
            evicted.append(name)
    return evicted


def main(argv: list[str]) -> int:
    if not argv or OPERANDS.get(argv[0]) != len(argv) - 1 or not CACHED.fullmatch(argv[2]) \
            or (argv[0] != "check" and not is_part(argv[2], argv[-1])):
        print(USAGE, file=sys.stderr)
        return 2
    folder, name = Path(argv[1]), argv[2]
    try:
        if argv[0] == "check":
            state, evicted = check(folder, name, int(argv[3])), []
        elif argv[0] == "publish":
            state, evicted = publish(folder, name, int(argv[3]), int(argv[4]), argv[5])
        else:
            state, evicted = discard(folder, argv[3]), []
    except OSError as exc:
        print(f"{node_name()} error {' '.join(str(exc).split())}")
        return 1
    print(" ".join([node_name(), state, *(["evicted", *evicted] if evicted else [])]))
    return 0 if state != "incomplete" else 1

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
