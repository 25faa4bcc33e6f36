"""20-nccl-net: the image's OFI plugin, NCCL_NET only multi-node, Slingshot defaults on cxi.

The defaults come from entrypoints/hooks.d/slingshot-env.sh, the one copy the launcher reads too
(tests/unit/run/test_sites_runtimes.py checks that no site or hook holds another)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hooklib import HOOKS

SLINGSHOT_DEFAULTS = {
    "NCCL_SOCKET_IFNAME": "hsn", "NCCL_NET_GDR_LEVEL": "PHB", "NCCL_CROSS_NIC": "1",
    "NCCL_PROTO": "^LL128", "FI_MR_CACHE_MONITOR": "userfaultfd",
    "FI_CXI_DISABLE_HOST_REGISTER": "1", "FI_CXI_DEFAULT_CQ_SIZE": "131072",
    "FI_CXI_DEFAULT_TX_SIZE": "2048", "FI_CXI_RX_MATCH_MODE": "hybrid",
    "FI_CXI_RDZV_EAGER_SIZE": "0", "FI_CXI_RDZV_THRESHOLD": "0", "FI_CXI_RDZV_GET_MIN": "0",
    "MPICH_GPU_SUPPORT_ENABLED": "0", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
}
PROFILE = HOOKS / "slingshot-env.sh"


@pytest.fixture
def prefix(workdir) -> Path:
    (workdir / "prefix/lib").mkdir(parents=True)
    return workdir / "prefix"


def env_for(prefix: Path, **extra: str) -> dict[str, str]:
    # the test's hooks folder holds only 20-nccl-net.sh: the profile is named where it lies
    return {"HPCAI_PREFIX": str(prefix), "HPCAI_VENDOR_OFI_DIR": str(prefix / "no-vendor"),
            "HPCAI_GPU_VENDOR": "cuda", "HPCAI_SLINGSHOT_PROFILE": str(PROFILE), **extra}


def test_plugin_only_without_cxi(run_entrypoint, prefix):
    (prefix / "lib/libnccl-net.so").touch()
    run = run_entrypoint(env_for(prefix, SLURM_JOB_NUM_NODES="4"), hooks=["nccl-net"])
    assert run.exported() == {"NCCL_NET_PLUGIN": f"{prefix}/lib/libnccl-net.so"}


def test_cxi_multi_node_forces_net_and_applies_defaults(run_entrypoint, prefix):
    (prefix / "lib/libnccl-net.so").touch()
    env = env_for(prefix, HPCAI_FABRIC_CXI="1", SLURM_JOB_NUM_NODES="2")
    assert run_entrypoint(env, hooks=["nccl-net"]).exported() == {
        "NCCL_NET_PLUGIN": f"{prefix}/lib/libnccl-net.so", "NCCL_NET": "AWS Libfabric",
        **SLINGSHOT_DEFAULTS, "FI_HMEM_CUDA_USE_GDRCOPY": "1"}


def test_cxi_single_node_does_not_force_net(run_entrypoint, prefix):
    (prefix / "lib/libnccl-net.so").touch()
    env = env_for(prefix, HPCAI_FABRIC_CXI="1", SLURM_JOB_NUM_NODES="4", SLURM_STEP_NUM_NODES="1")
    got = run_entrypoint(env, hooks=["nccl-net"]).exported()
    assert "NCCL_NET" not in got and got["FI_CXI_RX_MATCH_MODE"] == "hybrid"


def test_cxi_without_plugin_never_forces_net(run_entrypoint, prefix):
    env = env_for(prefix, HPCAI_FABRIC_CXI="1", SLURM_JOB_NUM_NODES="8")
    assert run_entrypoint(env, hooks=["nccl-net"]).exported() == SLINGSHOT_DEFAULTS


def test_rocm_uses_rccl_plugin_path(run_entrypoint, prefix):
    (prefix / "lib/librccl-net.so").touch()
    (prefix / "lib/libnccl-net.so").touch()  # the symlink OLCF adds; RCCL needs the path
    env = env_for(prefix, HPCAI_GPU_VENDOR="rocm", HPCAI_FABRIC_CXI="1", SLURM_NNODES="2")
    got = run_entrypoint(env, hooks=["nccl-net"]).exported()
    assert got["NCCL_NET_PLUGIN"] == f"{prefix}/lib/librccl-net.so"
    assert got["HSA_FORCE_FINE_GRAIN_PCIE"] == "1" and "FI_HMEM_CUDA_USE_GDRCOPY" not in got


@pytest.mark.parametrize("vendor,files,expected", [
    # Newer aws-ofi-nccl installs only the suffixed name; the hook finds it for either vendor.
    ("cuda", ["libnccl-net-ofi.so"], "libnccl-net-ofi.so"),
    ("rocm", ["librccl-net-ofi.so"], "librccl-net-ofi.so"),
    # The classic name wins over a suffixed one next to it.
    ("cuda", ["libnccl-net-ofi.so", "libnccl-net.so"], "libnccl-net.so"),
    # A ROCm image with only the RCCL plugin, whatever the vendor probe says.
    ("cuda", ["librccl-net.so"], "librccl-net.so"),
])
def test_plugin_name_variants(run_entrypoint, prefix, vendor, files, expected):
    for name in files:
        (prefix / "lib" / name).touch()
    env = env_for(prefix, HPCAI_GPU_VENDOR=vendor, HPCAI_FABRIC_CXI="1", SLURM_NNODES="2")
    got = run_entrypoint(env, hooks=["nccl-net"]).exported()
    assert got["NCCL_NET_PLUGIN"] == f"{prefix}/lib/{expected}" and got["NCCL_NET"] == "AWS Libfabric"
    rccl = expected.startswith("librccl")
    assert ("HSA_FORCE_FINE_GRAIN_PCIE" in got, "FI_HMEM_CUDA_USE_GDRCOPY" in got) == (rccl, not rccl)


def test_site_overrides_and_slingshot_env_survive(run_entrypoint, prefix):
    (prefix / "lib/libnccl-net.so").touch()
    user = {"FI_MR_CACHE_MONITOR": "kdreg2", "FI_CXI_DEFAULT_TX_SIZE": "16384",
            "NCCL_NET": "OFI", "NCCL_NET_PLUGIN": "/site/plugin/libnccl-net.so",
            "SLINGSHOT_VNIS": "1234", "SLINGSHOT_SVC_IDS": "5", "PALS_APINFO": "/x"}
    run = run_entrypoint(env_for(prefix, HPCAI_FABRIC_CXI="1", SLURM_JOB_NUM_NODES="2", **user),
                         hooks=["nccl-net"])
    assert {k: run.env[k] for k in user} == user
    assert not set(user) & set(run.exported())


def test_vendor_plugin_in_base_image_gets_ours_preloaded(run_entrypoint, prefix):
    (prefix / "lib/libnccl-net.so").touch()
    (prefix / "vendor/aws-ofi-nccl").mkdir(parents=True)
    env = env_for(prefix, HPCAI_VENDOR_OFI_DIR=str(prefix / "vendor"), LD_PRELOAD="/user.so")
    assert run_entrypoint(env, hooks=["nccl-net"]).exported() == {
        "NCCL_NET_PLUGIN": f"{prefix}/lib/libnccl-net.so",
        "LD_PRELOAD": f"{prefix}/lib/libnccl-net.so:/user.so"}


def test_nothing_to_do_on_a_cpu_image(run_entrypoint, prefix):
    run = run_entrypoint(env_for(prefix, SLURM_JOB_NUM_NODES="2"), hooks=["nccl-net"])
    assert (run.exported(), run.stderr) == ({}, "")


def test_profile_file_sets_what_it_says_and_bad_lines_are_warned(run_entrypoint, prefix, workdir):
    """The hook holds no value of its own: another profile gives other values, tagged lines
    follow the plugin, and a line that is not NAME=VALUE is skipped with a warning."""
    (prefix / "lib/librccl-net.so").touch()
    profile = workdir / "profile.sh"
    profile.write_text("# a comment\n\nFI_CXI_DEFAULT_TX_SIZE=16384\nFI_CXI_RX_MATCH_MODE=software  \n"
                       "ONLY_NV=1  # nvidia\nONLY_AMD=1  # amd\nnot a line\n9BAD=1\nLAST=x")  # no final newline
    env = env_for(prefix, HPCAI_GPU_VENDOR="rocm", HPCAI_FABRIC_CXI="1", SLURM_NNODES="1",
                  HPCAI_SLINGSHOT_PROFILE=str(profile))
    run = run_entrypoint(env, hooks=["nccl-net"])
    assert run.exported() == {"NCCL_NET_PLUGIN": f"{prefix}/lib/librccl-net.so", "FI_CXI_DEFAULT_TX_SIZE": "16384",
                              "FI_CXI_RX_MATCH_MODE": "software", "ONLY_AMD": "1", "LAST": "x"}
    assert len(run.warnings) == 2 and all(str(profile) in w for w in run.warnings)


def test_missing_profile_is_one_warning_not_a_failure(run_entrypoint, prefix, workdir):
    (prefix / "lib/libnccl-net.so").touch()
    env = env_for(prefix, HPCAI_FABRIC_CXI="1", SLURM_NNODES="2",
                  HPCAI_SLINGSHOT_PROFILE=str(workdir / "absent.sh"))
    run = run_entrypoint(env, hooks=["nccl-net"])
    assert run.rc == 0 and run.exported() == {"NCCL_NET_PLUGIN": f"{prefix}/lib/libnccl-net.so",
                                              "NCCL_NET": "AWS Libfabric"}
    assert run.warnings == [f"hpcai-entrypoint: warning: no Slingshot profile at {workdir}/absent.sh: "
                            "the cxi defaults are not set"]


def test_profile_found_beside_the_hooks_as_in_the_image(run_entrypoint, prefix, workdir):
    """In an image the profile lies in entrypoint.d/ next to the hooks (image/context.py copies
    every hooks.d/*.sh; only NN-*.sh run as hooks)."""
    import shutil

    hooks = workdir / "entrypoint.d"
    hooks.mkdir()
    shutil.copy(HOOKS / "20-nccl-net.sh", hooks)
    shutil.copy(PROFILE, hooks)
    (prefix / "lib/libnccl-net.so").touch()
    env = {"HPCAI_PREFIX": str(prefix), "HPCAI_VENDOR_OFI_DIR": str(prefix / "no-vendor"),
           "HPCAI_GPU_VENDOR": "cuda", "HPCAI_FABRIC_CXI": "1", "SLURM_NNODES": "1", "HPCAI_HOOKS_DIR": str(hooks)}
    got = run_entrypoint(env).exported()
    assert got == {"NCCL_NET_PLUGIN": f"{prefix}/lib/libnccl-net.so", **SLINGSHOT_DEFAULTS,
                   "FI_HMEM_CUDA_USE_GDRCOPY": "1"}
