"""Horovod synthetic benchmark (PyTorch and TF2 twins).

    Img/sec per GPU: 811.9 +-2.4
    Total img/sec on 4 GPU(s): 3247.6 +-9.6

`+-` is 1.96·σ (a 95 % band), kept as `ci95`. The device word is `GPU` or `CPU`.
Headline: total img/s.
"""

from __future__ import annotations

import re

from hpcai.results.metrics import HIGHER, Metric, ParseResult
from hpcai.results.parsers.common import FP, LogLines, Rows, nothing_found

ROWS = ("iterations",)

_PER = re.compile(rf"Img/sec per (?:GPU|CPU):\s*({FP})\s*\+-\s*({FP})")
_TOTAL = re.compile(rf"Total img/sec on (\d+) (?:GPU|CPU)\(s\):\s*({FP})\s*\+-\s*({FP})")
_ITER = re.compile(rf"Iter #(\d+):\s*({FP}) img/sec per (?:GPU|CPU)")
_INFO = re.compile(r"^(Model|Batch size|Number of (?:GPU|CPU)s):\s*(.+)$")


def parse(log: LogLines) -> ParseResult:
    per = total = None
    iters = Rows()
    info: dict[str, str] = {}
    for line in log:
        s = line.strip()
        if (m := _TOTAL.search(s)):
            total = (int(m.group(1)), float(m.group(2)), float(m.group(3)))
        elif (m := _PER.search(s)):
            per = (float(m.group(1)), float(m.group(2)))
        elif (m := _ITER.search(s)):
            iters.append(float(m.group(2)))
        elif (m := _INFO.match(s)):  # three fixed names: bounded
            info[m.group(1).lower().replace(" ", "_")] = m.group(2).strip()
    if total is None and per is None:
        raise nothing_found("hvd-synthetic", "'Total img/sec on N GPU(s)' line", log)
    metrics = []
    if total is not None:
        metrics.append(Metric("img_per_sec_total", total[1], "img/s", HIGHER, headline=True))
    if per is not None:
        metrics.append(Metric("img_per_sec_per_device", per[0], "img/s", HIGHER, headline=total is None))
    details = {**info, "iterations": iters.list(), "ci95_total": total[2] if total else None,
               "ci95_per_device": per[1] if per else None, "devices": total[0] if total else None}
    return ParseResult("hvd-synthetic", metrics, details, iters.warnings("'Iter #N' lines"))
