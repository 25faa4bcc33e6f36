"""Compare runs with baselines: per configuration and metric, stats, reference, ratio, verdict.

Runs are grouped by configuration (payload, system, geometry, payload variables). A verdict is
`pass`, `fail`, `too few runs` (fewer successful runs than `min_count`), `no reference`, or
`fail` when no run of the configuration produced the metric. The suite score is the weighted
geometric mean of normalized ratios (value/reference, inverted for lower-is-better metrics) over
every judged metric, multiplied by the success ratio (successful runs / runs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hpcai.results.baselines import Configuration, Reference, find
from hpcai.results.metrics import measured
from hpcai.results.runs import RunRecord
from hpcai.results.stats import DEFAULT_MIN_COUNT, DEVIATION_QUANTILE, Stats, describe, quantile, weighted_geomean

PASS, FAIL, TOO_FEW, NO_REF = "pass", "fail", "too few runs", "no reference"


@dataclass
class Row:
    config: str
    system: str
    metric: str
    unit: str
    better: str
    runs: int
    stats: Stats | None
    reference: Reference | None
    verdict: str
    weight: float = 1.0
    skipped: int = 0  # successful runs whose value was NaN or infinite: left out of the stats

    @property
    def ratio(self) -> float | None:
        if self.stats is None or self.reference is None or not self.reference.value:
            return None
        ratio = self.stats.mean / self.reference.value
        return ratio if math.isfinite(ratio) else None  # a mean near the float limit overflows

    @property
    def normalized(self) -> float | None:
        """Ratio where > 1 is always better (lower-is-better metrics inverted)."""
        r = self.ratio
        if r is None or r <= 0:
            return None
        return r if self.better == "higher" else 1.0 / r


@dataclass
class Comparison:
    rows: list[Row] = field(default_factory=list)
    runs: int = 0
    succeeded: int = 0

    @property
    def failed(self) -> bool:
        """A metric out of bounds, or a run that failed (CI must see both)."""
        return any(r.verdict == FAIL for r in self.rows) or self.succeeded < self.runs

    @property
    def success_ratio(self) -> float:
        return self.succeeded / self.runs if self.runs else 0.0

    @property
    def deviation_quantile(self) -> float | None:
        """sd% at DEVIATION_QUANTILE over the configurations with repeats (the Mila suite's
        stability figure); None with none."""
        spreads = [r.stats.sd_percent for r in self.rows if r.stats and r.stats.used > 1]
        return quantile(spreads, DEVIATION_QUANTILE) if spreads else None

    @property
    def score(self) -> float | None:
        judged = [r for r in self.rows if r.verdict in (PASS, FAIL) and r.normalized]
        if not judged:
            return None
        return weighted_geomean([r.normalized for r in judged], [r.weight for r in judged]) * self.success_ratio


def config_key(rec: RunRecord) -> str:
    """`payload nodes=N ntasks_per_node=M [var=value …]`: what makes runs comparable."""
    plan = rec.plan
    parts = [rec.payload, f"nodes={rec.nodes}", f"ntasks_per_node={plan.get('ntasks_per_node') or 1}"]
    parts += [f"{k}={v}" for k, v in sorted((plan.get("payload_vars") or {}).items())]
    return " ".join(parts)


def group(records: list[RunRecord]) -> dict[tuple[str, str], list[RunRecord]]:
    groups: dict[tuple[str, str], list[RunRecord]] = {}
    for rec in records:
        groups.setdefault((config_key(rec), rec.system), []).append(rec)
    return groups


def _row(key: str, system: str, runs: list[RunRecord], metric: str, ref: Reference | None,
         weight: float, min_count: int) -> Row:
    present = [m for r in runs if r.succeeded and r.result for m in [r.result.get(metric)] if m is not None]
    found = [m for m in present if measured(m)]
    skipped = len(present) - len(found)
    unit = present[0].unit if present else (ref.unit if ref else "")
    better = present[0].better if present else "higher"
    if not found:
        return Row(key, system, metric, unit, better, len(runs), None, ref, FAIL if ref else NO_REF, weight, skipped)
    stats = describe([m.value for m in found])
    if ref is None:
        verdict = NO_REF
    elif stats.n < min_count:
        verdict = TOO_FEW
    else:
        verdict = PASS if ref.accepts(stats.mean) else FAIL
    return Row(key, system, metric, unit, better, len(runs), stats, ref, verdict, weight, skipped)


def compare(records: list[RunRecord], baselines: list[Configuration] | None = None,
            min_count: int = DEFAULT_MIN_COUNT) -> Comparison:
    result = Comparison(runs=len(records), succeeded=sum(r.succeeded for r in records))
    for (key, system), runs in group(records).items():
        config: Configuration | None = find(baselines or [], runs[0].plan)
        refs = config.references_for(system) if config else None
        weight = config.weight if config else 1.0
        if refs:
            for metric, ref in refs.items():
                result.rows.append(_row(key, system, runs, metric, ref, weight, min_count))
            continue
        heads = [r.result.headline for r in runs if r.result and r.result.headline]
        metric = heads[0].name if heads else "(no metrics)"
        result.rows.append(_row(key, system, runs, metric, None, weight, min_count))
    return result


@dataclass(frozen=True)
class Paired:
    """One figure of one configuration, measured on both sides of `compare B --against A`."""

    config: str
    metric: str
    unit: str
    better: str
    change: Any  # hpcai.results.significance.Change


def against(a: list[RunRecord], b: list[RunRecord], tolerance: float) -> list[Paired]:
    """Every metric of every configuration that both A and B measured: its change from A to B
    (hpcai.results.significance). Configurations only one side ran are left out (say so: unpaired)."""
    from hpcai.results.significance import compare_samples

    def values(records: list[RunRecord]) -> dict[str, dict[str, list]]:
        found: dict[str, dict[str, list]] = {}
        for rec in records:
            for m in rec.result.metrics if rec.succeeded and rec.result else ():
                if measured(m):
                    found.setdefault(config_key(rec), {}).setdefault(m.name, []).append(m)
        return found

    va, vb = values(a), values(b)
    rows = []
    for config in sorted(set(va) & set(vb)):
        for metric in sorted(set(va[config]) & set(vb[config])):
            first = va[config][metric][0]
            change = compare_samples([m.value for m in va[config][metric]], [m.value for m in vb[config][metric]],
                                     first.better, tolerance)
            rows.append(Paired(config, metric, first.unit, first.better, change))
    return rows


def unpaired(a: list[RunRecord], b: list[RunRecord]) -> list[str]:
    """Configurations only one side ran: nothing to compare them with."""
    ka, kb = {config_key(r) for r in a}, {config_key(r) for r in b}
    return [f"only in A: {k}" for k in sorted(ka - kb)] + [f"only in B: {k}" for k in sorted(kb - ka)]
