"""Read run records and finalize them: parse a finished run's logs into metrics.json.

The launcher writes plan.json, status.json and logs/; after the run it calls `finalize(run_dir)`,
which picks the parser for plan.json's payload, parses rank 0's output (or, for `per_gpu` runs of
N independent copies, every rank's output, summing throughputs), adds energy figures when
energy/ holds power samples, and writes metrics.json. A parse failure is recorded in metrics.json
as `error` (never as zeros) and never changes the launcher's status.

Records may sit in folders other users write to, so every file of one is read through
hpcai.files (regular files only, size and JSON depth bounds): a FIFO, a link to /dev/zero or a
document nested 100,000 deep makes that one record a CorruptRecord, skipped with one warning line
when many are read, never a hang, MemoryError or RecursionError that hides the rest.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcai import files
from hpcai import record
from hpcai.errors import HpcaiError, UsageError
from hpcai.results.metrics import HIGHER, Metric, ParseResult

ALL_RANKS = {"sanity"}  # parsers that need every rank's output, not rank 0's
_RANK_LOG = re.compile(r"rank-(\d+)\.(out|err)$")


@dataclass
class RunRecord:
    path: Path
    plan: dict[str, Any]
    status: dict[str, Any] = field(default_factory=dict)
    result: ParseResult | None = None
    error: str | None = None  # why there are no metrics (parse failure), if so

    @property
    def payload(self) -> str:
        return str(self.plan.get("payload", "?"))

    @property
    def state(self) -> str:
        return str(self.status.get("state", "unknown"))

    @property
    def shown_state(self) -> str:
        """The state as a person reads it: a record still "running" says when its launcher is
        gone (killed outright) or runs on another host (record.launcher_note)."""
        note = record.launcher_note(self.status)
        return f"{self.state} ({note})" if note else self.state

    @property
    def nodes(self) -> int:
        return int(self.plan.get("nodes") or 1)

    @property
    def ranks(self) -> int:
        return self.nodes * int(self.plan.get("ntasks_per_node") or 1)

    @property
    def devices(self) -> int:
        gpus = self.plan.get("gpus_per_node")
        return self.nodes * int(gpus) if gpus else self.ranks

    @property
    def system(self) -> str:
        site, part = self.plan.get("site") or "local", self.plan.get("partition") or "*"
        return f"{site}:{part}"

    @property
    def succeeded(self) -> bool:
        return self.state == "completed" and self.result is not None and not self.error


def rank_logs(run_dir: Path) -> dict[int, list[Path]]:
    """rank -> [rank-N.out, rank-N.err] that exist (other *.out/*.err files count as rank 0).
    Only regular files: a FIFO would hang the parser, a link to /dev/zero never end it."""
    logs: dict[int, list[Path]] = {}
    log_dir = run_dir / record.LOGS
    for p in sorted(log_dir.glob("*")) if log_dir.is_dir() else []:
        if not p.is_file():
            continue
        m = _RANK_LOG.search(p.name)
        if m:
            logs.setdefault(int(m.group(1)), []).append(p)
        elif p.suffix in (".out", ".err", ".log"):
            logs.setdefault(0, []).append(p)
    return logs


def _combine_per_gpu(results: list[ParseResult]) -> ParseResult:
    """N independent copies: throughputs (higher-is-better rates) add up, the rest is averaged."""
    first = results[0]
    combined = []
    for m in first.metrics:
        values = [r.get(m.name).value for r in results if r.get(m.name) is not None]
        is_rate = m.better == HIGHER and "/s" in m.unit
        value = sum(values) if is_rate else sum(values) / len(values)
        combined.append(Metric(m.name, value, m.unit, m.better, m.headline, m.formula))
    details = dict(first.details)
    details["per_gpu_copies"] = len(results)
    return ParseResult(first.parser, combined, details, first.warnings)


def parse_run(run_dir: Path, plan: dict[str, Any]) -> ParseResult:
    from hpcai.results.parsers import parse_files, parser_for_payload

    if plan.get("payload") == "cmd":
        raise UsageError("a raw command (--cmd) has no parser: use `hpcai results parse --payload NAME` on its logs")
    parser = parser_for_payload(str(plan.get("payload", "")))
    logs = rank_logs(run_dir)
    if not logs:
        raise UsageError(f"{run_dir}: no logs under {record.LOGS}/")
    if plan.get("per_gpu") and len(logs) > 1:
        return _combine_per_gpu([parse_files(parser, logs[r]) for r in sorted(logs)])
    if parser in ALL_RANKS:
        return parse_files(parser, [p for r in sorted(logs) for p in logs[r]])
    first = min(logs)
    try:
        return parse_files(parser, logs[first])
    except UsageError:
        # Some launchers send everything to one rank's file, others only label lines: read all.
        return parse_files(parser, [p for r in sorted(logs) for p in logs[r]])


# Rank 0's log is read whole for the manifest's regexes (some span lines, e.g. OSU's table) only
# up to this size; a bigger log keeps the log parser's figures (which stream), with a warning.
REGEX_FALLBACK_MAX = 64 << 20


def _reported(payload: str, paths: list[Path]) -> dict[str, float]:
    """What the in-image runner reported for PAYLOAD: its last `HPCAI_RESULT {json}` line on
    rank 0, read a line at a time."""
    from hpcai.results.parsers.common import LogLines

    found: dict[str, float] = {}
    for line in LogLines.from_files(paths):
        tag, _, doc = line.strip().partition(" ")
        if tag != "HPCAI_RESULT":
            continue
        try:
            data = files.parse_json(doc, "HPCAI_RESULT")  # a line nested 100,000 deep: skipped
            if data.get("payload") == payload:
                found = {str(k): float(v) for k, v in data.get("metrics", {}).items()}
        except (files.BadFile, ValueError, TypeError, AttributeError):
            continue
    return found


def _regex_values(manifest: Any, paths: list[Path], result: ParseResult) -> dict[str, float]:
    """The manifest's regexes over rank 0's whole log, as the in-image runner applies them."""
    size = sum(p.stat().st_size for p in paths)
    if size > REGEX_FALLBACK_MAX:
        result.warnings.append(f"rank 0's log is {size >> 20} MiB: the payload's own regexes were not "
                               "applied (no HPCAI_RESULT line); the log parser's figures are recorded")
        return {}
    return manifest.extract_metrics("\n".join(p.read_text(errors="replace") for p in paths))


def as_documented(payload: str, result: ParseResult, paths: list[Path], per_gpu: bool,
                  streamed: bool = False) -> None:
    """Make the record say what the payload documents and its in-image runner reports: the
    manifest's metric names (hf-clm's `samples_per_second` is the HF parser's
    `train_samples_per_second`), its values (the runner's HPCAI_RESULT line, else the manifest's
    regexes over rank 0's log up to REGEX_FALLBACK_MAX), and its headline. Figures only the host parser knows are kept.
    Per-GPU copies are combined from every rank, so there only the names and headline apply.
    `results parse --payload` applies it too, so that it names what the record names; it promises
    logs of any size read line by line (`streamed`), so it reads one whole for the regexes only
    when the parser has no headline candidate of the manifest (sanity's world_size)."""
    import math

    from hpcai import payloads

    if payload not in payloads.available_payloads():
        return
    manifest = payloads.load_payload(payload)
    documented = {m.name: m for m in manifest.metrics}
    manifest.document(result)  # the names first: the reported figures below are matched by name
    if not per_gpu:
        reported = _reported(payload, paths)
        lacking = all(result.get(m.name) is None for m in manifest.metrics if m.headline)
        if not reported and (lacking or not streamed):
            reported = _regex_values(manifest, paths, result)
        for name, value in reported.items():
            spec, have = documented.get(name), result.get(name)
            if spec is None or (have is not None and math.isclose(have.value, value, rel_tol=1e-6)):
                continue
            if have is not None:
                result.warnings.append(f"{name}: the log parser read {have.value:g}, the payload reported "
                                       f"{value:g}; the payload's figure is recorded")
            result.metrics = [m for m in result.metrics if m.name != name]
            result.metrics.append(Metric(name, value, spec.unit, spec.better))
    manifest.document(result)  # the headline: a reported figure may be the one the parser lacked


def _derived(run_dir: Path, plan: dict[str, Any], result: ParseResult) -> None:
    """Add figures that need the plan: TFLOP/s (6·N·D) and energy per sample/token."""
    from hpcai.results import energy, tflops

    tflops.add_to_result(result, plan)
    energy.add_to_result(run_dir / record.ENERGY, result)


def _evaluate(run_dir: Path, plan: dict[str, Any]) -> dict[str, Any]:
    """What metrics.json holds for this run: the parsed result, or {"error": why there is none}."""
    try:
        result = parse_run(run_dir, plan)
        _derived(run_dir, plan, result)  # reads the parsers' own names
        logs = rank_logs(run_dir)
        as_documented(str(plan.get("payload", "")), result, logs[min(logs)] if logs else [],
                       bool(plan.get("per_gpu")))
    except HpcaiError as exc:
        return {"parser": None, "metrics": [], "error": str(exc)}
    return result.to_dict()


def prepare(payload: str) -> None:
    """Import what finalize() reads PAYLOAD's record with (its parser, the runner's metric rules),
    so that a launch can do it while the ranks run rather than after (benchmarks/launch_overhead.py)."""
    from hpcai import payloads
    from hpcai.results import energy, tflops  # noqa: F401 - imported for finalize
    from hpcai.results.parsers import _module, parser_for_payload

    _module(parser_for_payload(payload))
    payloads._runner()


def finalize(run_dir: Path | str) -> ParseResult | None:
    """Parse a finished run's logs into metrics.json; returns the result, or None on failure."""
    run_dir = Path(run_dir)
    plan = record.read_json(run_dir / record.PLAN) if (run_dir / record.PLAN).is_file() else {}
    data = _evaluate(run_dir, plan)
    record.write_json(run_dir / record.METRICS, data)
    return None if data.get("error") else ParseResult.from_dict(data)


class CorruptRecord(UsageError):
    """A run record whose files cannot be read as hpcai writes them (cut, edited, unreadable)."""


_COUNTS = ("nodes", "ntasks_per_node", "gpus_per_node", "cpus_per_task")
_TEXTS = ("payload", "site", "partition", "image", "job_id")


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
    data = _read(metrics_path, dict) if os.path.lexists(metrics_path) else _evaluate(run_dir, plan)
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
