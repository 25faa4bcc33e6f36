"""Energy with jpwr, the results side: read each node's power CSV into Wh/W/J after the run.

The launch side (hpcai.run.energy) wraps each node's payload so that one process per node
measures. jpwr writes `power<suffix>.csv` (pandas: index, `timestamps` in epoch seconds, one W
column per device such as `pynvml:0`) into `--df-out`; energy = Σ ½(Pᵢ+Pᵢ₊₁)·Δt / 3600 in Wh.

After the run, `energy/combined_energy.csv` is the table CARAML's `aux/combine_energy.py` writes
from its per-rank energy files: one row per power CSV (hpcai measures once per node), each device's
Wh as jpwr's `energy()` computes it (Σᵢ≥₁ Pᵢ·(tᵢ−tᵢ₋₁) / 3600, a right Riemann sum, not the
trapezoids above), full precision; tests/unit/results/test_energy_caraml.py runs CARAML's script on the
same files and compares.
"""


from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcai import files
from hpcai.errors import UsageError


# ---- reading -------------------------------------------------------------------------------

POWER_CSV_MAX = 1 << 30  # days of samples at jpwr's rate; a sparse or endless file is not one


def read_power_csv(path: Path) -> tuple[list[float], dict[str, list[float]]]:
    """(timestamps in s, {device column: watts}) from one jpwr power CSV; UsageError naming the
    file, line and column when it is not one (an energy figure from a damaged file would lie).
    Read through hpcai.files: a FIFO or a link to /dev/zero there is refused, never waited on."""
    try:
        rows = list(csv.reader(io.StringIO(files.read_text(path, POWER_CSV_MAX, path.name), newline="")))
    except (OSError, csv.Error) as exc:
        raise UsageError(f"{path.name}: cannot be read as a power CSV ({exc})") from None
    if not rows or "timestamps" not in rows[0]:
        raise UsageError(f"{path.name}: not a jpwr power CSV (no 'timestamps' column)")
    header = rows[0]
    t_col = header.index("timestamps")
    devices = {i: name for i, name in enumerate(header) if i != t_col and name}
    times: list[float] = []
    watts: dict[str, list[float]] = {name: [] for name in devices.values()}
    for line, row in enumerate(rows[1:], start=2):
        if len(row) < len(header):
            continue  # a truncated last line (the node was killed)
        values = {i: _number(row[i]) for i in (t_col, *devices)}
        bad = next((i for i, v in values.items() if v is None), None)
        if bad is not None:
            raise UsageError(f"{path.name}: line {line}, column {header[bad]!r}: {row[bad][:40]!r} is not a number")
        times.append(values[t_col])
        for i, name in devices.items():
            watts[name].append(values[i])
    return times, watts


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _wh(times: list[float], values: list[float]) -> float:
    joules = sum((values[i] + values[i + 1]) / 2 * (times[i + 1] - times[i]) for i in range(len(times) - 1))
    return joules / 3600.0


def _jpwr_wh(times: list[float], values: list[float]) -> float:
    """jpwr's ctxmgr.get_power.energy(): each sample's power times the time since the one before
    (`df[col].multiply(df["timestamps"].diff())[1:].sum() / 3600`), the figure CARAML's files carry."""
    return math.fsum(values[i] * (times[i] - times[i - 1]) / 3600 for i in range(1, len(times)))


@dataclass(frozen=True)
class NodeEnergy:
    """One power CSV (one node's measurer) reduced to its figures; its samples are not kept."""

    rel: str  # the file, relative to energy/
    nodename: str  # platform.node() of the measurer, from jpwr's file name
    samples: int
    seconds: float
    wh: dict[str, float]  # per device, trapezoids: hpcai's energy_wh
    jpwr_wh: dict[str, float]  # per device, jpwr's energy(): combined_energy.csv


_JPWR_NAME = re.compile(r"power\.(.+)\.\d+\.csv")  # jpwr's CLI: power.<platform.node()>.<pid>.csv


def _nodename(path: Path, energy_dir: Path) -> str:
    named = _JPWR_NAME.fullmatch(path.name)
    if named:
        return named.group(1)
    return path.parent.name if path.parent != energy_dir else ""


def node_energies(energy_dir: Path) -> tuple[list[NodeEnergy], dict[str, str]]:
    """(every readable power CSV under ENERGY_DIR in path order, {damaged file: why})."""
    paths = sorted(energy_dir.rglob("power*.csv")) if energy_dir.is_dir() else []
    nodes: list[NodeEnergy] = []
    skipped: dict[str, str] = {}
    for f in paths:
        rel = str(f.relative_to(energy_dir))
        try:
            times, watts = read_power_csv(f)
        except UsageError as exc:  # one node's damaged file: the others still measure
            skipped[rel] = str(exc)
            continue
        span = times[-1] - times[0] if times else 0.0
        nodes.append(NodeEnergy(rel, _nodename(f, energy_dir), len(times), span,
                                {k: _wh(times, v) for k, v in watts.items()},
                                {k: _jpwr_wh(times, v) for k, v in watts.items()}))
    return nodes, skipped


