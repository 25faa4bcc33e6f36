"""Repeat statistics the way the Mila suite reports them: mean, sd, sd%, min, max.

With at least `DROP_EXTREMES_AT` values the single lowest and highest are dropped before the
mean and sd (one outlier node should not decide a verdict); below `min_count` no verdict is
given at all ("too few runs").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DROP_EXTREMES_AT = 5
DEFAULT_MIN_COUNT = 4


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
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    kept = ordered[1:-1] if len(ordered) >= DROP_EXTREMES_AT else ordered
    mean = sum(kept) / len(kept)
    sd = math.sqrt(sum((v - mean) ** 2 for v in kept) / (len(kept) - 1)) if len(kept) > 1 else 0.0
    return Stats(len(values), len(kept), mean, sd, ordered[0], ordered[-1])


def weighted_geomean(values: list[float], weights: list[float]) -> float:
    """exp(Σ wᵢ·ln xᵢ / Σ wᵢ); values must be positive."""
    total = sum(weights)
    if not values or total <= 0:
        return 0.0
    return math.exp(sum(w * math.log(v) for v, w in zip(values, weights)) / total)
