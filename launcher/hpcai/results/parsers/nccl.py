"""nccl-tests / rccl-tests (`all_reduce_perf` …): one row per size, out-of-place then in-place.

The column names come from the header (`#  size  count  type  redop  root  time  algbw  busbw
#wrong  time …`), so the variants read the same way: before v2.13 there is no `root` and an
`error` (max delta) stands where `#wrong` is; `-c 0` prints `N/A`; alltoall adds `copybw`.
Metrics: `busbw_avg` (the printed `Avg bus bandwidth`, headline), `busbw_max_size` (out-of-place
busbw at the largest size, as payloads/nccl-tests reads it in the image), `algbw_max_size`
(likewise), `latency_min_size` (the shorter time at the smallest size).
"""

from __future__ import annotations

import re

from hpcai.results.metrics import HIGHER, LOWER, Metric, ParseResult
from hpcai.results.parsers.common import FP, nothing_found, strip_prefixes, to_float

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


def _row(cols: list[str], line: str) -> dict | None:
    parts = line.split()
    if len(parts) < len(cols) or not (parts[0].isascii() and parts[0].isdigit()):
        return None
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


def parse(text: str) -> ParseResult:
    lines = strip_prefixes(text)
    cols: list[str] | None = None
    rows: list[dict] = []
    avg = oob = version = test = None
    oob_ok = None
    for line in lines:
        s = line.strip()
        if _HEADER.match(s):
            cols = _columns(s)
        elif (m := _AVG.match(s)):
            avg = float(m.group(1))
        elif (m := _OOB.match(s)):
            oob, oob_ok = int(m.group(1)), (m.group(2) or "").upper() == "OK"
        elif (m := _VERSION.search(s)) and version is None:
            version = m.group(1)
        elif (m := _TEST.match(s)):
            test = m.group(1)
        elif cols and s and not s.startswith("#") and (row := _row(cols, s)):
            rows.append(row)
    if not rows and avg is None:
        raise nothing_found("nccl-tests", "size/time/algbw/busbw table", text)
    warnings = []
    if rows and avg is None:
        warnings.append("no 'Avg bus bandwidth' line: the log looks truncated")
    wrong = [r["size"] for r in rows for k in ("oop_wrong", "ip_wrong") if (r.get(k) or 0) > 0]
    if wrong:
        warnings.append(f"#wrong > 0 at sizes {sorted(set(wrong))}")
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
        raise nothing_found("nccl-tests", "busbw/algbw/time values in the size table", text)
    details = {
        "nccl_version": version,
        "test": test,
        "columns": cols,
        "rows": rows,
        "out_of_bounds": oob,
        "out_of_bounds_ok": oob_ok,
        "wrong_sizes": sorted(set(wrong)),
        "max_size": max((r["size"] for r in rows), default=None),
    }
    return ParseResult("nccl-tests", metrics, details, warnings)
