"""Mila-style suite reports (payloads/mila-suite): one `mila-report: {json}` line per benchmark.

    mila-report: {"name": "convnet", "train": {"avg": 0.11, …, "unit": "s"},
                  "train_item": {"avg": 581.3, "min": …, "max": …, "sd": …, "range": …, "unit": "items/s"},
                  "nans": 0, "unique_id": "…", "version": "hpcai-mila-1", "gpu": "cpu", "hostname": "…"}

A report file written with --report (a JSON list of them) reads the same. Metrics: `score` (the
geometric mean of every benchmark's items/s average, headline), `nans` (NaN losses, lower is
better), and per benchmark `<name>_items_per_s` with its `<name>_sd_pct` (sd as % of the mean).
"""

from __future__ import annotations

import json
import math

from hpcai.results.metrics import HIGHER, LOWER, Metric, ParseResult
from hpcai.results.parsers.common import Capture, LogLines, Rows, nothing_found

ROWS = ("reports",)

TAG = "mila-report: "


def _reports(log: LogLines) -> tuple[list[dict], list[str]]:
    """(the reports, warnings): from a --report file (the log is one JSON list), else from the
    `mila-report:` lines."""
    doc, lines = Capture("[", leading=True), Rows()
    for line in log:
        doc.feed(line)
        if not doc.started and (i := line.find(TAG)) >= 0:
            try:
                report = json.loads(line[i + len(TAG):])
            except (ValueError, RecursionError):
                continue  # a cut line
            if isinstance(report, dict):
                lines.append(report)
    if not doc.started:
        return lines.list(), lines.warnings("report lines")
    try:
        data = json.loads(doc.text or "")
    except (ValueError, RecursionError):
        return [], []
    return ([r for r in data if isinstance(r, dict)] if isinstance(data, list) else []), []


def _rate(report: dict) -> float | None:
    item = report.get("train_item")
    avg = item.get("avg") if isinstance(item, dict) else None
    return float(avg) if isinstance(avg, (int, float)) and not isinstance(avg, bool) and avg > 0 else None


def parse(log: LogLines) -> ParseResult:
    found, kept_warnings = _reports(log)
    reports = [r for r in found if isinstance(r.get("name"), str) and _rate(r) is not None]
    if not reports:
        raise nothing_found("mila", "'mila-report: {json}' lines", log)
    rates = [_rate(r) for r in reports]
    score = math.exp(sum(math.log(r) for r in rates) / len(rates))
    metrics = [Metric("score", score, "items/s", HIGHER, headline=True,
                      formula="geometric mean of the benchmarks' items/s averages"),
               Metric("nans", float(sum(int(r.get("nans") or 0) for r in reports)), "NaN losses", LOWER)]
    for report, rate in zip(reports, rates):
        metrics.append(Metric(f"{report['name']}_items_per_s", rate, "items/s", HIGHER))
        sd = report["train_item"].get("sd")
        if isinstance(sd, (int, float)):
            metrics.append(Metric(f"{report['name']}_sd_pct", 100.0 * sd / rate, "%", LOWER))
    warnings = [f"{int(r['nans'])} NaN loss(es) in {r['name']}" for r in reports if r.get("nans")] + kept_warnings
    return ParseResult("mila", metrics, {"reports": reports, "benchmarks": [r["name"] for r in reports]}, warnings)
