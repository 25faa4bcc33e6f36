"""Energy with jpwr: wrap each node's payload, detect a power source, read the CSV into Wh/W/J.

`hpcai launch --energy` passes the payload's argv through `wrap_argv`. The wrapped command runs
`python -m hpcai.results.energy` on each task: only the node's local rank 0 measures (NVML sees
every GPU of the node, so one measurer per node), the other ranks `exec` the payload unchanged.
jpwr's CLI drops its child's exit code, so the measured child is this module again in
`--record-exit` mode: it runs the payload, writes its exit code to
`energy/exit-code-<host>.txt`, and the outer wrapper returns that code.

jpwr writes `power<suffix>.csv` (pandas: index, `timestamps` in epoch seconds, one W column per
device such as `pynvml:0`) into `--df-out`; energy = Σ ½(Pᵢ+Pᵢ₊₁)·Δt / 3600 in Wh.

After the run, `energy/combined_energy.csv` is the table CARAML's `aux/combine_energy.py` writes
from its per-rank energy files: one row per power CSV (hpcai measures once per node), each device's
Wh as jpwr's `energy()` computes it (Σᵢ≥₁ Pᵢ·(tᵢ−tᵢ₋₁) / 3600, a right Riemann sum, not the
trapezoids above), full precision; tests/unit/test_energy_caraml.py runs CARAML's script on the
same files and compares.
"""

from __future__ import annotations

import csv
import glob
import io
import math
import os
import re
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcai import files
from hpcai.errors import UsageError
from hpcai.output import say

_LOCAL_RANK_VARS = ("SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "LOCAL_RANK")


def wrap_argv(argv: list[str], energy_dir: str, methods: list[str] | None = None) -> list[str]:
    """The payload argv wrapped so that one process per node measures power with jpwr.

    methods: jpwr methods (default: detected on the node at run time).
    """
    chosen = ",".join(methods) if methods else "auto"
    return [sys.executable, "-m", "hpcai.results.energy", "--dir", energy_dir,
            "--methods", chosen, "--", *argv]


def detect_power_source() -> list[str]:
    """jpwr methods usable on this node ([] when there is nothing to measure)."""
    found = []
    if shutil.which("nvidia-smi") or Path("/dev/nvidiactl").exists():
        found.append("pynvml")
    if shutil.which("rocm-smi") or Path("/dev/kfd").exists():
        found.append("rocm")
    if glob.glob("/sys/class/hwmon/hwmon*/device/power1_oem_info"):  # GH200 module sensors
        found.append("gh")
    if shutil.which("gc-monitor"):
        found.append("gc")
    return found


def jpwr_command() -> list[str] | None:
    exe = shutil.which("jpwr")
    return [exe] if exe else None


def preflight(methods: list[str] | None = None) -> tuple[list[str], str | None]:
    """(methods, None) when energy can be measured on this host, else ([], reason to print).

    The run goes on either way: each node's wrapper checks again and runs the payload unmeasured
    when it finds no power source or no jpwr (a login node often has no GPU while compute nodes do).
    """
    found = methods or detect_power_source()
    if not found:
        return [], ("--energy: no power source on this host (no NVIDIA/AMD GPU, GH200 sensors or Graphcore "
                    "IPU); the run continues, and a node without one runs unmeasured")
    if jpwr_command() is None:
        return [], ("--energy: jpwr is not installed (pip install 'hpcai[energy]'); the run continues, "
                    "and a node without jpwr runs unmeasured")
    return found, None


def _is_measurer(energy_dir: Path, host: str) -> bool:
    """Local rank 0 measures; without a local-rank variable (e.g. the local backend, where the
    rank environment only reaches the container) the first task to claim the node's lock does."""
    for var in _LOCAL_RANK_VARS:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var]) == 0
    energy_dir.mkdir(parents=True, exist_ok=True)
    try:
        os.close(files.create_new(energy_dir / f".measurer-{host}"))  # O_EXCL: one winner, no link followed
        return True
    except FileExistsError:
        return False


def _run_and_record(exit_file: Path, argv: list[str]) -> int:
    code = subprocess.run(argv, check=False).returncode
    exit_file.parent.mkdir(parents=True, exist_ok=True)
    files.write_atomic(exit_file, f"{code}\n", over_link=True)  # the record's own name: a link there is replaced
    return code


def _host() -> str:
    """The node's name: Slurm's when set (several slurmd may share one machine's hostname)."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def _measure(energy_dir: Path, methods: str, argv: list[str]) -> int:
    chosen = detect_power_source() if methods == "auto" else methods.split(",")
    jpwr = jpwr_command()
    host = _host()
    exit_file = energy_dir / f"exit-code-{host}.txt"
    if not chosen or jpwr is None:
        say(f"hpcai-energy: no power source or jpwr on {host}; not measuring")
        return _run_and_record(exit_file, argv)
    child = [sys.executable, "-m", "hpcai.results.energy", "--record-exit", str(exit_file), "--", *argv]
    cmd = [*jpwr, "--methods", *chosen, "--df-out", str(energy_dir / host), "--df-filetype", "csv", "--", *child]
    jpwr_rc = subprocess.run(cmd, check=False).returncode
    try:
        return int(files.read_text(exit_file, 64).strip())
    except (OSError, ValueError, files.BadFile):
        return jpwr_rc or 1


def main(args: list[str]) -> int:
    """`python -m hpcai.results.energy (--dir D --methods M | --record-exit F) -- cmd...`"""
    if "--" not in args:
        say("usage: python -m hpcai.results.energy --dir DIR --methods M -- cmd ...")
        return 2
    split = args.index("--")
    opts, argv = args[:split], args[split + 1:]
    named = dict(zip(opts[::2], opts[1::2]))
    if "--record-exit" in named:
        return _run_and_record(Path(named["--record-exit"]), argv)
    energy_dir = Path(named.get("--dir", "energy"))
    if not _is_measurer(energy_dir, _host()):
        os.execvp(argv[0], argv)  # not the node's measurer: become the payload
    return _measure(energy_dir, named.get("--methods", "auto"), argv)


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
    """Text from file names and headers as export.csv_cell writes it (a leading `=` never becomes
    a formula); real host and device names pass as is, without importing rich for them."""
    if text.isprintable() and not text.startswith(("=", "+", "-", "@")):
        return text
    from hpcai.results.export import csv_cell

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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
