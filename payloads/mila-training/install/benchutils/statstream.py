"""A stream of timings with a warm-up drop, as Mila's reports count it."""

from __future__ import annotations

import math


class StatStream:
    """Observations with the first ones dropped as warm-up.

    With drop_first_obs = d (Mila's Experiment uses 10), observations 1 … d-1 are dropped; the
    average and standard deviation are over observations d+1 onwards and `count` is their number
    (at least 1), while min and max also see observation d. This is the arithmetic of the
    benchutils stream Mila's suite ran with (it re-bases every observation on the first counted
    one, and observation d+1 replaces d as that base), kept so that our numbers are Mila's. Before
    any observation is counted the average is 0.
    """

    def __init__(self, drop_first_obs: int = 10):
        self.drop_obs = drop_first_obs
        self.observations: list[float] = []

    def update(self, val: float, weight: int = 1) -> None:
        self.observations.extend([float(val)] * weight)

    def __iadd__(self, other: float) -> "StatStream":
        self.update(other)
        return self

    @property
    def current_count(self) -> int:
        return len(self.observations)

    @property
    def _counted(self) -> list[float]:
        return self.observations[self.drop_obs:]

    @property
    def _bounded(self) -> list[float]:
        return self.observations[max(self.drop_obs - 1, 0):]

    @property
    def count(self) -> int:
        return max(self.current_count - self.drop_obs, 1)

    @property
    def val(self) -> float:
        return self.observations[-1] if self.observations else 0.0

    @property
    def avg(self) -> float:
        counted = self._counted
        return sum(counted) / self.count if counted else (self._bounded[0] if self._bounded else 0.0)

    @property
    def var(self) -> float:
        counted = self._counted
        if not counted:
            return 0.0
        mean = sum(counted) / self.count
        return max(sum(x * x for x in counted) / self.count - mean * mean, 0.0)

    @property
    def sd(self) -> float:
        return math.sqrt(self.var)

    @property
    def min(self) -> float:
        return min(self._bounded, default=float("inf"))

    @property
    def max(self) -> float:
        return max(self._bounded, default=float("-inf"))

    @property
    def total(self) -> float:
        return sum(self._counted)

    def to_array(self, transform=None) -> list:
        if transform is not None:
            return [transform(self.avg), "NA", transform(self.min), transform(self.max), self.count]
        return [self.avg, self.sd, self.min, self.max, self.count]

    def to_dict(self) -> dict:
        return {"avg": self.avg, "min": self.min, "max": self.max, "sd": self.sd, "count": self.count, "unit": "s"}
