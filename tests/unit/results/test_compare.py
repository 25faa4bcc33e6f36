"""compare: pass, fail, too few runs, lower-is-better inversion, wildcard system, suite score, CLI."""

from __future__ import annotations

import json

import pytest
from run_records import hvd_log, make_run

from hpcai.errors import UsageError
from hpcai.results.baselines import load_baselines
from hpcai.results.compare import FAIL, NO_REF, PASS, TOO_FEW, compare
from hpcai.results.loading import load_all
from hpcai.results.stats import describe

BASELINES = """
[references."hvd-synthetic"]
"*" = { img_per_sec_total = [1000.0, -0.10, 0.10, "img/s"] }
"jureca:dc-gpu" = { img_per_sec_total = [3000.0, -0.05, 0.05, "img/s"] }

[references."osu nodes=2"]
"*" = { latency_8B = [2.0, -0.5, 0.2, "us"] }

[weights]
"osu nodes=2" = 2.0
"""


def osu_log(lat8: float) -> str:
    return f"# OSU MPI Latency Test v7.5\n# Size       Avg Latency(us)\n1   1.0\n8   {lat8}\n"


@pytest.fixture
def baselines(tmp_path):
    p = tmp_path / "baselines.toml"
    p.write_text(BASELINES)
    return load_baselines(p)


def test_stats_drop_extremes_from_five():
    s = describe([10, 11, 12, 13, 100])
    assert (s.n, s.used, s.mean, s.min, s.max) == (5, 3, 12, 10, 100)
    s4 = describe([10, 12, 14, 16])
    assert s4.used == 4 and s4.mean == 13 and s4.sd == pytest.approx(2.5820, rel=1e-4)
    assert s4.sd_percent == pytest.approx(100 * s4.sd / 13)


def test_pass_with_wildcard_system(tmp_path, baselines):
    for i, v in enumerate([1000, 1010, 990, 1005]):
        make_run(tmp_path, f"r{i}", "hvd-synthetic", hvd_log(v))
    res = compare(load_all([tmp_path]), baselines, min_count=4)
    (row,) = res.rows
    assert row.verdict == PASS and row.reference.value == 1000 and row.stats.n == 4
    assert row.ratio == pytest.approx(1001.25 / 1000) and not res.failed
    assert res.score == pytest.approx(1.00125)


def test_site_partition_reference_beats_wildcard_and_fails(tmp_path, baselines):
    for i in range(4):
        make_run(tmp_path, f"r{i}", "hvd-synthetic", hvd_log(1000), site="jureca", partition="dc-gpu")
    res = compare(load_all([tmp_path]), baselines)
    assert res.rows[0].reference.value == 3000 and res.rows[0].verdict == FAIL and res.failed


def test_too_few_runs_gives_no_verdict(tmp_path, baselines):
    make_run(tmp_path, "r0", "hvd-synthetic", hvd_log(1000))
    res = compare(load_all([tmp_path]), baselines, min_count=4)
    assert res.rows[0].verdict == TOO_FEW and not res.failed
    assert compare(load_all([tmp_path]), baselines, min_count=1).rows[0].verdict == PASS


def test_lower_is_better_inverted_in_score(tmp_path, baselines):
    for i in range(4):
        make_run(tmp_path, f"o{i}", "osu", osu_log(1.0), nodes=2)  # half the reference latency: better
    res = compare(load_all([tmp_path]), baselines)
    (row,) = res.rows
    assert row.verdict == PASS and row.ratio == pytest.approx(0.5) and row.normalized == pytest.approx(2.0)
    assert res.score == pytest.approx(2.0)


def test_configuration_conditions_must_match(tmp_path, baselines):
    for i in range(4):
        make_run(tmp_path, f"o{i}", "osu", osu_log(1.0), nodes=1)  # baseline is for nodes=2 only
    assert compare(load_all([tmp_path]), baselines).rows[0].verdict == NO_REF


def test_failed_run_lowers_success_ratio_and_fails(tmp_path, baselines):
    for i in range(4):
        make_run(tmp_path, f"r{i}", "hvd-synthetic", hvd_log(1000))
    make_run(tmp_path, "r9", "hvd-synthetic", "Traceback: CUDA error\n", state="failed")
    res = compare(load_all([tmp_path]), baselines)
    assert res.success_ratio == pytest.approx(0.8) and res.failed
    assert res.score == pytest.approx(0.8)


