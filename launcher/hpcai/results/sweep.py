"""The scaling table of a sweep: per configuration (payload and variables, nodes excluded) and node
count, the headline throughput's mean/min/max and the parallel efficiency against the smallest
node count:
    efficiency(n) = (T(n) / n) / (T(n0) / n0)
Running a sweep is `hpcai.run.sweep`.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpcai.results.runs import RunRecord


@dataclass(frozen=True)
class ScalingPoint:
    series: str  # payload and variables, nodes excluded
    nodes: int
    runs: int
    metric: str
    unit: str
    mean: float
    min: float
    max: float
    efficiency: float | None


def series_key(rec: RunRecord) -> str:
    pvars = rec.plan.get("payload_vars") or {}
    return " ".join([rec.payload, *(f"{k}={v}" for k, v in sorted(pvars.items()))])


def aggregate(records: list[RunRecord]) -> list[ScalingPoint]:
    """One scaling table over successful runs: per series and node count, mean/min/max, efficiency."""
    by: dict[str, dict[int, list[float]]] = {}
    meta: dict[str, tuple[str, str, str]] = {}
    for rec in records:
        head = rec.result.headline if rec.succeeded and rec.result else None
        if head is None:
            continue
        by.setdefault(series_key(rec), {}).setdefault(rec.nodes, []).append(head.value)
        meta[series_key(rec)] = (head.name, head.unit, head.better)
    table = []
    for key, per_nodes in sorted(by.items()):
        name, unit, better = meta[key]
        n0 = min(per_nodes)
        base = sum(per_nodes[n0]) / len(per_nodes[n0])
        for n in sorted(per_nodes):
            vals = per_nodes[n]
            mean = sum(vals) / len(vals)
            # Efficiency only makes sense for throughputs that should grow with nodes.
            eff = (mean / n) / (base / n0) if better == "higher" and base > 0 else None
            table.append(ScalingPoint(key, n, len(vals), name, unit, mean, min(vals), max(vals), eff))
    return table
