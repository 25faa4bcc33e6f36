"""Figures judged by a confidence interval (benchmarks/_report.py) and the interleaved repeats
until each is decided (benchmarks/_repeats.py, container_parity.py's loop): `make bench`'s parity
rows on the method of `hpcai results compare` (issue 30, item 2). The loop runs here on seeded
random draws in place of the cluster runs, which need the Slurm test cluster and an image
(`make bench` runs them for real)."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import _repeats  # noqa: E402
import _report  # noqa: E402
import container_parity  # noqa: E402


@pytest.mark.parametrize("interval,better,status", [
    ((0.98, 1.04), "higher", "PASS"), ((0.90, 0.96), "higher", "FAIL"), ((0.95, 1.01), "higher", "undecided"),
    ((0.80, 1.05), "lower", "PASS"), ((1.06, 1.20), "lower", "FAIL"), ((1.00, 1.10), "lower", "undecided"),
    ((0.97, 0.97), "higher", "PASS"),
])
def test_an_interval_is_judged_whole(interval, better, status):
    target = 0.97 if better == "higher" else 1.05
    assert _report.verdict(sum(interval) / 2, target, better, interval) == status


def test_the_interval_is_kept_checked_and_shown():
    rec = _report.record("parity: docker/host, bw", 0.99, 0.97, "x", "higher", "n=5", (0.95, 1.02))
    assert rec["status"] == "undecided" and rec["interval"] == [0.95, 1.02]
    again = _report.checked(json.loads(json.dumps(rec)), "line 1")
    assert again == rec  # read back from a figures file, the verdict is recomputed from the interval
    assert "0.99 [0.95, 1.02] x" in _report.table([rec])
    assert _report.summary([rec, _report.record("y", 1, 2, "s")]) == "1 PASS, 0 FAIL, 1 undecided, 0 not run"
    assert _report.summary([_report.record("y", 1, 2, "s")]) == "1 PASS, 0 FAIL, 0 not run"
    assert "interval" not in _report.record("z", None, 1, "x", interval=(0.9, 1.1))  # not run: no interval


@pytest.mark.parametrize("bad", [[1.1, 0.9], [0.9], "0.9-1.1", [0.9, float("inf")], [-0.1, 1.0]])
def test_a_bad_interval_is_one_line(bad):
    with pytest.raises(_report.ReportError, match="interval must be"):
        _report.checked({"name": "x", "measured": 1.0, "target": 1.0, "unit": "x", "interval": bad}, "f: line 3")


def test_the_make_bench_case_is_undecided_not_a_loss():
    """The issue's case: medians 0.9x apart with overlapping spreads, 5 repeats each side."""
    host = [2327, 1814, 2387, 2300, 2150]
    docker = [2085, 2342, 2305, 2100, 1990]
    j = _repeats.judge(host, docker, 0.97, "higher")
    assert j.status == "undecided" and j.interval[0] < 0.97 < j.interval[1] and not j.decided
    assert "95 % interval of the ratio [" in _repeats.note(j, "docker", 2164, 2196, "MB/s", 15)


def test_still_open_runs_all_first_then_the_undecided_until_the_bound():
    keys = {"a", "b"}
    decided = _repeats.Judged(1.0, (0.99, 1.01), 0.5, 5, "PASS")
    undecided = _repeats.Judged(1.0, (0.9, 1.1), 0.5, 5, "undecided")
    assert _repeats.still_open(keys, {}, 0, 5, 15) == keys
    assert _repeats.still_open(keys, {"a": decided, "b": undecided}, 3, 5, 15) == keys  # before the minimum
    assert _repeats.still_open(keys, {"a": decided, "b": undecided}, 5, 5, 15) == {"b"}
    assert _repeats.still_open(keys, {"a": decided, "b": undecided}, 15, 5, 15) == set()


class DrawnSides:
    """container_parity's Sides, each run a seeded draw: host ~ N(100, 8); a runtime's mean is
    100 x its factor (the noise the 2-core machine shows)."""

    def __init__(self, factors: dict[str, float]):
        self.factors, self.rng, self.runs = factors, random.Random(7), []

    def log(self, side, w):
        self.runs.append(side)
        return self.rng.gauss(100 * self.factors.get(side, 1.0), 8)


def test_the_loop_stops_each_comparison_once_decided(monkeypatch, capsys):
    w = container_parity.workloads(quick=True)[1]  # bandwidth: higher is better, target 0.97
    sides = DrawnSides({"fast": 1.20, "slow": 0.60, "close": 0.97})
    monkeypatch.setattr(container_parity, "value", lambda w, v: v)
    results, errors, judged = container_parity.measure(sides, [w], ["fast", "slow", "close"], 3, 8)
    assert errors == {}
    assert judged[(w.label, "fast")].status == "PASS" and judged[(w.label, "slow")].status == "FAIL"
    assert len(results[w.label]["fast"]) == 3 and len(results[w.label]["slow"]) == 3  # decided at the minimum
    close = judged[(w.label, "close")]  # at the target itself: no number of repeats decides it
    assert close.status == "undecided" and close.repeats == 8 == len(results[w.label]["close"])
    assert len(results[w.label]["host"]) == 8  # the host ran in every round, interleaved
    assert sides.runs[:4] == ["host", "fast", "slow", "close"] and sides.runs[-2:] == ["host", "close"]
    container_parity.report([w], ["fast", "slow", "close"], results, errors, judged,
                            {w.label: "MB/s"}, 3, 8)
    out = capsys.readouterr().out
    assert "parity: close/host" in out and "undecided" in out and "8 interleaved repeats, the bound" in out


def test_a_failing_host_run_ends_that_workload_and_says_why(monkeypatch):
    w = container_parity.workloads(quick=True)[0]

    class Failing(DrawnSides):
        def log(self, side, w):
            if side == "host":
                raise RuntimeError("host pingpong exit 1: srun: error")
            return super().log(side, w)

    monkeypatch.setattr(container_parity, "value", lambda w, v: v)
    results, errors, judged = container_parity.measure(Failing({}), [w], ["docker"], 3, 6)
    assert errors[(w.label, "docker")].startswith("host pingpong exit 1") and judged == {}
    assert results[w.label]["docker"] == []
