"""Repeat statistics the way the Mila suite reports them: mean, sd, sd%, min, max, and over many
configurations its deviation quantile: sd% at the 80th percentile, which it wants below 5 %.

With at least `DROP_EXTREMES_AT` values the single lowest and highest are dropped before the
mean and sd (one outlier node should not decide a verdict); below `min_count` no verdict is
given at all ("too few runs").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DROP_EXTREMES_AT = 5
DEFAULT_MIN_COUNT = 4
DEVIATION_QUANTILE = 0.8   # the Mila suite's report: the 80 % quantile of sd% ...
DEVIATION_LIMIT = 5.0      # ... must stay below 5 % for the run to count as stable


@dataclass(frozen=True)
class Stats:
    n: int  # values given
    used: int  # values after dropping extremes
    mean: float
    sd: float  # sample standard deviation (0 for one value)
    min: float
    max: float

    @property
    def sd_percent(self) -> float:
        return 100.0 * self.sd / self.mean if self.mean else 0.0


def describe(values: list[float]) -> Stats:
    """VALUES must be finite (callers keep only measured metrics: NaN would make sorting, and so
    min, max and the dropped extremes, meaningless)."""
    if not values:
        raise ValueError("no values")
    if not all(math.isfinite(v) for v in values):
        raise ValueError("values must be finite numbers")
    ordered = sorted(values)
    kept = ordered[1:-1] if len(ordered) >= DROP_EXTREMES_AT else ordered
    # Computed in units of the largest magnitude: values near the float limit (1e308) would
    # overflow a plain sum to inf; scaled, the mean of finite values stays finite.
    scale = max(abs(v) for v in kept) or 1.0
    mean_s = sum(v / scale for v in kept) / len(kept)
    var_s = sum((v / scale - mean_s) ** 2 for v in kept) / (len(kept) - 1) if len(kept) > 1 else 0.0
    return Stats(len(values), len(kept), mean_s * scale, math.sqrt(var_s) * scale, ordered[0], ordered[-1])


def quantile(values: list[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics (pandas' and numpy's
    default, which the Mila report used: df["sd%"].quantile(0.8))."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def weighted_geomean(values: list[float], weights: list[float]) -> float:
    """exp(Σ wᵢ·ln xᵢ / Σ wᵢ); values must be positive."""
    if not values or not weights or max(weights) <= 0:
        return 0.0
    # Weights are relative: scaled by the largest, so weights near the float limit cannot sum to inf.
    top = max(weights)
    weights = [w / top for w in weights]
    return math.exp(sum(w * math.log(v) for v, w in zip(values, weights)) / sum(weights))
