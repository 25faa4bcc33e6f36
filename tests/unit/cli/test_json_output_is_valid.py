"""Every JSON hpcai writes stays valid JSON whatever non-finite value reaches it (hostile
corpus, round three, issue 25): a property over every producer (`results parse/compare/export
--json`, metrics.json, emit_json, ParseResult.to_dict, the bench figures and report.json,
`payloads show --json`), each given NaN, inf and -inf."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from error_checks import strict_json
from run_records import make_run, record

pytestmark = pytest.mark.hostile

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
BENCH = Path(__file__).resolve().parents[3] / "benchmarks"
NON_FINITE = [math.nan, math.inf, -math.inf]


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
