"""`hpcai login`'s input and enroot's netrc, without a registry (the logins themselves run against
the test registry: tests/integration/test_registry_login.py). The secret never comes from argv."""

from __future__ import annotations

import stat

import pytest

from hpcai import registry_login as rl
from hpcai.errors import UsageError


@pytest.mark.parametrize("registry, user, fragment", [
    ("https://reg.example.org", "u", "no scheme or path"),
    ("reg.example.org/team", "u", "no scheme or path"),
    ("registry", "u", "a host with a dot, a port or localhost"),
    ("reg.example.org", "-u", "--username '-u'"),
    ("reg.example.org", "a b", "--username 'a b'"),
])
def test_bad_names_are_refused(registry, user, fragment):
    with pytest.raises(UsageError, match=fragment):
        rl.check_names(registry, user)


def test_no_password_source_is_one_line_before_the_registry_is_asked(hpcai, monkeypatch):
    monkeypatch.delenv("HPCAI_REGISTRY_PASSWORD", raising=False)
    res = hpcai("login", "localhost:1", "-u", "me", "--runtimes", "docker")
    assert res.exit_code == 2 and "no password: give --password-file FILE" in res.stderr
    res = hpcai("login", "localhost:1", "-u", "me", "--runtimes", "docker", "--password-file", "/nonexistent")
    assert res.exit_code == 2 and res.stderr.startswith("error: --password-file /nonexistent: No such file")


def test_a_password_option_does_not_exist(hpcai):
    """A secret on the command line would show in `ps` and shell history: there is no such option."""
    res = hpcai("login", "localhost:1", "-u", "me", "--password", "s3cret")
    assert res.exit_code == 2 and "s3cret" not in res.stderr


def test_enroot_netrc_keeps_other_machines_and_is_private(tmp_path, monkeypatch):
    monkeypatch.setenv("ENROOT_CONFIG_PATH", str(tmp_path / "enroot"))
    (tmp_path / "enroot").mkdir()
    creds = tmp_path / "enroot" / ".credentials"
    creds.write_text("machine other.org login a password b\nmachine reg.example.org login old password old\n")
    rl._write_netrc("reg.example.org:5000", "me", "s3cret")
    assert creds.read_text() == "machine other.org login a password b\nmachine reg.example.org login me password s3cret\n"
    assert stat.S_IMODE(creds.stat().st_mode) == 0o600
    with pytest.raises(UsageError, match="cannot hold"):
        rl._write_netrc("reg.example.org", "me", "two words")
    assert rl.logged_in()["enroot"] == ["other.org", "reg.example.org"]
