"""tests/infra/rocm_recipe_inputs.py: CI runs the ROCm recipe's tests only when their inputs changed
since `make rocm-recipe` proved them; the digest must move with any input and only with them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "infra"))
import rocm_recipe_inputs as gate  # noqa: E402


@pytest.fixture
def tree(tmp_path, monkeypatch):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "build.sh").write_text("make\n")
    (tmp_path / "recipe.toml").write_text("x = 1\n")
    (tmp_path / "elsewhere.txt").write_text("not an input\n")
    monkeypatch.setattr(gate, "REPO", tmp_path)
    monkeypatch.setattr(gate, "INPUTS", ("scripts", "recipe.toml"))
    monkeypatch.setattr(gate, "STAMP", tmp_path / "proven")
    return tmp_path


def test_the_digest_moves_with_every_input_and_only_with_them(tree):
    first = gate.digest()
    (tree / "elsewhere.txt").write_text("changed\n")
    (tree / "scripts" / "__pycache__").mkdir()
    (tree / "scripts" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert gate.digest() == first
    (tree / "scripts" / "build.sh").write_text("make -j\n")
    assert gate.digest() != first
    (tree / "scripts" / "build.sh").write_text("make\n")
    (tree / "scripts" / "new.sh").write_text("")
    assert gate.digest() != first


def test_proven_only_on_the_recorded_inputs(tree):
    assert not gate.proven()  # never proven
    gate.STAMP.write_text(gate.digest() + "\n")
    assert gate.proven()
    (tree / "recipe.toml").write_text("x = 2\n")
    assert not gate.proven()


def test_every_input_exists_and_the_recipe_scripts_are_inputs():
    for entry in gate.INPUTS:
        assert (REPO / entry).exists(), entry
    names = {p.relative_to(REPO).as_posix() for p in gate.files()}
    for needed in ("tests/infra/rocm-recipe.sh", "tests/infra/base-rocm/Dockerfile", "payloads/rccl-tests/build.sh",
                   "dockerfiles/install/openmpi.sh", "launcher/hpcai/image/components.toml",
                   "tests/integration/test_rocm_recipe.py"):
        assert needed in names, needed
