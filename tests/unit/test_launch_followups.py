"""Launch loose ends: --energy says when nothing can be measured, MPI payloads refuse the local
backend (and detect a split MPI world themselves), SIF digests are cached between launches."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import types

import pytest
from test_plan_helpers import FakeHost

import hpcai.run.energy as energy
from hpcai.payloads import load_payload, payloads_root
from hpcai.run.plan import LaunchOptions, plan_launch

ALLREDUCE = payloads_root() / "mpi-allreduce" / "allreduce.py"


def _opts(tmp_path, **kw):
    kw.setdefault("image", "IMG.sif")
    kw.setdefault("output_dir", str(tmp_path / "run"))
    kw.setdefault("payload", "sanity")
    return LaunchOptions(**kw)


# ---- --energy without a power source ---------------------------------------------------------

def test_energy_without_power_source_is_a_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(energy, "detect_power_source", lambda: [])
    plan = plan_launch(_opts(tmp_path, site="generic-slurm", energy=True), host=FakeHost(), check=False)
    assert any("no power source" in w and "the run continues" in w for w in plan.warnings)


def test_energy_with_power_source_and_jpwr_is_silent(tmp_path, monkeypatch):
    monkeypatch.setattr(energy, "detect_power_source", lambda: ["pynvml"])
    monkeypatch.setattr(energy, "jpwr_command", lambda: ["jpwr"])
    plan = plan_launch(_opts(tmp_path, site="generic-slurm", energy=True), host=FakeHost(), check=False)
    assert not any("--energy" in w for w in plan.warnings)


def test_energy_notice_reaches_stderr(hpcai, tmp_path, monkeypatch):
    monkeypatch.setattr(energy, "detect_power_source", lambda: [])
    res = hpcai("launch", "--dry-run", "--energy", "--site", "generic-slurm", "--image", "x.sif",
                "-o", str(tmp_path / "r"), "sanity")
    assert res.exit_code == 0
    assert "# warning: --energy: no power source on this host" in res.stderr
    assert "no power source" not in res.stdout


# ---- MPI payloads and the local backend ------------------------------------------------------

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


# ---- image digest cache ----------------------------------------------------------------------

def test_image_digest_is_cached_by_path_size_mtime(tmp_path, monkeypatch):
    import hashlib
    import json

    from hpcai.run import digests

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    image = tmp_path / "img.sif"
    image.write_bytes(b"squashfs" * 1000)
    want = "sha256:" + hashlib.sha256(image.read_bytes()).hexdigest()
    link = tmp_path / "link.sif"
    link.symlink_to(image)
    assert digests.image_sha256(link) == want
    stored = json.loads((tmp_path / "cache" / "hpcai" / "digests.json").read_text())
    assert stored[str(image)]["digest"] == want and stored[str(image)]["size"] == 8000

    def no_rehash(path):
        raise AssertionError("rehashed an unchanged image")

    monkeypatch.setattr(digests, "sha256_file", no_rehash)
    assert digests.image_sha256(image) == want  # cache hit through the real path
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    image.write_bytes(b"rebuilt" * 1000)  # size (and mtime) change: hashed again
    assert digests.image_sha256(image) == "sha256:" + hashlib.sha256(image.read_bytes()).hexdigest()


@pytest.mark.hostile
@pytest.mark.parametrize("how", ["same size and mtime", "replaced by another file, mtime copied"])
def test_a_rewritten_image_keeping_size_and_mtime_is_hashed_again(tmp_path, monkeypatch, how):
    """issue 12: the cache returned a stale digest when size and mtime matched (touch -r, cp -p)."""
    import hashlib
    import os

    from hpcai.run import digests

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    image = tmp_path / "img.sif"
    image.write_bytes(b"A" * 4096)
    st = image.stat()
    digests.image_sha256(image)
    if how == "same size and mtime":
        image.write_bytes(b"B" * 4096)
    else:
        other = tmp_path / "other.sif"
        other.write_bytes(b"C" * 4096)
        os.replace(other, image)
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns))  # what `touch -r` or `cp -p` do
    assert (image.stat().st_size, image.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert digests.image_sha256(image) == "sha256:" + hashlib.sha256(image.read_bytes()).hexdigest()


@pytest.mark.hostile
@pytest.mark.parametrize("cache", ['{"x": 1', "[]", '{"%s": {"size": "8"}}', '{"%s": 7}', "\udcff"])
def test_a_damaged_digest_cache_only_costs_the_hash(tmp_path, monkeypatch, cache):
    import hashlib

    from hpcai.run import digests

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    image = tmp_path / "img.sif"
    image.write_bytes(b"squash")
    (tmp_path / "cache" / "hpcai").mkdir(parents=True)
    text = cache % image if "%s" in cache else cache
    (tmp_path / "cache" / "hpcai" / "digests.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    assert digests.image_sha256(image) == "sha256:" + hashlib.sha256(b"squash").hexdigest()


def test_unwritable_cache_still_gives_the_digest(tmp_path, monkeypatch):
    from hpcai.run import digests

    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    image = tmp_path / "i.sqfs"
    image.write_bytes(b"x")
    assert digests.image_sha256(image).startswith("sha256:")
