"""payloads/megatron-gpt/install/build_helpers.py: Megatron-LM f7727433's own data helper
(megatron/data/helpers.cpp and its Makefile as port_torch.py leaves it, from the mirror archive
components.toml pins), built with this machine's g++ and pybind11 and called.

The crash the script guards against (a GCC 13 helper with libstdc++ linked statically: SIGSEGV at
its first number printed through std::cout, seen on a lent H100) does not happen with this
machine's GCC 12, which initialises the streams in every object. A STAND-IN compiler reproduces
its effect instead: it builds the same helper plus an object that segfaults when the module is
loaded, so its helper dies on the test call as that one did."""

from __future__ import annotations

import importlib.util
import os
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
INSTALL = REPO / "payloads" / "megatron-gpt" / "install"
COMMIT = "f7727433293427bef04858f67b2889fe9b177d88"
ARCHIVE = REPO / "tests" / "infra" / "mirror" / "github" / "NVIDIA" / "Megatron-LM" / f"{COMMIT}.tar.gz"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", INSTALL / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_helpers = _load("build_helpers")


@pytest.fixture
def tree(tmp_path):
    """megatron/data/{helpers.cpp,Makefile} from the pinned archive, the Makefile ported."""
    with tarfile.open(ARCHIVE) as tar:
        for rel in ("megatron/data/helpers.cpp", "megatron/data/Makefile"):
            member = tar.getmember(f"Megatron-LM-{COMMIT}/{rel}")
            member.name = rel
            tar.extract(member, tmp_path / "tree", filter="data")
    port = _load("port_torch")
    port.port_one(tmp_path / "tree", next(c for c in port.CHANGES if c[0] == "megatron/data/Makefile"))
    return tmp_path / "tree"


@pytest.fixture
def crashing_cxx(tmp_path):
    """A g++ whose helper segfaults once loaded (see the module's docstring)."""
    boom = tmp_path / "boom.cpp"
    boom.write_text("#include <csignal>\n"
                    "__attribute__((constructor, used)) static void boom() { std::raise(SIGSEGV); }\n")
    cxx = tmp_path / "static-g++"
    cxx.write_text(f'#!/bin/sh\nexec g++ "$@" {boom}\n')
    cxx.chmod(cxx.stat().st_mode | stat.S_IXUSR)
    return str(cxx)


def _make_is_a_no_op(tree: Path) -> bool:
    """What pretrain_gpt.py's compile_helper meets at run time: `make -q` says up to date."""
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    return subprocess.run(["make", "-q", "-C", str(tree / "megatron/data")], env=env, capture_output=True,
                          check=False).returncode == 0


def test_the_pinned_helper_is_built_and_answers(tree):
    kept, failed = build_helpers.build(tree, ["g++"])
    assert (kept, failed) == ("g++", [])
    assert len(list((tree / "megatron/data").glob("helpers*.so"))) == 1
    assert _make_is_a_no_op(tree), "the run would build the helper again, which a read-only image cannot"


def test_a_compiler_whose_helper_crashes_is_passed_over(tree, crashing_cxx):
    kept, failed = build_helpers.build(tree, [crashing_cxx, "g++"])
    assert kept == "g++"
    assert len(failed) == 1 and failed[0].startswith(f"{crashing_cxx}: its helper died with SIGSEGV on a test call"), failed
    assert _make_is_a_no_op(tree)


def test_no_compiler_that_works_is_one_message_and_no_helper_left(tree, crashing_cxx, monkeypatch, capsys):
    monkeypatch.setattr(build_helpers, "compilers", lambda: [crashing_cxx])
    assert build_helpers.main([str(tree)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"build_helpers.py: {crashing_cxx}: its helper died with SIGSEGV"), err
    assert err[-1] == (f"build_helpers.py: no C++ compiler built a Megatron-LM data helper that answers (tried: "
                       f"{crashing_cxx}); set CXX to a g++ that links libstdc++ as a shared library")
    assert not list((tree / "megatron/data").glob("helpers*.so")), "a helper that crashes must not be left"


def test_cxx_comes_first_and_each_program_once(tmp_path, monkeypatch):
    gxx = subprocess.run(["sh", "-c", "command -v g++"], capture_output=True, text=True, check=True).stdout.strip()
    alias = tmp_path / "c++-alias"
    alias.symlink_to(gxx)
    monkeypatch.setenv("CXX", str(alias))
    assert build_helpers.compilers() == [str(alias)]  # g++ and /usr/bin/g++ are the same program
    monkeypatch.setenv("CXX", "no-such-compiler")
    assert build_helpers.compilers()[0] == "g++"
