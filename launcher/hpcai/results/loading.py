"""Find and read run records (`hpcai results show|compare|export|plot` read many at once).

Records may sit in folders other users write to, so every file of one is read through
hpcai.files (regular files only, size and JSON depth bounds): a FIFO, a link to /dev/zero or a
document nested 100,000 deep makes that one record a CorruptRecord, skipped with one warning line
when many are read, never a hang, MemoryError or RecursionError that hides the rest.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hpcai import files
from hpcai import record
from hpcai.errors import UsageError
from hpcai.results.metrics import ParseResult
from hpcai.results.runs import RunRecord, evaluate


class CorruptRecord(UsageError):
    """A run record whose files cannot be read as hpcai writes them (cut, edited, unreadable)."""


_COUNTS = ("nodes", "ntasks_per_node", "gpus_per_node", "cpus_per_task")
_TEXTS = ("payload", "site", "cluster", "partition", "image", "job_id")


def _read(path: Path, kind: type) -> Any:
    try:
        data = files.read_json(path, name=path.name)
    except OSError as exc:
        raise CorruptRecord(f"{path.name}: cannot be read ({exc.strerror or exc})") from None
    except files.BadFile as exc:  # not a regular file, too large, not UTF-8 or JSON, too deep
        raise CorruptRecord(str(exc)) from None
    if not isinstance(data, kind):
        raise CorruptRecord(f"{path.name}: a JSON {kind.__name__ if kind is not dict else 'object'} "
                            f"was expected, not {type(data).__name__}")
    return data


def _check_plan(plan: dict[str, Any], status: dict[str, Any]) -> None:
    """The fields the results commands compute with have the types hpcai writes."""
    for key in _COUNTS:
        value = plan.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise CorruptRecord(f"plan.json: {key} must be a whole number, not {value!r}")
    for key in _TEXTS:
        if plan.get(key) is not None and not isinstance(plan[key], (str, int)):
            raise CorruptRecord(f"plan.json: {key} must be text, not {type(plan[key]).__name__}")
    for key in ("payload_vars", "payload_values", "image_labels"):
        if plan.get(key) is not None and not isinstance(plan[key], dict):
            raise CorruptRecord(f"plan.json: {key} must be an object, not {type(plan[key]).__name__}")
    if status.get("state") is not None and not isinstance(status["state"], str):
        raise CorruptRecord(f"status.json: state must be text, not {status['state']!r}")


def load(run_dir: Path) -> RunRecord:
    """Read one record, never writing into it (archives may be read-only); a record without
    metrics.json (older or copied) is parsed in memory. Damage raises CorruptRecord."""
    if not record.is_run_dir(run_dir):
        raise UsageError(f"not a run record (no {record.PLAN}): {run_dir}")
    plan = _read(run_dir / record.PLAN, dict)
    # lexists, not is_file: a FIFO or a link to a device there is damage to report, not a missing file
    status_path = run_dir / record.STATUS
    status = _read(status_path, dict) if os.path.lexists(status_path) else {}
    _check_plan(plan, status)
    metrics_path = run_dir / record.METRICS
    data = _read(metrics_path, dict) if os.path.lexists(metrics_path) else evaluate(run_dir, plan)
    if data.get("error") or not data.get("metrics"):
        return RunRecord(run_dir, plan, status, None, str(data.get("error") or "no metrics"))
    try:
        result = ParseResult.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptRecord(f"metrics.json: a metric is malformed ({type(exc).__name__}: {exc})") from None
    from hpcai.payloads import document

    document(str(plan.get("payload", "")), result)  # a record of older hpcai: today's names and headline
    return RunRecord(run_dir, plan, status, result)


def _identity(path: Path) -> tuple[int, int] | str:
    """What makes two spellings of a record folder one record: the folder they lead to (device and
    inode, links followed), else its resolved real path."""
    try:
        st = os.stat(path)
    except OSError:
        return os.path.realpath(path)
    return (st.st_dev, st.st_ino)


def _linked(path: Path, top: Path) -> bool:
    """PATH, found below the folder TOP, is reached through a symlink below TOP."""
    return any((top / Path(*path.relative_to(top).parts[:i])).is_symlink()
               for i in range(1, len(path.relative_to(top).parts) + 1))


def discover(paths: list[Path]) -> list[Path]:
    """Run-record folders named directly or found one or two levels below (runs/, sweeps), each
    once: a record named twice (`runs/a` and `/abs/runs/a`, `runs/../runs/a`, `runs/` and
    `runs/a`) or reached through a symlink as well (`runs/a-link -> a`) is one record, counted and
    listed once, under the first name it was found by (arguments in order; in a folder, a name
    not through a link before one through a link). Dropped silently: it is the same record."""
    found: list[Path] = []
    for p in paths:
        if not p.exists():
            raise UsageError(f"no such run record or folder: {p}")
        if record.is_run_dir(p):
            found.append(p)
            continue
        below = [q.parent for q in [*p.glob(f"*/{record.PLAN}"), *p.glob(f"*/*/{record.PLAN}")]]
        # Hidden folders are records still being written (see hpcai.record): skip them.
        shown = [q for q in below if not any(part.startswith(".") for part in q.relative_to(p).parts)]
        found.extend(sorted(shown, key=lambda q: (_linked(q, p), q)))
    if not found:
        raise UsageError(f"no run records (folders with {record.PLAN}) in: {', '.join(map(str, paths))}")
    first: dict[tuple[int, int] | str, Path] = {}
    for q in found:
        first.setdefault(_identity(q), q)
    return sorted(first.values())


def read_all(paths: list[Path]) -> tuple[list[RunRecord], list[str]]:
    """(the readable records, one line per record skipped and why). None readable: UsageError."""
    records, skipped = [], []
    for path in discover(paths):
        try:
            records.append(load(path))
        except CorruptRecord as exc:
            skipped.append(f"skipped {path}: {exc}")
    if not records:
        raise UsageError(f"no readable run records ({len(skipped)} damaged): " + "; ".join(skipped)[:2000])
    return records, skipped


def load_all(paths: list[Path]) -> list[RunRecord]:
    return read_all(paths)[0]
