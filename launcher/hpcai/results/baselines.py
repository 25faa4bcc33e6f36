"""Baselines: ReFrame-style references per payload configuration and system, from TOML.

    # a configuration is the payload name, optionally narrowed: "payload k=v k=v" where k is
    # nodes, ntasks_per_node, gpus_per_node or a payload variable
    [references."nccl-tests nodes=2"]
    "*" = { busbw_avg = [170.0, -0.10, 0.10, "GB/s"] }       # any system
    "jureca:dc-gpu" = { busbw_avg = [175.0, -0.05, 0.05, "GB/s"] }
    "jureca:*" = { ... }                                       # any partition of a site

    [weights]                      # optional, for the suite score (default 1)
    "nccl-tests nodes=2" = 2.0

`[value, lower, upper, unit]`: lower/upper are fractions of value (ReFrame), so the bounds are
value·(1+lower) and value·(1+upper); `[value, unit]` checks nothing and only reports the ratio.
The most specific configuration (most conditions) and system (exact, `site:*`, `*`) win.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from hpcai.errors import UsageError

_PLAN_KEYS = ("nodes", "ntasks_per_node", "gpus_per_node")


@dataclass(frozen=True)
class Reference:
    metric: str
    value: float
    lower: float | None
    upper: float | None
    unit: str

    def bounds(self) -> tuple[float | None, float | None]:
        lo = self.value * (1 + self.lower) if self.lower is not None else None
        hi = self.value * (1 + self.upper) if self.upper is not None else None
        return lo, hi

    def accepts(self, value: float) -> bool:
        lo, hi = self.bounds()
        return (lo is None or value >= lo) and (hi is None or value <= hi)


@dataclass(frozen=True)
class Configuration:
    key: str
    payload: str
    conditions: dict[str, str]
    systems: dict[str, dict[str, Reference]]  # "site:partition" | "site:*" | "*" -> metric -> ref
    weight: float = 1.0

    def matches(self, plan: dict[str, Any]) -> bool:
        if plan.get("payload") != self.payload:
            return False
        pvars = plan.get("payload_vars") or {}
        for k, v in self.conditions.items():
            actual = plan.get(k) if k in _PLAN_KEYS else pvars.get(k)
            if str(actual) != v:
                return False
        return True

    def references_for(self, system: str) -> dict[str, Reference] | None:
        site = system.split(":", 1)[0]
        for key in (system, f"{site}:*", site, "*"):
            if key in self.systems:
                return self.systems[key]
        return None


def _reference(where: str, metric: str, raw: Any) -> Reference:
    if not isinstance(raw, list) or len(raw) not in (2, 4) or not isinstance(raw[0], (int, float)):
        raise UsageError(f"{where}: {metric} must be [value, lower, upper, unit] (or [value, unit]), got {raw!r}")
    if len(raw) == 2:
        return Reference(metric, float(raw[0]), None, None, str(raw[1]))
    value, lower, upper, unit = raw
    for name, frac in (("lower", lower), ("upper", upper)):
        if frac is not None and not isinstance(frac, (int, float)):
            raise UsageError(f"{where}: {metric}: {name} must be a fraction like -0.1, got {frac!r}")
    return Reference(metric, float(value), lower, upper, str(unit))


def _configuration(key: str, body: Any, weight: float) -> Configuration:
    if not isinstance(body, dict):
        raise UsageError(f"baselines: [references.{key!r}] must be a table of systems")
    payload, *conds = key.split()
    conditions = {}
    for c in conds:
        if "=" not in c:
            raise UsageError(f"baselines: configuration {key!r}: {c!r} is not key=value")
        k, v = c.split("=", 1)
        conditions[k] = v
    systems = {}
    for system, metrics in body.items():
        if not isinstance(metrics, dict):
            raise UsageError(f"baselines: {key!r} / {system!r} must map metric names to [value, lower, upper, unit]")
        where = f"baselines {key!r} {system!r}"
        systems[system] = {m: _reference(where, m, raw) for m, raw in metrics.items()}
    return Configuration(key, payload, conditions, systems, weight)


def load_baselines(path: Path) -> list[Configuration]:
    if not path.is_file():
        raise UsageError(f"no such baselines file: {path}")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: malformed TOML: {exc}") from None
    refs = data.get("references")
    if not isinstance(refs, dict) or not refs:
        raise UsageError(f"{path}: no [references.\"<payload>\"] tables (see `hpcai results compare --help`)")
    unknown_keys = set(data) - {"references", "weights"}
    if unknown_keys:
        raise UsageError(f"{path}: unknown top-level keys {sorted(unknown_keys)}; valid: references, weights")
    weights = data.get("weights", {})
    return [_configuration(k, v, float(weights.get(k, 1.0))) for k, v in refs.items()]


def find(configs: list[Configuration], plan: dict[str, Any]) -> Configuration | None:
    """The matching configuration with the most conditions (the most specific)."""
    matching = [c for c in configs if c.matches(plan)]
    return max(matching, key=lambda c: len(c.conditions)) if matching else None
