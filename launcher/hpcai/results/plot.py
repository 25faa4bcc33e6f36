"""Figures (matplotlib, Agg, imported lazily): bars with min–max error bars, scaling curves, busbw.

Each function returns the Figure so tests can inspect its series; `series_count` counts the
labelled artists (what a legend would show). `auto` picks the figure a set of records calls for:
bandwidth-vs-size when every run has a per-size table, scaling when a series spans several node
counts, bars otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcai.errors import UsageError
from hpcai.results.runs import RunRecord

SIZE_TABLE_PARSERS = {"nccl-tests": "busbw", "mpi-allreduce": "BusBW(MB/s)"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
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
        lo = [m - min(v) for m, (_, v) in zip(means, groups)]
        hi = [max(v) - m for m, (_, v) in zip(means, groups)]
        ax.bar(range(len(groups)), means, yerr=[lo, hi], capsize=4, label=ylabel)
        ax.set_xticks(range(len(groups)), labels, rotation=20, ha="right")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    return fig


def scaling(table: list[Any]) -> Any:
    """Throughput vs nodes (left) and parallel efficiency (right), one line each per series."""
    plt = _pyplot()
    fig, (ax_t, ax_e) = plt.subplots(1, 2, figsize=(10, 4))
    for series in dict.fromkeys(p.series for p in table):
        pts = [p for p in table if p.series == series]
        xs = [p.nodes for p in pts]
        ax_t.errorbar(xs, [p.mean for p in pts], yerr=[[p.mean - p.min for p in pts], [p.max - p.mean for p in pts]],
                      marker="o", capsize=3, label=series)
        effs = [(p.nodes, p.efficiency) for p in pts if p.efficiency is not None]
        if effs:
            ax_e.plot([x for x, _ in effs], [e for _, e in effs], marker="s", label=series)
    unit = table[0].unit if table else ""
    ax_t.set(xlabel="nodes", ylabel=f"{table[0].metric if table else ''} ({unit})", title="throughput")
    ax_e.set(xlabel="nodes", ylabel="parallel efficiency", title="efficiency", ylim=(0, 1.2))
    nodes = sorted({p.nodes for p in table})
    for ax in (ax_t, ax_e):
        ax.set_xscale("log", base=2)
        ax.set_xticks(nodes, [str(n) for n in nodes])  # label the node counts that ran, not powers of 2
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def busbw_vs_size(runs: list[tuple[str, list[dict], str]], unit: str) -> Any:
    """Bus bandwidth vs message size, one line per run (several runs overlaid)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, rows, column in runs:
        xs = [r["size"] for r in rows]
        # out-of-place first, as the busbw_max_size metric reads it
        ys = [next(v for v in (r.get(f"oop_{column}"), r.get(f"ip_{column}"), r.get(column)) if v is not None)
              for r in rows]
        ax.plot(xs, ys, marker=".", label=label)
    ax.set_xscale("log", base=2)
    ax.set(xlabel="message size (B)", ylabel=f"bus bandwidth ({unit})", title="bus bandwidth vs size")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def _label(rec: RunRecord) -> str:
    return f"{rec.path.name} ({rec.system}, {rec.nodes}n)"


def auto(records: list[RunRecord], kind: str = "auto") -> Any:
    from hpcai.results.compare import config_key
    from hpcai.results.sweep import aggregate

    ok = [r for r in records if r.succeeded and r.result]
    if not ok:
        raise UsageError("nothing to plot: no run with metrics among the given records")
    parsers = {r.result.parser for r in ok}
    if kind in ("auto", "busbw") and len(parsers) == 1 and parsers <= set(SIZE_TABLE_PARSERS):
        parser = parsers.pop()
        unit = "GB/s" if parser == "nccl-tests" else "MB/s"
        return busbw_vs_size([(_label(r), r.result.details["rows"], SIZE_TABLE_PARSERS[parser]) for r in ok], unit)
    if kind == "busbw":
        raise UsageError("--kind busbw needs nccl-tests/rccl-tests or mpi-allreduce runs")
    table = aggregate(ok)
    if kind == "scaling" or (kind == "auto" and any(
            len({p.nodes for p in table if p.series == s}) > 1 for s in {p.series for p in table})):
        return scaling(table)
    panels: dict[tuple[str, str], dict[str, list[float]]] = {}
    for r in ok:
        head = r.result.headline
        groups = panels.setdefault((r.payload, f"{head.name} ({head.unit})"), {})
        groups.setdefault(f"{r.system}\n{config_key(r)}", []).append(head.value)
    return bars([(payload, ylabel, list(groups.items())) for (payload, ylabel), groups in panels.items()])


def save(fig: Any, path: Path) -> None:
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise UsageError(f"plot output must end in .png, .svg or .pdf, got {path.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
