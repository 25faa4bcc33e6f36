"""Scaling sweeps: run a payload over node counts × variable values, then aggregate the series.

`run_sweep` builds one launch per point through the launch API (`hpcai.launch.LaunchOptions`,
`run_launch(opts) -> Path`), each leaving its own run record under the sweep folder, and writes
`sweep.json` (the points and their record folders). `aggregate` turns records into one scaling
table: per configuration (payload and variables, nodes excluded) and node count, the headline
throughput's mean/min/max and the parallel efficiency against the smallest node count:
    efficiency(n) = (T(n) / n) / (T(n0) / n0)
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcai.errors import HpcaiError, UsageError
from hpcai.results.records import RunRecord

SWEEP_FILE = "sweep.json"


def parse_nodes(text: str) -> list[int]:
    try:
        nodes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--nodes must be a comma-separated list of integers like 1,2,4,8, got {text!r}") from None
    if not nodes or any(n < 1 for n in nodes):
        raise UsageError(f"--nodes must list node counts >= 1, got {text!r}")
    return nodes


def parse_vars(items: list[str]) -> dict[str, list[str]]:
    """`batch_size=32,64` -> {"batch_size": ["32", "64"]}."""
    out: dict[str, list[str]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key or not values:
            raise UsageError(f"--var must look like NAME=V1,V2, got {item!r}")
        out[key] = [v for v in values.split(",") if v]
    return out


def points(nodes: list[int], variables: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Every (nodes, variables) combination, nodes varying fastest within each variable setting."""
    keys = sorted(variables)
    combos = itertools.product(*(variables[k] for k in keys)) if keys else [()]
    return [{"nodes": n, "payload_vars": dict(zip(keys, combo))} for combo in combos for n in nodes]


def _options(cls: type, wanted: dict[str, Any]) -> Any:
    """Build LaunchOptions from the keys it has (the launch API may grow; unknown keys are an error)."""
    names = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set(wanted)
    missing = [k for k in ("payload", "nodes") if k not in names]
    if missing:
        raise HpcaiError(f"hpcai.launch.LaunchOptions lacks {missing}: cannot run a sweep")
    return cls(**{k: v for k, v in wanted.items() if k in names})


def run_sweep(payload: str, nodes: list[int], variables: dict[str, list[str]], sweep_dir: Path,
              base: dict[str, Any] | None = None) -> list[Path]:
    """Launch (or submit) every point; returns the run-record folders in order."""
    try:
        from hpcai.launch import LaunchOptions, run_launch
    except ImportError as exc:
        raise HpcaiError(f"the launch API (hpcai.launch) is not available: {exc}") from None
    sweep_dir.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    for point in points(nodes, variables):
        pvars = {**(base or {}).get("payload_vars", {}), **point["payload_vars"]}
        wanted = {**(base or {}), "payload": payload, "nodes": point["nodes"], "payload_vars": pvars,
                  "output_dir": sweep_dir}
        run_dir = Path(run_launch(_options(LaunchOptions, wanted)))
        runs.append({**point, "run_dir": str(run_dir)})
        _write(sweep_dir, payload, runs)
    return [Path(r["run_dir"]) for r in runs]


def _write(sweep_dir: Path, payload: str, runs: list[dict[str, Any]]) -> None:
    from hpcai.record import write_json

    write_json(sweep_dir / SWEEP_FILE, {"payload": payload, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                        "runs": runs})


def sweep_runs(sweep_dir: Path) -> list[Path]:
    data = json.loads((sweep_dir / SWEEP_FILE).read_text())
    return [Path(r["run_dir"]) for r in data.get("runs", [])]


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
            # Efficiency only makes sense for throughputs that should grow with nodes.
            eff = (mean / n) / (base / n0) if better == "higher" and base > 0 else None
            table.append(ScalingPoint(key, n, len(vals), name, unit, mean, min(vals), max(vals), eff))
    return table
