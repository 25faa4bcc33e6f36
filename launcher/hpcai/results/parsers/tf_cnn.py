"""tf_cnn_benchmarks / Keras ResNet-50 (CARAML's ResNet50 benchmark).

    100	images/sec: 2315.4 +/- 1.2 (jitter = 8.1)	7.780
    total images/sec: 2314.98

Headline: `total images/sec`; when a truncated log lacks it, the last step's running mean is
reported with a warning. A Keras variant printing `images/sec: N` per epoch is read the same way.
"""

from __future__ import annotations

import re

from hpcai.results.metrics import HIGHER, Metric, ParseResult
from hpcai.results.parsers.common import FP, LogLines, Rows, nothing_found

ROWS = ("steps",)

_TOTAL = re.compile(rf"total images/sec:\s*({FP})")
_STEP = re.compile(rf"^(\d+)\s+images/sec:\s*({FP})\s*\+/-\s*({FP})\s*\(jitter = ({FP})\)")


def parse(log: LogLines) -> ParseResult:
    total = None
    steps = Rows()
    for line in log:
        s = line.strip()
        if (m := _TOTAL.search(s)):
            total = float(m.group(1))
        elif (m := _STEP.match(s)):
            steps.append({"step": int(m.group(1)), "images_per_sec": float(m.group(2)),
                          "pm": float(m.group(3)), "jitter": float(m.group(4))})
    kept = steps.list()
    if total is None and not kept:
        raise nothing_found("tf-resnet50", "'total images/sec' or per-step 'images/sec' lines", log)
    warnings = []
    if total is None:
        total = kept[-1]["images_per_sec"]
        warnings.append("no 'total images/sec' line (truncated log): using the last step's running mean")
    warnings += steps.warnings("step lines")
    return ParseResult("tf-resnet50", [Metric("images_per_sec", total, "img/s", HIGHER, headline=True)],
                       {"steps": kept}, warnings)
