"""Payload variables: never negative, a declared floor (hostile corpus, round three, issue
25). Over every manifest, a count, size or time refuses a negative value, and a variable declaring
`min` refuses less, in the host's check and the CLI alike; its floor itself is taken. A manifest's
floor must be a number no larger than its default."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.hostile


def _numeric_vars():
    from hpcai import payloads

    for name in payloads.available_payloads():
        for var in payloads.load_payload(name).variables:
            if isinstance(var.default, (int, float)) and not isinstance(var.default, bool):
                yield pytest.param(name, var, id=f"{name}:{var.name}")


@pytest.mark.parametrize("payload, var", list(_numeric_vars()))
def test_every_numeric_payload_variable_refuses_values_below_its_floor(hpcai, tmp_path, payload, var):
    """Over every manifest: a count, size or time is never negative, and a variable declaring
    `min` (a batch, a sequence length, an iteration count) refuses less, in the host's check and
    in the image's runner alike; its floor itself is taken."""
    from hpcai import payloads

    manifest = payloads.load_payload(payload)
    below = "-1" if var.minimum <= 0 else str(int(var.minimum) - 1)
    with pytest.raises(payloads.UsageError, match=f"variable {var.name}=.*expected at least"):
        manifest.validate_vars({var.name: below})
    res = hpcai("launch", "--dry-run", "--site", "local", "--image", "x", "-o", str(tmp_path / "r"),
                payload, f"{var.name}={below}")
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    floor = str(int(var.minimum)) if isinstance(var.default, int) else str(var.minimum)
    assert manifest.validate_vars({var.name: floor})[var.name] == floor


def test_a_manifest_floor_must_be_a_number_below_the_default(tmp_path):
    import tomllib

    from hpcai import payload_rules, payloads

    for bad, said in (('"one"', "key 'vars.n.min' must be a number"), ("true", "key 'vars.n.min' must be a number"),
                      ("nan", "vars.n.min must be a number no larger than its default"),
                      ("100", "vars.n.min must be a number no larger than its default")):
        raw = tomllib.loads(f'description = "x"\nflavors = ["*"]\nparser = "sanity"\n[run]\ncommand = ["true"]\n'
                            f'[vars]\nn = {{ default = 4, min = {bad} }}\n')
        with pytest.raises(payloads.UsageError, match=said):
            payload_rules.check_manifest("p", raw, tmp_path)
