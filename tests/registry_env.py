"""Helpers for the tests against the test registry (tests/infra/registry-up.sh): an environment
whose runtimes' credential files are the test's own (HOME, podman's auth file), so the machine's
logins are neither used nor changed, and `hpcai` run as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from engines import REGISTRY, REGISTRY_STATE, REGISTRY_USER

# what would let a runtime reach the registry without the test's own login
FOREIGN_LOGINS = ("DOCKER_CONFIG", "XDG_RUNTIME_DIR", "ENROOT_CONFIG_PATH", "APPTAINER_DOCKER_USERNAME",
                  "APPTAINER_DOCKER_PASSWORD", "HPCAI_REGISTRY_PASSWORD")


def private_home(tmp_path: Path) -> dict[str, str]:
    """An environment whose HOME (docker, Apptainer, enroot) and podman auth file are this test's."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_LOGINS}
    return {**env, "HOME": str(home), "REGISTRY_AUTH_FILE": str(tmp_path / "podman-auth.json")}


def run(*argv: str, env: dict[str, str], stdin: str | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), input=stdin, capture_output=True, text=True, env=env, timeout=timeout,
                          check=False)


def hpcai(*args: str, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess:
    return run(sys.executable, "-m", "hpcai", *args, env=env, stdin=stdin)


def login(env: dict[str, str], runtimes: str = "docker,podman,apptainer,enroot") -> None:
    """`hpcai login` for RUNTIMES with the registry's password file."""
    res = hpcai("login", REGISTRY, "-u", REGISTRY_USER, "--password-file", str(REGISTRY_STATE / "password"),
                "--runtimes", runtimes, env=env)
    assert res.returncode == 0, res.stderr
