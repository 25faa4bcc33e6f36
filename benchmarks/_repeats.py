"""Interleaved repeats until each comparison is decided, with a bound (issue 30, item 2).

The method is `hpcai results compare`'s (hpcai.results.significance): the ratio of the means,
side / baseline, with a 95 % bootstrap interval and the Mann–Whitney p-value beside it. Here it is
judged against a benchmark's target as _report judges an interval: PASS when all of it meets the
target, FAIL when none of it does, "undecided" while it straddles the target.

A benchmark runs every comparison MIN times, interleaved with its baseline, then runs again only
those still undecided, until each is decided or has run BOUND times. One that still straddles the
target at the bound is reported undecided, with its interval: on a loaded 2-core machine a 3 %
target can lie inside the noise of any affordable number of repeats, and saying so is the answer.
"""

from __future__ import annotations

from dataclasses import dataclass

import _report
from hpcai.results.significance import compare_samples


@dataclass(frozen=True)
class Judged:
    ratio: float | None       # mean(side) / mean(baseline)
    interval: tuple[float, float] | None
    p_value: float | None
    repeats: int              # the side's
    status: str               # _report's PASS, FAIL or UNDECIDED

    @property
    def decided(self) -> bool:
        return self.status in (_report.PASS, _report.FAIL)


def judge(baseline: list[float], side: list[float], target: float, better: str) -> Judged:
    """SIDE against BASELINE, both a figure's repeats, judged against TARGET (a ratio)."""
    change = compare_samples(baseline, side, better)
    interval = None if change.low is None else (change.low, change.high)
    status = _report.verdict(change.ratio, target, better, interval) if interval else _report.UNDECIDED
    return Judged(change.ratio, interval, change.p_value, len(side), status)


def still_open(keys: set, judged: dict, done: int, minimum: int, bound: int) -> set:
    """Which of KEYS the next round runs, after DONE rounds: all of them before MINIMUM, then those
    JUDGED undecided, until BOUND."""
    if done >= bound:
        return set()
    return {key for key in keys if done < minimum or key not in judged or not judged[key].decided}


def note(j: Judged, side: str, side_mean: float, base_mean: float, unit: str, bound: int) -> str:
    """The figure's note: both means, the interval, the p-value and the repeats."""
    low, high = j.interval or (float("nan"), float("nan"))
    tail = ", the bound: undecided" if j.status == _report.UNDECIDED and j.repeats >= bound else ""
    p = "" if j.p_value is None else f", Mann-Whitney p={j.p_value:.2g}"
    return (f"{side} {side_mean:.4g} vs host {base_mean:.4g} {unit} (means); 95 % interval of the ratio "
            f"[{low:.3f}, {high:.3f}]{p}; {j.repeats} interleaved repeats{tail}")
