"""nccl-tests / rccl-tests (`all_reduce_perf` …): one row per size, out-of-place then in-place.

The column names come from the header (`#  size  count  type  redop  root  time  algbw  busbw
#wrong  time …`), so the variants read the same way: before v2.13 there is no `root` and an
`error` (max delta) stands where `#wrong` is; `-c 0` prints `N/A`; alltoall adds `copybw`.
Metrics: `busbw_avg` (the printed `Avg bus bandwidth`, headline), `busbw_max_size` (out-of-place
busbw at the largest size, as payloads/nccl-tests reads it in the image), `algbw_max_size`
(likewise), `latency_min_size` (the shorter time at the smallest size). A log repeating the sweep
keeps the last row of each size (common.SizeTable).
"""

from __future__ import annotations

import re

from hpcai.results.metrics import HIGHER, LOWER, Metric, ParseResult
from hpcai.results.parsers.common import FP, MAX_SIZES, LogLines, SizeTable, nothing_found, to_float

ROWS = ("rows",)

_HEADER = re.compile(r"^#\s+size\s+count\s+type\b")
_AVG = re.compile(rf"^#\s*Avg bus bandwidth\s*:\s*({FP})")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(\w+)?")
_VERSION = re.compile(r"(?:NCCL|RCCL) version\s+(\S+)")
_TEST = re.compile(r"^#\s*Collective test starting:\s*(\S+)")


def _columns(header: str) -> list[str]:
    """Name header columns: the first time/algbw/busbw/#wrong set is oop_*, the second ip_*."""
    names, seen = [], set()
    for word in header.lstrip("#").split():
        key = word.lstrip("#").lower()
        if key in ("time", "algbw", "busbw", "wrong", "error", "copybw"):
            place = "ip" if key in seen else "oop"
            seen.add(key)
            key = f"{place}_{key}"
        names.append(key)
    return names


def _row(cols: list[str], parts: list[str]) -> dict:
    """A table line's fields by column name (kept as split words until the end: most rows are
    replaced by a later row of the same size before anyone reads them)."""
    row: dict = {}
    for name, text in zip(cols, parts):
        if name in ("type", "redop"):
            row[name] = text
        else:
            row[name] = to_float(text)
    row["size"] = int(parts[0])
    return row


def _out_of_place(row: dict, kind: str) -> float | None:
    """The out-of-place figure, as the payload's in-image metric and the usual quoted number take it;
    the in-place one only where out-of-place is N/A; None when both are (a garbled or cut row)."""
    return next((v for v in (row.get(f"oop_{kind}"), row.get(f"ip_{kind}")) if v is not None), None)


class _Table:
    """The size table as it is read: the header's columns, the last row of each size (kept as split
    words), and every size where a row counted wrong values (in any repetition: a corrupt result is
    never hidden). `_read` fills it, in its per-line loop."""

    def __init__(self) -> None:
        self.cols: list[str] | None = None
        self._wrong_at: list[int] = []  # the #wrong columns' positions
        self.sizes = SizeTable()
        self.wrong: set[int] = set()

    def header(self, line: str) -> None:
        self.cols = _columns(line)
        self._wrong_at = [i for i, c in enumerate(self.cols) if c in ("oop_wrong", "ip_wrong")]

    def rows(self) -> list[dict]:
        return [_row(cols, parts) for cols, parts in self.sizes.rows.values()]


def _read(log: LogLines) -> tuple[_Table, dict]:
    """One pass over the log: the table and the summary lines (Avg, out of bounds, version, test).

    The bulk of a big log is table rows, so the loop is written for them (issue 12: >= 50 MB/s): one
    split per line (its first word tells a comment from a row, as the stripped line's first character
    would), a row kept with no call (SizeTable.add, inlined), a comment stripped only then."""
    table = _Table()
    found: dict = {"avg": None, "oob": None, "oob_ok": None, "version": None, "test": None}
    sizes, wrong = table.sizes, table.wrong
    kept = sizes.rows
    cols: list[str] | None = None
    ncols, wrong_at = 0, ()
    for lines in log.blocks():
        for line in lines:
            parts = line.split()
            if not parts:
                continue
            first = parts[0]
            if first[0] == "#":  # the header and summary lines are comments
                s = line.strip()
                if _HEADER.match(s):
                    table.header(s)
                    cols, ncols, wrong_at = table.cols, len(table.cols), tuple(table._wrong_at)
                elif (m := _AVG.match(s)):
                    found["avg"] = float(m.group(1))
                elif (m := _OOB.match(s)):
                    found["oob"], found["oob_ok"] = int(m.group(1)), (m.group(2) or "").upper() == "OK"
                elif found["version"] is None and (m := _VERSION.search(s)):
                    found["version"] = m.group(1)
                elif (m := _TEST.match(s)):
                    found["test"] = m.group(1)
            elif found["version"] is None and " version" in line and (m := _VERSION.search(line)):
                found["version"] = m.group(1)
            elif cols and len(parts) >= ncols and first.isdigit() and first.isascii():
                # a complete row (a cut line is shorter than the header)
                size = int(first)
                if size in kept or len(kept) < MAX_SIZES:
                    kept[size] = (cols, parts)
                    for i in wrong_at:
                        if parts[i] != "0" and (to_float(parts[i]) or 0) > 0:
                            wrong.add(size)
                else:
                    sizes.left_out += 1
    return table, found


def parse(log: LogLines) -> ParseResult:
    table, found = _read(log)
    rows, avg, oob = table.rows(), found["avg"], found["oob"]
    if not rows and avg is None:
        raise nothing_found("nccl-tests", "size/time/algbw/busbw table", log)
    warnings = []
    if rows and avg is None:
        warnings.append("no 'Avg bus bandwidth' line: the log looks truncated")
    wrong = sorted(table.wrong)
    if wrong:
        warnings.append(f"#wrong > 0 at sizes {wrong}")
    if oob:
        warnings.append(f"out of bounds values: {oob}")
    metrics = []
    if avg is not None:
        metrics.append(Metric("busbw_avg", avg, "GB/s", HIGHER, headline=True))
    if rows:
        big, small = max(rows, key=lambda r: r["size"]), min(rows, key=lambda r: r["size"])
        if (busbw := _out_of_place(big, "busbw")) is not None:
            metrics.append(Metric("busbw_max_size", busbw, "GB/s", HIGHER, headline=avg is None))
        if (algbw := _out_of_place(big, "algbw")) is not None:
            metrics.append(Metric("algbw_max_size", algbw, "GB/s", HIGHER))
        times = [v for v in (small.get("oop_time"), small.get("ip_time")) if v is not None]
        if times:
            metrics.append(Metric("latency_min_size", min(times), "us", LOWER))
    if not metrics:
        raise nothing_found("nccl-tests", "busbw/algbw/time values in the size table", log)
    warnings += table.sizes.warnings()
    details = {
        "nccl_version": found["version"],
        "test": found["test"],
        "columns": table.cols,
        "rows": rows,
        "out_of_bounds": oob,
        "out_of_bounds_ok": found["oob_ok"],
        "wrong_sizes": wrong,
        "max_size": max((r["size"] for r in rows), default=None),
    }
    return ParseResult("nccl-tests", metrics, details, warnings)
