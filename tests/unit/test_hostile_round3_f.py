"""Hostile corpus, round three (issue 25), part F: results and bench. A baselines file of the wrong
content, metrics that are NaN or infinite, numbers past the float range in --var, a bench report
of the wrong shape: each is one line and exit 2, or a value left out with a note, never a
traceback. Every JSON hpcai writes stays valid JSON whatever non-finite value reaches it (a
property over every producer), and `results plot` gives each payload's metric axes of its own."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from test_compare import hvd_log, make_run

from hpcai.errors import UsageError

pytestmark = pytest.mark.hostile

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
NON_FINITE = [math.nan, math.inf, -math.inf]


def one_line_error(res, *fragments: str) -> None:
    """Exit 2, exactly one line on stderr starting with `error: ` and holding every fragment."""
    assert "Traceback" not in res.stderr + res.stdout
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def strict_json(text: str):
    """json.loads that refuses NaN, Infinity and -Infinity, as every other JSON reader does."""
    def refuse(name):
        raise AssertionError(f"{name} in JSON output")
    return json.loads(text, parse_constant=refuse)


def record(root: Path, name: str, payload: str, metric: str, unit: str, value, *, nodes: int = 1,
           parser: str = "x", details: dict | None = None) -> Path:
    """A finished run whose metrics.json holds one headline metric (VALUE may be "nan", as hpcai
    writes a non-finite one)."""
    run = make_run(root, name, payload, "", nodes=nodes)
    doc = {"parser": parser, "metrics": [{"name": metric, "value": value, "unit": unit, "headline": True}],
           "details": details or {}, "warnings": []}
    (run / "metrics.json").write_text(json.dumps(doc))
    return run


def hf_nan_log() -> str:
    """HF Trainer's train_results.json as a benchmark printed it, with NaN throughput: a parse
    that yields NaN (Python's json reads NaN)."""
    doc = json.loads((LOGS / "hf_train_results.json").read_text())
    return json.dumps({**doc, "train_samples_per_second": math.nan})


# --- 1. baselines content -------------------------------------------------------------------------

REF = '[references."hvd-synthetic"]\n"*" = {{ img_per_sec_total = {ref} }}\n'
BAD_BASELINES = {
    "binary": (b"\xc4\x00\xff\xfe", "not UTF-8"),
    "deep arrays": ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper"),
    "deep inline tables": ("[references]\nx = " + "{a=" * 3000 + "1" + "}" * 3000 + "\n", "nested deeper"),
    "references is a list": ("references = [1, 2]\n", "no [references"),
    "configuration is a number": ('[references]\n"hvd-synthetic" = 3\n', 'references.hvd-synthetic'),
    "configuration is blank": ('[references."  "]\n"*" = { m = [1.0, "s"] }\n', "payload name"),
    "condition without =": ('[references."osu nodes"]\n"*" = { m = [1.0, "s"] }\n', "not key=value"),
    "condition twice": ('[references."osu nodes=1 nodes=2"]\n"*" = { m = [1.0, "s"] }\n', "nodes is given twice"),
    "system empty": ('[references."osu"]\n"" = { m = [1.0, "s"] }\n', "not empty"),
    "system is a number": ('[references."osu"]\n"*" = 5\n', 'references.osu."*"'),
    "system has no metrics": ('[references."osu"]\n"*" = {}\n', "must map metric names"),
    "reference not a list": (REF.format(ref="1000.0"), "must be [value, lower, upper, unit]"),
    "reference of three": (REF.format(ref='[1000.0, 0.1, "img/s"]'), "must be [value, lower, upper, unit]"),
    "value is text": (REF.format(ref='["1000", -0.1, 0.1, "img/s"]'), "finite number > 0"),
    "value is true": (REF.format(ref='[true, "img/s"]'), "finite number > 0"),
    "value is nan": (REF.format(ref='[nan, -0.1, 0.1, "img/s"]'), "finite number > 0"),
    "value is inf": (REF.format(ref='[inf, "img/s"]'), "finite number > 0"),
    "value is zero": (REF.format(ref='[0, -0.1, 0.1, "img/s"]'), "finite number > 0"),
    "value is negative": (REF.format(ref='[-5.0, -0.1, 0.1, "img/s"]'), "finite number > 0"),
    "lower is text": (REF.format(ref='[1000.0, "low", 0.1, "img/s"]'), "lower must be a fraction"),
    "lower is positive": (REF.format(ref='[1000.0, 0.1, 0.2, "img/s"]'), "lower must be a fraction"),
    "lower below -1": (REF.format(ref='[1000.0, -2.0, 0.2, "img/s"]'), "lower must be a fraction"),
    "lower is nan": (REF.format(ref='[1000.0, nan, 0.2, "img/s"]'), "lower must be a fraction"),
    "upper is negative": (REF.format(ref='[1000.0, -0.1, -0.2, "img/s"]'), "upper must be a fraction"),
    "upper is inf": (REF.format(ref='[1000.0, -0.1, inf, "img/s"]'), "upper must be a fraction"),
    "zero tolerance": (REF.format(ref='[1000.0, 0.0, 0.0, "img/s"]'), "both 0"),
    "unit is a number": (REF.format(ref='[1000.0, -0.1, 0.1, 5]'), "unit must be text"),
    "weights is a list": ("weights = [1]\n" + REF.format(ref='[1000.0, "img/s"]'), "weights must be a table"),
    "weight is text": (REF.format(ref='[1000.0, "img/s"]') + '[weights]\n"hvd-synthetic" = "heavy"\n',
                       "weights.hvd-synthetic"),
    "weight is negative": (REF.format(ref='[1000.0, "img/s"]') + '[weights]\n"hvd-synthetic" = -1.0\n',
                           "finite number > 0"),
    "weight is nan": (REF.format(ref='[1000.0, "img/s"]') + '[weights]\n"hvd-synthetic" = nan\n',
                      "finite number > 0"),
    "weight names no configuration": (REF.format(ref='[1000.0, "img/s"]') + '[weights]\n"osu" = 2.0\n',
                                      "no such configuration"),
    "unknown top-level key": ("extra = 1\n" + REF.format(ref='[1000.0, "img/s"]'), "unknown top-level keys"),
}


@pytest.mark.parametrize("case", sorted(BAD_BASELINES))
def test_bad_baselines_content_is_one_line_naming_the_file(tmp_path, hpcai, case):
    text, fragment = BAD_BASELINES[case]
    for i in range(2):
        make_run(tmp_path / "runs", f"r{i}", "hvd-synthetic", hvd_log(1000))
    path = tmp_path / "b.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    res = hpcai("results", "compare", str(tmp_path / "runs"), "--baseline", str(path))
    one_line_error(res, str(path), fragment)


def test_good_baselines_at_the_edges_still_load(tmp_path, hpcai):
    """lower -1 (no lower bound), upper 0, [value, unit], a weight: valid, and a verdict comes out."""
    (tmp_path / "b.toml").write_text(
        '[references."hvd-synthetic"]\n"*" = { img_per_sec_total = [900.0, -1, 0.5, "img/s"] }\n'
        '[references."osu nodes=2 ntasks_per_node=1"]\n"local:*" = { latency_8B = [2.0, -0.1, 0, "us"] }\n'
        '[weights]\n"hvd-synthetic" = 1e308\n')
    for i in range(4):
        make_run(tmp_path / "runs", f"r{i}", "hvd-synthetic", hvd_log(1000))
    res = hpcai("results", "compare", str(tmp_path / "runs"), "-b", str(tmp_path / "b.toml"), "--json")
    data = strict_json(res.stdout)
    assert res.exit_code == 0 and data["rows"][0]["verdict"] == "pass"
    assert data["score"] == pytest.approx(1000 / 900)  # a weight near the float limit: no inf / inf


# --- 2. non-finite metrics: compare and plot leave them out, with a note ---------------------------

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


# --- 2b. one payload's metric per axis --------------------------------------------------------------

FIVE = [("hvd-synthetic", "img_per_sec_total", "img/s", "horovod"), ("osu", "latency_8B", "us", "osu"),
        ("tf-resnet50", "images_per_sec", "img/s", "tf-cnn"), ("hf-clm", "samples_per_second", "samples/s", "hf"),
        ("megatron-gpt", "tflops_per_gpu", "TFLOP/s", "megatron")]


def axes_by_title(fig) -> dict[str, object]:
    return {ax.get_title(): ax for ax in fig.axes}


def test_five_payloads_get_five_axes_each_with_its_own_metric(tmp_path):
    from hpcai.results import plot
    from hpcai.results.loading import load_all

    for i, (payload, metric, unit, parser) in enumerate(FIVE):
        for rep in range(2):
            record(tmp_path, f"{payload}-{rep}", payload, metric, unit, 10.0 * (i + 1) + rep, parser=parser)
    fig = plot.auto(load_all([tmp_path]), "bars")
    by = axes_by_title(fig)
    assert sorted(by) == sorted(p for p, *_ in FIVE)
    for i, (payload, metric, unit, _) in enumerate(FIVE):
        ax = by[payload]
        assert ax.get_ylabel() == f"{metric} ({unit})"
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert labels and all(f"\n{payload} " in label for label in labels)  # only this payload's runs
        bar = next(c for c in ax.containers if c.__class__.__name__ == "BarContainer")
        assert [b.get_height() for b in bar] == pytest.approx([10.0 * (i + 1) + 0.5])


def test_a_multi_payload_sweep_gets_a_scaling_row_per_payload(tmp_path):
    """The default figure for sweeps: throughput vs nodes, once per payload, labelled with its metric."""
    from hpcai.results import plot
    from hpcai.results.loading import load_all

    for i, (payload, metric, unit, parser) in enumerate(FIVE):
        for nodes in (1, 2, 4):
            record(tmp_path, f"{payload}-{nodes}", payload, metric, unit, 100.0 * (i + 1) * nodes,
                   nodes=nodes, parser=parser)
    fig = plot.auto(load_all([tmp_path]))
    by = axes_by_title(fig)
    assert len(fig.axes) == 2 * len(FIVE)
    for i, (payload, metric, unit, _) in enumerate(FIVE):
        throughput, efficiency = by[f"{payload}: throughput"], by[f"{payload}: efficiency"]
        assert throughput.get_ylabel() == f"{metric} ({unit})"
        assert throughput.get_legend_handles_labels()[1] == [payload]  # its one series: the payload
        (series,) = throughput.containers  # an ErrorbarContainer: (data line, caps, bars)
        assert list(series.lines[0].get_ydata()) == pytest.approx([100.0 * (i + 1) * n for n in (1, 2, 4)])
        assert efficiency.get_ylabel() == "parallel efficiency" and len(efficiency.lines) == 1


def test_two_size_table_payloads_do_not_share_an_axis(tmp_path):
    from hpcai.results import plot
    from hpcai.results.loading import load_all

    rows = [{"size": 8, "oop_busbw": 1.0}, {"size": 16, "oop_busbw": 2.0}]
    for payload in ("nccl-tests", "rccl-tests"):
        record(tmp_path, payload, payload, "busbw_avg", "GB/s", 1.5, parser="nccl-tests", details={"rows": rows})
    fig = plot.auto(load_all([tmp_path]))
    assert sorted(ax.get_title() for ax in fig.axes) == ["nccl-tests: bus bandwidth vs size",
                                                         "rccl-tests: bus bandwidth vs size"]
    assert all(len(ax.lines) == 1 for ax in fig.axes)


# --- 3. --var numbers ------------------------------------------------------------------------------

HUGE = "9" * 5000


@pytest.mark.parametrize("argv, fragment", [
    (["sweep", "--dry-run", "--nodes", "1", "--var", "seq_len=1e400", "hf-clm"], "seq_len"),
    (["sweep", "--dry-run", "--nodes", "1", "--var", "epochs=1e400", "hf-clm"], "past the largest float"),
    (["sweep", "--dry-run", "--nodes", "1", "--var", "lr=nan", "hf-clm"], "NaN or infinity"),
    (["sweep", "--dry-run", "--nodes", "1", "--var", "lr=1e-4,-inf", "hf-clm"], "lr='-inf'"),
    (["sweep", "--dry-run", "--nodes", "1", "--var", "seq_len=9223372036854775808", "hf-clm"], "out of range"),
    (["sweep", "--dry-run", "--nodes", "1", "--var", f"seq_len={HUGE}", "hf-clm"], "out of range"),
    (["launch", "--dry-run", "--site", "generic-slurm", "--image", "x.sif", "hf-clm", "epochs=1e400"], "epochs"),
    (["launch", "--dry-run", "--site", "generic-slurm", "--image", "x.sif", "hf-clm", "lr=inf"], "lr"),
    (["results", "parse", "-p", "hf-clm", str(LOGS / "hf_clm_hpcai.log"), "--var", "seq_len=1e400"], "seq_len"),
    (["results", "parse", "-p", "hf-clm", str(LOGS / "hf_clm_hpcai.log"), "--var", "n_params=nan"], "n_params"),
    (["results", "parse", "-p", "hf-clm", str(LOGS / "hf_clm_hpcai.log"), "--var", "seq_len=-Infinity"],
     "seq_len"),
])
def test_numbers_past_the_float_range_are_one_line(tmp_path, monkeypatch, hpcai, argv, fragment):
    monkeypatch.chdir(tmp_path)
    res = hpcai(*argv)
    one_line_error(res, fragment)
    assert len(res.stderr) < 300  # a 5,000-digit value is shown shortened
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("text, kind, expected", [
    ("1024", int, 1024), ("-9223372036854775807", int, -(2**63 - 1)), ("0000000000000000000000012", int, 12),
    ("1e308", float, 1e308), ("5e-5", float, 5e-5), ("-0.0", float, 0.0),
])
def test_check_number_accepts_what_fits(text, kind, expected):
    from hpcai.payload_rules import check_number

    assert check_number("v", text, kind) == expected


@pytest.mark.parametrize("text, kind", [("1e400", float), ("nan", float), ("inf", float), ("-Infinity", float),
                                         ("2e308", float), (str(2**63), int), (HUGE, int), ("1e3", int),
                                         ("x", float)])
def test_check_number_refuses_what_does_not(text, kind):
    from hpcai.payload_rules import check_number

    with pytest.raises(UsageError, match=r"^v='"):
        check_number("v", text, kind)


def test_a_plan_holding_inf_facts_computes_no_tflops_and_does_not_crash(tmp_path, hpcai):
    """A record's plan is a file anyone may edit: seq_len "inf" is unknown, not an OverflowError."""
    run = make_run(tmp_path / "runs", "r0", "hf-clm", (LOGS / "hf_clm_hpcai.log").read_text(),
                   pvars={"seq_len": "inf", "n_params": "1e400"})
    res = hpcai("results", "export", "--json", str(run))
    assert res.exit_code == 0, res.stderr
    metrics = strict_json(res.stdout)[0]["metrics"]
    assert metrics and "tflops_per_gpu" not in {m["name"] for m in metrics}


# --- 4. bench report --compare / --from / --jsonl ---------------------------------------------------

GOOD_FIGURE = {"name": "a", "measured": 1.0, "target": 2.0, "unit": "s", "better": "lower"}
BAD_REPORTS = {
    "missing": (None, "cannot be read"),
    "invalid JSON": ("{x", "not valid JSON"),
    "binary": (b"\xc4\x00\xff", "not UTF-8"),
    "empty": ("", "not valid JSON"),
    "a list": ("[]", "a report is a JSON object"),
    "no figures": ("{}", "figures must be a list"),
    "figures an object": ('{"figures": {}}', "figures must be a list"),
    "figure a number": ('{"figures": [3]}', "figures[0]: a figure is a JSON object"),
    "no unit": (json.dumps({"figures": [{k: v for k, v in GOOD_FIGURE.items() if k != "unit"}]}),
                "figures[0]: figure 'a': unit must be text"),
    "string value": (json.dumps({"figures": [{**GOOD_FIGURE, "measured": "fast"}]}), "measured must be"),
    "true value": (json.dumps({"figures": [{**GOOD_FIGURE, "measured": True}]}), "measured must be"),
    "NaN value": ('{"figures": [{"name": "a", "measured": NaN, "target": 1, "unit": "s"}]}', "NaN"),
    "no target": (json.dumps({"figures": [{"name": "a", "unit": "s"}]}), "target must be a finite number"),
    "bad direction": (json.dumps({"figures": [{**GOOD_FIGURE, "better": "faster"}]}), "better must be"),
    "no name": (json.dumps({"figures": [{**GOOD_FIGURE, "name": ""}]}), "name must be text"),
    "machine a list": (json.dumps({"figures": [], "machine": []}), "machine must be"),
    "steps not objects": (json.dumps({"figures": [], "steps": [1]}), "steps[0]"),
    "deep": ('{"figures": ' + "[" * 100 + "]" * 100 + "}", "nested deeper"),
}


@pytest.fixture
def report_main():
    sys.path.insert(0, str(BENCH))
    import report

    yield report.main
    sys.path.remove(str(BENCH))


@pytest.mark.parametrize("case", sorted(BAD_REPORTS))
@pytest.mark.parametrize("option", ["--compare", "--from"])
def test_bad_bench_reports_are_one_line_exit_2(tmp_path, capsys, report_main, case, option):
    content, fragment = BAD_REPORTS[case]
    bad = tmp_path / "old.json"
    if content is not None:
        bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    good = tmp_path / "new.json"
    good.write_text(json.dumps({"figures": [GOOD_FIGURE]}))
    argv = ["--from", str(good), "--compare", str(bad)] if option == "--compare" else ["--from", str(bad)]
    assert report_main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("report.py: error: ") and str(bad) in lines[0], captured.err
    assert fragment in lines[0] and "Traceback" not in captured.err


def test_a_report_machine_of_odd_types_is_still_shown(tmp_path, capsys, report_main):
    """machine is free-form facts: a load average that is a number, not a list, is not a crash."""
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"figures": [GOOD_FIGURE], "machine": {"load_avg": 5, "cpu": 3, "git_sha": 7}}))
    assert report_main(["--from", str(path), "--compare", str(path)]) == 0
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("line, fragment", [("[1]", "line 1: a figure is a JSON object"),
                                            ('{"name": "a", "target": 1, "unit": "s", "measured": NaN}', "NaN"),
                                            ('{"name": "a", "target": "x", "unit": "s"}', "target must be")])
