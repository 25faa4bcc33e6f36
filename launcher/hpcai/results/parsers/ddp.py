"""PyTorch DDP benchmark (`benchmarks/distributed/ddp/benchmark.py`) and its `--json` output.

    Benchmark: resnet50 with batch size 32
       1 GPUs --   no ddp:  p50:  0.097s     329/s  p75:  0.097s     329/s  p90: …  p95: …
       4 GPUs --    1M/4G:  p50:  0.101s     316/s  …

Every configuration and percentile is kept in details. `ex/sec` is per rank, so the total is
ex/s × GPUs. Headline: total ex/s at p50 of the largest configuration (`<nodes>M/<gpus>G`).
Lines may say `CPUs` instead of `GPUs` when the payload runs on CPU.
"""

from __future__ import annotations

import json
import re

from hpcai.results.metrics import HIGHER, LOWER, Metric, ParseResult
from hpcai.results.parsers.common import FP, nothing_found, strip_prefixes

_BENCH = re.compile(r"^Benchmark:\s*(\S+) with batch size (\d+)")
_ROW = re.compile(r"^\s*(\d+) [GC]PUs --\s*(.+?):\s+(p\d+:.*)$")
_PCT = re.compile(rf"p(\d+):\s*({FP})s\s+({FP})/s")


def _from_json(text: str) -> list[dict] | None:
    start = text.find("{")
    if start < 0:
        return None
    try:
        data = json.loads(text[start:text.rfind("}") + 1])
    except ValueError:
        return None
    if not isinstance(data, dict) or "benchmark_results" not in data:
        return None
    configs = []
    for entry in data["benchmark_results"]:
        if isinstance(entry, dict) and "result" in entry:
            r = entry["result"]
            pct = {f"p{k}": {"sec_per_iter": v} for k, v in zip((50, 75, 90, 95), r.get("sec_per_iter", []))}
            configs.append({"model": entry.get("model"), "config": r.get("configuration", "?"),
                            "gpus": int(r.get("world_size", 1)), "percentiles": pct,
                            "batch_size": entry.get("batch_size")})
    return configs or None


def parse(text: str) -> ParseResult:
    configs: list[dict] = []
    model = batch = None
    for line in strip_prefixes(text):
        if (m := _BENCH.match(line.strip())):
            model, batch = m.group(1), int(m.group(2))
        elif (m := _ROW.match(line)):
            pct = {f"p{int(p)}": {"sec_per_iter": float(t), "ex_per_sec": float(x)}
                   for p, t, x in _PCT.findall(m.group(3))}
            if pct:
                configs.append({"model": model, "batch_size": batch, "config": m.group(2).strip(),
                                "gpus": int(m.group(1)), "percentiles": pct})
    if not configs:
        configs = _from_json(text) or []
    if not configs:
        raise nothing_found("ddp-bench", "'N GPUs -- config: p50: …' rows", text)
    for c in configs:
        for p in c["percentiles"].values():
            if "ex_per_sec" not in p and c.get("batch_size") and p["sec_per_iter"] > 0:
                p["ex_per_sec"] = c["batch_size"] / p["sec_per_iter"]
            if "ex_per_sec" in p:
                p["ex_per_sec_total"] = p["ex_per_sec"] * c["gpus"]
    top = max(configs, key=lambda c: (c["config"] != "no ddp", c["gpus"]))
    p50 = top["percentiles"].get("p50") or next(iter(top["percentiles"].values()))
    metrics = []
    if "ex_per_sec_total" in p50:
        metrics.append(Metric("ex_per_sec_total", p50["ex_per_sec_total"], "ex/s", HIGHER, headline=True))
    metrics.append(Metric("sec_per_iter_p50", p50["sec_per_iter"], "s", LOWER, headline=not metrics))
    base = next((c for c in configs if c["config"] == "no ddp"), None)
    if base and top is not base and "ex_per_sec" in p50 and "ex_per_sec" in base["percentiles"].get("p50", {}):
        eff = p50["ex_per_sec"] / base["percentiles"]["p50"]["ex_per_sec"]
        metrics.append(Metric("scaling_efficiency", eff, "ratio", HIGHER))
    return ParseResult("ddp-bench", metrics, {"model": model, "batch_size": batch,
                                              "configurations": configs, "headline_config": top["config"]})
