"""10-host-fabric: swap in the host's libfabric/libcxi via a private dir, append the rest.

These tests use files that only need the right names (the hook never loads them); the real
loading proof (/proc/self/maps in Docker and Charliecloud) is in tests/integration.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hooklib import as_root, touch


@pytest.fixture
def host(workdir):
    """A fake host tree: lib (the libfabric bind), usr/lib64, and a TMPDIR."""
    (workdir / "host" / "lib").mkdir(parents=True)
    (workdir / "host" / "usr" / "lib64").mkdir(parents=True)
    (workdir / "tmp").mkdir()
    return workdir


def env_for(root: Path, **extra: str) -> dict[str, str]:
    return {"HPCAI_HOST_LIB": str(root / "host/lib"), "HPCAI_HOST_USR": str(root / "host/usr"),
            "HPCAI_PREFIX": str(root / "prefix"), "TMPDIR": str(root / "tmp"), "USER": "alice",
            **extra}


def test_host_libfabric_and_cxi_are_linked_first_rest_appended(run_entrypoint, host):
    lib, usr = host / "host/lib", host / "host/usr"
    touch(lib / "libfabric.so.1.22.0")
    touch(lib / "libfabric.so.1", "libfabric.so.1.22.0")
    touch(lib / "libstdc++.so.6")  # must never be prepended
    touch(usr / "lib64/libcxi.so.1.5.0")
    touch(usr / "lib64/libcxi.so.1", "libcxi.so.1.5.0")
    touch(usr / "lib64/libjson-c.so.5")
    env = env_for(host, LD_LIBRARY_PATH="/user/a:/user/b", SLURM_JOB_ID="99", SLURM_STEP_ID="2",
                  SLURM_PROCID="3")
    run = run_entrypoint(env, hooks=["host-fabric"])
    private = host / "tmp/hpcai-alice-99-2-3"
    assert run.exported() == {
        "LD_LIBRARY_PATH": f"{private}:/user/a:/user/b:{lib}:{usr}/lib64",
        "HPCAI_FABRIC": "host", "HPCAI_FABRIC_LIB": f"{lib}/libfabric.so.1.22.0",
        "HPCAI_FABRIC_CXI": "1"}
    assert sorted(os.listdir(private)) == ["libcxi.so.1", "libcxi.so.1.5.0", "libfabric.so.1"]
    assert os.path.realpath(private / "libfabric.so.1") == str(lib / "libfabric.so.1.22.0")
    assert os.path.realpath(private / "libcxi.so.1") == str(usr / "lib64/libcxi.so.1.5.0")
    assert oct(private.stat().st_mode & 0o777) == "0o700"
    assert run.stderr == ""


def test_a_cxi_library_in_both_host_folders_comes_from_host_lib(run_entrypoint, host):
    lib, usr = host / "host/lib", host / "host/usr"
    touch(lib / "libfabric.so.1.22.0")
    touch(lib / "libcxi.so.1")  # the site's fabric folder
    touch(usr / "lib64/libcxi.so.1")  # the OS copy, listed after it
    touch(usr / "lib64/libcxi.so.1.5.0")
    env = env_for(host, SLURM_JOB_ID="7", SLURM_PROCID="0")
    for _ in range(2):  # and again, with the links already there
        run = run_entrypoint(env, hooks=["host-fabric"])
        private = host / "tmp/hpcai-alice-7-0-0"
        assert os.path.realpath(private / "libcxi.so.1") == str(lib / "libcxi.so.1")
        assert os.path.realpath(private / "libcxi.so.1.5.0") == str(usr / "lib64/libcxi.so.1.5.0")
        assert run.env["HPCAI_FABRIC_CXI"] == "1"


def test_two_versions_pick_newest_numerically_and_say_so(run_entrypoint, host):
    lib = host / "host/lib"
    for version in ("9.0", "22.0", "15.2"):
        touch(lib / f"libfabric.so.1.{version}")
    run = run_entrypoint(env_for(host), hooks=["host-fabric"])
    assert run.env["HPCAI_FABRIC_LIB"] == f"{lib}/libfabric.so.1.22.0"
    assert run.env["HPCAI_FABRIC_CXI"] == "0"
    assert len(run.warnings) == 1
    assert "several libfabric versions" in run.warnings[0] and "libfabric.so.1.22.0" in run.warnings[0]


def test_broken_symlinks_are_skipped_with_a_warning(run_entrypoint, host):
    lib = host / "host/lib"
    touch(lib / "libfabric.so.1.30.0", "/nonexistent/libfabric.so.1.30.0")
    touch(lib / "libfabric.so.1.20.1")
    touch(lib / "libcxi.so.1", "/nonexistent/libcxi.so.1")
    run = run_entrypoint(env_for(host), hooks=["host-fabric"])
    assert run.env["HPCAI_FABRIC_LIB"] == f"{lib}/libfabric.so.1.20.1"
    assert run.env["HPCAI_FABRIC_CXI"] == "0"
    assert run.warnings == [f"hpcai-entrypoint: warning: broken symlink {lib}/libfabric.so.1.30.0 ignored"]


def test_only_broken_libfabric_falls_back_or_fails_in_strict_mode(run_entrypoint, host):
    touch(host / "host/lib/libfabric.so.1", "/nonexistent/libfabric.so.1.20.0")
    run = run_entrypoint(env_for(host), hooks=["host-fabric"])
    assert run.rc == 0 and run.exported() == {"HPCAI_FABRIC": "image"}
    assert any("no usable libfabric.so.1" in w for w in run.warnings)
    strict = run_entrypoint(env_for(host, HPCAI_STRICT_FABRIC="1"), hooks=["host-fabric"])
    assert strict.rc == 78
    assert "error: no usable libfabric.so.1 in" in strict.stderr and "HPCAI_STRICT_FABRIC=1" in strict.stderr


def test_empty_host_dir_keeps_the_image_libfabric_quietly(run_entrypoint, host):
    run = run_entrypoint(env_for(host, HPCAI_STRICT_FABRIC="1"), hooks=["host-fabric"])
    assert (run.rc, run.exported(), run.stderr) == (0, {"HPCAI_FABRIC": "image"}, "")


def test_no_host_dir_is_not_applicable(run_entrypoint, host):
    env = env_for(host, HPCAI_HOST_LIB=str(host / "absent"))
    run = run_entrypoint(env, hooks=["host-fabric"])
    assert (run.rc, run.exported(), run.stderr) == (0, {"HPCAI_FABRIC": "image"}, "")


@pytest.mark.skipif(not as_root(), reason="needs root to run the hook as another user")
def test_unreadable_host_dir_warns_or_fails_strict(run_entrypoint, host):
    lib = host / "host/lib"
    touch(lib / "libfabric.so.1.20.0")
    lib.chmod(0o700)  # root-owned, and the hook runs as nobody
    run = run_entrypoint(env_for(host), hooks=["host-fabric"], user="65534")
    assert run.rc == 0 and run.env["HPCAI_FABRIC"] == "image"
    assert run.warnings == [f"hpcai-entrypoint: warning: host library dir {lib} is not readable; "
                            "using the image's libfabric"]
    strict = run_entrypoint(env_for(host, HPCAI_STRICT_FABRIC="1"), hooks=["host-fabric"],
                            user="65534")
    assert strict.rc == 78 and "is not readable" in strict.stderr


def test_baked_libs_of_an_ss_image_are_used_without_host(run_entrypoint, host):
    baked = host / "prefix/hpc-libs"
    touch(baked / "libfabric.so.1.22.0")
    touch(baked / "libfabric.so.1", "libfabric.so.1.22.0")
    touch(baked / "libcxi.so.1")
    env = env_for(host, HPCAI_HOST_LIB=str(host / "absent"), LD_LIBRARY_PATH="/user")
    assert run_entrypoint(env, hooks=["host-fabric"]).exported() == {
        "LD_LIBRARY_PATH": f"{baked}:/user", "HPCAI_FABRIC": "baked",
        "HPCAI_FABRIC_LIB": f"{baked}/libfabric.so.1.22.0", "HPCAI_FABRIC_CXI": "1"}


def test_host_wins_over_baked(run_entrypoint, host):
    touch(host / "prefix/hpc-libs/libfabric.so.1.22.0")
    touch(host / "host/lib/libfabric.so.1.20.1")
    assert run_entrypoint(env_for(host), hooks=["host-fabric"]).env["HPCAI_FABRIC"] == "host"


def test_outside_a_job_the_private_dir_is_per_process_and_stale_ones_go(run_entrypoint, host):
    touch(host / "host/lib/libfabric.so.1.20.1")
    stale = host / "tmp/hpcai-alice-local-999999999"  # no such pid
    stale.mkdir()
    run = run_entrypoint(env_for(host), hooks=["host-fabric"], args=["sh", "-c", 'echo "$$"; echo "$LD_LIBRARY_PATH"'])
    pid, ld_path = run.stdout.split()
    assert ld_path.split(":")[0] == str(host / f"tmp/hpcai-alice-local-{pid}")
    assert not stale.exists()


def test_a_live_process_stand_in_private_dir_is_not_removed_as_stale(run_entrypoint, host):
    # hpcai_private_dir's mktemp stand-in for hpcai-alice-local-PID is hpcai-alice-local-PID.XXXXXXXX
    touch(host / "host/lib/libfabric.so.1.20.1")
    live = host / "tmp/hpcai-alice-local-1.AbCd1234"  # pid 1 always runs
    dead = host / "tmp/hpcai-alice-local-999999999.AbCd1234"
    live.mkdir()
    dead.mkdir()
    run = run_entrypoint(env_for(host), hooks=["host-fabric"])
    assert run.rc == 0 and live.exists() and not dead.exists()


def test_foreign_private_dir_is_not_reused(run_entrypoint, host):
    if not as_root():
        pytest.skip("needs root to create a dir owned by someone else")
    touch(host / "host/lib/libfabric.so.1.20.1")
    squatter = host / "tmp/hpcai-alice-5-0-0"
    squatter.mkdir()
    os.chown(squatter, 65534, 65534)
    run = run_entrypoint(env_for(host, SLURM_JOB_ID="5", SLURM_PROCID="0"), hooks=["host-fabric"])
    first = run.env["LD_LIBRARY_PATH"].split(":")[0]
    assert first != str(squatter) and first.startswith(str(host / "tmp/hpcai-alice-"))
    assert os.listdir(squatter) == []


def test_rerun_in_the_same_step_reuses_links_and_follows_a_new_choice(run_entrypoint, host):
    lib = host / "host/lib"
    touch(lib / "libfabric.so.1.20.1")
    touch(host / "host/usr/lib64/libcxi.so.1")
    env = env_for(host, SLURM_JOB_ID="8", SLURM_PROCID="0")
    private = host / "tmp/hpcai-alice-8-0-0"
    first = run_entrypoint(env, hooks=["host-fabric"])
    stamp = (private / "libfabric.so.1").lstat().st_mtime_ns
    again = run_entrypoint(env, hooks=["host-fabric"])
    assert again.exported() == first.exported()
    assert (private / "libfabric.so.1").lstat().st_mtime_ns == stamp  # not rewritten
    touch(lib / "libfabric.so.1.22.0")
    newer = run_entrypoint(env, hooks=["host-fabric"])
    assert os.readlink(private / "libfabric.so.1") == str(lib / "libfabric.so.1.22.0")
    assert newer.env["HPCAI_FABRIC_LIB"] == str(lib / "libfabric.so.1.22.0")
