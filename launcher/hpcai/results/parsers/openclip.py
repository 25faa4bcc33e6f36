"""OpenCLIP training log (MMoCLIP benchmark), usually on stderr through Python logging.

    … | INFO | Train Epoch: 0 [   8192/3200000 (0%)] Data (t): 41.210 Batch (t): 60.117, 136.27/s, 4.25844/s/gpu LR: …

MMoCLIP's metric `total_time_secs` = sum of `Batch (t)` over all logged steps except the first
(needs `--log-every-n-steps 1`), lower is better. Older versions lack `/s/gpu`. Sanity: the last
step line should be at 100 %; otherwise a warning says the log is truncated.
"""

from __future__ import annotations

import re

from hpcai.results.metrics import HIGHER, LOWER, Metric, ParseResult
from hpcai.results.parsers.common import FP, nothing_found, strip_prefixes

_STEP = re.compile(
    rf"Train Epoch: (\d+) \[\s*(\d+)/(\d+) \((\d+)%\)\].*?Data \(t\): ({FP}) Batch \(t\): ({FP}),? ({FP})/s"
    rf"(?:, ({FP})/s/gpu)?"
)


def parse(text: str) -> ParseResult:
    steps = []
    for line in strip_prefixes(text):
        if (m := _STEP.search(line)):
            epoch, done, total, pct, data_t, batch_t, sps, spg = m.groups()
            steps.append({"epoch": int(epoch), "samples": int(done), "of": int(total), "percent": int(pct),
                          "data_t": float(data_t), "batch_t": float(batch_t), "samples_per_s": float(sps),
                          "samples_per_s_per_gpu": float(spg) if spg else None})
    if not steps:
        raise nothing_found("openclip", "'Train Epoch: N [done/total (p%)] … Batch (t)' lines", text)
    timed = steps[1:] or steps
    metrics = [Metric("total_time_secs", sum(s["batch_t"] for s in timed), "s", LOWER, headline=True),
               Metric("samples_per_s", sum(s["samples_per_s"] for s in timed) / len(timed), "samples/s", HIGHER)]
    per_gpu = [s["samples_per_s_per_gpu"] for s in timed if s["samples_per_s_per_gpu"] is not None]
    if per_gpu:
        metrics.append(Metric("samples_per_s_per_gpu", sum(per_gpu) / len(per_gpu), "samples/s", HIGHER))
    warnings = [] if steps[-1]["percent"] == 100 else [f"last step at {steps[-1]['percent']} %: log truncated or run stopped early"]
    return ParseResult("openclip", metrics, {"steps": steps, "logged_steps": len(steps)}, warnings)
