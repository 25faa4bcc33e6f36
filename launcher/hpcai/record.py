"""Run records: the folder every launch leaves behind, read later by `hpcai results`.

Layout of `runs/<YYYYmmdd-HHMMSS>-<payload>[-<jobid>]/` (or `--output-dir`):

    plan.json     what was asked and what ran (argv and environment already redacted)
    status.json   how it ended: state, exit codes per step, failed ranks, wall time
    logs/         rank-<N>.out / rank-<N>.err per rank (srun --output/--error with %t)
    metrics.json  parsed metrics (written by hpcai.results after the run)
    energy/       jpwr CSV files, one per node, when --energy was given

A record's folder name is claimed with an exclusive mkdir when its launch is planned (runs started
together each get their own), and its logs folder by exactly one run (claim_logs), so two runs
never share a record; each JSON file is written aside and renamed into place, so a reader never
sees half a file. A full disk cannot leave a record saying "running" for ever: when the run
starts, its record sets space aside (`.reserve`, sized to hold the final plan and status), freed
just before the final files are written.

A record folder may be one the user, or another user, could write into (--output-dir), so its
files are written and read through hpcai.files: a link planted at one of its names is refused when
the run starts and replaced, never followed, if planted later; a file that is not a regular file,
too large or too deeply nested is a BadFile, never a hang or a RecursionError.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hpcai import files

PLAN = "plan.json"
STATUS = "status.json"
METRICS = "metrics.json"
LOGS = "logs"
ENERGY = "energy"
RESERVE = ".reserve"
OWN_NAMES = (PLAN, STATUS, METRICS, RESERVE, ENERGY)  # what a run writes besides logs/


@dataclass
class RunStatus:
    state: str  # "completed" | "failed" | "cancelled" | "running"
    exit_code: int | None = None
    failed_ranks: list[int] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)  # [{"name", "exit_code", "wall_s"}]
    wall_s: float | None = None
    started: str | None = None
    ended: str | None = None
    message: str = ""
    # Which process runs (ran) the launch, so that a record left "running" by a launcher that
    # was killed outright can be recognised (launcher_note); None in records written before.
    launcher_pid: int | None = None
    launcher_host: str | None = None
    launcher_start: str | None = None  # the process's start as the kernel counts it (process_start)


# Records are the user's own: plans name images, nodes, accounts and commands.
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600

def new_run_dir(root: Path, payload: str, job_id: str | None = None) -> Path:
    """A fresh, unique record folder name under `root` (never an existing one)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = f"{stamp}-{payload}" + (f"-{job_id}" if job_id else "")
    candidate, n = root / base, 1
    while candidate.exists():
        n += 1
        candidate = root / f"{base}.{n}"
    return candidate


def claim_name(run_dir: Path) -> bool:
    """Take RUN_DIR's name for one run (an exclusive mkdir): False when another run has it."""
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        run_dir.mkdir(mode=PRIVATE_DIR)
    except FileExistsError:
        return False
    return True


def claim_logs(run_dir: Path) -> None:
    """Start writing the record: its logs folder is made by exactly one run, so two runs given the
    same --output-dir at once never share it (the second stops with this error)."""
    from hpcai.errors import UsageError

    run_dir.parent.mkdir(parents=True, exist_ok=True)
    run_dir.mkdir(mode=PRIVATE_DIR, exist_ok=True)
    try:
        # Any name the run will write already taken (a link planted to send .reserve's zeros to
        # its target, an energy/ link to another folder): not a fresh record, nothing is made.
        if any(os.path.lexists(run_dir / name) for name in OWN_NAMES):
            raise FileExistsError
        (run_dir / LOGS).mkdir(mode=PRIVATE_DIR)
    except FileExistsError:
        raise UsageError(f"{run_dir} already holds, or is being written by, another run; "
                         "a run never shares a record") from None


def write_json(path: Path, data: Any) -> None:
    """Atomic JSON write (hpcai.files.write_atomic): private (0600), aside then renamed, so a
    failure (a full disk) leaves the old file whole. The names are the record's own: a link
    planted at one after the run claimed it is replaced, never written through, and never stops
    a run whose ranks are running. NaN is written as null (valid JSON)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    files.write_atomic(path, files.dumps(data, indent=2, sort_keys=True, default=str) + "\n",
                       PRIVATE_FILE, over_link=True)


def reserve_space(run_dir: Path, size: int) -> None:
    """Set SIZE bytes aside in the record (written, not sparse, so the blocks are really taken),
    as write_json writes: a link at .reserve is replaced, its target never filled with zeros."""
    files.write_atomic(run_dir / RESERVE, bytes(size), PRIVATE_FILE, over_link=True)


def release_space(run_dir: Path) -> None:
    (run_dir / RESERVE).unlink(missing_ok=True)


def abandon(run_dir: Path) -> None:
    """Remove a record that could not be started (nothing ran): only the files hpcai writes."""
    for name in (RESERVE, STATUS, PLAN):
        (run_dir / name).unlink(missing_ok=True)
    for path in (run_dir / LOGS, run_dir):
        try:
            path.rmdir()
        except OSError:  # not empty: something else is there, keep it
            pass


def read_json(path: Path) -> Any:
    """A record's JSON file (hpcai.files.read_json): BadFile when it is not a regular file, is too
    large or too deep, or is not JSON; OSError when it cannot be opened."""
    return files.read_json(path)


def write_status(run_dir: Path, status: RunStatus) -> None:
    write_json(run_dir / STATUS, asdict(status))


def read_status(run_dir: Path) -> RunStatus | None:
    p = run_dir / STATUS
    return RunStatus(**read_json(p)) if os.path.lexists(p) else None


def is_run_dir(path: Path) -> bool:
    """PATH holds a record: anything named plan.json, so a FIFO or a link there is read (and
    reported) as a damaged record rather than passed over, and never written over."""
    return os.path.lexists(path / PLAN)


def process_start(pid: int | str) -> str | None:
    """When process PID started, as `<boot id>/<clock ticks since boot>` (/proc/PID/stat field
    22): a later process given the same pid, even after a reboot, has another. None when there is
    no such live process (a zombie has ended) or no /proc to ask."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except (OSError, ValueError):
        return None
    after_name = stat.rpartition(")")[2].split()  # the name, in parentheses, may hold spaces and ")"
    if len(after_name) < 20 or after_name[0] == "Z":  # fields 3 (state) to 22 (start time)
        return None
    return f"{boot}/{after_name[19]}"


def this_launcher() -> dict[str, Any]:
    """The RunStatus launcher fields of this process."""
    import socket

    return {"launcher_pid": os.getpid(), "launcher_host": socket.gethostname(),
            "launcher_start": process_start(os.getpid())}


def launcher_note(status: dict[str, Any]) -> str:
    """What to add to the state of a record that says "running": "launcher gone" when it was
    launched on this host by a process that no longer runs (killed outright: SIGKILL, out of
    memory), "launcher on HOST" when it was launched elsewhere (that host's processes cannot be
    seen from here), "" while its launcher runs or when the record cannot tell (written before
    these fields, damaged, no /proc here)."""
    pid, host, start = (status.get(k) for k in ("launcher_pid", "launcher_host", "launcher_start"))
    if (status.get("state") != "running" or isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0
            or not isinstance(host, str) or not isinstance(start, str)):
        return ""
    import socket

    if host != socket.gethostname():
        return f"launcher on {host}"
    if process_start("self") is None:  # no /proc: nothing can be said
        return ""
    return "" if process_start(pid) == start else "launcher gone"
