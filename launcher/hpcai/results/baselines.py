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

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcai.errors import UsageError
from hpcai.schema import Key, Table

_PLAN_KEYS = ("nodes", "ntasks_per_node", "gpus_per_node")
# The smallest value each plan key takes in a record (a CPU-only run has gpus_per_node 0); a
# condition is compared with the record's value as text, so it is written as plain digits.
_PLAN_MIN = {"nodes": 1, "ntasks_per_node": 1, "gpus_per_node": 0}
_DIGITS = re.compile(r"0|[1-9][0-9]{0,5}")


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


# Every rule a baselines file must follow, checked once here when it is loaded, so that compare
# computes only with the types below; each error is one line naming the file and the TOML key.
#   references: a non-empty table; its keys "payload k=v …" (each k once), each a table of systems
#   system: a non-empty name, a table of metric -> [value, lower, upper, unit] | [value, unit]
#   value: a finite number > 0 (bounds and ratios are fractions of it)
#   lower: finite, -1 <= lower <= 0; upper: finite, >= 0; not both 0 (only the exact value passed)
#   unit: text, the metric's unit where the payload's manifest declares one ([metrics.<name>].unit)
#   payload: a payload of the registry (payloads/<name>/payload.toml)
#   conditions: nodes, ntasks_per_node (whole numbers from 1), gpus_per_node (from 0), written as
#     plain digits; or one of the payload's variables, with a value `hpcai launch` takes for it
#   weights: a table of configurations that references names -> a finite number > 0
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SHAPE = "[value, lower, upper, unit] (or [value, unit])"


def _key(*parts: str) -> str:
    """A TOML key path as it would be written: `references."osu nodes=2"."*".latency_8B`."""
    return ".".join(p if _BARE_KEY.fullmatch(p) else json.dumps(p) for p in parts)


