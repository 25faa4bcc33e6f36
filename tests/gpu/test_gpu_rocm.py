"""`make gpu-check` on a machine with AMD GPUs (ROCm) and a ROCm build of PyTorch, from the source
tree, on bare metal, as test_gpu_bare_metal.py does on NVIDIA:

1. `sanity` and `ddp-bench` (backend=nccl, which a ROCm torch runs on RCCL) on every visible GPU
   (an MI250X counts as two: one per GCD), one rank per GPU under torchrun;
2. rccl-tests at the commit components.toml pins, built with the machine's hipcc for the GPUs
   rocminfo lists (as the image's build.sh does, MPI=0), all_reduce_perf over every GPU of the
   node from one process, read back with `hpcai results parse --payload rccl-tests`.

Figures go to HPCAI_GPU_REPORT like the NVIDIA checks'. ROCM_PATH names the ROCm install
(default /opt/rocm). Without an AMD GPU every test skips (on CI they are deselected).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from gpucheck import (amd_gpus, append_report, build_rccl_tests, find_python, machine_facts, passed,
                      results_parse, run_bench)

GPUS = amd_gpus()

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not GPUS, reason="no AMD GPU on this machine (`rocminfo` lists no GPU agent): "
                                        "the ROCm checks run on a machine with an AMD GPU and a ROCm PyTorch"),
]


def _visible() -> list[int]:
    """The GPU indices this session may use: ROCR_VISIBLE_DEVICES's or HIP_VISIBLE_DEVICES's, else all."""
    for var in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        text = os.environ.get(var)
        if text is not None:
            ids = [t.strip() for t in text.split(",") if t.strip()]
            if not all(t.isdigit() for t in ids):
                pytest.skip(f"{var}={text!r} names devices by UUID; this check needs indices (or it unset)")
            return [int(t) for t in ids]
    return [g["index"] for g in GPUS]


@pytest.fixture(scope="module")
def rocm_python():
    python, info, why = find_python(need_cuda=True)
    if python is None or not info.get("hip"):
        pytest.fail(f"rocminfo lists {len(GPUS)} AMD GPU(s) but no Python has a ROCm torch that sees them: "
                    + "; ".join(why + ([f"{python}: torch {info.get('torch')} is not a ROCm build"] if python else []))
                    + " (HPCAI_GPU_PYTHON names one)")
    print(f"gpu-check: payloads run with {python} (torch {info['torch']}, HIP {info['hip']}, "
          f"RCCL {info.get('nccl')}, {info['devices']} device(s): {', '.join(info['names'])})")
    return python, info


@pytest.fixture(scope="module")
def facts(rocm_python):
    return {**machine_facts(rocm_python[1], [GPUS[i] for i in _visible()]), "vendor": "amd",
            "arch": ",".join(sorted({GPUS[i]["arch"] for i in _visible()}))}


def test_sanity_on_every_amd_gpu(rocm_python, session_dir, facts):
    run = run_bench(rocm_python[0], "sanity", session_dir, nproc=len(_visible()))
    result = passed(run)
    assert result["metrics"].get("world_size") == len(_visible()), result
    append_report({"check": "sanity", **facts, "ranks": len(_visible()), "seconds": result["seconds"],
                   "log": str(run.log)})


@pytest.mark.slow
def test_ddp_bench_rccl_on_every_amd_gpu(rocm_python, session_dir, facts):
    """PyTorch DDP with the nccl backend, which a ROCm torch runs on RCCL: real ex/s."""
    ranks = len(_visible())
    run = run_bench(rocm_python[0], "ddp-bench", session_dir, args=("backend=nccl",), nproc=ranks)
    result = passed(run)
    doc = json.loads((run.out_dir / "ddp-bench.json").read_text())
    assert doc["distributed_backend"] == "nccl" and doc["summary"]["world_size"] == ranks, doc["summary"]
    total = result["metrics"]["ex_per_sec_total"]
    assert total > 0, result
    append_report({"check": "ddp-bench", **facts, "ranks": ranks, "backend": "nccl (RCCL)",
                   "model": doc["benchmark_results"][0]["model"], "ex_per_sec_total": total,
                   "seconds": result["seconds"], "log": str(run.log)})


@pytest.mark.slow
def test_rccl_tests_all_reduce_on_every_amd_gpu(session_dir, facts):
    """rccl-tests (the pinned commit) built here for this node's GPUs; all_reduce_perf over all of
    them from one process, checked (-c 1) and read by hpcai's rccl-tests parser."""
    archs = sorted({GPUS[i]["arch"].split(":")[0] for i in _visible()})
    build, output = build_rccl_tests(session_dir, archs)
    assert build is not None, output[-4000:]
    log = session_dir / "rccl-tests.log"
    res = subprocess.run([str(build / "all_reduce_perf"), "-b", "8", "-e", "256M", "-f", "2", "-g", str(len(_visible())),
                          "-c", "1"], capture_output=True, text=True, timeout=1800, check=False)
    log.write_text(res.stdout + res.stderr)
    assert res.returncode == 0 and "# Out of bounds values : 0 OK" in res.stdout, res.stdout[-3000:] + res.stderr
    parsed = results_parse(log, "rccl-tests")
    assert parsed.returncode == 0 and parsed.headline == "busbw_avg", parsed.stderr
    busbw = parsed.metric("busbw_avg")
    assert busbw and busbw > 0, parsed.table
    append_report({"check": "rccl-tests", **facts, "ranks": len(_visible()), "metric": "busbw_avg",
                   "value": busbw, "busbw_max_size": parsed.metric("busbw_max_size"), "log": str(log)})
