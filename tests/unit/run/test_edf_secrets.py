"""Secrets in every EDF writer (hostile corpus, round three, issue 25): the hpcai.run.edf
module and the ce runtime's step file leave every secret value out of the EDF; `hpcai edf` keeps
each secret out of stdout, stderr and the file, writes a private file (mode 0600) in place of an
existing one, refuses a symbolic link at its output and leaves no temporary file behind. A
property over every EDF writer."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from hpcai.run import edf

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.hostile

SECRETS = [("HF_TOKEN", "hf_SEKRIT5"), ("DATABASE_URL", "postgres://u:SEKRIT6@h/db"),
           ("AWS_SECRET_ACCESS_KEY", "SEKRIT7aws")]


def _edf_writers():
    """Every way hpcai writes an EDF: the module itself, and the ce runtime's step file."""
    from hpcai.run.runtimes import ContainerSpec
    from hpcai.run.runtimes.ce import CeRuntime

    def module(env):
        spec = edf.EdfSpec(image="img", env=env)
        return edf.render(edf.build(spec), inherited=edf.split_secrets(env)[1])

    def ce(env):
        return CeRuntime().edf(ContainerSpec(image="img", command=("true",), env=env))

    return {"module": module, "ce": ce}


@pytest.mark.parametrize("writer", sorted(_edf_writers()))
def test_no_edf_writer_writes_a_secret_value(writer):
    env = (("A", "1"), *SECRETS)
    text = _edf_writers()[writer](env)
    doc = tomllib.loads(text)
    assert edf.check(doc) == [] and doc["env"] == {"A": "1"}
    assert not any(value in text for _, value in SECRETS) and "SEKRIT" not in text


@pytest.mark.parametrize("name,value", SECRETS)
@pytest.mark.parametrize("to_file", [False, True])
def test_hpcai_edf_keeps_each_secret_out_of_stdout_stderr_and_the_file(hpcai, tmp_path, monkeypatch, name, value,
                                                                     to_file):
    monkeypatch.setenv("COPIED_TOKEN", "SEKRIT8copied")
    out = tmp_path / "env.toml"
    res = hpcai("edf", "img", "--env", f"{name}={value}", "--env", "COPIED_TOKEN", "--env", "A=1",
                *(["-o", str(out)] if to_file else []))
    assert res.exit_code == 0, res.stderr
    text = out.read_text() if to_file else res.stdout
    assert "SEKRIT" not in res.stdout + res.stderr + text
    doc = tomllib.loads(text)
    assert edf.check(doc) == [] and doc["env"]["A"] == "1" and name not in doc["env"]
    # the names are where the user needs them: the file's comment and the note on stderr
    assert f"{name}, COPIED_TOKEN" in text.splitlines()[1] and f"{name}, COPIED_TOKEN kept out" in res.stderr
    if to_file:
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
        assert sorted(p.name for p in tmp_path.iterdir()) == ["env.toml"]


def test_hpcai_edf_replaces_an_existing_file_with_a_private_one(hpcai, tmp_path):
    out = tmp_path / "env.toml"
    out.write_text("old\n")
    out.chmod(0o644)
    assert hpcai("edf", "img", "-o", str(out)).exit_code == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and out.read_text().startswith("# Container Engine")


@pytest.mark.parametrize("dangling", [False, True])
def test_hpcai_edf_refuses_a_symlink_at_its_output(hpcai, tmp_path, dangling):
    victim = tmp_path / "victim"
    if not dangling:
        victim.write_text("precious\n")
    link = tmp_path / "env.toml"
    link.symlink_to(victim)
    res = hpcai("edf", "img", "--env", "HF_TOKEN=SEKRIT9", "-o", str(link))
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "is a symbolic link" in errors[0] and "give a new file name" in errors[0]
    assert link.is_symlink() and (victim.read_text() == "precious\n" if not dangling else not victim.exists())
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["env.toml"] + ([] if dangling else ["victim"]))
    assert "SEKRIT" not in res.stdout + res.stderr


def test_no_temp_file_is_left_when_the_edf_cannot_be_written(hpcai, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        res = hpcai("edf", "img", "-o", str(folder / "env.toml"))
        if os.geteuid() == 0:  # root writes anyway: the file is still private
            assert res.exit_code == 0 and stat.S_IMODE((folder / "env.toml").stat().st_mode) == 0o600
        else:
            assert res.exit_code == 2 and "cannot be written" in res.stderr and list(folder.iterdir()) == []
    finally:
        folder.chmod(0o700)
    assert not [p for p in Path(folder).iterdir() if p.name.endswith(".tmp")]
