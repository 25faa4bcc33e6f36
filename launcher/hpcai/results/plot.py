"""Figures (matplotlib, Agg, imported lazily): bars with min–max error bars, scaling curves, busbw.

Each function returns the Figure so tests can inspect its series; `series_count` counts the
labelled artists (what a legend would show). `auto` picks the figure a set of records calls for:
bandwidth-vs-size when every run has a per-size table, scaling when a series spans several node
counts, bars otherwise. Whatever the figure, each payload's metric gets axes of its own, titled with
the payload and labelled with that metric and its unit: two payloads' numbers never share a y axis.
A value that is not a finite number (NaN or infinity in metrics.json or a size table) is left out
with a note, never drawn and never a crash.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from hpcai.errors import UsageError
from hpcai.results.metrics import HIGHER, measured
from hpcai.results.runs import RunRecord

SIZE_TABLE_PARSERS = {"nccl-tests": "busbw", "mpi-allreduce": "BusBW(MB/s)"}
# The largest magnitude drawn: matplotlib's axis arithmetic (margins, tick steps) overflows to inf
# near the float limit (1.8e308) and then raises; a value beyond is left out with a note, like NaN.
DRAWABLE = 1e300


def _pyplot():
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    # Labels come from records (run names, payload values): a character the font lacks made
    # matplotlib warn with that character in the line, raw, so a control character in a label
    # reached the terminal. The plot draws a box for it; the warning adds nothing.
    warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
    import matplotlib.pyplot as plt

    return plt


def series_count(fig: Any) -> int:
    return sum(len(ax.get_legend_handles_labels()[0]) for ax in fig.axes)


def bars(panels: list[tuple[str, str, list[tuple[str, list[float]]]]]) -> Any:
    """One axis per (title, ylabel, groups) panel: a payload's headline never shares an axis with
    another's. One bar per group at its mean, error bars from min to max."""
    plt = _pyplot()
    width = max(4, 1.2 * max(len(groups) for _, _, groups in panels) + 2)
    fig, axes = plt.subplots(1, len(panels), figsize=(width * len(panels), 4), squeeze=False)
    for ax, (title, ylabel, groups) in zip(axes[0], panels):
        labels = [g for g, _ in groups]
        means = [sum(v) / len(v) for _, v in groups]
        # max(0, …): the mean of equal values can round past them ([0.7] * 3 -> 0.6999…), and
        # matplotlib refuses a negative error bar
        lo = [max(0.0, m - min(v)) for m, (_, v) in zip(means, groups)]
        hi = [max(0.0, max(v) - m) for m, (_, v) in zip(means, groups)]
        ax.bar(range(len(groups)), means, yerr=[lo, hi], capsize=4, label=ylabel)
        ax.set_xticks(range(len(groups)), labels, rotation=20, ha="right")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    return fig


