"""Run facts that must be positive (hostile corpus, round three, issue 25): lengths, counts,
sizes and GPUs are refused at 0 or below (and when not finite), and a figure past the float range
is left out with a note, never `inf`. A property over every fact the derived figures compute
with."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from error_checks import one_line_error, strict_json

from hpcai.errors import UsageError

pytestmark = pytest.mark.hostile

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


HF_LOG = str(LOGS / "hf_clm_hpcai.log")
MEGATRON_LOG = str(LOGS / "megatron_caraml.log")
NOT_POSITIVE = ["0", "-1", "-1e9", "-0.0"]
NOT_FINITE = ["nan", "inf", "-inf"]


def _facts() -> list[str]:
    from hpcai.results.tflops import POSITIVE

    return sorted(POSITIVE)


def _parse(hpcai, name: str, value: str):
    """`results parse` of an HF log (a Megatron one for the Megatron facts) given NAME=VALUE."""
    log, payload = (MEGATRON_LOG, "megatron") if name in ("global_batch_size", "micro_batch_size",
                                                          "seq_length") else (HF_LOG, "hf-clm")
    fact = ["--gpus", value] if name == "gpus" else ["--var", f"{name}={value}"]
    return hpcai("results", "parse", "-p", payload, log, "--json", *fact)


def test_every_positive_fact_refuses_zero_negative_and_non_finite_values(hpcai):
    """A property over every fact the derived figures compute with × {0, -1, -1e9, -0.0, nan, inf}:
    one line naming it, exit 2. (--gpus is typer's int: nan and inf are not integers there either.)"""
    assert {"n_params", "seq_len", "gpus", "global_batch_size"} <= set(_facts())
    for name in _facts():
        for value in NOT_POSITIVE + NOT_FINITE:
            if name == "gpus" and value not in ("0", "-1"):
                continue  # typer refuses what is no integer before hpcai sees it
            res = _parse(hpcai, name, value)
            assert res.exit_code == 2 and "Traceback" not in res.stderr, (name, value, res.stderr)
            assert name in res.stderr or (name == "gpus" and "--gpus" in res.stderr), (name, value, res.stderr)
            assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_every_positive_fact_near_the_float_limit_is_refused_or_left_out_with_a_note(hpcai):
    """1e308: an integer fact is no integer of 64 bits (refused); n_params is a finite number, and
    the figure 6·N·D past the float range is left out with a warning, never `inf`."""
    for name in _facts():
        if name == "gpus":
            continue
        res = _parse(hpcai, name, "1e308")
        if res.exit_code == 2:
            assert name in res.stderr and len(res.stderr.strip().splitlines()) == 1
            continue
        assert res.exit_code == 0, res.stderr
        doc = strict_json(res.stdout)
        assert all(math.isfinite(m["value"]) and m["value"] >= 0 for m in doc["metrics"]
                   if m["name"] in ("tflops_per_gpu", "tokens_per_second")), doc["metrics"]
        if name == "n_params":
            assert "tflops_per_gpu" not in {m["name"] for m in doc["metrics"]}
            assert any("past the largest float" in w for w in doc["warnings"])


def test_the_reviewers_cases(hpcai):
    for argv, fragment in [(["--var", "seq_len=-5", "--var", "n_params=124e6"], "seq_len='-5'"),
                           (["--var", "n_params=-1e9"], "n_params='-1e9'"),
                           (["--var", "seq_len=1e308"], "seq_len='1e308'"),
                           (["--gpus", "-4"], "--gpus='-4'")]:
        one_line_error(hpcai("results", "parse", "-p", "hf-clm", HF_LOG, "--json", *argv), fragment)
    good = hpcai("results", "parse", "-p", "hf-clm", HF_LOG, "--json", "--var", "seq_len=1024", "--gpus", "2")
    tflops = next(m for m in strict_json(good.stdout)["metrics"] if m["name"] == "tflops_per_gpu")
    assert tflops["value"] > 0


@pytest.mark.parametrize("value", ["0", "-5", "-1e9", "nan", "inf", "1e308"])
def test_a_records_facts_that_are_not_positive_give_no_figure(value):
    """A record's plan is not checked by the CLI: there a fact of 0 or less (or not finite) is
    unknown, and a figure past the float range is left out, each with a warning."""
    from hpcai.results import tflops
    from hpcai.results.metrics import HIGHER, Metric, ParseResult

    for fact in ("n_params", "seq_len"):
        result = ParseResult("hf-trainer", [Metric("train_samples_per_second", 40.0, "samples/s", HIGHER)], {})
        pvars = {"n_params": "124e6", "seq_len": "1024", fact: value}
        tflops.add_to_result(result, {"payload_vars": pvars, "nodes": 1, "gpus_per_node": 1})
        figure = result.get("tflops_per_gpu")
        if fact == "seq_len" and value == "1e308" or fact == "n_params" and value == "1e308":
            assert figure is None or math.isfinite(figure.value)
        else:
            assert figure is None, (fact, value)
        assert figure is not None or result.warnings


def test_megatron_tokens_past_the_float_range_are_left_out():
    from hpcai.results import tflops
    from hpcai.results.metrics import LOWER, Metric, ParseResult

    result = ParseResult("megatron", [Metric("time_per_iteration", 1e-300, "s", LOWER)], {})
    tflops.add_megatron_tokens(result, {"seq_len": "1e300", "global_batch_size": "1e300"})
    assert result.get("tokens_per_second") is None and "past the largest float" in result.warnings[-1]


@pytest.mark.parametrize("text, kind, above, ok", [
    ("1", int, 0, True), ("0", int, 0, False), ("-1", int, 0, False), ("5", int, 4, True), ("4", int, 4, False),
    ("0.5", float, 0, True), ("0", float, 0, False), ("-0.0", float, 0, False), ("1e-300", float, 0, True),
    ("-3", int, None, True),
])
def test_check_number_lower_bound(text, kind, above, ok):
    from hpcai.payload_rules import check_number

    if ok:
        assert check_number("v", text, kind, above=above) == kind(float(text))
    else:
        with pytest.raises(UsageError, match=r"^v='.*': expected (a whole number from|a number above)"):
            check_number("v", text, kind, above=above)
