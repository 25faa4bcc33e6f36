"""Sweep bounds (hardening round three, issue 25): node lists, variables and the grid size
are checked before anything is written, in a dry run and with --no-submit; every payload refuses an
unknown sweep variable, and a grid at the bound is still planned. Each refusal is one line, exit 2,
no traceback, nothing written."""

from __future__ import annotations

import pytest
from refusal_helpers import SITE, one_line_refusal

from hpcai import payloads

pytestmark = pytest.mark.hostile

SWEEP_CASES = [
    (["--nodes", "1,1,1"], "lists 1 more than once"),
    (["--nodes", "1,2,2,4"], "lists 2 more than once"),
    (["--nodes", "1,,2"], "(an empty item)"),
    (["--nodes", ","], "(an empty item)"),
    (["--nodes", "0"], "--nodes must list node counts >= 1"),
    (["--nodes", "1,-2"], "--nodes must list node counts >= 1"),
    (["--nodes", "100001"], "--nodes must be between 1 and 100000, got 100001"),
    (["--nodes", "1,99999999999999999999"], "--nodes must be between 1 and 100000"),
    (["--nodes", "1", "--var", "steps=1,,2"], "no empty value"),
    (["--nodes", "1", "--var", "steps=5,5"], "lists 5 more than once"),
    (["--nodes", "1", "--var", "steps=1", "--var", "steps=2"], "--var steps is given twice"),
    (["--nodes", "1", "--var", "nope=1,2"], "unknown variable 'nope' for payload hf-clm; valid: "),
    (["--nodes", "1", "--var", "steps=1,many"], "variable steps='many': expected an integer"),
    (["--nodes", "1", "--var", "steps=" + ",".join(map(str, range(1, 1001))),
      "--var", "seq_len=" + ",".join(map(str, range(1, 1001)))],
     "the sweep would make 1000000 points (1000 × 1000), more than the bound of 10000"),
    (["--nodes", ",".join(map(str, range(1, 101))), "--repeat", "101"], "would make 10100 points (100 × 101)"),
]


@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "no-submit"])
@pytest.mark.parametrize("args, fragment", SWEEP_CASES, ids=[" ".join(c[0])[:40] for c in SWEEP_CASES])
def test_bad_sweeps_are_refused_before_anything_is_written(hpcai, tmp_path, monkeypatch, dry, args, fragment):
    monkeypatch.chdir(tmp_path)
    mode = ["--dry-run"] if dry else ["--no-submit", *SITE]
    res = hpcai("sweep", *mode, *args, "hf-clm")
    one_line_refusal(res, fragment)
    assert not res.stdout and not list(tmp_path.iterdir())


@pytest.mark.parametrize("payload", payloads.available_payloads())
def test_every_payload_refuses_an_unknown_sweep_variable_in_a_dry_run(hpcai, payload):
    known = [v.name for v in payloads.load_payload(payload).variables]
    res = hpcai("sweep", "--dry-run", "--nodes", "1", "--var", "hpcai_no_such_var=1", payload)
    one_line_refusal(res, f"--var hpcai_no_such_var: unknown variable 'hpcai_no_such_var' for payload {payload}")
    assert all(name in res.stderr for name in known)  # the valid names are listed


def test_a_grid_at_the_bound_is_still_planned(hpcai):
    from hpcai.run import sweep

    assert sweep.count_points(list(range(1, 101)), {"a": [str(i) for i in range(100)]}) == sweep.MAX_POINTS
    res = hpcai("sweep", "--dry-run", "--nodes", "1,2", "--var", "steps=1,2", "hf-clm")
    assert res.exit_code == 0 and len(res.stdout.splitlines()) == 4
