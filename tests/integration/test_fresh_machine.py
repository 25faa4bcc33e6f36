"""tests/infra/check-fresh.py for real: the package list covers what this repository's tests use,
checked against a simulated install in a fresh container of the minimal Debian base, and a test
that starts using a command outside the list is caught (a made-up tree with a shortened list)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECK = REPO / "tests" / "infra" / "check-fresh.py"
pytestmark = pytest.mark.docker


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK), *args], capture_output=True, text=True, timeout=900,
                          check=False)


def test_the_package_list_covers_every_command_the_tests_use():
    res = check()
    assert res.returncode == 0, res.stdout + res.stderr
    assert "MISSING" not in res.stdout
    assert "commands/modules the tests use are covered" in res.stdout


def test_a_command_outside_the_list_is_named_with_its_package_and_user(tmp_path):
    infra = tmp_path / "tests" / "infra"
    infra.mkdir(parents=True)
    shutil.copy(REPO / "tests" / "infra" / "install-packages.sh", infra)
    (infra / "packages.txt").write_text("base  make  make  runs make test\n")
    (tmp_path / "tests" / "test_uses_slurm.py").write_text(
        'import subprocess\n\ndef test_x():\n    subprocess.run(["srun", "-N2", "true"])\n')
    res = check("--root", str(tmp_path))
    assert res.returncode == 1
    assert ("check-fresh: MISSING srun (package slurm-client), used by tests/test_uses_slurm.py: "
            "add its package to tests/infra/packages.txt") in res.stdout.splitlines()
