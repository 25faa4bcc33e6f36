"""The scaling table of a sweep: per configuration (payload and variables, nodes excluded) and node
count, the headline metric's mean/min/max and the parallel efficiency against the smallest node
count n0. A throughput X (higher is better) should grow with the nodes; a time to solution T
(lower is better, such as MMoCLIP's total_time_secs for its fixed epoch) should shrink:
    throughput:        efficiency(n) = (X(n) / n) / (X(n0) / n0)
    time to solution:  efficiency(n) = (T(n0) · n0) / (T(n) · n)      (strong scaling)
Running a sweep is `hpcai.run.sweep`.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpcai.results.metrics import HIGHER, LOWER
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
    better: str = HIGHER  # the metric's direction: "higher" (throughput) or "lower" (time to solution)


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
            table.append(ScalingPoint(key, n, len(vals), name, unit, mean, min(vals), max(vals),
                                      efficiency(better, base, n0, mean, n), better))
    return table


def efficiency(better: str, base: float, n0: int, value: float, n: int) -> float | None:
    """Parallel efficiency at N nodes of VALUE against BASE at N0 nodes (see the module's rule);
    None where it cannot be told (a zero or negative figure)."""
    if base <= 0 or value <= 0:
        return None
    if better == LOWER:
        return (base * n0) / (value * n)
    return (value / n) / (base / n0)
