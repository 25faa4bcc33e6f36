"""Mila training suite reports: Mila's own (payloads/mila-training) and the Mila-style suite's
(payloads/mila-suite). Three shapes read the same:

- Mila's stdout: make_report prints each report as indented JSON between two rules of dashes,
  `{` and `}` alone at the start of their lines (the README's stdout example);
- Mila's report file, <report>_<copy>.json: `[` then each report followed by `,`, never closed;
- mila-suite's lines, one per benchmark:

    mila-report: {"name": "convnet", "train": {"avg": 0.11, …, "unit": "s"},
                  "train_item": {"avg": 581.3, "min": …, "max": …, "sd": …, "range": …, "unit": "items/s"},
                  "nans": 0, "unique_id": "…", "version": "hpcai-mila-1", "gpu": "cpu", "hostname": "…"}

and its --report file, a JSON list of them. A benchmark reported by several copies (Mila runs one
per GPU) counts once, at its copies' mean. Metrics: `score` (the geometric mean of the
benchmarks' items/s, headline), `nans` (NaN losses, lower is better), and per benchmark
`<name>_items_per_s` with its `<name>_sd_pct` (sd as % of the mean).
"""

from __future__ import annotations

import json
import math

from hpcai.results.metrics import HIGHER, LOWER, Metric, ParseResult
from hpcai.results.parsers.common import MAX_DOC, Capture, LogLines, Rows, nothing_found

ROWS = ("reports",)

TAG = "mila-report: "


def _load(text: str) -> object:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


class _StdoutReport:
    """Mila's printed reports: from a line `{` to the next line `}` (its nested objects close
    indented), at most MAX_DOC characters; copies printing at once can cut one into another's,
    which then does not load and is skipped."""

    def __init__(self) -> None:
        self._lines: list[str] | None = None
        self._size = 0

    def feed(self, line: str) -> dict | None:
        text = line.rstrip()
        if text == "{":
            self._lines, self._size = [], 0
        if self._lines is None:
            return None
        self._lines.append(text)
        self._size += len(text) + 1
        if self._size > MAX_DOC:
            self._lines = None
        elif text == "}":
            report, self._lines = _load("\n".join(self._lines)), None
            return report if isinstance(report, dict) else None
        return None


def _reports(log: LogLines) -> tuple[list[dict], list[str]]:
    """(the reports, warnings): from a report file (the log is one JSON list, Mila's unclosed
    one included), else from Mila's printed reports and the `mila-report:` lines."""
    doc, printed, lines = Capture("[", leading=True), _StdoutReport(), Rows()
    for line in log:
        doc.feed(line)
        if doc.started:
            continue
        if (i := line.find(TAG)) >= 0:
            report = _load(line[i + len(TAG):])  # a cut line does not load
        else:
            report = printed.feed(line)
        if isinstance(report, dict):
            lines.append(report)
    if not doc.started:
        return lines.list(), lines.warnings("report lines")
    text = (doc.text or "").rstrip()
    data = _load(text)
    if data is None and text.endswith(","):  # Mila's file: `[{…},{…},`
        data = _load(text[:-1] + "]")
    return ([r for r in data if isinstance(r, dict)] if isinstance(data, list) else []), []


def _rate(report: dict) -> float | None:
    item = report.get("train_item")
    avg = item.get("avg") if isinstance(item, dict) else None
    return float(avg) if isinstance(avg, (int, float)) and not isinstance(avg, bool) and avg > 0 else None


def _sd_pct(report: dict) -> float | None:
    """The spread as % of the mean: of items/s where the report has it (mila-suite), else of the
    batch time (Mila's train_item has no sd; its `train` has)."""
    for key in ("train_item", "train"):
        stats = report.get(key)
        sd, avg = (stats.get("sd"), stats.get("avg")) if isinstance(stats, dict) else (None, None)
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (sd, avg)) and avg > 0:
            return 100.0 * sd / avg
    return None


def parse(log: LogLines) -> ParseResult:
    found, kept_warnings = _reports(log)
    reports = [r for r in found if isinstance(r.get("name"), str) and _rate(r) is not None]
    if not reports:
        raise nothing_found("mila", "Mila's reports (JSON between rules, a report file, 'mila-report:' lines)", log)
    copies: dict[str, list[dict]] = {}
    for report in reports:
        copies.setdefault(report["name"], []).append(report)
    rates = {name: sum(_rate(r) for r in group) / len(group) for name, group in copies.items()}
    score = math.exp(sum(math.log(r) for r in rates.values()) / len(rates))
    metrics = [Metric("score", score, "items/s", HIGHER, headline=True,
                      formula="geometric mean of the benchmarks' items/s averages"),
               Metric("nans", float(sum(int(r.get("nans") or 0) for r in reports)), "NaN losses", LOWER)]
    for name, rate in rates.items():
        metrics.append(Metric(f"{name}_items_per_s", rate, "items/s", HIGHER))
        if len(copies[name]) == 1 and (pct := _sd_pct(copies[name][0])) is not None:
            metrics.append(Metric(f"{name}_sd_pct", pct, "%", LOWER))
    warnings = [f"{int(r['nans'])} NaN loss(es) in {r['name']}" for r in reports if r.get("nans")] + kept_warnings
    return ParseResult("mila", metrics, {"reports": reports, "benchmarks": list(copies)}, warnings)
