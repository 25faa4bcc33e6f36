"""The GPU recipe built for real (issue 14): `hpcai build pytorch-ngc` with the OFI stack, on
every CI run.

NGC's registry cannot be reached here, so the CUDA stand-in base (tests/infra/base-cuda.sh:
Debian + NVIDIA's CUDA 13.2 compiler, runtime, headers and NCCL 2.29.7 from PyPI, laid out as in
NGC) plays nvcr.io/nvidia/pytorch, and tests/infra/gpu-recipe.sh builds the recipe on it from
sources this machine reaches (Debian's source archive, the GitHub mirror), each checked against
its sha256: libfabric with HPE's cxi provider (libcxi), PMIx, Open MPI over OFI with CUDA,
aws-ofi-nccl, and nccl-tests with MPI=1 for one GPU architecture. The install scripts are the
ones every NGC build runs. There is no GPU here: what needs one is skipped by the image's own
self-test, which says so, and is covered by `make gpu-check` on a GPU machine.
HPCAI_GPU_RECIPE_IMAGE names an already built image to test instead. HPCAI_GPU_RECIPE_MPI=mpich
tests the MPICH-over-OFI configuration instead (`make gpu-recipe MPI=mpich` builds it and runs
these tests; CI builds the Open MPI one only, for time).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from imagebuild import in_image, plugin_tables, recipe_image, sh

REPO = Path(__file__).resolve().parents[2]
PREFIX = "/opt/hpcai"
MPI = os.environ.get("HPCAI_GPU_RECIPE_MPI", "ompi")
LIBMPI = {"ompi": "libmpi.so.40", "mpich": "libmpi.so.12"}[MPI]

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(5400)]


@pytest.fixture(scope="module")
def gpu_image(tmp_path_factory) -> str:
    return recipe_image(tmp_path_factory.mktemp("gpu-recipe"), "gpu-recipe.sh", MPI, prebuilt="HPCAI_GPU_RECIPE_IMAGE")


def plugin(image: str) -> str:
    res = in_image(image, f"ls {PREFIX}/lib/libnccl-net*.so")
    assert res.returncode == 0, res.stderr
    return res.stdout.split()[0]


def test_the_mpi_runs_over_ofi_with_cuda_support(gpu_image):
    """Open MPI: the OFI MTL and CUDA support in ompi_info. MPICH: the ch4:ofi device over the
    image's libfabric, and yaksa's CUDA backend linked in (libcudart)."""
    if MPI == "ompi":
        res = in_image(gpu_image, "ompi_info --parsable --all")
        assert res.returncode == 0, res.stderr[-2000:]
        assert "mca:mtl:ofi:" in res.stdout
        assert "mpi_built_with_cuda_support:value:true" in res.stdout
    else:
        res = in_image(gpu_image, f"mpichversion; ldd {PREFIX}/lib/libmpi.so.12")
        assert res.returncode == 0, res.stderr[-2000:]
        assert "ch4:ofi" in res.stdout and "--with-cuda" in res.stdout, res.stdout
        assert f"libfabric.so.1 => {PREFIX}/lib/" in res.stdout, res.stdout
        assert "libcudart.so" in res.stdout, res.stdout


def test_fi_info_lists_the_providers_with_cxi(gpu_image):
    res = in_image(gpu_image, "fi_info -l")
    assert res.returncode == 0, res.stderr
    providers = {line.rstrip(":") for line in res.stdout.splitlines() if line.endswith(":")}
    assert {"tcp", "shm", "cxi"} <= providers, res.stdout


def test_the_nccl_plugin_links_libfabric_and_mpi_from_the_prefix(gpu_image):
    """aws-ofi-nccl 1.19 links libfabric only (MPI is for its tests, which are not built); any MPI
    it did link must be the image's too. nccl-tests' MPI is checked below."""
    path = plugin(gpu_image)
    res = in_image(gpu_image, f"ldd {path}")
    assert res.returncode == 0 and "not found" not in res.stdout, res.stdout
    resolved = dict(line.split(" => ", 1) for line in res.stdout.splitlines() if " => " in line)
    libfabric = next(v for k, v in resolved.items() if k.strip().startswith("libfabric.so"))
    assert libfabric.startswith(f"{PREFIX}/lib/"), res.stdout
    mpi = [v for k, v in resolved.items() if k.strip().startswith("libmpi.so")]
    assert all(m.startswith(f"{PREFIX}/lib/") for m in mpi), res.stdout


def test_the_nccl_plugin_dlopens_and_exports_its_ncclnet_symbols(gpu_image):
    """dlopen in the image (no nm there: the final stage has no toolchain) and look up the
    versioned plugin tables NCCL asks for (ncclNetPlugin_vN)."""
    names = plugin_tables(gpu_image, plugin(gpu_image))
    assert "ncclNetPlugin_v8" in names, names  # NCCL 2.19+; NGC 26.03's NCCL 2.29 asks for newer ones first
    assert len(names) >= 3, names


def test_nccl_tests_run_and_link_the_image_mpi(gpu_image):
    res = in_image(gpu_image, "all_reduce_perf -h; echo rc=$?; ldd \"$(command -v all_reduce_perf)\"")
    assert "rc=0" in res.stdout and "USAGE" in res.stdout.upper(), res.stdout + res.stderr
    assert f"{LIBMPI} => {PREFIX}/lib/" in res.stdout, res.stdout


def test_self_test_passes_and_names_what_needs_a_gpu(gpu_image):
    res = in_image(gpu_image, "hpcai-bench --self-test")
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert not [line for line in lines if line.startswith("self-test: FAIL")], res.stdout
    for check in ("import torch", "MPI init", "libfabric load", "load libnccl-net"):
        assert any(line.startswith("self-test: ok") and check in line for line in lines), (check, res.stdout)
    skipped = [line for line in lines if line.startswith("self-test: skip")]
    assert skipped and all("no GPU" in line for line in skipped), res.stdout


def test_the_host_libfabric_is_mapped_first(gpu_image, tmp_path):
    """The host-fabric swap (10-host-fabric) on the GPU image: a libfabric under /host/lib (a copy
    of the image's own, so it loads) is the one the loader maps, as for the CPU image."""
    cid = sh("docker", "create", gpu_image).stdout.strip()
    host = tmp_path / "host"
    host.mkdir(mode=0o755)
    try:
        real = sh("docker", "run", "--rm", "--entrypoint", "readlink", gpu_image, "-f",
                  f"{PREFIX}/lib/libfabric.so.1").stdout.strip()
        assert sh("docker", "cp", "-L", f"{cid}:{real}", str(host / Path(real).name)).returncode == 0
    finally:
        sh("docker", "rm", "-f", cid)
    (host / "libfabric.so.1").symlink_to(Path(real).name)
    res = in_image(gpu_image, "LD_PRELOAD=libfabric.so.1 cat /proc/self/maps | grep libfabric; "
                              "fi_info -l >/dev/null && echo FI_INFO_OK",
                   "-v", f"{host}:/host/lib:ro")
    mapped = sorted({line.split()[-1] for line in res.stdout.splitlines() if "libfabric" in line})
    assert mapped == [f"/host/lib/{Path(real).name}"], res.stdout + res.stderr
    assert "FI_INFO_OK" in res.stdout


def test_caramls_megatron_lm_is_baked_patched_and_tokenizes(gpu_image, tmp_path):
    """megatron-gpt on a CUDA image bakes CARAML's own code path: Megatron-LM f7727433 with
    CARAML's NVIDIA patch and its GPT-2 tokenizer files. Megatron's preprocess_data.py tokenizes a
    text file at run time and the run trains on it; without a GPU `auto` runs the Megatron Core
    stand-in (pretrain_gpt.py needs CUDA and NCCL: `make gpu-check` runs it where one is)."""
    share = f"{PREFIX}/share/megatron-lm"
    res = in_image(gpu_image, f"grep -c 'TFLOPs(megatron)' {share}/megatron/training.py; "
                   f"ls {share}/caraml-tokenizers; cd {share} && python -c "
                   "'import megatron.tokenizer, megatron.data.indexed_dataset; print(\"imports ok\")' && python -c "
                   "'import jpwr.ctxmgr, megatron.optimizer as o; print(\"port\", o.Adam.__module__)' && "
                   # built at bake time and newer than its source: pretrain_gpt.py's make has nothing to do
                   "for so in megatron/data/helpers.cpython-*.so; do test \"$so\" -nt megatron/data/helpers.cpp "
                   "&& echo helper built; done")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.split()[:3] == ["1", "gpt2-merges.txt", "gpt2-vocab.json"] and "imports ok" in res.stdout
    # the base has no apex: port_torch.py's fallbacks are in, and CARAML's patched script finds jpwr
    assert "port megatron.torch_port" in res.stdout, res.stdout
    assert res.stdout.count("helper built") == 1, res.stdout  # install/build_helpers.py
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"Document {i}: the quick brown fox jumps over the lazy dog, {i} times.\n"
                              for i in range(400)))
    run = sh("docker", "run", "--rm", "-v", f"{tmp_path}:/work", gpu_image, "hpcai-bench", "megatron-gpt",
             "model_size=tiny", "seq_len=32", "iters=4", "log_interval=2", "text=/work/corpus.txt", timeout=900)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "implementation=core (Megatron-LM f7727433's pretrain_gpt.py needs a GPU" in run.stdout
    assert "implementation=core data=/work/corpus.txt (tokenized by Megatron-LM's preprocess_data.py" in run.stdout
    result = next(line for line in run.stdout.splitlines() if line.startswith("HPCAI_RESULT "))
    assert '"synthetic": false' in result and '"status": "PASS"' in result
    refused = sh("docker", "run", "--rm", gpu_image, "hpcai-bench", "megatron-gpt", "model_size=tiny",
                 "implementation=megatron-lm", timeout=300)
    assert refused.returncode != 0
    assert ("megatron-gpt: implementation=megatron-lm is not possible: Megatron-LM f7727433's pretrain_gpt.py "
            "needs a GPU (CUDA and NCCL); valid here: core, auto") in refused.stdout + refused.stderr
