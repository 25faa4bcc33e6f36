"""`make gpu-check`: hpcai's payloads, entrypoint and results on a machine with an NVIDIA GPU and
PyTorch, from the source tree, on bare metal (no Docker, Apptainer or image).

1. the payload runner (payloads/_runner/hpcai-bench, HPCAI_PAYLOADS_DIR=payloads):
   `sanity` and `ddp-bench` (backend=nccl) on every visible GPU, one rank per GPU under torchrun;
   `hf-clm --profile quick` on one GPU (GPT-2-shaped 2-layer model from its config, random
   tokens: no download, no network); megatron-gpt at CARAML's 800M values and openclip (OpenCLIP
   at MMoCLIP's commit, `--profile quick`) on one GPU, where their modules are installed;
2. entrypoints/hpcai-entrypoint --check, and the entrypoint's GPU hook binding a rank to its GPU;
3. `hpcai results parse` over the logs the runner printed.

Each test prints its figures (GPU, driver, torch, CUDA, NCCL, ex/s, samples/s) and appends them as
a JSON line to HPCAI_GPU_REPORT (default build/gpu-check.jsonl); the logs stay under
HPCAI_GPU_OUT (default build/gpu-check/<time>/). HPCAI_GPU_PYTHON names the Python with a CUDA
build of torch when it is neither the one running pytest nor python3 on PATH.
Without an NVIDIA GPU every test skips (on CI, HPCAI_REQUIRE_ENGINES=1, they are deselected).
"""

from __future__ import annotations

import json
import math
import os
import re

import pytest
from gpucheck import (NEEDS, PAYLOADS, append_report, bake_megatron_lm, find_python, machine_facts, nvidia_gpus,
                      passed, results_parse, run_bench, run_entrypoint, table_rows)

GPUS = nvidia_gpus()

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not GPUS, reason="no NVIDIA GPU on this machine (`nvidia-smi --query-gpu` lists none): "
                                        "make gpu-check runs on a machine with an NVIDIA GPU and PyTorch"),
]

# ddp-bench at its GPU defaults (torchvision's resnet50 when torchvision is there, else the
# built-in convnet; batch 32 per GPU at 224 px, 5 + 20 iterations): seconds on any data-centre GPU.
DDP_ARGS = ("backend=nccl",)


def _visible() -> list[int]:
    """The GPU indices this session may use: CUDA_VISIBLE_DEVICES's (when it names indices), else all."""
    text = os.environ.get("CUDA_VISIBLE_DEVICES")
    if text is None:
        return [g["index"] for g in GPUS]
    ids = [t.strip() for t in text.split(",") if t.strip()]
    if not all(t.isdigit() for t in ids):
        pytest.skip(f"CUDA_VISIBLE_DEVICES={text!r} names devices by UUID or MIG id; this check needs "
                    "indices (or CUDA_VISIBLE_DEVICES unset)")
    return [int(t) for t in ids]


def _gpu(index: int) -> dict:
    return next(g for g in GPUS if g["index"] == index)


@pytest.fixture(scope="module")
def cuda_python():
    """(python, probe): the interpreter whose torch sees CUDA, with torch's versions and devices."""
    python, info, why = find_python(need_cuda=True)
    if python is None:
        if all("no torch" in w for w in why):
            pytest.skip("PyTorch is not installed for any Python tried (" + "; ".join(why) +
                        "): set HPCAI_GPU_PYTHON to a Python with a CUDA build of torch")
        pytest.fail(f"nvidia-smi sees {len(GPUS)} GPU(s) but no Python's torch sees CUDA: " + "; ".join(why) +
                    " (HPCAI_GPU_PYTHON names another Python)", pytrace=False)
    print(f"gpu-check: payloads run with {python} (torch {info['torch']}, CUDA {info['cuda_build']}, "
          f"NCCL {info.get('nccl')}, {info['devices']} device(s): {', '.join(info['names'])})")
    return python, info


