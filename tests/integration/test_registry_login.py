"""`hpcai login` against the test registry (tests/infra/registry-up.sh, issue 29): one secret,
checked once, written where docker, podman, Apptainer and enroot read credentials; then each of
them pulls from the registry with no login of its own. The runtimes' files live in this test's
own HOME (and podman's REGISTRY_AUTH_FILE), so the machine's logins are untouched. A wrong
password and a registry that does not answer are one line each, and nothing is written.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from engines import REGISTRY, REGISTRY_STATE, REGISTRY_USER
from registry_env import hpcai, private_home, run

pytestmark = [pytest.mark.registry, pytest.mark.docker, pytest.mark.podman, pytest.mark.apptainer]
BASE = os.environ.get("HPCAI_DEBIAN_BASE", "debian:bookworm-slim")


@pytest.fixture
def home(tmp_path) -> dict[str, str]:
    return private_home(tmp_path)


def test_one_login_serves_every_runtime(home, tmp_path):
    password = (REGISTRY_STATE / "password").read_text().strip()
    res = hpcai("login", REGISTRY, "-u", REGISTRY_USER, "--password-file", str(REGISTRY_STATE / "password"), env=home)
    assert res.returncode == 0, res.stderr
    assert password not in res.stdout + res.stderr
    for runtime in ("docker", "podman", "apptainer", "enroot"):
        assert f"{runtime}: " in res.stderr
    netrc = Path(home["HOME"]) / ".config" / "enroot" / ".credentials"
    for path in (netrc, Path(home["HOME"]) / ".docker" / "config.json", Path(home["REGISTRY_AUTH_FILE"])):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert netrc.read_text() == f"machine localhost login {REGISTRY_USER} password {password}\n"

    doctor = json.loads(hpcai("doctor", "--json", env=home).stdout)
    logins = next(c["found"] for c in doctor["checks"] if c["name"] == "registry logins")
    assert password not in logins
    for runtime in ("docker", "podman", "apptainer", "enroot"):
        assert f"{runtime}: localhost" in logins

    # a push and a pull per runtime, none of them logged in by itself
    res = hpcai("push", "--json", BASE, f"{REGISTRY}/hpcai-test/login:1", env=home)
    assert res.returncode == 0, res.stderr
    pull = json.loads(res.stdout)["pull"]
    assert run("podman", "pull", "-q", pull, env=home).returncode == 0
    sif = tmp_path / "login.sif"
    res = run("apptainer", "pull", str(sif), f"docker://{pull}",
              env={**home, "APPTAINER_CACHEDIR": str(tmp_path / "cache")})
    assert res.returncode == 0 and sif.is_file(), res.stderr
    sqsh = tmp_path / "login.sqsh"
    res = run("enroot", "import", "-o", str(sqsh), f"docker://{REGISTRY.replace('/', '#')}#hpcai-test/login:1",
              env={**home, "ENROOT_CACHE_PATH": str(tmp_path / "enroot-cache"),
                   "ENROOT_TEMP_PATH": str(tmp_path)})
    assert res.returncode == 0 and sqsh.is_file(), res.stderr[-2000:]


def test_a_wrong_password_writes_nothing(home):
    res = hpcai("login", REGISTRY, "-u", REGISTRY_USER, "--password-file", "-", env=home, stdin="not-the-password\n")
    assert res.returncode == 1, res.stderr
    assert res.stderr == f"error: login to {REGISTRY}: the registry refused '{REGISTRY_USER}': wrong password or " \
                         "expired token\n"
    assert list(Path(home["HOME"]).iterdir()) == [] and not Path(home["REGISTRY_AUTH_FILE"]).exists()


def test_the_password_from_the_environment_and_an_unreachable_registry(home):
    env = {**home, "HPCAI_REGISTRY_PASSWORD": "whatever"}
    res = hpcai("login", "localhost:1", "-u", REGISTRY_USER, env=env)
    assert res.returncode == 1 and res.stderr.startswith("error: login to localhost:1: the registry does not answer"), \
        res.stderr
    assert res.stderr.count("\n") == 1 and list(Path(home["HOME"]).iterdir()) == []
    res = hpcai("login", REGISTRY, "-u", REGISTRY_USER, "--runtimes", "docker,shifter", env=env)
    assert res.returncode == 2 and "unknown runtime 'shifter'" in res.stderr
