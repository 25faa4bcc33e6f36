"""hpcai's mpi-allreduce payload (payloads/mpi-allreduce/allreduce.py, mpi4py), OSU-style table.

    # hpcai mpi4py Allreduce Test (mpi4py 4.0.1, Open MPI v4.1.6)
    # ranks 4 iters 100 warmup 10 dtype float32
    # Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)   BusBW(MB/s)
    8                       12.31             11.90             12.80          1.25
    # mpi-allreduce: done, 4 ranks

BusBW uses nccl-tests' all-reduce factor 2(n-1)/n. Headline: BusBW at the largest size (MB/s);
also the average latency at the smallest size (µs, lower is better). Without the closing
`done` line the log is truncated (a warning, the rows read so far still count).
"""

from __future__ import annotations

import re

from hpcai.results.metrics import HIGHER, LOWER, Metric, ParseResult
from hpcai.results.parsers.common import LogLines, SizeTable, nothing_found, to_float

ROWS = ("rows",)

_TITLE = re.compile(r"^# hpcai mpi4py Allreduce Test \((.+)\)")
_RANKS = re.compile(r"^# ranks (\d+)")
_HEADER = re.compile(r"^# Size\s+(.+)$")
_DONE = re.compile(r"^# mpi-allreduce: done, (\d+) ranks")
_ROW = re.compile(r"^([0-9]+)\s+(.*)$")


def parse(log: LogLines) -> ParseResult:
    cols: list[str] = []
    table = SizeTable()
    title = ranks = None
    done = False
    for line in log:
        s = line.strip()
        if (m := _TITLE.match(s)):
            title = m.group(1)
        elif (m := _RANKS.match(s)):
            ranks = int(m.group(1))
        elif (m := _HEADER.match(s)):
            cols = re.split(r"\s{2,}", m.group(1).strip())
        elif _DONE.match(s):
            done = True
        elif cols and (m := _ROW.match(s)):
            values = [to_float(p) for p in m.group(2).split()]
            if len(values) == len(cols) and None not in values:
                table.add(int(m.group(1)), {"size": int(m.group(1)), **dict(zip(cols, values))})
    rows = list(table.rows.values())
    if not rows or not {"BusBW(MB/s)", "Avg Latency(us)"} <= set(cols):
        raise nothing_found("mpi-allreduce", "'# hpcai mpi4py Allreduce Test' size/latency/BusBW table", log)
    big, small = max(rows, key=lambda r: r["size"]), min(rows, key=lambda r: r["size"])
    metrics = [
        Metric("busbw_max_size", big["BusBW(MB/s)"], "MB/s", HIGHER, headline=True),
        Metric("latency_min_size", small["Avg Latency(us)"], "us", LOWER),
    ]
    warnings = ([] if done else ["no '# mpi-allreduce: done' line: the log looks truncated"]) + table.warnings()
    return ParseResult("mpi-allreduce", metrics,
                       {"mpi": title, "ranks": ranks, "columns": cols, "rows": rows,
                        "max_size": big["size"], "min_size": small["size"]}, warnings)
