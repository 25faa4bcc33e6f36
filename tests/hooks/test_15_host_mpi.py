"""15-host-mpi: swap in the host's MPICH-ABI libmpi.so.12 and its dependencies via a private dir.

The files here only need the right names (the hook never loads them); the proof that the loader
maps the host's library, and that an MPI program across two Slurm nodes sums right with it, is
tests/integration/test_host_mpi_swap.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hooklib import as_root, touch


@pytest.fixture
def host(workdir):
    """A fake container view: /host/mpi/lib (the bound MPI folder), dep folders, a TMPDIR."""
    for sub in ("mpi/lib", "mpi/dep0", "mpi/dep1", "tmp"):
        (workdir / sub).mkdir(parents=True)
    return workdir


def env_for(root: Path, **extra: str) -> dict[str, str]:
    return {"HPCAI_HOST_MPI_LIB": str(root / "mpi/lib"), "TMPDIR": str(root / "tmp"), "USER": "alice",
            **extra}


def cray_lib(lib: Path) -> None:
    """Cray's lib-abi-mpich: the upstream names only."""
    touch(lib / "libmpi.so.12.0.0")
    touch(lib / "libmpi.so.12", "libmpi.so.12.0.0")
    touch(lib / "libmpifort.so.12", "libmpi.so.12.0.0")
    touch(lib / "libstdc++.so.6")  # never linked: only the MPI's own names are


def test_host_mpi_and_named_deps_are_linked_first_with_debian_twins(run_entrypoint, host):
    lib = host / "mpi/lib"
    cray_lib(lib)
    touch(host / "mpi/dep0/libpmi2.so.0")
    touch(host / "mpi/dep0/libjunk.so.1")  # in a dep folder but not named: not linked
    touch(host / "mpi/dep1/libmpi_gtl_cuda.so.0")
    deps = f"{host}/mpi/dep0/libpmi2.so.0:{host}/mpi/dep1/libmpi_gtl_cuda.so.0"
    env = env_for(host, HPCAI_HOST_MPI_DEPS=deps, LD_LIBRARY_PATH="/user/a:/user/b", SLURM_JOB_ID="99",
                  SLURM_STEP_ID="2", SLURM_PROCID="3")
    run = run_entrypoint(env, hooks=["host-mpi"])
    private = host / "tmp/hpcai-mpi-alice-99-2-3"
    assert run.exported() == {"LD_LIBRARY_PATH": f"{private}:/user/a:/user/b", "HPCAI_MPI_SOURCE": "host",
                              "HPCAI_MPI_LIB": f"{lib}/libmpi.so.12"}
    assert sorted(os.listdir(private)) == ["libmpi.so.12", "libmpi_gtl_cuda.so.0", "libmpich.so.12",
                                           "libmpichfort.so.12", "libmpifort.so.12", "libpmi2.so.0"]
    # Debian-built programs ask for libmpich.so.12: it is the host's libmpi.so.12
    assert os.path.realpath(private / "libmpich.so.12") == str(lib / "libmpi.so.12.0.0")
    assert os.path.realpath(private / "libmpichfort.so.12") == str(lib / "libmpi.so.12.0.0")
    assert os.readlink(private / "libpmi2.so.0") == f"{host}/mpi/dep0/libpmi2.so.0"
    assert oct(private.stat().st_mode & 0o777) == "0o700"
    assert run.stderr == ""


def test_a_debian_style_host_mpi_gets_the_upstream_name(run_entrypoint, host):
    lib = host / "mpi/lib"
    touch(lib / "libmpich.so.12.2.2")
    touch(lib / "libmpich.so.12", "libmpich.so.12.2.2")
    run = run_entrypoint(env_for(host, SLURM_JOB_ID="5", SLURM_PROCID="0"), hooks=["host-mpi"])
    private = host / "tmp/hpcai-mpi-alice-5-0-0"
    assert run.env["HPCAI_MPI_LIB"] == f"{lib}/libmpich.so.12"
    assert sorted(os.listdir(private)) == ["libmpi.so.12", "libmpich.so.12"]
    assert os.path.realpath(private / "libmpi.so.12") == str(lib / "libmpich.so.12.2.2")


def test_the_hosts_own_twin_is_kept(run_entrypoint, host):
    lib = host / "mpi/lib"
    touch(lib / "libmpi.so.12")
    touch(lib / "libmpich.so.12")  # its own, different file: never replaced by a link to libmpi
    run = run_entrypoint(env_for(host, SLURM_JOB_ID="5", SLURM_PROCID="1"), hooks=["host-mpi"])
    private = host / "tmp/hpcai-mpi-alice-5-0-1"
    assert run.rc == 0 and os.readlink(private / "libmpich.so.12") == str(lib / "libmpich.so.12")


