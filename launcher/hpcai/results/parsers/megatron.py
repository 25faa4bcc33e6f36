"""Megatron-LM iteration lines (CARAML's GPT benchmark).

    iteration       50/    5000 | consumed samples: 51200 | elapsed time per iteration (ms): 617.4 | throughput per GPU (TFLOP/s/GPU): 168.2 | … |

The rest of the line is split on `|` into `label: value` pairs. CARAML's patch prints seconds
(`elapsed time per iteration (s)`) and `TFLOPs:`. The first logged interval is warm-up and is
skipped when there are more, except for a run of CARAML's own code (megatron-gpt's shape line says
`implementation=megatron-lm`): there every interval counts, as CARAML's JUBE result averages
them. tokens/s = global batch × seq_len / seconds per iteration
(hpcai.results.tflops), from the log's `global batch size` and `seq-length`, or the run's
variables (`seq_len`, `global_batch_size`) when the log lacks them.
"""

from __future__ import annotations

import re

from hpcai.results.metrics import HIGHER, LOWER, Metric, ParseResult
from hpcai.results.parsers.common import AfterFirst, LogLines, Rows, nothing_found, to_float

ROWS = ("iterations",)

_ITER = re.compile(r"iteration\s+(\d+)/\s*(\d+)\s*\|(.*)$")
_SEQ = re.compile(r"seq[_-]length\s*[.=:\s]+\s*(\d+)")
# hpcai's megatron-gpt payload states its resolved shape once: model=800M … tp=1 pp=1 dp=4 …
_SHAPE = re.compile(r"^megatron-gpt: model=(\S+) .*? tp=(\d+) pp=(\d+) dp=(\d+) micro-batch=(\d+) "
                    r"global-batch-size=(\d+)")
_IMPLEMENTATION = re.compile(r" implementation=(\S+) ")


def _pairs(rest: str) -> dict[str, float]:
    out = {}
    for part in rest.split("|"):
        if ":" in part:
            label, _, value = part.rpartition(":")
            v = to_float(value.strip().split()[0]) if value.strip() else None
            if v is not None:
                out[label.strip().lower()] = v
    return out


def _seconds(p: dict[str, float]) -> float | None:
    for key, scale in (("elapsed time per iteration (ms)", 1e-3), ("elapsed time per iteration (s)", 1.0)):
        if key in p:
            return p[key] * scale
    return None


def _tflops(p: dict[str, float]) -> float | None:
    for key in p:
        if "tflop" in key:
            return p[key]
    return None


def parse(log: LogLines) -> ParseResult:
    iters, steady = Rows(), AfterFirst()  # the first logged interval includes warm-up
    gbs = seq = shape = None
    for line in log:
        if (m := _ITER.search(line)):
            iteration = {"iteration": int(m.group(1)), "of": int(m.group(2)), **_pairs(m.group(3))}
            iters.append(iteration)
            steady.add({"secs": _seconds(iteration), "tflops": _tflops(iteration)})
            gbs = iteration.get("global batch size", gbs)  # the last one printed
        if seq is None and (m := _SEQ.search(line)):
            seq = int(m.group(1))
        if shape is None:
            shape = _SHAPE.search(line)
    if not iters.seen:
        raise nothing_found("megatron", "'iteration N/ M | …' lines", log)
    implementation = (m.group(1) if shape and (m := _IMPLEMENTATION.search(shape.string)) else None)
    mean = steady.mean_all if implementation == "megatron-lm" else steady.mean
    secs, tfl = mean("secs"), mean("tflops")
    metrics = []
    if tfl is not None:
        metrics.append(Metric("tflops_per_gpu", tfl, "TFLOP/s", HIGHER, headline=True,
                              formula="Megatron's own 'throughput per GPU (TFLOP/s/GPU)', mean over logged intervals"))
    if secs is not None:
        metrics.append(Metric("time_per_iteration", secs, "s", LOWER, headline=tfl is None))
    if not metrics:
        raise nothing_found("megatron", "iteration time or TFLOP/s", log)
    details = {"iterations": iters.list(), "global_batch_size": gbs, "seq_len": seq}
    if shape:
        details.update(model="GPT", model_size=shape.group(1), tp=int(shape.group(2)), pp=int(shape.group(3)),
                       dp=int(shape.group(4)), micro_batch_size=int(shape.group(5)),
                       global_batch_size=gbs or int(shape.group(6)), implementation=implementation)
    result = ParseResult("megatron", metrics, details, iters.warnings("iteration lines"))
    from hpcai.results.tflops import add_megatron_tokens

    add_megatron_tokens(result, {}, warn=False)  # the run's facts may still give it (records, results parse --var)
    return result
