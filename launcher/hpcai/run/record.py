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
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PLAN = "plan.json"
STATUS = "status.json"
METRICS = "metrics.json"
LOGS = "logs"
ENERGY = "energy"
RESERVE = ".reserve"


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
        if is_run_dir(run_dir):
            raise FileExistsError
        (run_dir / LOGS).mkdir(mode=PRIVATE_DIR)
    except FileExistsError:
        raise UsageError(f"{run_dir} already holds, or is being written by, another run; "
                         "a run never shares a record") from None


def write_json(path: Path, data: Any) -> None:
    """Atomic JSON write: a private temporary file (0600) in the same folder, then rename. On any
    failure (a full disk) the temporary file is removed and the old file, if any, stays whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def reserve_space(run_dir: Path, size: int) -> None:
    """Set SIZE bytes aside in the record (written, not sparse, so the blocks are really taken)."""
    block = bytes(min(size, 1 << 16))
    fd = os.open(run_dir / RESERVE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    with os.fdopen(fd, "wb") as fh:
        for _ in range(0, size, len(block)):
            fh.write(block)


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
    return json.loads(path.read_text())


def write_status(run_dir: Path, status: RunStatus) -> None:
    write_json(run_dir / STATUS, asdict(status))


def read_status(run_dir: Path) -> RunStatus | None:
    p = run_dir / STATUS
    return RunStatus(**read_json(p)) if p.exists() else None


def is_run_dir(path: Path) -> bool:
    return (path / PLAN).is_file()
