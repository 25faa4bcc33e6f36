"""Plots: the Figure's series are inspected (not only the file): bars, scaling, busbw overlay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcai.errors import UsageError
from hpcai.results import plot
from hpcai.results.loading import load_all

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def make_run(root: Path, name: str, payload: str, log: str, nodes: int = 1, pvars=None) -> Path:
    run = root / name
    (run / "logs").mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps({"payload": payload, "site": "local", "partition": "debug",
                                               "nodes": nodes, "ntasks_per_node": 1, "payload_vars": pvars or {}}))
    (run / "status.json").write_text(json.dumps({"state": "completed"}))
    (run / "logs" / "rank-0.out").write_text(log)
    return run


def hvd(total: float) -> str:
    return f"Total img/sec on 4 GPU(s): {total} +-4.0\n"


def test_busbw_overlay_one_line_per_run(tmp_path):
    nccl = (LOGS / "nccl_allreduce_2.21.log").read_text()
    for i in range(3):
        make_run(tmp_path, f"n{i}", "nccl-tests", nccl)
    fig = plot.auto(load_all([tmp_path]))
    assert plot.series_count(fig) == 3
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and len(ax.lines[0].get_xdata()) == 6
    assert max(ax.lines[0].get_ydata()) == pytest.approx(175.73)  # out-of-place, as busbw_max_size
    out = tmp_path / "busbw.png"
    plot.save(fig, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bars_with_min_max_error_bars(tmp_path):
    for i, v in enumerate([100, 110, 120]):
        make_run(tmp_path, f"a{i}", "hvd-synthetic", hvd(v), pvars={"batch_size": "32"})
    make_run(tmp_path, "b0", "hvd-synthetic", hvd(200), pvars={"batch_size": "64"})
    fig = plot.auto(load_all([tmp_path]))
    ax = fig.axes[0]
    bars = next(c for c in ax.containers if c.__class__.__name__ == "BarContainer")
    assert plot.series_count(fig) == 1 and len(bars) == 2
    assert sorted(b.get_height() for b in bars) == pytest.approx([110, 200])
    err = next(c for c in ax.containers if c.__class__.__name__ == "ErrorbarContainer")
    segments = err.lines[2][0].get_segments()
    assert sorted((s[0][1], s[1][1]) for s in segments) == [(100, 120), (200, 200)]


def test_mixed_payloads_get_an_axis_each(tmp_path):
    make_run(tmp_path, "h0", "hvd-synthetic", hvd(100))
    make_run(tmp_path, "h1", "hvd-synthetic", hvd(120))
    make_run(tmp_path, "t0", "tf-resnet50", (LOGS / "tf_cnn.log").read_text())
    fig = plot.auto(load_all([tmp_path]))
    assert [ax.get_title() for ax in fig.axes] == ["hvd-synthetic", "tf-resnet50"]
    assert [ax.get_ylabel() for ax in fig.axes] == ["img_per_sec_total (img/s)", "images_per_sec (img/s)"]
    heights = [[b.get_height() for b in next(c for c in ax.containers if c.__class__.__name__ == "BarContainer")]
               for ax in fig.axes]
    assert heights == [pytest.approx([110]), pytest.approx([2314.98])]


def test_scaling_curves_throughput_and_efficiency(tmp_path):
    for n, v in [(1, 100), (2, 190), (4, 360)]:
        make_run(tmp_path, f"s{n}", "hvd-synthetic", hvd(v), nodes=n)
    fig = plot.auto(load_all([tmp_path]))
    assert plot.series_count(fig) == 2  # throughput line + efficiency line for one series
    eff = fig.axes[1].lines[0].get_ydata()
    assert list(eff) == pytest.approx([1.0, 0.95, 0.9])


def test_nothing_to_plot_and_bad_suffix(tmp_path, hpcai):
    make_run(tmp_path, "x", "hvd-synthetic", "crashed\n")
    with pytest.raises(UsageError, match="nothing to plot"):
        plot.auto(load_all([tmp_path]))
    r = hpcai("results", "plot", str(tmp_path), "-o", str(tmp_path / "p.png"), "--kind", "pie")
    assert r.exit_code == 2 and "unknown plot kind 'pie'; valid: auto, bars, busbw, scaling" in r.stderr


def test_cli_plot_writes_png(tmp_path, hpcai):
    for i in range(2):
        make_run(tmp_path / "runs", f"n{i}", "nccl-tests", (LOGS / "nccl_old_noroot.log").read_text())
    r = hpcai("results", "plot", str(tmp_path / "runs"), "-o", str(tmp_path / "out.png"))
    assert r.exit_code == 0, r.stderr
    assert "(2 series)" in r.stderr and (tmp_path / "out.png").stat().st_size > 1000