def _number(x: Any) -> bool:
    """A TOML number: int or float, never a boolean (True is an int to Python)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _fraction(source: str, where: str, name: str, frac: Any, low: float, high: float) -> float:
    if not _number(frac) or not math.isfinite(frac) or not low <= frac <= high:
        side = "below" if name == "lower" else "above"
        raise UsageError(f"{source}: {where}: {name} must be a fraction like {'-' if name == 'lower' else ''}0.1 "
                         f"(how far {side} the value a result may be, {low:g} to {high:g}), got {frac!r}")
    return float(frac)


def _reference(source: str, where: str, metric: str, raw: Any) -> Reference:
    if not isinstance(raw, list) or len(raw) not in (2, 4):
        raise UsageError(f"{source}: {where}: must be {_SHAPE}, got {raw!r}")
    value, unit = raw[0], raw[-1]
    if not _number(value) or not math.isfinite(value) or value <= 0:
        raise UsageError(f"{source}: {where}: the value must be a finite number > 0 "
                         f"(bounds are fractions of it), got {value!r}; {_SHAPE}")
    if not isinstance(unit, str):
        raise UsageError(f"{source}: {where}: the unit must be text like \"GB/s\", got {unit!r}; {_SHAPE}")
    if len(raw) == 2:
        return Reference(metric, float(value), None, None, unit)
    lower = _fraction(source, where, "lower", raw[1], -1.0, 0.0)
    upper = _fraction(source, where, "upper", raw[2], 0.0, math.inf)
    if lower == upper == 0:
        raise UsageError(f"{source}: {where}: lower and upper are both 0, so only exactly {value!r} would pass; "
                         "give a tolerance like -0.05, 0.05 (or [value, unit] to report the ratio only)")
    return Reference(metric, float(value), lower, upper, unit)


def _conditions(source: str, where: str, conds: list[str]) -> dict[str, str]:
    conditions: dict[str, str] = {}
    for c in conds:
        k, sep, v = c.partition("=")
        if not sep or not k or not v:
            raise UsageError(f"{source}: {where}: {c!r} is not key=value (the key is \"payload k=v …\", k one of "
                             f"{', '.join(_PLAN_KEYS)} or a payload variable)")
        if k in conditions:
            raise UsageError(f"{source}: {where}: {k} is given twice")
        conditions[k] = v
    return conditions


def _configuration(source: str, key: str, body: Any, weight: float) -> Configuration:
    where = _key("references", key)
    if not isinstance(body, dict):
        raise UsageError(f"{source}: {where}: must be a table of systems like \"*\" = {{ metric = {_SHAPE} }}, "
                         f"got {type(body).__name__}")
    if not key.split():
        raise UsageError(f"{source}: {where}: the configuration must start with a payload name")
    payload, *conds = key.split()
    conditions = _conditions(source, where, conds)
    manifest = _manifest(source, where, payload)
    _check_conditions(source, where, manifest, conditions)
    systems = {}
    for system, metrics in body.items():
        at = _key("references", key, system)
        if not system.strip():
            raise UsageError(f"{source}: {at}: a system is \"site:partition\", \"site:*\" or \"*\", not empty")
        if not isinstance(metrics, dict) or not metrics:
            raise UsageError(f"{source}: {at}: must map metric names to {_SHAPE}, got {metrics!r}")
        systems[system] = {m: _reference(source, _key("references", key, system, m), m, raw)
                           for m, raw in metrics.items()}
        for m, ref in systems[system].items():
            _check_unit(source, _key("references", key, system, m), manifest, ref)
    return Configuration(key, payload, conditions, systems, weight)


def _manifest(source: str, where: str, payload: str) -> Any:
    """The manifest of the payload a configuration names; a name that is no payload matches no
    run, so it is refused naming the valid ones."""
    from hpcai import payloads

    known = payloads.available_payloads()
    if payload not in known:
        raise UsageError(f"{source}: {where}: {payload!r} is no payload (the key is \"payload k=v …\"); "
                         f"valid: {', '.join(known)}")
    return payloads.load_payload(payload)


def _check_conditions(source: str, where: str, manifest: Any, conditions: dict[str, str]) -> None:
    """Each condition names a plan key or one of the payload's variables, with a value a record can
    hold: otherwise it would match no run, silently."""
    variables = [v.name for v in manifest.variables]
    for k, v in conditions.items():
        if k in _PLAN_KEYS:
            low = _PLAN_MIN[k]
            if not _DIGITS.fullmatch(v) or int(v) < low:
                raise UsageError(f"{source}: {where}: {k}={v}: {k} must be a whole number from {low}, written "
                                 f"as plain digits (e.g. {k}=2)")
        elif k in variables:
            try:
                manifest.validate_vars({k: v})
            except UsageError as exc:
                raise UsageError(f"{source}: {where}: {k}={v}: {exc}") from None
        else:
            raise UsageError(f"{source}: {where}: {k!r} is no condition of {manifest.name}; valid: "
                             + ", ".join([*_PLAN_KEYS, *variables]))


def _check_unit(source: str, where: str, manifest: Any, ref: Reference) -> None:
    """A reference's unit is the metric's unit as the payload's manifest declares it (a metric only
    a host parser knows has no declared unit to check against)."""
    name = manifest.aliases.get(ref.metric, ref.metric)
    spec = manifest.raw.get("metrics", {}).get(name)
    if isinstance(spec, dict) and isinstance(spec.get("unit"), str) and ref.unit != spec["unit"]:
        raise UsageError(f"{source}: {where}: unit {ref.unit!r} is not the unit of {name}, {spec['unit']!r} "
                         f"(payloads/{manifest.name}/payload.toml)")


def _weights(source: str, data: dict[str, Any]) -> dict[str, float]:
    weights = data.get("weights", {})
    for key, w in weights.items():
        if key not in data["references"]:
            raise UsageError(f"{source}: {_key('weights', key)}: no such configuration in [references]; valid: "
                             + ", ".join(sorted(data["references"])))
        if not _number(w) or not math.isfinite(w) or w <= 0:
            raise UsageError(f"{source}: {_key('weights', key)}: must be a finite number > 0 (default 1), got {w!r}")
    return {k: float(w) for k, w in weights.items()}


def _references(source: str, refs: Any) -> dict[str, Any]:
    if not isinstance(refs, dict) or not refs:
        raise UsageError(f"{source}: no [references.\"<payload>\"] tables (see `hpcai results compare --help`)")
    return refs


def _weights_table(source: str, weights: Any) -> dict[str, Any]:
    if not isinstance(weights, dict):
        raise UsageError(f"{source}: weights must be a table of configuration = weight, got {type(weights).__name__}")
    return weights


_NUMBER_ABOVE_0 = {"type": "number", "exclusiveMinimum": 0}
_REFERENCE_JSON = {"oneOf": [  # [value, unit] | [value, lower, upper, unit]
    {"type": "array", "prefixItems": [_NUMBER_ABOVE_0, {"type": "string"}], "minItems": 2, "items": False},
    {"type": "array", "prefixItems": [_NUMBER_ABOVE_0, {"type": "number", "minimum": -1, "maximum": 0},
                                      {"type": "number", "minimum": 0}, {"type": "string"}],
     "minItems": 4, "items": False}]}
# The file's two tables, declared as every TOML file of hpcai is (hpcai.schema): an unknown key is
# said alike, and `hpcai results schema` publishes the rules as JSON Schema. Their keys are data
# (configurations, systems, metrics), so the rules above are read by the functions here.
SCHEMA = Table([
    Key("references", None, parse=_references, json={
        "type": "object", "minProperties": 1, "additionalProperties": {  # "payload k=v …"
            "type": "object", "additionalProperties": {  # system: "site:partition", "site:*", "*"
                "type": "object", "minProperties": 1, "additionalProperties": _REFERENCE_JSON}}}),
    Key("weights", None, parse=_weights_table, json={"type": "object", "additionalProperties": _NUMBER_ABOVE_0}),
], "baselines file")


def configurations(data: Any, source: str) -> list[Configuration]:
    """The configurations of a parsed baselines document; SOURCE names it in errors."""
    if not isinstance(data, dict):
        raise UsageError(f"{source}: a baselines file is a TOML document, got {type(data).__name__}")
    SCHEMA.read(source, data)
    refs = _references(source, data.get("references"))
    weights = _weights(source, data)
    return [_configuration(source, k, v, weights.get(k, 1.0)) for k, v in refs.items()]


def load_baselines(path: Path) -> list[Configuration]:
    from hpcai import files

    if not path.exists():  # exists, not is_file: a FIFO or a folder there gets files' own one line
        raise UsageError(f"no such baselines file: {path}")
    try:  # a regular file, size-bounded, TOML nested no deeper than files.MAX_DEPTH (BadFile)
        data = files.read_toml(path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return configurations(data, str(path))


def find(configs: list[Configuration], plan: dict[str, Any]) -> Configuration | None:
    """The matching configuration with the most conditions (the most specific)."""
    matching = [c for c in configs if c.matches(plan)]
    return max(matching, key=lambda c: len(c.conditions)) if matching else None
