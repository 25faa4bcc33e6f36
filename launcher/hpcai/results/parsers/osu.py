"""OSU micro-benchmarks: `# OSU <title> Test v7.5` then `# Size  <columns>` and one row per size.

Columns are split on two or more spaces (`Avg Latency(us)`, `Bandwidth (MB/s)`, 7.x adds
`P50 Tail Lat(us)` …, `-c` adds `Validation`). Headline: latency at 8 B (µs, lower is better)
for latency tests, bandwidth at 4 MiB (MB/s, higher is better) for bandwidth tests; when that
size is missing, the nearest size below it. A log repeating the test keeps the last row of each
size (common.SizeTable).
"""

from __future__ import annotations

import re

from hpcai.results.metrics import HIGHER, LOWER, Metric, ParseResult
from hpcai.results.parsers.common import LogLines, SizeTable, nothing_found, to_float

ROWS = ("rows",)

_TITLE = re.compile(r"^# OSU (?P<title>.+?) Test(?: v(?P<ver>[\d.]+))?")
_HEADER = re.compile(r"^# Size\s+(?P<cols>.+)$")
_ROW = re.compile(r"^(\d+)[ \t]+(.+)$")


def _pick(rows: list[dict], target: int) -> dict:
    below = [r for r in rows if r["size"] <= target]
    return max(below, key=lambda r: r["size"]) if below else min(rows, key=lambda r: r["size"])


def parse(log: LogLines) -> ParseResult:
    title = version = None
    cols: list[str] = []
    table = SizeTable()
    failed: list[int] = []  # validation failures in any repetition stay reported
    for line in log:
        s = line.strip()
        if (m := _TITLE.match(s)):
            title, version = m.group("title"), m.group("ver")
        elif (m := _HEADER.match(s)):
            cols = [c.strip() for c in re.split(r"\s{2,}", m.group("cols").strip())]
        elif cols and (m := _ROW.match(s)):
            values = m.group(2).split()
            row: dict = {"size": int(m.group(1))}
            for name, v in zip(cols, values):
                row[name] = to_float(v) if to_float(v) is not None else v
            if isinstance(row.get(cols[0]), float) and table.add(row["size"], row):
                if str(row.get("Validation", "")).lower() == "fail" and row["size"] not in failed:
                    failed.append(row["size"])
    rows = list(table.rows.values())
    if not rows:
        raise nothing_found("osu", "'# OSU … Test' table with '# Size' rows", log)
    main = cols[0]
    is_bw = "bandwidth" in main.lower() or "MB/s" in main
    unit_m = re.search(r"\(([^)]+)\)", main)
    unit = unit_m.group(1) if unit_m else ("MB/s" if is_bw else "us")
    row = _pick(rows, 4 * 1024 * 1024 if is_bw else 8)
    name = f"{'bandwidth' if is_bw else 'latency'}_{row['size']}B"
    metrics = [Metric(name, row[main], unit, HIGHER if is_bw else LOWER, headline=True)]
    peak = max(rows, key=lambda r: r[main]) if is_bw else min(rows, key=lambda r: r[main])
    metrics.append(Metric(f"{'bandwidth_peak' if is_bw else 'latency_min'}", peak[main], unit,
                          HIGHER if is_bw else LOWER))
    warnings = ([f"validation failed at sizes {failed}"] if failed else []) + table.warnings()
    return ParseResult("osu", metrics, {"title": title, "version": version, "columns": cols, "rows": rows}, warnings)
