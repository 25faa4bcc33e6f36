"""Finalize run records: parse a finished run's logs into metrics.json (reading records back:
hpcai.results.loading).

The launcher writes plan.json, status.json and logs/; after the run it calls `finalize(run_dir)`,
which picks the parser for plan.json's payload, parses rank 0's output (or, for `per_gpu` runs of
N independent copies, every rank's output, summing throughputs), adds energy figures when
energy/ holds power samples, and writes metrics.json. A parse failure is recorded in metrics.json
as `error` (never as zeros) and never changes the launcher's status.
"""

from __future__ import annotations

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
    def shown_system(self) -> str:
        """site:partition, and the Slurm cluster the job ran on where the site has several."""
        cluster = self.plan.get("cluster")
        return f"{self.system} on {cluster}" if cluster else self.system

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


def evaluate(run_dir: Path, plan: dict[str, Any]) -> dict[str, Any]:
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
    from hpcai.bench_runner import bench_runner
    from hpcai.results import energy, tflops  # noqa: F401 - imported for finalize
    from hpcai.results.parsers import _module, parser_for_payload

    _module(parser_for_payload(payload))
    bench_runner()


def finalize(run_dir: Path | str) -> ParseResult | None:
    """Parse a finished run's logs into metrics.json; returns the result, or None on failure."""
    run_dir = Path(run_dir)
    plan = record.read_json(run_dir / record.PLAN) if (run_dir / record.PLAN).is_file() else {}
    data = evaluate(run_dir, plan)
    record.write_json(run_dir / record.METRICS, data)
    return None if data.get("error") else ParseResult.from_dict(data)