@pytest.fixture(scope="module")
def facts(cuda_python):
    return machine_facts(cuda_python[1], GPUS)


def _need(info: dict, payload: str) -> None:
    missing = [m for m in NEEDS[payload] if m != "torch" and not info.get("modules", {}).get(m)]
    if missing:
        pytest.skip(f"{payload} needs {', '.join(missing)} in {info['python']} (pip install -r "
                    f"payloads/{payload}/requirements.txt); its quick profile downloads nothing "
                    "(a model from its config, random tokens)")


@pytest.fixture(scope="module")
def sanity_run(cuda_python, session_dir):
    return run_bench(cuda_python[0], "sanity", session_dir, nproc=len(_visible()))


@pytest.fixture(scope="module")
def ddp_run(cuda_python, session_dir):
    return run_bench(cuda_python[0], "ddp-bench", session_dir, args=DDP_ARGS, nproc=len(_visible()))


@pytest.fixture(scope="module")
def hf_run(cuda_python, session_dir):
    _need(cuda_python[1], "hf-clm")
    first = str(_visible()[0])  # one GPU: figures comparable from machine to machine
    return run_bench(cuda_python[0], "hf-clm", session_dir, profile="quick",
                     env={"CUDA_VISIBLE_DEVICES": first, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})


def test_sanity_on_every_gpu(sanity_run, facts):
    """One rank per GPU: every rank reports itself, the world size and the GPUs nvidia-smi lists."""
    result = passed(sanity_run)
    ranks = len(_visible())
    assert result["metrics"].get("world_size") == ranks, result
    for rank in range(ranks):
        line = re.search(rf"^hpcai-sanity: rank={rank} gpu=(.*)$", sanity_run.output, re.MULTILINE)
        assert line, f"rank {rank} printed no gpu line:\n{sanity_run.tail()}"
        for gpu in GPUS:
            assert gpu["name"] in line.group(1), (gpu, line.group(0))
    append_report({"check": "sanity", **facts, "ranks": ranks, "seconds": result["seconds"],
                   "log": str(sanity_run.log)})


@pytest.mark.slow
def test_ddp_bench_nccl_on_every_gpu(ddp_run, facts):
    """PyTorch DDP over every visible GPU with NCCL: real ex/s, backend nccl, world size = GPUs."""
    result = passed(ddp_run)
    ranks = len(_visible())
    doc = json.loads((ddp_run.out_dir / "ddp-bench.json").read_text())
    summary = doc["summary"]
    assert doc["distributed_backend"] == "nccl", doc["distributed_backend"]
    assert summary["world_size"] == ranks and summary["nodes"] == 1, summary
    assert f"* World size: {ranks} ranks on 1 node(s), device cuda" in ddp_run.output, ddp_run.tail()
    assert doc["cuda_version"], "torch reports no CUDA version: not a CUDA run"
    total = result["metrics"]["ex_per_sec_total"]
    assert total > 0 and math.isclose(total, summary["total_ex_per_sec_p50"], rel_tol=1e-9), (total, summary)
    assert 0 < summary["sec_per_iter_p50"] < 60, summary
    entry = doc["benchmark_results"][0]
    append_report({"check": "ddp-bench", **facts, "ranks": ranks, "backend": doc["distributed_backend"],
                   "model": entry["model"], "batch_size": entry["batch_size"],
                   "image_size": int(result["vars"]["image_size"]),
                   "ex_per_sec_total": total, "sec_per_iter_p50": summary["sec_per_iter_p50"],
                   "seconds": result["seconds"], "log": str(ddp_run.log)})


