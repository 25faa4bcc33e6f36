"""OpenCLIP training log (MMoCLIP benchmark), usually on stderr through Python logging.

    … | INFO | Train Epoch: 0 [   8192/3200000 (0%)] Data (t): 41.210 Batch (t): 60.117, 136.27/s, 4.25844/s/gpu LR: …

MMoCLIP's metric `total_time_secs` = sum of `Batch (t)` over all logged steps except the first
(needs `--log-every-n-steps 1`), lower is better. Older versions lack `/s/gpu`. Sanity: the last
step line should be at 100 %; otherwise a warning says the log is truncated.
"""

from __future__ import annotations

import re

from hpcai.results.metrics import HIGHER, LOWER, Metric, ParseResult
from hpcai.results.parsers.common import FP, AfterFirst, LogLines, Rows, nothing_found

ROWS = ("steps",)

_STEP = re.compile(
    rf"Train Epoch: (\d+) \[\s*(\d+)/(\d+) \((\d+)%\)\].*?Data \(t\): ({FP}) Batch \(t\): ({FP}),? ({FP})/s"
    rf"(?:, ({FP})/s/gpu)?"
)


def parse(log: LogLines) -> ParseResult:
    steps, timed = Rows(), AfterFirst()
    for line in log:
        if (m := _STEP.search(line)):
            epoch, done, total, pct, data_t, batch_t, sps, spg = m.groups()
            step = {"epoch": int(epoch), "samples": int(done), "of": int(total), "percent": int(pct),
                    "data_t": float(data_t), "batch_t": float(batch_t), "samples_per_s": float(sps),
                    "samples_per_s_per_gpu": float(spg) if spg else None}
            steps.append(step)
            timed.add({"batch_t": step["batch_t"], "samples_per_s": step["samples_per_s"],
                       "per_gpu": step["samples_per_s_per_gpu"]})
    kept = steps.list()
    if not kept:
        raise nothing_found("openclip", "'Train Epoch: N [done/total (p%)] … Batch (t)' lines", log)
    last = kept[-1]["percent"]
    warnings = [] if last == 100 else [f"last step at {last} %: log truncated or run stopped early"]
    metrics = [Metric("total_time_secs", timed.sum("batch_t"), "s", LOWER, headline=True),
               Metric("samples_per_s", timed.mean("samples_per_s"), "samples/s", HIGHER)]
    if (per_gpu := timed.mean("per_gpu")) is not None:
        metrics.append(Metric("samples_per_s_per_gpu", per_gpu, "samples/s", HIGHER))
    return ParseResult("openclip", metrics, {"steps": kept, "logged_steps": steps.seen},
                       warnings + steps.warnings("step lines"))
