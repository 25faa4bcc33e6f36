"""`results compare B --against A` (issue 30, item 2): each figure's ratio with a bootstrap interval
(scipy), a change called only when the interval lies beyond the tolerance, and "too few repeats"
when it cannot be told; then the CLI on real record folders."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from run_records import record

from hpcai.results.metrics import HIGHER, LOWER
from hpcai.results.significance import (IMPROVEMENT, REGRESSION, SAME, TOO_FEW, UNDECIDED, compare_samples,
                                        verdict)

STEADY = [100.0, 101.0, 99.0, 100.5, 99.5]


def test_a_clear_loss_is_a_regression():
    change = compare_samples(STEADY, [v * 0.8 for v in STEADY], HIGHER)
    assert change.verdict == REGRESSION and change.ratio == pytest.approx(0.8)
    assert change.low < 0.8 < change.high < 0.95 and change.p_value < 0.05


def test_overlapping_noise_is_undecided_not_a_regression():
    """The make bench case: medians 0.9x apart, but both sides spread over the same range."""
    a = [100.0, 130.0, 75.0, 118.0, 84.0]
    b = [90.0, 120.0, 70.0, 110.0, 80.0]
    change = compare_samples(a, b, HIGHER)
    assert change.verdict == UNDECIDED and change.low < 0.95 < change.high
    assert change.p_value > 0.05


def test_a_tight_match_is_the_same():
    assert compare_samples(STEADY, [v * 1.01 for v in STEADY], HIGHER).verdict == SAME


def test_lower_is_better_turns_the_verdict_round():
    latency = [5.0, 5.1, 4.9, 5.05]
    assert compare_samples(latency, [v * 1.2 for v in latency], LOWER).verdict == REGRESSION
    assert compare_samples(latency, [v * 0.8 for v in latency], LOWER).verdict == IMPROVEMENT


def test_too_few_repeats_are_said_and_never_judged():
    change = compare_samples([100.0, 101.0], [50.0, 51.0, 52.0], HIGHER)
    assert change.verdict == TOO_FEW and change.low is None and change.ratio == pytest.approx(51 / 100.5)
    assert compare_samples([1.0, float("nan"), 2.0], STEADY).n_a == 2  # NaN is no repeat


def test_the_same_records_give_the_same_interval():
    a, b = [100.0, 130.0, 75.0, 118.0], [90.0, 120.0, 70.0, 110.0]
    assert compare_samples(a, b) == compare_samples(a, b)  # a fixed seed


@pytest.mark.parametrize("low, high, better, expected", [
    (0.80, 0.90, HIGHER, REGRESSION), (1.10, 1.20, HIGHER, IMPROVEMENT), (0.97, 1.04, HIGHER, SAME),
    (0.90, 1.02, HIGHER, UNDECIDED), (1.10, 1.20, LOWER, REGRESSION), (0.80, 0.90, LOWER, IMPROVEMENT)])
def test_verdicts(low, high, better, expected):
    assert verdict(low, high, better, 0.05) == expected


def folder(root, values, payload="ddp-bench"):
    for i, v in enumerate(values):
        record(root, f"r{i}", payload, "examples_per_sec", "ex/s", v)
    return root


def hpcai(*args):
    return subprocess.run([sys.executable, "-m", "hpcai", *args], capture_output=True, text=True)


def test_the_cli_calls_a_regression_exit_1_and_noise_exit_0(tmp_path):
    before = folder(tmp_path / "before", STEADY)
    after = folder(tmp_path / "after", [v * 0.8 for v in STEADY])
    res = hpcai("results", "compare", str(after), "--against", str(before), "--json")
    assert res.returncode == 1, res.stderr
    [row] = json.loads(res.stdout)["rows"]
    assert row["verdict"] == REGRESSION and row["config"].startswith("ddp-bench nodes=1")
    assert row["n_a"] == row["n_b"] == 5 and row["ratio"] == pytest.approx(0.8)
    same = folder(tmp_path / "again", [v * 1.01 for v in STEADY])
    res = hpcai("results", "compare", str(same), "--against", str(before))
    assert res.returncode == 0 and "same" in res.stdout and "95 % interval" in res.stdout


def test_the_cli_refuses_what_it_cannot_compare(tmp_path):
    a = folder(tmp_path / "a", STEADY)
    b = folder(tmp_path / "b", STEADY, payload="osu")
    res = hpcai("results", "compare", str(b), "--against", str(a))
    assert res.returncode == 2 and res.stderr.splitlines()[-1] == \
        "error: no configuration and metric measured on both sides: nothing to compare"
    assert "note: only in A: ddp-bench" in res.stderr
    res = hpcai("results", "compare", str(b), "--against", str(a), "-b", str(tmp_path / "x.toml"))
    assert res.returncode == 2 and res.stderr.startswith("error: --against compares runs with runs")
