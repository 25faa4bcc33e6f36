"""Numbers past the float range in `--var` and payload arguments (hostile corpus, round three,
issue 25): each is one line and exit 2 (payload_rules.check_number), a 5,000-digit value is shown
shortened, and a record's plan holding infinite facts computes no TFLOP/s instead of crashing."""

from __future__ import annotations

from pathlib import Path

import pytest
from error_checks import one_line_error, strict_json
from run_records import make_run

from hpcai.errors import UsageError

pytestmark = pytest.mark.hostile

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


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
