"""MASTER_PORT (hardening round three, issue 25): a value that is no port, from --env or
from a site's env, is refused in one line, exit 2, nothing written; --env wins over the site."""

from __future__ import annotations

import pytest
from refusal_helpers import one_line_refusal

pytestmark = pytest.mark.hostile


@pytest.mark.parametrize("value", ["abc", "99999999999", "-5", "0", "65536", "", " 80", "8o8o", "1" * 5000])
@pytest.mark.parametrize("site", ["local", "generic-slurm"])
def test_a_master_port_that_is_no_port_is_refused(hpcai, tmp_path, monkeypatch, value, site):
    monkeypatch.chdir(tmp_path)
    res = hpcai("launch", "--dry-run", "--site", site, "--image", "x", "-e", f"MASTER_PORT={value}", "sanity")
    one_line_refusal(res, f"--env MASTER_PORT={value!r}: expected a port between 1 and 65535")
    assert not list(tmp_path.iterdir())


def test_a_site_master_port_is_checked_and_env_wins(hpcai, tmp_path, site_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HPCAI_SITE_PATH", site_path("bad", 'backend = "local"\nruntime = "docker"\n'
                                                          '[env]\nMASTER_PORT = "x1"\n'))
    one_line_refusal(hpcai("launch", "--dry-run", "--site", "bad", "--image", "x", "sanity"),
                     "site bad: env MASTER_PORT='x1': expected a port between 1 and 65535")
    ok = hpcai("launch", "--dry-run", "--site", "bad", "--image", "x", "-e", "MASTER_PORT=29400", "sanity")
    assert ok.exit_code == 0 and "MASTER_PORT=29400" in ok.stdout, ok.stderr