def test_it_goes_after_the_fabric_swap_and_leaves_libfabric_to_it(run_entrypoint, host):
    cray_lib(host / "mpi/lib")
    touch(host / "fabric/libfabric.so.1.22.0")
    touch(host / "mpi/dep0/libfabric.so.1")
    touch(host / "mpi/dep0/libpmi.so.0")
    env = env_for(host, HPCAI_HOST_LIB=str(host / "fabric"), HPCAI_HOST_USR=str(host / "absent"),
                  HPCAI_PREFIX=str(host / "prefix"), SLURM_JOB_ID="7", SLURM_PROCID="0",
                  HPCAI_HOST_MPI_DEPS=f"{host}/mpi/dep0/libfabric.so.1:{host}/mpi/dep0/libpmi.so.0")
    run = run_entrypoint(env, hooks=["host-fabric", "host-mpi"])
    mpi, fabric = host / "tmp/hpcai-mpi-alice-7-0-0", host / "tmp/hpcai-alice-7-0-0"
    assert run.env["LD_LIBRARY_PATH"].split(":") == [str(mpi), str(fabric), str(host / "fabric")]
    assert "libfabric.so.1" not in os.listdir(mpi) and "libpmi.so.0" in os.listdir(mpi)
    assert (run.env["HPCAI_FABRIC"], run.env["HPCAI_MPI_SOURCE"]) == ("host", "host")
    # without the fabric swap, the MPI's own libfabric goes first
    alone = run_entrypoint({**env, "HPCAI_HOOK_HOST_FABRIC": "0", "SLURM_JOB_ID": "8"},
                           hooks=["host-fabric", "host-mpi"])
    assert alone.rc == 0 and "libfabric.so.1" in os.listdir(host / "tmp/hpcai-mpi-alice-8-0-0")


def test_switched_off_by_the_user(run_entrypoint, host):
    cray_lib(host / "mpi/lib")
    run = run_entrypoint(env_for(host, HPCAI_HOOK_HOST_MPI="0", LD_LIBRARY_PATH="/user"),
                         hooks=["host-mpi"])
    assert (run.rc, run.exported(), run.stderr) == (0, {}, "")
    assert os.listdir(host / "tmp") == []


def test_a_users_library_path_keeps_its_order_after_ours(run_entrypoint, host):
    cray_lib(host / "mpi/lib")
    env = env_for(host, LD_LIBRARY_PATH="/my/mpich/lib:/other", SLURM_JOB_ID="3", SLURM_PROCID="0")
    run = run_entrypoint(env, hooks=["host-mpi"])
    assert run.env["LD_LIBRARY_PATH"].split(":")[1:] == ["/my/mpich/lib", "/other"]


def test_no_host_dir_or_an_empty_one_is_not_applicable(run_entrypoint, host):
    absent = run_entrypoint(env_for(host, HPCAI_HOST_MPI_LIB=str(host / "absent")), hooks=["host-mpi"])
    assert (absent.rc, absent.exported(), absent.stderr) == (0, {"HPCAI_MPI_SOURCE": "image"}, "")
    empty = run_entrypoint(env_for(host, HPCAI_STRICT_MPI="1"), hooks=["host-mpi"])
    assert (empty.rc, empty.exported(), empty.stderr) == (0, {"HPCAI_MPI_SOURCE": "image"}, "")


def test_a_folder_without_libmpi_warns_or_stops_in_strict_mode(run_entrypoint, host):
    lib = host / "mpi/lib"
    touch(lib / "libmpi.so.12", "/nonexistent/libmpi.so.12.0.0")
    touch(lib / "README")
    run = run_entrypoint(env_for(host), hooks=["host-mpi"])
    assert run.rc == 0 and run.exported() == {"HPCAI_MPI_SOURCE": "image"}
    assert run.warnings == [f"hpcai-entrypoint: warning: broken symlink {lib}/libmpi.so.12 ignored",
                            f"hpcai-entrypoint: warning: no usable libmpi.so.12 in {lib}; using the image's MPI"]
    strict = run_entrypoint(env_for(host, HPCAI_STRICT_MPI="1"), hooks=["host-mpi"])
    assert strict.rc == 78 and strict.stdout == ""
    assert strict.stderr.splitlines()[-1] == (f"hpcai-entrypoint: error: no usable libmpi.so.12 in {lib}; "
                                              "using the image's MPI (HPCAI_STRICT_MPI=1)")


def test_a_missing_dependency_warns_or_stops_in_strict_mode(run_entrypoint, host):
    cray_lib(host / "mpi/lib")
    gone = f"{host}/mpi/dep0/libpmi.so.0"
    run = run_entrypoint(env_for(host, HPCAI_HOST_MPI_DEPS=gone), hooks=["host-mpi"])
    assert run.rc == 0 and run.env["HPCAI_MPI_SOURCE"] == "host"
    assert run.warnings == [f"hpcai-entrypoint: warning: host MPI dependency {gone} is missing or unreadable; "
                            "the host MPI may not load"]
    strict = run_entrypoint(env_for(host, HPCAI_HOST_MPI_DEPS=gone, HPCAI_STRICT_MPI="1"), hooks=["host-mpi"])
    assert strict.rc == 78 and "(HPCAI_STRICT_MPI=1)" in strict.stderr


