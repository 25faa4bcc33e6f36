"""The payload manifest's keys, declared once (hpcai.payload_schema over hpcai.schema), read by
hpcai and published as JSON Schema (`hpcai payloads schema`): every packaged manifest passes both,
and a manifest whose keys or types one refuses, the other refuses too. The JSON Schema is checked
with the jsonschema library."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from hpcai import payloads
from hpcai.errors import UsageError
from hpcai.files import parse_toml


@pytest.fixture(scope="module")
def validator():
    from typer.testing import CliRunner

    from hpcai.cli.main import app

    res = CliRunner().invoke(app, ["payloads", "schema"])
    assert res.exit_code == 0, res.stderr
    schema = json.loads(res.stdout)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def test_every_packaged_manifest_passes_both(validator):
    names = payloads.available_payloads()
    assert len(names) >= 10
    for name in names:
        manifest = payloads.load_payload(name)
        text = (manifest.dir / "payload.toml").read_text()
        errors = [e.message for e in validator.iter_errors(parse_toml(text, name))]
        assert errors == [], (name, errors)


# Each manifest is refused by hpcai with this message (file, dotted key, what is valid), and by
# the JSON Schema.
BAD = {
    "unknown top-level key": ('descripton = "x"\n', "unknown key(s) descripton; valid: description, downloads,"),
    "unknown key in a metric": ('[metrics.rate]\nregex = "x"\nunits = "GB/s"\n',
                                "unknown key(s) metrics.rate.units; valid: better, file, group,"),
    "unknown key in a variable": ('[vars.n]\ndefault = 1\nhlep = "x"\n', "unknown key(s) vars.n.hlep; valid: choices,"),
    "wrong type in requires": ('[requires]\nmpi = "yes"\n', "key 'requires.mpi' must be true or false, got 'yes'"),
    "not a choice": ('geometry = "per-socket"\n', "geometry 'per-socket' is not one of: per-gpu, per-node, single"),
    "better": ('[metrics.rate]\nregex = "x"\nbetter = "faster"\n',
               "metrics.rate.better 'faster' is not one of: higher, lower"),
    "reduce": ('[metrics.rate]\nregex = "x"\nreduce = "median"\n', "metrics.rate.reduce 'median' is not one of: last,"),
    "install family": ('[install.gpu]\nbuild = "b.sh"\n', "install name 'gpu' is not one of: cuda, rocm, poplar,"),
    "variable name": ('[vars.N-1]\ndefault = 1\n', "vars name 'N-1': expected a variable name"),
    "variant name": ('[variants."-x"]\nhelp = "x"\n', "variants name '-x': expected a variant name"),
    "a table expected": ('run = "python x.py"\n', "run must be a table, got 'python x.py'"),
    "negative group": ('[metrics.rate]\nregex = "x"\ngroup = -1\n', "metrics.rate.group -1: expected a group number"),
    "a line break": ('sanity = ["ok\\nrm"]\n', "sanity 'ok\\nrm' holds a control character"),
    "variable default": ('[vars.n]\ndefault = [1]\n', "vars.n default [1]: expected a string, a number or true/false"),
    "profiles": ('profiles = { quick = 1 }\n', "profiles must hold tables profiles.<name> of variable values"),
}


@pytest.mark.parametrize("text,message", BAD.values(), ids=BAD.keys())
def test_a_bad_manifest_is_refused_by_both(validator, tmp_path, monkeypatch, text, message):
    folder = tmp_path / "payloads" / "bad"
    folder.mkdir(parents=True)
    (folder / "payload.toml").write_text(text)
    monkeypatch.setattr(payloads, "payloads_root", lambda: tmp_path / "payloads")
    with pytest.raises(UsageError) as exc:
        payloads.load_payload("bad")
    assert str(exc.value).startswith(f"payloads/bad/payload.toml: {message}"), str(exc.value)
    assert list(validator.iter_errors(parse_toml(text, "bad"))), text
