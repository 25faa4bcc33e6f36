"""40-hostname, 50-gpu, 60-caches and 90-diagnose under a synthetic environment."""

from __future__ import annotations

import os

import pytest

from hooklib import as_root

SLURM = {"SLURM_JOB_ID": "31", "SLURM_PROCID": "2", "SLURM_LOCALID": "2", "SLURM_NTASKS": "4",
         "SLURM_NODEID": "0", "SLURM_TASKS_PER_NODE": "4", "SLURM_JOB_NODELIST": "local"}


# --- hostname ---------------------------------------------------------------------------

def test_suffix_resolves_to_an_address(run_entrypoint):
    # "local" + suffix "host" = "localhost", which resolves everywhere.
    run = run_entrypoint({**SLURM, "HPCAI_MASTER_ADDR_SUFFIX": "host"}, hooks=["ranks", "hostname"])
    assert run.env["MASTER_ADDR"] in {"127.0.0.1", "::1"}
    assert run.stderr == ""


def test_unresolvable_suffix_warns_and_keeps_the_plain_host(run_entrypoint):
    env = {**SLURM, "SLURM_JOB_NODELIST": "hpcai-no-such-node[01-02]", "HPCAI_MASTER_ADDR_SUFFIX": "i"}
    run = run_entrypoint(env, hooks=["ranks", "hostname"])
    assert run.rc == 0 and run.env["MASTER_ADDR"] == "hpcai-no-such-node01"
    assert run.warnings == ["hpcai-entrypoint: warning: hpcai-no-such-node01i does not resolve; "
                            "MASTER_ADDR stays hpcai-no-such-node01"]


def test_suffix_leaves_a_user_master_addr_alone(run_entrypoint):
    env = {**SLURM, "MASTER_ADDR": "nid001", "HPCAI_MASTER_ADDR_SUFFIX": "host"}
    run = run_entrypoint(env, hooks=["ranks", "hostname"])
    assert (run.env["MASTER_ADDR"], run.stderr) == ("nid001", "")


def test_no_suffix_is_not_applicable(run_entrypoint):
    run = run_entrypoint(SLURM, hooks=["ranks", "hostname"])
    assert run.env["MASTER_ADDR"] == "local"


# --- gpu --------------------------------------------------------------------------------

def test_gpu_binding_is_opt_in(run_entrypoint):
    run = run_entrypoint({"LOCAL_RANK": "3", "HPCAI_GPU_VENDOR": "cuda"}, hooks=["gpu"])
    assert run.exported() == {}


def test_gpu_binding_by_local_rank(run_entrypoint):
    env = {**SLURM, "HPCAI_GPU_BIND": "local-rank", "HPCAI_GPU_VENDOR": "cuda"}
    assert run_entrypoint(env, hooks=["ranks", "gpu"]).exported()["CUDA_VISIBLE_DEVICES"] == "2"
    env = {"LOCAL_RANK": "5", "HPCAI_GPU_BIND": "local-rank", "HPCAI_GPU_VENDOR": "rocm",
           "HPCAI_GPUS_PER_NODE": "4"}
    assert run_entrypoint(env, hooks=["gpu"]).exported() == {"ROCR_VISIBLE_DEVICES": "1"}


def test_scheduler_binding_survives(run_entrypoint):
    env = {"LOCAL_RANK": "2", "HPCAI_GPU_BIND": "local-rank", "HPCAI_GPU_VENDOR": "cuda",
           "CUDA_VISIBLE_DEVICES": "GPU-abc"}
    run = run_entrypoint(env, hooks=["gpu"])
    assert (run.exported(), run.env["CUDA_VISIBLE_DEVICES"]) == ({}, "GPU-abc")
    for scheduler in ({"ROCR_VISIBLE_DEVICES": "6"}, {"HIP_VISIBLE_DEVICES": "6"}):  # AMD: either layer
        env = {"LOCAL_RANK": "2", "HPCAI_GPU_BIND": "local-rank", "HPCAI_GPU_VENDOR": "rocm", **scheduler}
        run = run_entrypoint(env, hooks=["gpu"])
        assert run.exported() == {} and "ROCR_VISIBLE_DEVICES" not in run.exported(), scheduler


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/kfd"), reason="a GPU node")
def test_mpich_gpu_support_is_off_without_a_gpu_device(run_entrypoint):
    """MPICH built with CUDA segfaults in MPI_Init with no driver (seen in the GPU recipe's MPICH
    image): without a GPU device the hook turns its GPU support off; a user's value stays, and
    other MPIs are left alone."""
    assert run_entrypoint({"HPCAI_MPI": "mpich"}, hooks=["gpu"]).exported() == {"MPIR_CVAR_ENABLE_GPU": "0"}
    kept = run_entrypoint({"HPCAI_MPI": "mpich", "MPIR_CVAR_ENABLE_GPU": "1"}, hooks=["gpu"])
    assert (kept.exported(), kept.env["MPIR_CVAR_ENABLE_GPU"]) == ({}, "1")
    assert run_entrypoint({"HPCAI_MPI": "ompi"}, hooks=["gpu"]).exported() == {}


def test_gpu_bad_input_warns(run_entrypoint):
    run = run_entrypoint({"LOCAL_RANK": "1", "HPCAI_GPU_BIND": "closest"}, hooks=["gpu"])
    assert run.rc == 0 and run.exported() == {}
    assert run.warnings == ["hpcai-entrypoint: warning: unknown HPCAI_GPU_BIND=closest "
                            "(valid: local-rank, none); not binding"]