def test_weighted_geometric_mean_score(tmp_path, baselines):
    for i in range(4):
        make_run(tmp_path, f"r{i}", "hvd-synthetic", hvd_log(1050))
        make_run(tmp_path, f"o{i}", "osu", osu_log(2.2), nodes=2)
    res = compare(load_all([tmp_path]), baselines)
    expected = (1.05 ** 1 * (2.0 / 2.2) ** 2) ** (1 / 3)
    assert res.score == pytest.approx(expected)


@pytest.mark.parametrize("text, message", [
    ("[references\n", "malformed TOML"),
    ("x = 1\n", "unknown key\\(s\\) x; valid: references, weights"),
    ('[references."osu"]\n"*" = { latency_8B = [2.0, "low", 0.1, "us"] }\n', "lower must be a fraction"),
    ('[references."osu"]\n"*" = { latency_8B = 2.0 }\n', "must be \\[value, lower, upper, unit\\]"),
])
def test_malformed_baselines(tmp_path, text, message):
    p = tmp_path / "b.toml"
    p.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_baselines(p)


def test_cli_compare_exit_codes_and_json(tmp_path, hpcai):
    (tmp_path / "b.toml").write_text(BASELINES)
    for i in range(4):
        make_run(tmp_path / "runs", f"r{i}", "hvd-synthetic", hvd_log(1000))
    ok = hpcai("results", "compare", str(tmp_path / "runs"), "--baseline", str(tmp_path / "b.toml"), "--json")
    assert ok.exit_code == 0, ok.stderr
    data = json.loads(ok.stdout)
    assert data["rows"][0]["verdict"] == "pass" and data["score"] == pytest.approx(1.0)
    make_run(tmp_path / "runs", "slow1", "hvd-synthetic", hvd_log(500))
    # one slow run of five is dropped as an extreme; two of six pull the mean to 875 < 900
    assert hpcai("results", "compare", str(tmp_path / "runs"), "-b", str(tmp_path / "b.toml")).exit_code == 0
    make_run(tmp_path / "runs", "slow2", "hvd-synthetic", hvd_log(500))
    bad = hpcai("results", "compare", str(tmp_path / "runs"), "-b", str(tmp_path / "b.toml"))
    assert bad.exit_code == 1 and "fail" in bad.stdout and "suite score" in bad.stdout
    (tmp_path / "broken.toml").write_text("[references\n")
    broken = hpcai("results", "compare", str(tmp_path / "runs"), "-b", str(tmp_path / "broken.toml"))
    assert broken.exit_code == 2 and broken.stderr.count("\n") == 1 and "malformed TOML" in broken.stderr


def test_quantile_interpolates_like_numpy():
    from hpcai.results.stats import quantile

    assert quantile([1.0, 2.0, 3.0, 4.0, 5.0], 0.8) == pytest.approx(4.2)  # numpy.quantile: 4.2
    assert quantile([7.0], 0.8) == 7.0
    assert quantile([3.0, 1.0], 0.5) == pytest.approx(2.0)


def test_deviation_quantile_beside_mean_and_sd(tmp_path, hpcai):
    """The Mila report's stability figure: sd% at the 80 % quantile over configurations (< 5 % wanted)."""
    for i, total in enumerate((1000, 1010, 990, 1000)):  # steady: sd% 0.8
        make_run(tmp_path / "runs", f"a{i}", "hvd-synthetic", hvd_log(total))
    for i, lat in enumerate((2.0, 2.4, 1.6, 2.0)):  # noisy: sd% 16.3
        make_run(tmp_path / "runs", f"b{i}", "osu", osu_log(lat), nodes=2)
    result = compare(load_all([tmp_path / "runs"]))
    spreads = sorted(r.stats.sd_percent for r in result.rows)
    assert spreads == pytest.approx([0.8165, 16.3299], rel=1e-3)
    assert result.deviation_quantile == pytest.approx(spreads[0] + 0.8 * (spreads[1] - spreads[0]))
    res = hpcai("results", "compare", str(tmp_path / "runs"))
    assert "sd% at the 80% quantile over the configurations: 13.23 % (unstable" in res.stdout
    data = json.loads(hpcai("results", "compare", str(tmp_path / "runs"), "--json").stdout)
    assert data["deviation_quantile"] == pytest.approx(result.deviation_quantile)
