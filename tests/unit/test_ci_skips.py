"""tests/conftest.py's CI rule, run for real by pytest in a subprocess: under
HPCAI_REQUIRE_ENGINES=1 a test that would skip (missing engine, package or file) fails instead,
Apptainer included (tests/infra installs it), and tests for the engine CI cannot have (a GPU) are
deselected, not skipped."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from engines import engine_available

REPO = Path(__file__).resolve().parents[2]

pytest_plugins = ["pytester"]

SUITE = """
import shutil
import pytest

def test_passes():
    pass

def test_skips_inside():
    pytest.skip("no such package here")

@pytest.mark.skipif(not shutil.which("no-such-tool-hpcai"), reason="no-such-tool-hpcai missing")
def test_skipif():
    pass

@pytest.mark.apptainer
def test_needs_apptainer():
    pass

@pytest.mark.gpu
def test_needs_gpu():
    pass
"""


@pytest.fixture
def suite(pytester):
    for name in ("conftest.py", "engines.py", "imagebuild.py", "sifcache.py"):
        shutil.copy(REPO / "tests" / name, pytester.path / name)
    pytester.makeini("[pytest]\nmarkers =\n  apptainer: x\n  gpu: x\n")
    pytester.makepyfile(test_suite=SUITE)
    return pytester


@pytest.mark.skipif(engine_available("gpu"), reason="needs a machine like CI's (no GPU)")
def test_skips_fail_and_never_on_ci_engines_are_deselected(suite, monkeypatch):
    monkeypatch.setenv("HPCAI_REQUIRE_ENGINES", "1")
    res = suite.runpytest_subprocess("-rA")
    # a skipif fails in setup: an error; the apptainer test runs (CI has it), failing where it is missing
    apptainer = engine_available("apptainer")
    res.assert_outcomes(passed=1 + apptainer, failed=1 + (not apptainer), errors=1, deselected=1)
    res.stdout.fnmatch_lines(["*would skip, which CI (HPCAI_REQUIRE_ENGINES=1) does not allow: no-such-tool-hpcai missing",
                              "*would skip, which CI (HPCAI_REQUIRE_ENGINES=1) does not allow: no such package here"])


def test_a_workstation_skips(suite, monkeypatch):
    monkeypatch.delenv("HPCAI_REQUIRE_ENGINES", raising=False)
    res = suite.runpytest_subprocess()
    skipped = 2 + sum(not engine_available(name) for name in ("apptainer", "gpu"))
    res.assert_outcomes(passed=5 - skipped, skipped=skipped)