# --- caches -----------------------------------------------------------------------------

def test_cuda_caches_per_job(run_entrypoint, workdir):
    env = {**SLURM, "USER": "bob", "TMPDIR": str(workdir), "HOME": str(workdir),
           "HPCAI_GPU_VENDOR": "cuda"}
    assert run_entrypoint(env, hooks=["caches"]).exported() == {
        "CUDA_CACHE_PATH": f"{workdir}/hpcai-bob-31/cuda-cache",
        "TRITON_CACHE_DIR": f"{workdir}/hpcai-bob-31/triton"}


def test_rocm_caches_per_local_rank_and_user_values_survive(run_entrypoint, workdir):
    env = {**SLURM, "USER": "bob", "TMPDIR": str(workdir), "HOME": str(workdir),
           "HPCAI_GPU_VENDOR": "rocm", "TRITON_CACHE_DIR": "/mine"}
    run = run_entrypoint(env, hooks=["caches"])
    assert run.exported() == {"MIOPEN_USER_DB_PATH": f"{workdir}/hpcai-bob-31/miopen-2",
                              "MIOPEN_CUSTOM_CACHE_DIR": f"{workdir}/hpcai-bob-31/miopen-2"}
    assert run.env["TRITON_CACHE_DIR"] == "/mine"


def test_hf_home_moves_only_when_the_default_is_not_writable(run_entrypoint, workdir):
    tmp = workdir / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)  # a shared TMPDIR, like /tmp: the hook may run as nobody below
    base = {"USER": "bob", "TMPDIR": str(tmp), "HPCAI_GPU_VENDOR": "none"}
    assert run_entrypoint({**base, "HOME": str(workdir)}, hooks=["caches"]).exported() == {}
    assert not (tmp / "hpcai-bob-local").exists()  # made on first need only
    readonly_home = workdir / "home"
    readonly_home.mkdir(mode=0o555)
    # root may write anywhere, so drop to nobody when running as root
    got = run_entrypoint({**base, "HOME": str(readonly_home)}, hooks=["caches"],
                         user="65534" if as_root() else None).exported()
    assert got == {"HF_HOME": f"{tmp}/hpcai-bob-local/huggingface"}
    assert oct((tmp / "hpcai-bob-local").stat().st_mode & 0o777) == "0o700"


# --- diagnose ---------------------------------------------------------------------------

def test_diagnose_reports_set_and_kept(run_entrypoint):
    env = {**SLURM, "MASTER_PORT": "29500", "HPCAI_DEBUG": "1", "HPCAI_GPU_VENDOR": "none"}
    run = run_entrypoint(env, hooks=["ranks", "diagnose"])
    lines = run.stderr.splitlines()
    assert "hpcai-entrypoint: set   RANK=2  [ranks]" in lines
    assert "hpcai-entrypoint: set   MASTER_ADDR=local  [ranks]" in lines
    assert "hpcai-entrypoint: kept  MASTER_PORT=29500  (user value; [ranks] would set 61031)" in lines
    assert any(line.startswith("hpcai-entrypoint: libfabric: ") for line in lines)
    assert "hpcai-entrypoint: nccl plugin: none" in lines


def test_diagnose_is_silent_without_debug(run_entrypoint):
    run = run_entrypoint({**SLURM, "HPCAI_GPU_VENDOR": "none"}, hooks=["ranks", "diagnose"])
    assert run.stderr == ""


# --- --check ----------------------------------------------------------------------------

def test_check_report_lists_fabric_plugin_mpi_gpus_and_ranks(run_entrypoint, workdir):
    env = {**SLURM, "HPCAI_HOST_LIB": str(workdir / "absent"), "HPCAI_GPU_VENDOR": "none"}
    run = run_entrypoint(env, args=["--check"])
    keys = {line.split(":")[0] for line in run.stdout.splitlines()}
    assert {"libfabric", "providers", "nccl plugin", "mpi", "gpus", "RANK", "LOCAL_RANK",
            "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT"} <= keys
    assert "RANK:             2" in run.stdout and "MASTER_ADDR:      local" in run.stdout
    assert (run.rc, run.stdout.splitlines()[-1]) == (0, "OK")


def test_check_fails_when_a_mounted_host_fabric_is_unusable(run_entrypoint, workdir):
    host_lib = workdir / "hostlib"
    host_lib.mkdir()
    (host_lib / "libcxi.so.1").write_text("not libfabric")
    run = run_entrypoint({"HPCAI_HOST_LIB": str(host_lib), "HPCAI_STRICT_FABRIC": "1"},
                         args=["--check"])
    assert run.rc == 1
    assert run.stdout.splitlines()[-1] == f"FAIL: no usable libfabric.so.1 in {host_lib}; using the image's libfabric"


def test_diagnose_marks_extended_paths(run_entrypoint, workdir):
    host_lib = workdir / "hostlib"
    host_lib.mkdir()
    (host_lib / "libfabric.so.1.20.1").write_bytes(b"\x7fELF")
    env = {"HPCAI_HOST_LIB": str(host_lib), "TMPDIR": str(workdir), "HPCAI_DEBUG": "1",
           "LD_LIBRARY_PATH": "/user"}
    run = run_entrypoint(env, hooks=["host-fabric", "diagnose"])
    line = next(x for x in run.stderr.splitlines() if "LD_LIBRARY_PATH=" in x)
    assert line.endswith(f":/user:{host_lib}  [host-fabric (extended)]")
    assert f"hpcai-entrypoint: libfabric: {host_lib}/libfabric.so.1.20.1 (source: host)" in run.stderr
