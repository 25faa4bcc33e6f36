"""The site file's rules, declared once (hpcai.schema over SiteProfile), read by hpcai and
published as JSON Schema (`hpcai sites schema`): every packaged site passes both, and a file
either refuses, the other refuses too. The JSON Schema is checked with the jsonschema library."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from hpcai.errors import UsageError
from hpcai.files import parse_toml
from hpcai.run import scheduler
from hpcai.run.site import GPUS_PER_NODE_MAX, SCHEMA, parse_site, site_files


@pytest.fixture(scope="module")
def validator(hpcai_module):
    res = hpcai_module("sites", "schema")
    assert res.exit_code == 0, res.stderr
    schema = json.loads(res.stdout)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@pytest.fixture(scope="module")
def hpcai_module():
    from typer.testing import CliRunner

    from hpcai.cli.main import app

    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))


def test_every_packaged_site_passes_both(validator):
    files = site_files()
    assert len(files) >= 10
    for name, path in files.items():
        text = path.read_text()
        parse_site(name, text, str(path))
        errors = [e.message for e in validator.iter_errors(parse_toml(text, str(path)))]
        assert errors == [], (name, errors)


BAD = {
    "unknown key": 'gpus = 4',
    "wrong type": 'gpus_per_node = "4"',
    "not a choice": 'runtime = "shifter"',
    "above the bound": f'gpus_per_node = {GPUS_PER_NODE_MAX + 1}',
    "below the bound": 'master_port = -1',
    "relative bind": 'binds = ["scratch:/scratch"]',
    "bind with a comma": 'binds = ["/a,/b"]',
    "a line break": 'partition = "gpu\\nrm -rf /"',
    "env key": 'env = { "NOT A NAME" = "1" }',
    "mpi_swap without lib": 'mpi_swap = { deps = ["/opt/x"] }',
    "mpi_swap unknown key": 'mpi_swap = { lib = "/opt/mpi", libs = "/x" }',
    "pass_env glob": 'pass_env = ["SLURM_*_X"]',
}


@pytest.mark.parametrize("line", BAD.values(), ids=BAD.keys())
def test_a_bad_site_is_refused_by_both(validator, line):
    with pytest.raises(UsageError, match=r"^bad\.toml: "):
        parse_site("bad", line + "\n", "bad.toml")
    assert list(validator.iter_errors(parse_toml(line + "\n", "bad.toml")))


def test_one_bound_per_number():
    """The GPU limit a site may state is the one --gpus-per-node takes."""
    assert scheduler._LIMITS["--gpus-per-node"] == GPUS_PER_NODE_MAX == SCHEMA.keys["gpus_per_node"].high


def test_the_message_names_the_file_the_key_and_the_valid_keys():
    with pytest.raises(UsageError) as exc:
        parse_site("bad", "gpus = 4\n", "/etc/hpcai/bad.toml")
    text = str(exc.value)
    assert text.startswith("/etc/hpcai/bad.toml: unknown key(s) gpus; valid: account, ") and "gpus_per_node" in text