@pytest.mark.slow
def test_hf_clm_quick_on_one_gpu(hf_run, facts, cuda_python):
    """Hugging Face Trainer, --profile quick (gpt2-tiny, 128 tokens, batch 4, 5 steps), offline."""
    result = passed(hf_run)
    summary = json.loads((hf_run.out_dir / "hpcai_summary.json").read_text())
    sps = result["metrics"]["samples_per_second"]
    assert sps > 0 and math.isclose(sps, summary["train_samples_per_second"], rel_tol=1e-9), (sps, summary)
    assert summary["model"] == "gpt2-tiny" and summary["ranks"] == 1, summary
    assert result["synthetic"] and summary["synthetic"], "the quick profile trains on random tokens, said so"
    assert math.isfinite(summary["train_loss"]), summary
    gpu = _gpu(_visible()[0])
    append_report({"check": "hf-clm", **facts, "gpu": gpu["name"], "gpus": 1, "ranks": 1,
                   "model": summary["model"], "precision": summary["precision"], "seq_len": summary["seq_len"],
                   "batch_size": int(result["vars"]["batch_size"]), "steps": int(result["vars"]["steps"]),
                   "samples_per_second": sps, "tflops_per_gpu": summary["tflops_per_gpu"],
                   "synthetic": summary["synthetic"], "seconds": result["seconds"], "log": str(hf_run.log)})


# CARAML's 800M layout (16 layers, hidden 2048, 8 heads, tp 1, pp 1, micro 4, global 32, 2048
# tokens, fp16) from --profile caraml, stopped by its wall-time rule after a minute instead of 30.
MEGATRON_MINUTES = "1"


