"""Is B slower than A, or is that noise? (issue 30, item 2)

A figure's repeats on each side become a ratio, mean(B) / mean(A), with a confidence interval
from scipy's bootstrap (resampling each side's repeats on its own; percentile intervals, a fixed
seed so the same records give the same answer) and a Mann–Whitney U test's p-value beside it.
A change is called only when the whole interval lies beyond the tolerance:

- higher is better: a regression when the interval's top is under 1 − tolerance, an improvement
  when its bottom is over 1 + tolerance;
- lower is better: the other way round;
- "same" when the interval lies inside 1 ± tolerance;
- "undecided" when it crosses a tolerance bound: the repeats cannot tell a change of that size
  from noise, and more of them would;
- "too few repeats" under MIN_REPEATS on either side (a bootstrap of two values says nothing).

A fixed tolerance on medians of 5, which `make bench` used, cannot tell a 20 % loss from noise when
both sides' ranges overlap; this can, and says when it cannot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hpcai.results.metrics import HIGHER

MIN_REPEATS = 3
CONFIDENCE = 0.95
TOLERANCE = 0.05
RESAMPLES = 9999
SEED = 20261127
REGRESSION, IMPROVEMENT, SAME, UNDECIDED, TOO_FEW = ("regression", "improvement", "same", "undecided",
                                                     "too few repeats")


@dataclass(frozen=True)
class Change:
    n_a: int
    n_b: int
    ratio: float | None          # mean(B) / mean(A)
    low: float | None            # the ratio's confidence interval
    high: float | None
    p_value: float | None        # Mann–Whitney U, two-sided
    verdict: str


def compare_samples(a: list[float], b: list[float], better: str = HIGHER, tolerance: float = TOLERANCE,
                    confidence: float = CONFIDENCE) -> Change:
    """The change from repeats A to repeats B of one figure (finite values only)."""
    a = [float(v) for v in a if math.isfinite(v)]
    b = [float(v) for v in b if math.isfinite(v)]
    mean_a = sum(a) / len(a) if a else 0.0
    ratio = (sum(b) / len(b)) / mean_a if a and b and mean_a else None
    if len(a) < MIN_REPEATS or len(b) < MIN_REPEATS or not mean_a:
        return Change(len(a), len(b), ratio, None, None, None, TOO_FEW)
    import numpy as np
    from scipy import stats

    def mean_ratio(x, y, axis=-1):
        return np.mean(y, axis=axis) / np.mean(x, axis=axis)

    if len(set(a)) == 1 and len(set(b)) == 1:  # no spread on either side: the ratio is exact
        low = high = ratio
        p_value = 1.0 if a[0] == b[0] else 0.0
    else:
        boot = stats.bootstrap((np.array(a), np.array(b)), mean_ratio, vectorized=True, paired=False,
                               confidence_level=confidence, n_resamples=RESAMPLES, method="percentile",
                               random_state=np.random.default_rng(SEED))
        low, high = float(boot.confidence_interval.low), float(boot.confidence_interval.high)
        p_value = float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    return Change(len(a), len(b), ratio, low, high, p_value, verdict(low, high, better, tolerance))


def verdict(low: float, high: float, better: str, tolerance: float) -> str:
    worse_below = better == HIGHER
    if high < 1 - tolerance:
        return REGRESSION if worse_below else IMPROVEMENT
    if low > 1 + tolerance:
        return IMPROVEMENT if worse_below else REGRESSION
    if low >= 1 - tolerance and high <= 1 + tolerance:
        return SAME
    return UNDECIDED
