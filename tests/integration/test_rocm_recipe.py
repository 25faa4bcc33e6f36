"""The ROCm recipe built for real (issue 27): `hpcai build pytorch-rocm` with the OFI stack and
rccl-tests, on every CI run.

AMD's registry and GPUs cannot be reached here, so the ROCm stand-in base (tests/infra/base-rocm.sh:
Debian trixie's HIP 5.7.1, hipcc on LLVM 17, RCCL 5.4.3 and PyTorch 2.6, laid out in AMD's
/opt/rocm) plays rocm/pytorch, and tests/infra/rocm-recipe.sh builds the recipe on it from sources
this machine reaches, each checked against its sha256: libfabric with ROCr support, PMIx, Open MPI
over OFI, aws-ofi-nccl built for ROCm (librccl-net.so), and rccl-tests at its pinned commit with
MPI=1 for one GPU architecture (gfx90a). The install scripts are the ones every ROCm build runs.
There is no GPU here: what needs one is skipped by the image's own self-test, which says so.
HPCAI_ROCM_RECIPE_IMAGE names an already built image to test instead.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from imagebuild import in_image, plugin_tables, recipe_image, sh

REPO = Path(__file__).resolve().parents[2]
PREFIX = "/opt/hpcai"
PERF_TESTS = ("all_reduce", "all_gather", "broadcast", "reduce_scatter", "reduce", "alltoall", "scatter",
              "gather", "sendrecv", "alltoallv")

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(5400)]


@pytest.fixture(scope="module")
def rocm_image(tmp_path_factory) -> str:
    return recipe_image(tmp_path_factory.mktemp("rocm-recipe"), "rocm-recipe.sh", prebuilt="HPCAI_ROCM_RECIPE_IMAGE")


def resolved(ldd: str) -> dict[str, str]:
    return {k.strip().split()[0]: v.split(" (")[0].strip()
            for k, v in (line.split(" => ", 1) for line in ldd.splitlines() if " => " in line)}


def from_the_base(path: str) -> bool:
    """A library of the base image's ROCm: Debian's multiarch folder (/lib is /usr/lib there), which
    /opt/rocm/lib points at."""
    return path.startswith(("/usr/lib/x86_64-linux-gnu/", "/lib/x86_64-linux-gnu/"))


def test_the_stand_in_base_has_amds_layout_and_compiles_for_an_mi250x():
    """/opt/rocm as AMD's images have it: hipcc compiles a kernel for gfx90a and links RCCL."""
    base = sh("bash", str(REPO / "tests/infra/base-rocm.sh"), timeout=1800).stdout.strip().splitlines()[-1]
    probe = ("#include <hip/hip_runtime.h>\n#include <rccl/rccl.h>\n#include <cstdio>\n"
             "__global__ void k(float *x) { x[threadIdx.x] += 1; }\n"
             "int main() { int v; ncclGetVersion(&v); int n = 0; hipError_t e = hipGetDeviceCount(&n);\n"
             "  printf(\"rccl %d devices %d (%s)\\n\", v, n, hipGetErrorString(e)); }\n")
    res = sh("docker", "run", "--rm", base, "bash", "-c",
             f"printf %s {shlex.quote(probe)} > /tmp/t.hip && cd /tmp && "
             "$ROCM_PATH/bin/hipcc --offload-arch=gfx90a t.hip -o t -lrccl && ./t && "
             "$ROCM_PATH/bin/roc-obj-ls t", timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "rccl 21304 devices 0 (no ROCm-capable device is detected)" in res.stdout  # RCCL 2.13.4 (ROCm 5.4)
    assert "hipv4-amdgcn-amd-amdhsa--gfx90a" in res.stdout  # the MI250X code object in the binary


def test_the_mpi_runs_over_ofi(rocm_image):
    res = in_image(rocm_image, "ompi_info --parsable --all")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "mca:mtl:ofi:" in res.stdout


def test_fi_info_lists_the_providers(rocm_image):
    res = in_image(rocm_image, "fi_info -l")
    assert res.returncode == 0, res.stderr
    providers = {line.rstrip(":") for line in res.stdout.splitlines() if line.endswith(":")}
    assert {"tcp", "shm"} <= providers, res.stdout


def test_the_rccl_plugin_links_libfabric_hip_and_exports_its_ncclnet_symbols(rocm_image):
    """aws-ofi-nccl 1.19 built --with-rocm installs librccl-net.so: it resolves the image's
    libfabric and the base's HIP runtime, and dlopens with the plugin tables RCCL asks for."""
    path = f"{PREFIX}/lib/librccl-net.so"
    res = in_image(rocm_image, f"ldd {path}")
    assert res.returncode == 0 and "not found" not in res.stdout, res.stdout
    libs = resolved(res.stdout)
    assert libs["libfabric.so.1"].startswith(f"{PREFIX}/lib/"), res.stdout
    assert from_the_base(libs["libamdhip64.so.5"]), res.stdout
    names = plugin_tables(rocm_image, path)
    assert "ncclNetPlugin_v6" in names and len(names) >= 3, names  # RCCL 2.13 asks for v6, v5, v4


def test_rccl_tests_are_baked_run_and_link_rccl_hip_and_the_image_mpi(rocm_image):
    res = in_image(rocm_image, "ls $HPCAI_PREFIX/bin/*_perf; all_reduce_perf -h; echo rc=$?; "
                               "ldd \"$(command -v all_reduce_perf)\"")
    assert "rc=0" in res.stdout and "USAGE" in res.stdout.upper(), res.stdout + res.stderr
    assert {f"{PREFIX}/bin/{t}_perf" for t in PERF_TESTS} <= set(res.stdout.split()), res.stdout
    libs = resolved(res.stdout)
    assert libs["libmpi.so.40"].startswith(f"{PREFIX}/lib/"), res.stdout
    assert from_the_base(libs["librccl.so.1"]) and from_the_base(libs["libamdhip64.so.5"]), res.stdout
    assert "not found" not in res.stdout


def test_the_rccl_tests_payload_is_baked_with_its_parser(rocm_image):
    res = in_image(rocm_image, "hpcai-bench --list")
    assert res.returncode == 0, res.stderr
    assert any(line.startswith("rccl-tests ") for line in res.stdout.splitlines()), res.stdout
    labels = sh("docker", "image", "inspect", "--format", "{{index .Config.Labels \"hpcai.gpu-archs\"}} "
                "{{index .Config.Labels \"hpcai.component.rccl-tests\"}}", rocm_image)
    assert labels.stdout.split() == ["gfx90a", "ae3e6357cb3514d5649b3b5dfaa80cb2d2af3532"], labels.stdout


def test_self_test_passes_and_names_what_needs_a_gpu(rocm_image):
    res = in_image(rocm_image, "hpcai-bench --self-test")
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert not [line for line in lines if line.startswith("self-test: FAIL")], res.stdout
    for check in ("import torch", "load RCCL", "MPI init", "libfabric load", "load librccl-net"):
        assert any(line.startswith("self-test: ok") and check in line for line in lines), (check, res.stdout)
    assert any("librccl.so.1 2.13.4" in line for line in lines), res.stdout
    skipped = [line for line in lines if line.startswith("self-test: skip")]
    assert skipped and all("no GPU" in line for line in skipped), res.stdout
    assert any("GPU and RCCL" in line for line in skipped), res.stdout


def test_the_entrypoint_points_rccl_at_the_plugin(rocm_image):
    res = in_image(rocm_image, "echo NCCL_NET_PLUGIN=$NCCL_NET_PLUGIN")
    assert f"NCCL_NET_PLUGIN={PREFIX}/lib/librccl-net.so" in res.stdout, res.stdout + res.stderr