def test_deps_without_a_mounted_host_mpi_are_a_problem(run_entrypoint, host):
    env = env_for(host, HPCAI_HOST_MPI_LIB=str(host / "absent"), HPCAI_HOST_MPI_DEPS="/x/libpmi.so.0")
    run = run_entrypoint(env, hooks=["host-mpi"])
    assert run.rc == 0 and run.env["HPCAI_MPI_SOURCE"] == "image"
    assert run.warnings == [f"hpcai-entrypoint: warning: HPCAI_HOST_MPI_DEPS is set but {host}/absent is "
                            "not mounted; using the image's MPI"]


@pytest.mark.skipif(not as_root(), reason="needs root to run the hook as another user")
def test_unreadable_host_dir_warns_or_fails_strict(run_entrypoint, host):
    lib = host / "mpi/lib"
    cray_lib(lib)
    lib.chmod(0o700)  # root-owned, and the hook runs as nobody
    run = run_entrypoint(env_for(host), hooks=["host-mpi"], user="65534")
    assert run.rc == 0 and run.env["HPCAI_MPI_SOURCE"] == "image"
    assert run.warnings == [f"hpcai-entrypoint: warning: host MPI dir {lib} is not readable; "
                            "using the image's MPI"]
    strict = run_entrypoint(env_for(host, HPCAI_STRICT_MPI="1"), hooks=["host-mpi"], user="65534")
    assert strict.rc == 78 and "is not readable" in strict.stderr


def test_rerun_in_the_same_step_reuses_the_links(run_entrypoint, host):
    cray_lib(host / "mpi/lib")
    env = env_for(host, SLURM_JOB_ID="8", SLURM_PROCID="0")
    private = host / "tmp/hpcai-mpi-alice-8-0-0"
    first = run_entrypoint(env, hooks=["host-mpi"])
    stamps = {p.name: p.lstat().st_mtime_ns for p in private.iterdir()}
    again = run_entrypoint(env, hooks=["host-mpi"])
    assert again.exported() == first.exported()
    assert {p.name: p.lstat().st_mtime_ns for p in private.iterdir()} == stamps  # not rewritten


def test_outside_a_job_the_dir_is_per_process_and_stale_ones_go(run_entrypoint, host):
    cray_lib(host / "mpi/lib")
    stale = host / "tmp/hpcai-mpi-alice-local-999999999"  # no such pid
    fabric = host / "tmp/hpcai-alice-local-999999999"  # 10-host-fabric's: not ours to remove
    stale.mkdir()
    fabric.mkdir()
    run = run_entrypoint(env_for(host), hooks=["host-mpi"],
                         args=["sh", "-c", 'echo "$$"; echo "$LD_LIBRARY_PATH"'])
    pid, ld_path = run.stdout.split()
    assert ld_path.split(":")[0] == str(host / f"tmp/hpcai-mpi-alice-local-{pid}")
    assert not stale.exists() and fabric.exists()


def test_check_reports_the_host_mpi_and_fails_on_an_unusable_one(run_entrypoint, host):
    lib = host / "mpi/lib"
    cray_lib(lib)
    env = env_for(host, HPCAI_HOST_LIB=str(host / "absent"), HPCAI_GPU_VENDOR="none", SLURM_JOB_ID="4",
                  SLURM_PROCID="0")
    run = run_entrypoint(env, args=["--check"])
    private = host / "tmp/hpcai-mpi-alice-4-0-0"
    line = next(x for x in run.stdout.splitlines() if x.startswith("mpi library:"))
    assert line.startswith(f"mpi library:      libmpi.so.12 -> {lib}/libmpi.so.12.0.0, "
                           f"libmpich.so.12 -> {lib}/libmpi.so.12.0.0")
    assert line.endswith("(source: host)") and private.is_dir()
    assert (run.rc, run.stdout.splitlines()[-1]) == (0, "OK")
    (lib / "libmpi.so.12").unlink()
    (lib / "libmpifort.so.12").unlink()
    bad = run_entrypoint({**env, "HPCAI_STRICT_MPI": "1"}, args=["--check"])
    assert bad.rc == 1
    assert bad.stdout.splitlines()[-1] == f"FAIL: no usable libmpi.so.12 in {lib}; using the image's MPI"


def test_a_dependency_named_apart_from_its_file_is_linked_by_that_name(run_entrypoint, host):
    # the launcher resolved the host's libpals.so.0 link to the PALS folder's libpals.so.0.0.0
    cray_lib(host / "mpi/lib")
    touch(host / "mpi/dep1/libpals.so.0.0.0")
    env = env_for(host, HPCAI_HOST_MPI_DEPS=f"libpals.so.0={host}/mpi/dep1/libpals.so.0.0.0", SLURM_JOB_ID="6",
                  SLURM_PROCID="0")
    run = run_entrypoint(env, hooks=["host-mpi"])
    private = host / "tmp/hpcai-mpi-alice-6-0-0"
    assert run.rc == 0 and run.stderr == ""
    assert os.readlink(private / "libpals.so.0") == f"{host}/mpi/dep1/libpals.so.0.0.0"
    assert "libpals.so.0.0.0" not in os.listdir(private)
