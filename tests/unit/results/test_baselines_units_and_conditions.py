"""A baselines file's units, payload names and condition keys are checked against the
payload registry and the manifests (hostile corpus, round three, issue 25): a reference in another
unit than its metric's, a configuration that would match nothing and a condition of the wrong type
are refused in one line naming the file; valid conditions still select the runs. Properties over
every declared metric and every payload's conditions."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from error_checks import one_line_error, strict_json
from run_records import hvd_log, make_run

from hpcai.errors import UsageError

pytestmark = pytest.mark.hostile


def _load(tmp_path: Path, text: str):
    from hpcai.results.baselines import load_baselines

    path = tmp_path / "b.toml"
    path.write_text(text)
    return load_baselines(path)


def _declared_units() -> list[tuple[str, str, str]]:
    """(payload, metric, unit) for every metric a manifest declares a unit for."""
    from hpcai import payloads

    out = []
    for name in payloads.available_payloads():
        for metric, spec in payloads.load_payload(name).raw.get("metrics", {}).items():
            if isinstance(spec.get("unit"), str):
                out.append((name, metric, spec["unit"]))
    return out


def test_every_declared_unit_loads_and_every_other_unit_is_refused(tmp_path):
    """A property over every metric of every manifest: its own unit loads; another is refused in
    one line naming the file, the key and both units."""
    triples = _declared_units()
    assert len(triples) > 20
    for payload, metric, unit in triples:
        body = f'[references."{payload}"]\n"*" = {{ {metric} = [2.0, -0.1, 0.1, "{unit}"] }}\n'
        (config,) = _load(tmp_path, body)
        assert config.systems["*"][metric].unit == unit
        for wrong in {"GB/s", "ex/s", "s", "", f"{unit}x", unit.upper()} - {unit}:
            with pytest.raises(UsageError) as exc:
                _load(tmp_path, body.replace(f'"{unit}"]', f'"{wrong}"]'))
            msg = str(exc.value)
            assert "\n" not in msg and str(tmp_path / "b.toml") in msg and metric in msg, msg
            assert repr(wrong) in msg and repr(unit) in msg, msg


def test_a_reference_in_the_wrong_unit_fails_the_compare_command(tmp_path, hpcai):
    """The reviewer's case: img/s runs against a reference in GB/s gave `pass`."""
    for i in range(2):
        make_run(tmp_path / "runs", f"r{i}", "hvd-synthetic", hvd_log(1000))
    (tmp_path / "b.toml").write_text('[references."hvd-synthetic"]\n'
                                     '"*" = { img_per_sec_total = [1000.0, -0.10, 0.10, "GB/s"] }\n')
    res = hpcai("results", "compare", str(tmp_path / "runs"), "-b", str(tmp_path / "b.toml"), "--min-runs", "1")
    one_line_error(res, str(tmp_path / "b.toml"), "img_per_sec_total", "'GB/s'", "'img/s'")


def test_a_metric_only_a_host_parser_knows_keeps_its_unit_unchecked(tmp_path):
    """osu's parser has figures the manifest does not declare: no unit to check against."""
    (config,) = _load(tmp_path, '[references."osu"]\n"*" = { latency_1B = [2.0, -0.1, 0.1, "us"] }\n')
    assert config.systems["*"]["latency_1B"].unit == "us"


BAD_KEYS = {
    "nodes is a word": ("ddp-bench nodes=two", "nodes must be a whole number from 1"),
    "nodes is 0": ("osu nodes=0", "from 1"),
    "nodes is negative": ("osu nodes=-1", "from 1"),
    "nodes with a zero in front": ("osu nodes=02", "plain digits"),
    "nodes as a float": ("osu nodes=2.0", "plain digits"),
    "ntasks_per_node is 0": ("osu ntasks_per_node=0", "ntasks_per_node must be a whole number from 1"),
    "gpus_per_node is a word": ("osu gpus_per_node=many", "gpus_per_node must be a whole number from 0"),
    "unknown condition": ("ddp-bench flavor=x nodes=1", "'flavor' is no condition of ddp-bench; valid: nodes, "),
    "unknown payload": ("nopayload", "'nopayload' is no payload"),
    "unknown payload with conditions": ("osu-bench nodes=1", "valid: ddp-bench, "),
    "choice not offered": ("osu test=nosuch", "valid: allreduce"),
    "integer variable is a word": ("hvd-synthetic batch_size=many", "expected an integer"),
    "integer variable is a float": ("hf-clm seq_len=1e3", "expected an integer"),
    "float variable is nan": ("hf-clm lr=nan", "NaN or infinity"),
}


