"""MPI payloads refuse the local backend with several ranks (one rank locally and many under
srun are fine), and detect a split MPI world themselves: mpi-allreduce's world check, with a
stand-in mpi4py and with a real Open MPI singleton."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import types

import pytest
from plan_helpers import FakeHost, _opts

from hpcai.payloads import load_payload, payloads_root
from hpcai.run.plan import plan_launch

ALLREDUCE = payloads_root() / "mpi-allreduce" / "allreduce.py"


def test_mpi_payloads_declare_it():
    assert load_payload("mpi-allreduce").needs_mpi and load_payload("osu").needs_mpi
    assert not load_payload("sanity").needs_mpi


def test_local_backend_refuses_mpi_payload_with_several_ranks(hpcai, tmp_path):
    res = hpcai("launch", "--dry-run", "--site", "local", "--image", "img", "--ntasks-per-node", "2",
                "-o", str(tmp_path / "r"), "mpi-allreduce")
    assert res.exit_code == 2
    line = res.stderr.strip()
    assert "\n" not in line and line.startswith("error: payload mpi-allreduce needs an MPI process manager")
    assert "srun --mpi=pmix" in line and "mpirun" in line


def test_local_backend_allows_one_rank_and_srun_allows_many(tmp_path):
    one = plan_launch(_opts(tmp_path, site="local", image="img", payload="mpi-allreduce"),
                      host=FakeHost(), check=False)
    assert len(one.rank_argvs) == 1
    srun = plan_launch(_opts(tmp_path, site="generic-slurm", payload="mpi-allreduce", ntasks_per_node=2,
                             nodes=2), host=FakeHost(), check=False)
    assert srun.argv[0] == "srun"


def _allreduce_module(monkeypatch):
    """allreduce.py loaded with a stand-in mpi4py (only check_world is exercised)."""
    monkeypatch.setitem(sys.modules, "mpi4py", types.SimpleNamespace(MPI=None))
    spec = importlib.util.spec_from_file_location("allreduce_under_test", ALLREDUCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_allreduce_world_check(monkeypatch):
    check = _allreduce_module(monkeypatch).check_world
    assert check(2, {"WORLD_SIZE": "2"}) is None
    assert check(1, {}) is None  # run by hand, no entrypoint
    assert check(1, {"WORLD_SIZE": "1", "HPCAI_COPY": "3"}) is None
    why = check(1, {"WORLD_SIZE": "4"})
    assert "MPI sees 1 rank(s) but WORLD_SIZE=4" in why and "srun --mpi=pmix" in why


def _system_mpi4py() -> str | None:
    py = shutil.which("python3", path="/usr/bin")
    if py and subprocess.run([py, "-c", "import mpi4py"], capture_output=True).returncode == 0:
        return py
    return None


@pytest.mark.skipif(_system_mpi4py() is None, reason="no system python3 with mpi4py (apt python3-mpi4py)")
def test_allreduce_real_singleton_fails_when_world_size_says_more(tmp_path):
    """Real mpi4py (Open MPI singleton, as in one of N independent local containers)."""
    argv = [_system_mpi4py(), str(ALLREDUCE), "--max-bytes", "8", "--iters", "1", "--warmup", "0"]
    env = {**os.environ, "WORLD_SIZE": "2"}
    env.pop("HPCAI_COPY", None)
    bad = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines()[-1].startswith("mpi-allreduce: MPI sees 1 rank(s) but WORLD_SIZE=2")
    good = subprocess.run(argv, capture_output=True, text=True, env={**env, "WORLD_SIZE": "1"},
                          cwd=tmp_path, timeout=60)
    assert good.returncode == 0 and "# mpi-allreduce: done, 1 ranks" in good.stdout
