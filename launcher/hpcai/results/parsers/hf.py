"""Hugging Face Trainer (`run_clm.py` and friends): metrics blocks, the final dict, *_results.json.

Sources, best first: a `*_results.json` document (the text is one JSON object); the final dict
line `{'train_runtime': 182.53, 'train_samples_per_second': 38.097, …}` (full precision,
`ast.literal_eval`; Transformers 5 prints the values as strings, `'182.53'`, read the same);
the `***** train metrics *****` block (`H:MM:SS.cc` runtimes, `NNNGF` flos).
A log with several runs (repetitions) yields one entry per run in details["runs"]; metrics are
the mean over runs. `train_samples_per_second` is global (all ranks). The parameter count, GPU
count and model name are picked from the log when printed, for the 6·N·D TFLOP/s estimate.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterable, Iterator

from hpcai.results.metrics import HIGHER, LOWER, Metric, ParseResult
from hpcai.results.parsers.common import FP, Capture, LogLines, Rows, nothing_found, to_float

ROWS = ("runs",)

_BLOCK = re.compile(r"^\*{5} (\w+) metrics \*{5}$")
_KV = re.compile(r"^\s+(\w+)\s+=\s+(.+?)\s*$")
_RUNTIME = re.compile(r"^(?:(\d+) days?,? )?(\d+):(\d\d):(\d\d(?:\.\d+)?)$")
_UNIT = re.compile(rf"^({FP})\s*(GF|MB)$")
_PARAMS = re.compile(r"Number of trainable parameters = ([\d,]+)")
_NGPU = re.compile(r"n_gpu: (\d+)")
_MODEL = re.compile(r'"_name_or_path": "([^"]+)"')
_BLOCKSIZE = re.compile(r"block_size\s*[=:]\s*(\d+)")
# hpcai's hf-clm payload states its shape first; SYNTHETIC marks random weights and tokens
_HPCAI = re.compile(r"hf-clm: model=(\S+) params=(\d+) seq_len=(\d+) batch_size=(\d+) ranks=(\d+)")
_PRECISION = re.compile(r"hf-clm: model=\S+ .*?\bprecision=(\w+)")
_GLOBAL_BATCH = re.compile(r"Total train batch size \(.*?\) = ([\d,]+)")
_TOTAL_STEPS = re.compile(r"Total optimization steps = ([\d,]{1,25})(?![\d,])")  # a count, not 5,000 digits
# facts for details, the first each the log prints
_FACTS = (("n_params", _PARAMS), ("n_gpu", _NGPU), ("model", _MODEL), ("seq_len", _BLOCKSIZE),
          ("global_batch_size", _GLOBAL_BATCH), ("optimization_steps", _TOTAL_STEPS))
_MAX_KEYS = 256  # names kept of one metrics block (a real one has about ten)

# name -> (unit, better); metrics reported when present
_KNOWN = {
    "train_samples_per_second": ("samples/s", HIGHER),
    "train_steps_per_second": ("steps/s", HIGHER),
    "train_runtime": ("s", LOWER),
    "train_loss": ("loss", LOWER),
    "eval_samples_per_second": ("samples/s", HIGHER),
    "eval_loss": ("loss", LOWER),
    "eval_accuracy": ("ratio", HIGHER),
    "perplexity": ("ppl", LOWER),
}


def _value(text: str) -> float | None:
    text = text.strip().replace(",", "")
    if (m := _RUNTIME.match(text)):
        days, h, mi, s = m.groups()
        return int(days or 0) * 86400 + int(h) * 3600 + int(mi) * 60 + float(s)
    if (m := _UNIT.match(text)):
        scale = 1e9 if m.group(2) == "GF" else 1.0
        return float(m.group(1)) * scale
    return to_float(text)


def _numbers(d: dict) -> dict:
    """The dict with numeric values as floats: Transformers 5 logs `'182.53'`, older ones 182.53."""
    out = {}
    for k, v in d.items():
        if isinstance(v, str) and (n := _value(v)) is not None:
            v = n  # anything else is kept for details; only numbers are read as metrics
        out[str(k)] = v
    return out


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _precision(line: str, current: str | None) -> str | None:
    """The precision a line announces (TrainingArguments' fp16=/bf16=, hf-clm's precision=), else current."""
    if (m := _PRECISION.search(line)):
        return m.group(1)
    if "TrainingArguments(" in line or ("fp16=" in line and "bf16=" in line):
        return "fp16" if "fp16=True" in line else "bf16" if "bf16=True" in line else "fp32"
    return current


def _collect(lines: Iterable[str]) -> tuple[Rows, Rows, Rows]:
    """(train dicts from the final dict line, train blocks, eval blocks) in log order; each run
    carries the precision announced before it (`precision`, None when the log never says)."""
    dicts, train_blocks, eval_blocks = Rows(), Rows(), Rows()
    block: dict | None = None
    precision: str | None = None
    for line in lines:
        s = line.strip()
        precision = _precision(s, precision)
        if s.startswith("{") and "train_runtime" in s:
            try:
                d = ast.literal_eval(s[: s.rfind("}") + 1])
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                d = None  # a cut or garbled line (TypeError: `{[1]: 2}`, an unhashable key)
            if isinstance(d, dict):
                dicts.append({**_numbers(d), "precision": precision})
        if (m := _BLOCK.match(s)):
            block = {"precision": precision}
            (train_blocks if m.group(1) == "train" else eval_blocks).append(block)
            continue
        if block is not None and (m := _KV.match(line)):
            v = _value(m.group(2))
            if v is not None and (m.group(1) in block or len(block) < _MAX_KEYS):
                block[m.group(1)] = v
            continue
        block = None
    return dicts, train_blocks, eval_blocks


def _json_doc(text: str | None) -> dict | None:
    if text is None:
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(data, dict) and any(k.startswith(("train_", "eval_")) for k in data):
        return _numbers(data)
    return None


def _facts(line: str, found: dict) -> None:
    """The first value of each fact (parameters, GPUs, model, …) the log prints, into FOUND."""
    for key, rx in _FACTS:
        if key not in found and (m := rx.search(line)):
            raw = m.group(1).replace(",", "")
            found[key] = int(raw) if raw.isdigit() else raw
    if "hpcai" not in found and (m := _HPCAI.search(line)):
        model, params, seq_len, batch, ranks = m.groups()
        found["hpcai"] = dict(model=model, n_params=int(params), seq_len=int(seq_len), batch_size=int(batch),
                              n_gpu=int(ranks), synthetic="SYNTHETIC" in line[m.start():])


def _read(log: LogLines) -> tuple[list[dict], int, dict, list[str]]:
    """(runs, how many the log holds, facts, warnings) in one pass: a *_results.json document, else
    the final dict lines (or train blocks) with the eval blocks merged in."""
    doc, found = Capture("{", leading=True), {}

    def observed() -> Iterator[str]:
        for line in log:
            doc.feed(line)
            _facts(line, found)
            yield line

    dicts, train_blocks, evals = _collect(observed())
    if (single := _json_doc(doc.text)) is not None:
        return [single], 1, found, []
    source = dicts if dicts.seen else train_blocks
    runs, eval_runs = source.list(), evals.list()
    # The block carries eval/perplexity figures the dict lacks: merge per run, by order.
    for run, ev in zip(runs, eval_runs):
        run.update({k: v for k, v in ev.items() if k not in run})
    return runs, source.seen, found, source.warnings("runs")


def _train_steps(run: dict, found: dict) -> int | None:
    """The optimizer steps a run took: its own count (hf-clm prints the Trainer's global_step as
    `train_steps`), else the Trainer's `Total optimization steps` line, else runtime × steps/s
    (the Trainer rounds steps/s to 3 decimals: exact to the step for runs under about 15 minutes).
    Epochs set the count, not a `steps` variable, so only the log knows it. A log's `inf` or `nan`
    is no count."""
    runtime, rate = run.get("train_runtime"), run.get("train_steps_per_second")
    for steps in (run.get("train_steps"), found.get("optimization_steps"),
                  runtime * rate if _is_number(runtime) and _is_number(rate) else None):
        if _is_number(steps) and math.isfinite(steps) and steps >= 0.5:
            return round(steps)
    return None


def parse(log: LogLines) -> ParseResult:
    runs, repetitions, found, warnings = _read(log)
    metrics = []
    # Repetitions are averaged, precisions never: the first precision's figures carry the plain
    # names, each other one's get its suffix (the WikiText-2 benchmark runs FP32, then FP16).
    precisions = list(dict.fromkeys(r.get("precision") for r in runs))
    if len(precisions) > 1:
        warnings.append(f"runs in {len(precisions)} precisions ({', '.join(map(str, precisions))}): each is "
                        f"reported apart, {precisions[0]} under the plain names")
    if any(_is_number(r.get("train_samples_per_second")) or _is_number(r.get("eval_samples_per_second"))
           for r in runs):
        for precision in precisions:
            suffix = f"_{precision}" if precision != precisions[0] else ""
            for name, (unit, better) in _KNOWN.items():
                values = [float(r[name]) for r in runs if r.get("precision") == precision and _is_number(r.get(name))]
                if values:
                    headline = name == "train_samples_per_second" and not suffix
                    metrics.append(Metric(name + suffix, sum(values) / len(values), unit, better, headline))
    if not metrics:
        raise nothing_found("hf-trainer", "train/eval metrics ('***** train metrics *****' or the final dict)", log)
    if not any(m.headline for m in metrics):
        metrics[0] = Metric(**{**metrics[0].to_dict(), "headline": True})
    details: dict = {"runs": runs, "repetitions": repetitions}
    details.update((key, found[key]) for key, _ in _FACTS if key in found)
    if runs and (steps := _train_steps(runs[-1], found)) is not None:
        details["train_steps"] = steps  # the Iterations of an export
    if "hpcai" in found:
        details.update(found["hpcai"])
        if details["synthetic"]:
            warnings.append("synthetic data and random weights: throughput is real, the loss is not comparable")
    return ParseResult("hf-trainer", metrics, details, warnings)