@pytest.mark.parametrize("case", sorted(BAD_KEYS))
def test_a_configuration_that_would_match_nothing_is_refused(tmp_path, hpcai, case):
    key, fragment = BAD_KEYS[case]
    make_run(tmp_path / "runs", "r0", "hvd-synthetic", hvd_log(1000))
    (tmp_path / "b.toml").write_text(f'[references."{key}"]\n"*" = {{ some_metric = [1.0, "x"] }}\n')
    res = hpcai("results", "compare", str(tmp_path / "runs"), "-b", str(tmp_path / "b.toml"))
    one_line_error(res, str(tmp_path / "b.toml"), f'references."{key}"' if " " in key else key, fragment)


def test_every_condition_key_of_every_payload_with_each_bad_value(tmp_path):
    """A property: for each payload, each plan key refuses 0 (but gpus_per_node), -1, 1.5, 01, x;
    each variable with choices refuses a value outside them and takes each of them."""
    from hpcai import payloads

    for name in payloads.available_payloads():
        manifest = payloads.load_payload(name)
        for key in ("nodes", "ntasks_per_node", "gpus_per_node"):
            for bad in ["-1", "1.5", "01", "x", "+2", *(["0"] if key != "gpus_per_node" else [])]:
                with pytest.raises(UsageError, match=re.escape(f"{key}={bad}: {key} must be a whole number")):
                    _load(tmp_path, f'[references."{name} {key}={bad}"]\n"*" = {{ m = [1.0, "x"] }}\n')
            (config,) = _load(tmp_path, f'[references."{name} {key}=4"]\n"*" = {{ m = [1.0, "x"] }}\n')
            assert config.conditions == {key: "4"}
        for var in manifest.variables:
            if var.choices:
                bad = "7" if isinstance(var.default, int) else "not-a-choice"  # of the right type, not offered
                with pytest.raises(UsageError, match="valid: "):
                    _load(tmp_path, f'[references."{name} {var.name}={bad}"]\n"*" = {{ m = [1.0, "x"] }}\n')
                for choice in var.choices:
                    _load(tmp_path, f'[references."{name} {var.name}={choice}"]\n"*" = {{ m = [1.0, "x"] }}\n')


def test_valid_conditions_still_select_the_runs(tmp_path, hpcai):
    for i in range(2):
        make_run(tmp_path / "runs", f"r{i}", "hvd-synthetic", hvd_log(1000), nodes=2, pvars={"batch_size": "64"})
    (tmp_path / "b.toml").write_text(
        '[references."hvd-synthetic nodes=2 ntasks_per_node=1 batch_size=64"]\n'
        '"*" = { img_per_sec_total = [1000.0, -0.1, 0.1, "img/s"] }\n')
    res = hpcai("results", "compare", str(tmp_path / "runs"), "-b", str(tmp_path / "b.toml"), "--min-runs", "1",
                "--json")
    assert res.exit_code == 0, res.stderr
    assert strict_json(res.stdout)["rows"][0]["verdict"] == "pass"


def test_the_baselines_schema_is_json_schema_that_agrees(hpcai, tmp_path):
    """`hpcai results schema`: the file's rules as JSON Schema (checked with jsonschema): a good
    file passes it, and files hpcai refuses for their shape (an unknown table, a reference of
    three items, a value of 0, a bound above 0, a weight below 0) are refused by it too."""
    import json

    import tomllib
    from jsonschema import Draft202012Validator

    from hpcai.results.baselines import configurations

    res = hpcai("results", "schema")
    assert res.exit_code == 0, res.stderr
    schema = json.loads(res.stdout)
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    good = ('[references."osu nodes=2"]\n"*" = { latency_8B = [2.0, -0.1, 0.1, "us"] }\n'
            '"jureca:*" = { latency_8B = [2.5, "us"] }\n[weights]\n"osu nodes=2" = 2.0\n')
    configurations(tomllib.loads(good), "good.toml")
    assert list(validator.iter_errors(tomllib.loads(good))) == []
    for bad in ('extra = 1\n[references.osu]\n"*" = { latency_8B = [2.0, "us"] }\n',
                '[references.osu]\n"*" = { latency_8B = [2.0, 0.1, "us"] }\n',
                '[references.osu]\n"*" = { latency_8B = [0, "us"] }\n',
                '[references.osu]\n"*" = { latency_8B = [2.0, 0.1, 0.2, "us"] }\n',
                '[references.osu]\n"*" = { latency_8B = [2.0, "us"] }\n[weights]\nosu = -1\n'):
        with pytest.raises(UsageError):
            configurations(tomllib.loads(bad), "bad.toml")
        assert list(validator.iter_errors(tomllib.loads(bad))), bad
