"""Metrics that are NaN or infinite (hostile corpus, round three, issue 25): `results
compare` and `results plot` leave them out with a note, never a traceback; nothing but non-finite
values is nothing to plot; a size table with NaN, text and missing cells is drawn without them, and
equal values or values near the float limit still draw."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from error_checks import one_line_error, strict_json
from run_records import make_run, record

pytestmark = pytest.mark.hostile

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def hf_nan_log() -> str:
    """HF Trainer's train_results.json as a benchmark printed it, with NaN throughput: a parse
    that yields NaN (Python's json reads NaN)."""
    doc = json.loads((LOGS / "hf_train_results.json").read_text())
    return json.dumps({**doc, "train_samples_per_second": math.nan})


def test_a_parse_yielding_nan_is_left_out_of_compare_and_plot_with_a_note(tmp_path, hpcai):
    from hpcai.results import plot
    from hpcai.results.loading import load_all

    runs = tmp_path / "runs"
    make_run(runs, "nan", "hf-clm", hf_nan_log())  # parsed in memory: no metrics.json
    for name, value in (("a", 30.0), ("b", 40.0)):
        record(runs, name, "hf-clm", "samples_per_second", "samples/s", value, parser="hf-trainer")
    res = hpcai("results", "compare", str(runs), "--json")
    row = strict_json(res.stdout)["rows"][0]
    assert (row["n"], row["mean"], row["min"], row["max"]) == (2, 35.0, 30.0, 40.0)
    assert "note:" in res.stderr and "not a finite number" in res.stderr
    notes: list[str] = []
    fig = plot.auto(load_all([runs]), notes=notes)
    bar = next(c for c in fig.axes[0].containers if c.__class__.__name__ == "BarContainer")
    assert [b.get_height() for b in bar] == pytest.approx([35.0])
    assert len(notes) == 1 and notes[0].startswith("nan: samples_per_second is nan")
    out = hpcai("results", "plot", str(runs), "-o", str(tmp_path / "p.png"))
    assert out.exit_code == 0 and "note: nan: samples_per_second is nan" in out.stderr, out.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_only_non_finite_values_is_nothing_to_plot(tmp_path, hpcai, value):
    record(tmp_path / "runs", "a", "hvd-synthetic", "img_per_sec_total", "img/s", value)
    res = hpcai("results", "plot", str(tmp_path / "runs"), "-o", str(tmp_path / "p.png"))
    one_line_error(res, "nothing to plot", "(1 NaN, infinite or past")
    assert not (tmp_path / "p.png").exists()


def test_size_table_with_nan_text_and_missing_cells_is_drawn_without_them(tmp_path, hpcai):
    runs = tmp_path / "runs"
    rows = [{"size": 8, "oop_busbw": None}, {"size": 16, "oop_busbw": 5.0}, {"size": "x", "oop_busbw": 3.0},
            {"size": 32}, 7, {"size": 64, "oop_busbw": "fast", "ip_busbw": 6.0}, {"size": 0, "oop_busbw": 1.0}]
    record(runs, "a", "nccl-tests", "busbw_avg", "GB/s", 1.0, parser="nccl-tests", details={"rows": rows})
    record(runs, "b", "nccl-tests", "busbw_avg", "GB/s", 1.0, parser="nccl-tests", details={})
    record(runs, "c", "nccl-tests", "busbw_avg", "GB/s", 1.0, parser="nccl-tests", details={"rows": "x"})
    res = hpcai("results", "plot", str(runs), "-o", str(tmp_path / "p.png"))
    assert res.exit_code == 0 and "Traceback" not in res.stderr, res.stderr
    assert "note: a: 5 of 7 size rows" in res.stderr and "note: b: no per-size table" in res.stderr
    from hpcai.results import plot
    from hpcai.results.loading import load_all

    fig = plot.auto(load_all([runs]), notes=[])
    (line,) = fig.axes[0].lines
    assert list(line.get_xdata()) == [16, 64] and list(line.get_ydata()) == [5.0, 6.0]


@pytest.mark.parametrize("kind", ["bars", "scaling"])
def test_equal_values_and_values_near_the_float_limit_draw(tmp_path, hpcai, kind):
    """The mean of [0.7] * 3 rounds below 0.7 (a negative error bar, which matplotlib refuses);
    1.7e308 overflows matplotlib's axis arithmetic: drawn without it, with a note."""
    runs = tmp_path / "runs"
    for nodes, value in ((1, 0.7), (2, 3.3)):
        for rep in range(3):
            record(runs, f"n{nodes}-{rep}", "hvd-synthetic", "img_per_sec_total", "img/s", value, nodes=nodes)
    record(runs, "huge", "hvd-synthetic", "img_per_sec_total", "img/s", 1.7e308, nodes=2)
    res = hpcai("results", "plot", str(runs), "-o", str(tmp_path / "p.png"), "--kind", kind)
    assert res.exit_code == 0, res.stderr
    assert "note: huge: img_per_sec_total is 1.7e+308 (beyond ±1e+300" in res.stderr