def scaling(panels: list[tuple[str, list[Any]]]) -> Any:
    """One row per (title, scaling table) panel, a payload's metric each: throughput vs nodes (left,
    labelled with the panel's metric and unit) and parallel efficiency (right), one line each per
    series of the panel."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(panels), 2, figsize=(10, 4 * len(panels)), squeeze=False)
    for (ax_t, ax_e), (title, table) in zip(axes, panels):
        for series in dict.fromkeys(p.series for p in table):
            pts = [p for p in table if p.series == series]
            xs = [p.nodes for p in pts]
            ax_t.errorbar(xs, [p.mean for p in pts], yerr=[[max(0.0, p.mean - p.min) for p in pts],  # see bars
                                                           [max(0.0, p.max - p.mean) for p in pts]],
                          marker="o", capsize=3, label=series)
            effs = [(p.nodes, p.efficiency) for p in pts if p.efficiency is not None]
            if effs:
                ax_e.plot([x for x, _ in effs], [e for _, e in effs], marker="s", label=series)
        kind = "throughput" if table[0].better == HIGHER else "time to solution"
        ax_t.set(xlabel="nodes", ylabel=f"{table[0].metric} ({table[0].unit})", title=f"{title}: {kind}")
        ax_e.set(xlabel="nodes", ylabel="parallel efficiency", title=f"{title}: efficiency", ylim=(0, 1.2))
        nodes = sorted({p.nodes for p in table})
        for ax in (ax_t, ax_e):
            ax.set_xscale("log", base=2)
            ax.set_xticks(nodes, [str(n) for n in nodes])  # label the node counts that ran, not powers of 2
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def busbw_vs_size(panels: list[tuple[str, str, list[tuple[str, list[tuple[float, float]]]]]]) -> Any:
    """One axis per (payload, unit, runs) panel: bus bandwidth vs message size, one line of
    (size, busbw) points per run (a payload's runs overlaid)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 4), squeeze=False)
    for ax, (payload, unit, runs) in zip(axes[0], panels):
        for label, points in runs:
            ax.plot([x for x, _ in points], [y for _, y in points], marker=".", label=label)
        ax.set_xscale("log", base=2)
        ax.set(xlabel="message size (B)", ylabel=f"bus bandwidth ({unit})", title=f"{payload}: bus bandwidth vs size")
        ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def _label(rec: RunRecord) -> str:
    return f"{rec.path.name} ({rec.system}, {rec.nodes}n)"


def _drawable(x: Any) -> bool:
    """A number that can be drawn: int or float (not a boolean), finite and within DRAWABLE."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and abs(x) <= DRAWABLE


def _size_points(rec: RunRecord, column: str, notes: list[str]) -> list[tuple[float, float]]:
    """(size, busbw) of each row of a run's size table with a positive finite size and a finite
    bandwidth, out-of-place first as the busbw_max_size metric reads it; other rows left out with a note."""
    rows = rec.result.details.get("rows")
    if not isinstance(rows, list):
        notes.append(f"{rec.path.name}: no per-size table (details.rows) to plot; left out")
        return []
    points = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        ys = [row.get(f"oop_{column}"), row.get(f"ip_{column}"), row.get(column)]
        y = next((v for v in ys if _drawable(v)), None)
        if _drawable(row.get("size")) and row["size"] > 0 and y is not None:
            points.append((row["size"], y))
    if not rows:
        notes.append(f"{rec.path.name}: its per-size table is empty; left out")
    elif len(points) < len(rows):
        notes.append(f"{rec.path.name}: {len(rows) - len(points)} of {len(rows)} size rows without a positive size "
                     "and a finite bandwidth (NaN, infinity, text, past 1e300) left out")
    return points


def _measured(records: list[RunRecord], notes: list[str]) -> list[RunRecord]:
    """The successful runs whose headline metric is a finite number; each other one named in NOTES."""
    keep = []
    for r in records:
        head = r.result.headline
        if measured(head) and _drawable(head.value):
            keep.append(r)
        elif head is not None:
            why = "not a finite number" if not measured(head) else f"beyond ±{DRAWABLE:g}, which cannot be drawn"
            notes.append(f"{r.path.name}: {head.name} is {head.value} ({why}); left out")
    if not keep:
        left = len(records) - len(keep)
        raise UsageError("nothing to plot: no run with a finite headline metric among the given records"
                         + (f" ({left} NaN, infinite or past ±{DRAWABLE:g})" if left else ""))
    return keep


def _per_metric(records: list[RunRecord]) -> dict[tuple[str, str], list[RunRecord]]:
    """Records by (payload, "metric (unit)"): what may share an axis."""
    groups: dict[tuple[str, str], list[RunRecord]] = {}
    for r in records:
        head = r.result.headline
        groups.setdefault((r.payload, f"{head.name} ({head.unit})"), []).append(r)
    return groups


def auto(records: list[RunRecord], kind: str = "auto", notes: list[str] | None = None) -> Any:
    """The figure for RECORDS (kind: auto, bars, scaling or busbw). NOTES, when given, receives one
    line per run or value left out (not a finite number, no size table)."""
    from hpcai.results.compare import config_key
    from hpcai.results.sweep import aggregate

    notes = [] if notes is None else notes
    ok = [r for r in records if r.succeeded and r.result]
    if not ok:
        raise UsageError("nothing to plot: no run with metrics among the given records")
    parsers = {r.result.parser for r in ok}
    if kind in ("auto", "busbw") and len(parsers) == 1 and parsers <= set(SIZE_TABLE_PARSERS):
        parser = parsers.pop()
        unit = "GB/s" if parser == "nccl-tests" else "MB/s"
        by_payload: dict[str, list[tuple[str, list[tuple[float, float]]]]] = {}
        for r in ok:
            points = _size_points(r, SIZE_TABLE_PARSERS[parser], notes)
            if points:
                by_payload.setdefault(r.payload, []).append((_label(r), points))
        if not by_payload:
            raise UsageError("nothing to plot: no run has a size table with finite bandwidths")
        return busbw_vs_size([(payload, unit, runs) for payload, runs in by_payload.items()])
    if kind == "busbw":
        raise UsageError("--kind busbw needs nccl-tests/rccl-tests or mpi-allreduce runs")
    groups = _per_metric(_measured(ok, notes))
    tables = {key: aggregate(group) for key, group in groups.items()}
    if kind == "scaling" or (kind == "auto" and any(
            len({p.nodes for p in table if p.series == s}) > 1 for table in tables.values()
            for s in {p.series for p in table})):
        return scaling([(payload, table) for (payload, _), table in tables.items()])
    panels = []
    for (payload, ylabel), group in groups.items():
        bars_of: dict[str, list[float]] = {}
        for r in group:
            bars_of.setdefault(f"{r.system}\n{config_key(r)}", []).append(r.result.headline.value)
        panels.append((payload, ylabel, list(bars_of.items())))
    return bars(panels)


def save(fig: Any, path: Path) -> None:
    """Write FIG to PATH (-o) with hpcai.files.write_atomic: drawn in memory first, so a link at
    PATH is refused in one line rather than written through (savefig would follow it), and a
    failed draw or write leaves no half a file."""
    import io

    from hpcai import files

    suffix = path.suffix.lower()
    if suffix not in (".png", ".svg", ".pdf"):
        raise UsageError(f"plot output must end in .png, .svg or .pdf, got {path.name!r}")
    files.refuse_link(path, "-o")  # before drawing: the answer does not depend on the figure
    buf = io.BytesIO()
    fig.savefig(buf, format=suffix[1:], dpi=120)
    files.write_atomic(path, buf.getvalue(), None, "-o")  # mode: as open() would (a figure is shared)


def history_figure(payload: str, points: list, marked: dict[str, set[int]] | None = None) -> Any:
    """A payload's series over time (hpcai results history, the report): one axis per metric,
    labelled with its unit, runs in order on x; a dashed line where the image digest changed;
    MARKED (metric -> indices of points) drawn as red crosses: the report's regressions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(n for p in points for n in p.values))
    if not names:
        raise UsageError(f"nothing to plot: no metric among the runs of {payload}")
    fig, axes = plt.subplots(len(names), 1, figsize=(9, 2.8 * len(names)), squeeze=False)
    xs = list(range(len(points)))
    changes = [i for i in xs[1:] if points[i].image_digest != points[i - 1].image_digest]
    for ax, name in zip(axes[:, 0], names):
        unit = next(p.units[name] for p in points if name in p.units)
        got = [(x, p.values.get(name)) for x, p in zip(xs, points)]
        got = [(x, v) for x, v in got if v is not None and math.isfinite(v)]
        ax.plot([x for x, _ in got], [v for _, v in got], marker="o")
        bad = [(x, v) for x, v in got if x in (marked or {}).get(name, set())]
        if bad:
            ax.plot([x for x, _ in bad], [v for _, v in bad], "x", color="red", markersize=10, label="regression")
            ax.legend(fontsize=7)
        for x in changes:
            ax.axvline(x - 0.5, linestyle="--", color="grey", linewidth=1)
        ax.set_ylabel(f"{name} ({unit})" if unit else name)
        ax.set_title(f"{payload}: {name}", fontsize=9)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xticks(xs, [p.started[:16] or p.name for p in points], rotation=30, ha="right", fontsize=7)
    axes[-1, 0].set_xlabel("run (started); dashed: a new image digest")
    fig.tight_layout()
    return fig