@pytest.fixture(scope="module")
def megatron_run(cuda_python, session_dir):
    _need(cuda_python[1], "megatron-gpt")
    first = str(_visible()[0])
    return run_bench(cuda_python[0], "megatron-gpt", session_dir, profile="caraml",
                     args=("model_size=800M", f"exit_duration={MEGATRON_MINUTES}", "implementation=core"), nproc=1,
                     env={"CUDA_VISIBLE_DEVICES": first, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, timeout=600)


@pytest.mark.slow
def test_megatron_caraml_800m_on_one_gpu(megatron_run, facts):
    """megatron-gpt (Megatron Core) at CARAML's 800M values on one GPU, ended by exit_duration as
    Megatron's --exit-duration-in-mins ends CARAML's run: tokens/s and TFLOP/s from its own JSON."""
    result = passed(megatron_run)
    summary = json.loads((megatron_run.out_dir / "megatron-gpt.json").read_text())
    assert (summary["layers"], summary["hidden"], summary["heads"], summary["gbs"], summary["seq"]) == \
        (16, 2048, 8, 32, 2048), summary
    assert summary["nan_iterations"] == 0 and summary["iterations"] >= 2, summary
    tps = result["metrics"]["tokens_per_second"]
    assert tps > 0 and math.isclose(tps, summary["tokens_per_second"], rel_tol=1e-9), (tps, summary)
    assert "exit duration" in megatron_run.output, megatron_run.tail()
    gpu = _gpu(_visible()[0])
    append_report({"check": "megatron-gpt", **facts, "gpu": gpu["name"], "gpus": 1, "ranks": 1,
                   "model": "800M (CARAML)", "precision": summary.get("precision"),
                   "iterations": summary["iterations"], "tokens_per_second": tps,
                   "tflops_per_gpu": summary["tflops_per_gpu"], "time_per_iteration": summary["time_per_iteration"],
                   "seconds": result["seconds"], "log": str(megatron_run.log)})


@pytest.fixture(scope="module")
def openclip_run(cuda_python, session_dir):
    _need(cuda_python[1], "openclip")
    first = str(_visible()[0])
    return run_bench(cuda_python[0], "openclip", session_dir, profile="quick", nproc=1,
                     env={"CUDA_VISIBLE_DEVICES": first, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, timeout=600)


@pytest.mark.slow
def test_openclip_at_mmoclips_commit_on_one_gpu(openclip_run, facts, cuda_python):
    """openclip: OpenCLIP at the commit MMoCLIP pins (ee286275, open_clip 2.14.0, `training.main`)
    with MMoCLIP's flags on synthetic data, the quick profile (ViT-B-32, 2048 samples, batch 64,
    amp_bf16) on one GPU: every step logged, total_time_secs by MMoCLIP's rule."""
    result = passed(openclip_run)
    assert "Train Epoch: 0 [2048/2048 (100%)]" in openclip_run.output, openclip_run.tail()
    parsed = results_parse(openclip_run.log, "openclip")
    assert parsed.returncode == 0 and parsed.headline == "total_time_secs", parsed.doc
    secs = result["metrics"]["total_time_secs"]
    assert secs > 0 and math.isclose(parsed.metric("total_time_secs"), secs, rel_tol=1e-6), (parsed.doc, secs)
    gpu = _gpu(_visible()[0])
    append_report({"check": "openclip", **facts, "gpu": gpu["name"], "gpus": 1, "ranks": 1,
                   "open_clip": cuda_python[1].get("modules", {}).get("open_clip"), "model": "ViT-B-32",
                   "samples": 2048, "batch": 64, "precision": "amp_bf16", "total_time_secs": secs,
                   "samples_per_second_after_first": 2048 * 31 / 32 / secs, "seconds": result["seconds"],
                   "log": str(openclip_run.log)})


PROBE_GPU = ("import json, os, torch; print(json.dumps({'visible': os.environ.get('CUDA_VISIBLE_DEVICES'), "
             "'count': torch.cuda.device_count(), 'name': torch.cuda.get_device_name(0)}))")


def test_entrypoint_hooks_see_the_gpus(cuda_python, facts):
    """`hpcai-entrypoint --check` lists every GPU; with HPCAI_GPU_BIND=local-rank the GPU hook gives
    the rank its own GPU, and torch behind the entrypoint sees that one GPU."""
    python = cuda_python[0]
    target = _visible()[-1]  # the last one: a binding that is not just device 0
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")}
    env.update(HPCAI_DEBUG="1", CUDA_DEVICE_ORDER="PCI_BUS_ID")
    check = run_entrypoint(["--check"], env)
    assert check.returncode == 0 and check.stdout.rstrip().endswith("OK"), (check.stdout, check.stderr)
    gpus_line = check.fields().get("gpus", "")
    for gpu in GPUS:
        assert f"GPU {gpu['index']}: {gpu['name']}" in gpus_line, (gpu, gpus_line)

    env.update(HPCAI_GPU_BIND="local-rank", LOCAL_RANK=str(target))
    run = run_entrypoint([python, "-c", PROBE_GPU], env)
    assert run.returncode == 0, (run.stdout, run.stderr)
    assert run.hook_set("CUDA_VISIBLE_DEVICES") == (str(target), "gpu"), run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen == {"visible": str(target), "count": 1, "name": _gpu(target)["name"]}, seen
    append_report({"check": "entrypoint", **facts, "bound_gpu": target, "gpus_line": gpus_line,
                   "torch_sees": seen})


# each payload's headline as its manifest names it: what its record and export say too (issue 25)
@pytest.mark.parametrize("payload, fixture, headline", [
    ("sanity", "sanity_run", "world_size"),
    ("ddp-bench", "ddp_run", "ex_per_sec_total"),
    ("hf-clm", "hf_run", "samples_per_second"),
])
def test_hpcai_results_over_the_logs(payload, fixture, headline, request, facts):
    """`hpcai results parse LOG --payload NAME` over what the runner printed: the headline row, and
    the same figure the runner reported in its HPCAI_RESULT line."""
    run = request.getfixturevalue(fixture)
    result = passed(run)
    parsed = results_parse(run.log, payload)
    print(parsed.table)
    assert parsed.returncode == 0, parsed.stderr
    rows = table_rows(parsed.table)
    assert headline in rows and parsed.headline == headline, (rows, parsed.doc)
    value = parsed.metric(headline)
    if payload == "sanity":
        assert value == len(_visible()) and parsed.metric("ranks_missing") == 0, parsed.doc
        assert rows[headline][0] == str(len(_visible())), rows
    elif payload == "ddp-bench":  # the log's total is printed to 2 decimals
        assert math.isclose(value, result["metrics"]["ex_per_sec_total"], rel_tol=1e-3, abs_tol=0.01), parsed.doc
    else:
        assert math.isclose(value, result["metrics"]["samples_per_second"], rel_tol=1e-6), parsed.doc
        assert any("synthetic" in w for w in parsed.doc.get("warnings", [])), parsed.doc
    assert value > 0
    append_report({"check": f"results:{payload}", **facts, "metric": headline, "value": value,
                   "log": str(run.log)})


MILA_ARCHIVE = "tests/infra/mirror/github/mila-iqia/training/224a69c36fb9388635af729f3ed186ac75989f25.tar.gz"


@pytest.fixture(scope="module")
def mila_run(cuda_python, session_dir):
    """mila-training as the image bakes it, laid out from the source tree: Mila's archive from the
    mirror under the runner's HPCAI_PREFIX, ported by install/port.py, with Mila's perf and hpcai's
    benchutils on PYTHONPATH (the image copies them into its venv)."""
    import subprocess
    import sys
    import tarfile
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    share = session_dir / "prefix" / "share"
    share.mkdir(parents=True, exist_ok=True)
    with tarfile.open(repo / MILA_ARCHIVE) as tar:
        tar.extractall(share, filter="data")
    src = share / "mila-training"
    next(share.glob("training-*")).rename(src)
    subprocess.run([sys.executable, str(repo / "payloads/mila-training/install/port.py"), str(src)], check=True)
    path = os.pathsep.join(filter(None, [str(repo / "payloads/mila-training/install"), str(src / "common"),
                                         os.environ.get("PYTHONPATH")]))
    first = str(_visible()[0])
    return run_bench(cuda_python[0], "mila-training", session_dir, args=("bench=toy_reg,toy_lstm,wlm", "device=gpu"),
                     profile="quick", env={"CUDA_VISIBLE_DEVICES": first, "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                                           "PYTHONPATH": path}, timeout=900)


@pytest.mark.slow
def test_mila_training_runs_milas_own_code_on_one_gpu(mila_run, facts):
    """mila-training: Mila's own toy_reg, toy_lstm and wlm (224a69c3, ported) through its run.py
    with --cuda on one GPU, the quick sizes; Mila's report, parsed, gives the runner's score."""
    result = passed(mila_run)
    parsed = results_parse(mila_run.log, "mila-training")
    assert parsed.returncode == 0 and parsed.headline == "score", parsed.doc
    assert math.isclose(parsed.metric("score"), result["metrics"]["score"], rel_tol=1e-5), parsed.doc
    assert '"cuda": true' in mila_run.output, mila_run.tail()
    gpu = _gpu(_visible()[0])
    append_report({"check": "mila-training", **facts, "gpu": gpu["name"], "gpus": 1, "copies": 1,
                   "score": result["metrics"]["score"],
                   **{f"{b}_items_per_s": parsed.metric(f"{b}_items_per_s") for b in ("toy_reg", "toy_lstm", "wlm")},
                   "seconds": result["seconds"], "log": str(mila_run.log)})


# CARAML's own code path: Megatron-LM f7727433 + CARAML's NVIDIA patch, pretrain_gpt.py with CARAML's
# 800M arguments on a data set preprocess_data.py makes from the stand-in corpus. The stand-in is
# small, so the run is counted in global batches (CARAML's 300,000,000 samples would index it
# millions of times over); the wall time still applies.
MEGATRON_LM_ITERS = "30"
# its wall-time rule counts from the start of initialization, which takes ~30 s of the first minute here
MEGATRON_LM_MINUTES = "2"


@pytest.fixture(scope="module")
def megatron_lm_run(cuda_python, session_dir):
    """megatron-gpt implementation=megatron-lm from the source tree: the tree install.sh bakes,
    laid out by bake_megatron_lm under the runner's HPCAI_PREFIX (apex and flash-attn where the
    Python has them, else the torch port)."""
    _need(cuda_python[1], "megatron-lm")
    baked = bake_megatron_lm(session_dir / "prefix", session_dir / "megatron-lm-src")
    print(baked)
    first = str(_visible()[0])
    return run_bench(cuda_python[0], "megatron-gpt", session_dir / "megatron-lm", profile="caraml",
                     args=("model_size=800M", "implementation=megatron-lm", f"iters={MEGATRON_LM_ITERS}",
                           f"exit_duration={MEGATRON_LM_MINUTES}"), nproc=1,
                     env={"CUDA_VISIBLE_DEVICES": first, "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                          "HPCAI_PREFIX": str(session_dir / "prefix")},
                     timeout=float(os.environ.get("HPCAI_GPU_MEGATRON_LM_TIMEOUT", 480)))


@pytest.mark.slow
def test_megatron_lm_caraml_800m_on_one_gpu(megatron_lm_run, facts):
    """megatron-gpt implementation=megatron-lm: CARAML's pretrain_gpt.py run at its 800M values on
    one GPU, tokens/s as CARAML's JUBE result computes it (global batch x sequence / the mean of
    every logged interval), and `hpcai results parse` agreeing."""
    result = passed(megatron_lm_run)
    out = megatron_lm_run.output
    assert "implementation=megatron-lm (Megatron-LM f7727433 + CARAML's NVIDIA patch)" in out, megatron_lm_run.tail()
    summary = json.loads((megatron_lm_run.out_dir / "megatron-gpt.json").read_text())
    assert summary["implementation"] == "megatron-lm" and summary["nan_iterations"] == 0, summary
    assert summary["iterations"] >= 10 and summary["logged_intervals"] >= 2, summary
    assert "TFLOPs(megatron)" in out, "CARAML's patch prints its TFLOP/s on every logged line"
    tps = result["metrics"]["tokens_per_second"]
    assert tps > 0 and math.isclose(tps, summary["tokens_per_second"], rel_tol=1e-9), (tps, summary)
    assert math.isclose(tps, 32 * 2048 / summary["time_per_iteration"], rel_tol=1e-9), summary
    parsed = results_parse(megatron_lm_run.log, "megatron-gpt")
    assert parsed.returncode == 0, parsed.stderr
    gpu = _gpu(_visible()[0])
    append_report({"check": "megatron-lm", **facts, "gpu": gpu["name"], "gpus": 1, "ranks": 1,
                   "model": "800M (CARAML)", "kernels": summary["kernels"], "iterations": summary["iterations"],
                   "logged_intervals": summary["logged_intervals"], "tokens_per_second": tps,
                   "tflops_per_gpu": summary["tflops_per_gpu"], "time_per_iteration": summary["time_per_iteration"],
                   "parsed": {m["name"]: m["value"] for m in parsed.doc.get("metrics", [])},
                   "seconds": result["seconds"], "log": str(megatron_lm_run.log)})


PORT = PAYLOADS / "megatron-gpt" / "install" / "megatron_torch_port.py"
PORT_CHECK = PAYLOADS.parent / "tests" / "gpu" / "torch_port_check.py"


def test_megatron_torch_port_matches_torch_on_the_gpu(cuda_python, facts):
    """The torch port's stand-ins for apex and flash-attn against plain torch on CUDA tensors, fp16
    activations (torch_port_check.py; CI runs the same check on CPU in the pytorch-cpu image)."""
    import subprocess

    res = subprocess.run([cuda_python[0], str(PORT_CHECK), str(PORT), "cuda"], capture_output=True, text=True,
                         timeout=300, check=False)
    assert res.returncode == 0 and "torch port: ok" in res.stdout, (res.stdout, res.stderr)
    append_report({"check": "megatron-torch-port", **facts, "result": "ok"})