def summarize(energy_dir: Path) -> dict[str, Any] | None:
    """Total Wh, duration and average W over every node's power CSV; None when there is none."""
    return _summary(*node_energies(energy_dir))


def _summary(nodes: list[NodeEnergy], skipped: dict[str, str]) -> dict[str, Any] | None:
    total_wh, avg_w, duration, per_file = 0.0, 0.0, 0.0, {}
    for node in nodes:
        if node.samples < 2:
            continue
        # On GH200 the gh:Module reading already includes the GPU: do not add NVML power too.
        wh_of = node.wh
        if any(name.startswith("gh:") for name in wh_of):
            wh_of = {k: v for k, v in wh_of.items() if not k.startswith("pynvml:")}
        wh = sum(wh_of.values())
        total_wh += wh
        avg_w += wh * 3600 / node.seconds if node.seconds > 0 else 0.0
        duration = max(duration, node.seconds)
        per_file[node.rel] = {"wh": wh, "seconds": node.seconds, "devices": sorted(wh_of)}
    if not per_file:
        return {"skipped": skipped} if skipped else None
    return {"energy_wh": total_wh, "avg_power_w": avg_w, "seconds": duration, "files": per_file,
            **({"skipped": skipped} if skipped else {})}


COMBINED = "combined_energy.csv"


def combined_csv(nodes: list[NodeEnergy]) -> str:
    """CARAML's combined_energy.csv for NODES: pandas' index, `nodename`, `rank` (the row's node
    index: one measurer per node), then every device column in the order first seen, in Wh; a
    device a node lacks is an empty cell."""
    devices = list(dict.fromkeys(name for node in nodes for name in node.jpwr_wh))
    # Format: ,nodename,rank,pynvml:0,pynvml:1
    #         0,jrc0001,0,12.3456789,12.0987654
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["", "nodename", "rank", *map(_cell, devices)])
    for rank, node in enumerate(nodes):
        cells = [repr(node.jpwr_wh[d]) if d in node.jpwr_wh else "" for d in devices]
        writer.writerow([rank, _cell(node.nodename), rank, *cells])
    return buf.getvalue()


def _cell(text: str) -> str:
    """Text from file names and headers as output.csv_cell writes it (a leading `=` never becomes
    a formula); real host and device names pass as is, without importing rich for them."""
    if text.isprintable() and not text.startswith(("=", "+", "-", "@")):
        return text
    from hpcai.output import csv_cell

    return csv_cell(text)


def write_combined(energy_dir: Path, nodes: list[NodeEnergy]) -> Path | None:
    """Write NODES' combined_energy.csv into ENERGY_DIR (none without nodes, as CARAML's script
    fails without files); its path, or None. A record's own name: a planted link is replaced."""
    if not nodes or energy_dir.is_symlink():  # a record's energy/ is never a link: not ours to write into
        return None
    path = energy_dir / COMBINED
    files.write_atomic(path, combined_csv(nodes), over_link=True)
    return path


def add_to_result(energy_dir: Path, result: Any) -> None:
    """Add Wh, average W and J per sample/token/image to a ParseResult when energy was measured,
    and write energy/combined_energy.csv (CARAML's table) beside the power CSVs."""
    from hpcai.results.metrics import LOWER, Metric

    nodes, skipped = node_energies(energy_dir)
    try:
        write_combined(energy_dir, nodes)
    except OSError as exc:  # a full disk or a read-only record: the figures below still count
        result.warnings.append(f"energy/{COMBINED} not written: {exc.strerror or exc}")
    summary = _summary(nodes, skipped)
    if summary is None:
        return
    result.details["energy"] = summary
    if "energy_wh" not in summary:  # every file damaged: no figure rather than a wrong one
        return
    result.metrics.append(Metric("energy_wh", summary["energy_wh"], "Wh", LOWER))
    result.metrics.append(Metric("avg_power_w", summary["avg_power_w"], "W", LOWER))
    rate = result.headline
    if rate is not None and rate.unit.endswith("/s") and rate.value > 0 and not rate.unit.startswith(("GB", "MB")):
        thing = rate.unit[:-2].rstrip("s") or "item"  # samples/s -> sample
        result.metrics.append(Metric(f"joules_per_{thing}", summary["avg_power_w"] / rate.value, f"J/{thing}", LOWER))