def test_bad_figure_lines_are_one_line_exit_2(tmp_path, capsys, report_main, line, fragment):
    jsonl = tmp_path / "f.jsonl"
    jsonl.write_text(line + "\n")
    assert report_main(["--jsonl", str(jsonl)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{jsonl}: line 1" in err[0] and fragment in err[0]
    assert report_main(["--jsonl", str(tmp_path / "none.jsonl")]) == 2
    assert "no such figures file" in capsys.readouterr().err


# --- 5. every JSON hpcai writes is valid JSON, whatever non-finite value reaches it ----------------

def _parse_json_cli(tmp_path, hpcai, bad):
    log = tmp_path / "train_results.json"
    doc = json.loads((LOGS / "hf_train_results.json").read_text())
    log.write_text(json.dumps({**doc, "train_samples_per_second": bad}))
    res = hpcai("results", "parse", "-p", "hf-clm", str(log), "--json")
    assert res.exit_code == 0, res.stderr
    return res.stdout


def _nan_runs(tmp_path, bad) -> Path:
    """Two runs with a finite headline, two whose parse yields BAD (no metrics.json), one with a
    metrics.json as hpcai writes a non-finite value ("nan")."""
    runs = tmp_path / "runs"
    for name, value in (("a", 30.0), ("b", 1.7e308)):
        record(runs, name, "hf-clm", "samples_per_second", "samples/s", value, parser="hf-trainer")
    doc = json.loads((LOGS / "hf_train_results.json").read_text())
    for name in ("c", "d"):
        make_run(runs, name, "hf-clm", json.dumps({**doc, "train_samples_per_second": bad}))
    record(runs, "e", "hf-clm", "samples_per_second", "samples/s", str(bad), parser="hf-trainer")
    return runs


def _compare_cli(tmp_path, hpcai, bad):
    res = hpcai("results", "compare", str(_nan_runs(tmp_path, bad)), "--json")
    assert res.exit_code in (0, 1) and "Traceback" not in res.stderr, res.stderr
    return res.stdout


def _export_cli(tmp_path, hpcai, bad):
    res = hpcai("results", "export", "--json", str(_nan_runs(tmp_path, bad)))
    assert res.exit_code == 0, res.stderr
    return res.stdout


def _metrics_json(tmp_path, hpcai, bad):
    from hpcai.results.runs import finalize

    run = _nan_runs(tmp_path, bad) / "c"
    finalize(run)
    return (run / "metrics.json").read_text()


def _emit_json(tmp_path, hpcai, bad):
    import io
    from contextlib import redirect_stdout

    from hpcai.output import emit_json

    buf = io.StringIO()
    with redirect_stdout(buf):
        emit_json({"value": bad, "rows": [bad, {"x": bad}]})
    return buf.getvalue()


def _parse_result(tmp_path, hpcai, bad):
    from hpcai.files import dumps
    from hpcai.results.metrics import Metric, ParseResult

    result = ParseResult("x", [Metric("m", bad, "s", headline=True)], {"rows": [{"size": 8, "busbw": bad}]})
    text = dumps(result.to_dict())
    back = ParseResult.from_dict(json.loads(text))
    assert str(back.metrics[0].value) == str(bad)  # read back as written: nan stays nan, inf inf
    return text


def _bench_figures(tmp_path, hpcai, bad):
    import os

    sys.path.insert(0, str(BENCH))
    try:
        import _report
        import report
    finally:
        sys.path.remove(str(BENCH))
    jsonl, out = tmp_path / "f.jsonl", tmp_path / "report.json"
    os.environ[_report.OUT_ENV] = str(jsonl)
    try:
        rec = _report.figure("x: a timer that divided by zero", bad, 1.0, "s")
    finally:
        del os.environ[_report.OUT_ENV]
    assert rec["status"] == _report.NOT_RUN and "not a finite number" in rec["note"]
    strict_json(jsonl.read_text())
    report.main(["--jsonl", str(jsonl), "--out", str(out)])
    return out.read_text()


def _payloads_show(tmp_path, hpcai, bad, monkeypatch=None):
    import hpcai.payloads as payloads

    class Manifest:  # a manifest whose default is NaN: TOML can write `default = nan`
        name, description, flavors, geometry, parser, synthetic = "p", "", ("*",), "single", None, False
        raw = {"vars": {"lr": {"default": bad}}}

        def benchmark_argv(self):
            return ["run", str(bad)]

    real = payloads.load_payload
    payloads.load_payload = lambda name: Manifest()
    try:
        res = hpcai("payloads", "show", "p", "--json")
    finally:
        payloads.load_payload = real
    assert res.exit_code == 0, res.stderr
    return res.stdout


PRODUCERS = {"results parse --json": _parse_json_cli, "results compare --json": _compare_cli,
             "results export --json": _export_cli, "metrics.json": _metrics_json, "emit_json": _emit_json,
             "ParseResult.to_dict": _parse_result, "bench figures and report.json": _bench_figures,
             "payloads show --json": _payloads_show}


@pytest.mark.parametrize("bad", NON_FINITE, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("producer", sorted(PRODUCERS))
def test_json_output_is_valid_json_whatever_the_value(tmp_path, hpcai, producer, bad):
    strict_json(PRODUCERS[producer](tmp_path, hpcai, bad))
