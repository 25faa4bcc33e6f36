"""hpcai's own options typed after `--cmd --` (hostile corpus, round three, issue 25): each
stays the command's word, with one warning; a property over every long option `hpcai launch`
declares. Ordinary command words give no warning."""

from __future__ import annotations

import json

import pytest

from hpcai.cli.launch import own_flags
from hpcai.run.options import LAUNCH, SUBMIT

pytestmark = pytest.mark.hostile


@pytest.mark.parametrize("flag", sorted(own_flags(LAUNCH)))
def test_every_own_long_option_after_cmd_dashes_warns_once(hpcai, flag, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = hpcai("launch", "--json", "--site", "local", "--runtime", "apptainer", "--image", "/i/x.sif",
                "--cmd", "--", "hostname", flag)
    assert res.exit_code == 0, res.stderr
    warnings = [line for line in res.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and flag in warnings[0] and "after `--`" in warnings[0], res.stderr
    assert json.loads(res.stdout)["command"][-1] == flag  # still the command's word


def test_the_declared_options_include_the_ones_users_mistype_and_both_switch_halves():
    assert {"--dry-run", "--json", "--image", "--userns", "--no-userns"} <= own_flags(LAUNCH)
    assert {"--no-submit", "--wait"} <= own_flags(SUBMIT) and "--help" not in own_flags(LAUNCH)


@pytest.mark.parametrize("command", [("sh", "-c", "true"), ("python", "-c", "0", "-o", "x"), ("ls", "--help"),
                                     ("echo", "--dry-runs")])
def test_ordinary_command_words_give_no_warning(hpcai, command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = hpcai("launch", "--dry-run", "--site", "local", "--runtime", "apptainer", "--image", "/i/x.sif",
                "--cmd", "--", *command)
    assert res.exit_code == 0 and "warning: " not in res.stderr.replace("# warning", ""), res.stderr
