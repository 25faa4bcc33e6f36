"""PyTorch DDP benchmark (`benchmarks/distributed/ddp/benchmark.py`) and its `--json` output.

    Benchmark: resnet50 with batch size 32
       1 GPUs --   no ddp:  p50:  0.097s     329/s  p75:  0.097s     329/s  p90: …  p95: …
       4 GPUs --    1M/4G:  p50:  0.101s     316/s  …

Every configuration and percentile is kept in details (of a log repeating them without end, the
first and last common.LIMIT // 2 rows). `ex/sec` is per rank, so the total is
ex/s × GPUs. Headline: total ex/s at p50 of the largest configuration (`<nodes>M/<gpus>G`).
Lines may say `CPUs` instead of `GPUs` when the payload runs on CPU.
"""

from __future__ import annotations

import json
import re

from hpcai.results.metrics import HIGHER, LOWER, Metric, ParseResult
from hpcai.results.parsers.common import FP, LIMIT, Capture, LogLines, Rows, nothing_found

ROWS = ("configurations",)

_BENCH = re.compile(r"^Benchmark:\s*(\S+) with batch size (\d+)")
_ROW = re.compile(r"^\s*(\d+) [GC]PUs --\s*(.+?):\s+(p\d+:.*)$")
_PCT = re.compile(rf"p(\d+):\s*({FP})s\s+({FP})/s")
# hpcai's ddp_bench.py closes with the exact total (the table prints ex/sec as an integer)
_TOTAL = re.compile(rf"^hpcai-ddp: (\S+) total ex/sec p50 on (\d+) ranks: ({FP})")  # (config, ranks, total)


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _json_config(entry: dict, r: object) -> dict | None:
    """One configuration of the JSON output, or None when it is not the documented shape."""
    if not isinstance(r, dict):
        return None
    secs = r.get("sec_per_iter", {})
    if isinstance(secs, list):  # upstream-like: [p50, p75, p90, p95]
        secs = {f"p{k}": v for k, v in zip((50, 75, 90, 95), secs)}
    rates = r.get("ex_per_sec_per_rank", {})
    if not isinstance(secs, dict) or not isinstance(rates, dict):
        return None
    pct = {}
    for p, v in secs.items():
        if (t := _num(v)) is not None:
            pct[str(p)] = {"sec_per_iter": t}
            if (x := _num(rates.get(p))) is not None:
                pct[str(p)]["ex_per_sec"] = x
    ranks, world = r.get("ranks"), _num(r.get("world_size", 1))
    gpus = len(ranks) if isinstance(ranks, list) else int(world or 1)
    if not pct:
        return None
    batch = entry.get("batch_size")
    return {"model": entry.get("model"), "config": str(r.get("label") or r.get("configuration", "?")),
            "gpus": gpus, "percentiles": pct, "batch_size": batch if _num(batch) else None}


def _from_json(text: str | None) -> list[dict] | None:
    """The configurations of a --json document (TEXT runs from its first `{` to the log's end)."""
    if text is None:
        return None
    try:
        data = json.loads(text[:text.rfind("}") + 1])
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("benchmark_results"), list):
        return None
    configs = []
    for entry in data["benchmark_results"]:
        if not isinstance(entry, dict) or "result" not in entry:
            continue
        # hpcai's ddp_bench.py: a list of {label, ranks, sec_per_iter{p50…}, ex_per_sec_per_rank{p50…}}
        results = entry["result"] if isinstance(entry["result"], list) else [entry["result"]]
        configs += [c for r in results if (c := _json_config(entry, r)) is not None]
    return configs or None


def _read(log: LogLines) -> tuple[Rows, dict[str, float], str | None]:
    """(table configurations, hpcai's exact totals by configuration, the JSON document when the log
    has no table) in one pass."""
    configs, doc = Rows(), Capture("{", leading=False)
    model = batch = None
    exact_totals: dict[str, float] = {}
    for line in log:
        doc.feed(line)
        if (m := _TOTAL.match(line.strip())):
            if m.group(1) in exact_totals or len(exact_totals) < LIMIT:  # one per configuration
                exact_totals[m.group(1)] = float(m.group(3))
        elif (m := _BENCH.match(line.strip())):
            model, batch = m.group(1), int(m.group(2))
        elif (m := _ROW.match(line)):
            pct = {f"p{int(p)}": {"sec_per_iter": float(t), "ex_per_sec": float(x)}
                   for p, t, x in _PCT.findall(m.group(3))}
            if pct:
                configs.append({"model": model, "batch_size": batch, "config": m.group(2).strip(),
                                "gpus": int(m.group(1)), "percentiles": pct})
                doc.drop()  # the table wins over any JSON
    return configs, exact_totals, doc.text


def parse(log: LogLines) -> ParseResult:
    rows, exact_totals, doc = _read(log)
    configs = rows.list() or _from_json(doc) or []
    if not configs:
        raise nothing_found("ddp-bench", "'N GPUs -- config: p50: …' rows", log)
    for c in configs:
        for p in c["percentiles"].values():
            if "ex_per_sec" not in p and c.get("batch_size") and p["sec_per_iter"] > 0:
                p["ex_per_sec"] = c["batch_size"] / p["sec_per_iter"]
            if "ex_per_sec" in p:
                p["ex_per_sec_total"] = p["ex_per_sec"] * c["gpus"]
    # Upstream's suite benchmarks several models in turn: every figure comes from the first one, and
    # the record names that model (it once named the last while showing the first one's number).
    models = list(dict.fromkeys(c["model"] for c in configs))
    model = models[0]
    mine = [c for c in configs if c["model"] == model]
    batch = mine[0].get("batch_size")
    top = max(mine, key=lambda c: (c["config"] != "no ddp", c["gpus"]))
    p50 = top["percentiles"].get("p50") or next(iter(top["percentiles"].values()))
    if len(models) == 1 and top["config"] in exact_totals:  # hpcai's payload benchmarks one model
        p50["ex_per_sec_total"] = exact_totals[top["config"]]
    metrics = []
    if "ex_per_sec_total" in p50:
        metrics.append(Metric("ex_per_sec_total", p50["ex_per_sec_total"], "ex/s", HIGHER, headline=True))
    metrics.append(Metric("sec_per_iter_p50", p50["sec_per_iter"], "s", LOWER, headline=not metrics))
    base = next((c for c in mine if c["config"] == "no ddp"), None)
    base_rate = base["percentiles"].get("p50", {}).get("ex_per_sec") if base else None
    if base and top is not base and "ex_per_sec" in p50 and base_rate:  # a zero baseline has no ratio
        eff = p50["ex_per_sec"] / base_rate
        metrics.append(Metric("scaling_efficiency", eff, "ratio", HIGHER))
    warnings = [f"the log benchmarks {len(models)} models ({', '.join(map(str, models))}): the figures are "
                f"{model}'s; every model's rows are in details.configurations"] if len(models) > 1 else []
    warnings += rows.warnings("configuration rows")
    return ParseResult("ddp-bench", metrics, {"model": model, "models": models, "batch_size": batch,
                                              "configurations": configs, "headline_config": top["config"]},
                       warnings)
