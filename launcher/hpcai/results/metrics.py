"""The metric model every parser returns and every later stage (records, compare, plot) reads.

A `Metric` is one named figure with its unit and direction; a `ParseResult` holds the metrics of
one log plus free-form details (the per-size table of a bandwidth test, every DDP percentile).
Exactly one metric per result should carry `headline=True`: the number a table shows.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

HIGHER = "higher"
LOWER = "lower"


@dataclass(frozen=True)
class Metric:
    name: str
    value: float
    unit: str
    better: str = HIGHER  # "higher" | "lower"
    headline: bool = False
    formula: str | None = None  # how a derived figure was computed (e.g. TFLOP/s = 6·N·D)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if d["formula"] is None:
            del d["formula"]
        return d

    @property
    def measured(self) -> bool:
        """The value is a measurement: a finite number. A log may hold `NaN` or `Infinity` (a JSON
        document a benchmark printed); such a metric stays in the record as found, but is never
        averaged, compared or plotted."""
        return math.isfinite(self.value)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Metric:
        return cls(
            name=d["name"],
            value=float(d["value"]),  # "nan", "inf": see ParseResult.to_dict
            unit=d.get("unit", ""),
            better=d.get("better", HIGHER),
            headline=bool(d.get("headline", False)),
            formula=d.get("formula"),
        )


@dataclass
class ParseResult:
    parser: str
    metrics: list[Metric]
    details: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def headline(self) -> Metric | None:
        for m in self.metrics:
            if m.headline:
                return m
        return self.metrics[0] if self.metrics else None

    def get(self, name: str) -> Metric | None:
        return next((m for m in self.metrics if m.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        """The result as metrics.json and `--json` hold it, valid JSON (which has no NaN): a metric
        whose value is not finite keeps it as text, "nan", "inf" or "-inf", which from_dict reads
        back as it was (null would lose which, and a null value marks a damaged record); any other
        NaN or infinity (a cell of a details table) is null."""
        from hpcai.files import finite

        metrics = [{**m.to_dict(), "value": m.value if m.measured else str(m.value)} for m in self.metrics]
        return finite({"parser": self.parser, "metrics": metrics, "details": self.details,
                       "warnings": self.warnings})

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ParseResult:
        return cls(
            parser=d.get("parser", "?"),
            metrics=[Metric.from_dict(m) for m in d.get("metrics", [])],
            details=d.get("details", {}),
            warnings=list(d.get("warnings", [])),
        )


def measured(metric: Metric | None) -> bool:
    """METRIC exists and holds a finite value: the one test before a value is computed with."""
    return metric is not None and metric.measured
