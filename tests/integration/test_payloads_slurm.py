"""Payloads on the real Slurm test cluster: 2 nodes x 2 ranks, each rank in its own container.

`hpcai launch --image TAG --runtime docker -N 2 --ntasks-per-node 2 <payload> var=value…` exactly
as a user types it; each rank runs `hpcai-bench <payload>` behind hpcai-entrypoint. Rank 0's log
carries the runner's HPCAI_RESULT line; the run record's metrics.json is what the host-side
parsers made of the same logs. Sizes are the `quick` ones so the module stays within CI's budget.

The fake nodes share this machine's host name, /dev/shm and 2 cores, so MPI runs use TCP and
yield while waiting (tests/engines.py: CLUSTER_MPI_ENV).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from engines import CLUSTER_MPI_OPTIONS

pytestmark = [pytest.mark.slurm, pytest.mark.docker, pytest.mark.slow]

ENV = {**os.environ, "USER": os.environ.get("USER") or "root"}
# srun --mpi=pmix: the image's Open MPI reaches Slurm's PMIx server through the slurmd spool dir.
MPI_OPTS = ["--mpi", "pmix", "--bind", "/var/spool/slurmd", *CLUSTER_MPI_OPTIONS]


def launch(hpcai_exe, image, run_dir: Path, payload: str, *args: str, options=(), timeout=600):
    argv = [*hpcai_exe, "launch", "--image", image, "--runtime", "docker", "--site", "generic-slurm",
            "-N", "2", "--ntasks-per-node", "2", "--output-dir", str(run_dir), *options, payload, *args]
    res = subprocess.run(argv, capture_output=True, text=True, env=ENV, cwd=run_dir.parent,
                         timeout=timeout)
    logs = [(run_dir / "logs" / f"rank-{r}.out").read_text(errors="replace")
            if (run_dir / "logs" / f"rank-{r}.out").exists() else "" for r in range(4)]
    return res, logs


def bench_result(log: str) -> dict:
    lines = [line for line in log.splitlines() if line.startswith("HPCAI_RESULT ")]
    assert len(lines) == 1, log[-3000:]
    return json.loads(lines[0].split(" ", 1)[1])


def recorded(run_dir: Path) -> dict[str, float]:
    doc = json.loads((run_dir / "metrics.json").read_text())
    return {m["name"]: m["value"] for m in doc["metrics"]}


def check_ok(res, logs):
    assert res.returncode == 0, res.stderr[-3000:] + "\n".join(log[-1500:] for log in logs)
    for rank, log in enumerate(logs[1:], start=1):
        assert "HPCAI_RESULT" not in log, f"rank {rank} must not report"


def test_sanity_every_rank_on_two_nodes(pytorch_cpu_image, hpcai_exe, tmp_path):
    run = tmp_path / tmp_path.name  # unique: names the docker label hpcai.run
    res, logs = launch(hpcai_exe, pytorch_cpu_image, run, "sanity")
    check_ok(res, logs)
    assert bench_result(logs[0])["metrics"] == {"world_size": 4.0}
    nodes = {}
    for rank, log in enumerate(logs):
        assert f"hpcai-sanity: rank={rank} local_rank={rank % 2} world_size=4" in log
        nodes[rank] = log.split(" node=", 1)[1].split()[0]
        assert f"hpcai-sanity: rank={rank} libfabric=/usr/lib/x86_64-linux-gnu/libfabric.so.1" in log
    assert nodes[0] == nodes[1] != nodes[2] == nodes[3]


def test_mpi_allreduce_across_nodes(pytorch_cpu_image, hpcai_exe, tmp_path):
    run = tmp_path / tmp_path.name  # unique: names the docker label hpcai.run
    res, logs = launch(hpcai_exe, pytorch_cpu_image, run, "mpi-allreduce", "max_bytes=262144",
                       "iters=20", "warmup=3", options=MPI_OPTS)
    check_ok(res, logs)
    result = bench_result(logs[0])
    assert result["status"] == "PASS" and result["metrics"]["ranks"] == 4.0
    assert "# ranks 4 iters 20" in logs[0]
    assert result["metrics"]["busbw_max_size"] > 0
    assert recorded(run)["busbw_max_size"] == pytest.approx(result["metrics"]["busbw_max_size"])


def test_ddp_bench_gloo_two_nodes(pytorch_cpu_image, hpcai_exe, tmp_path):
    run = tmp_path / tmp_path.name  # unique: names the docker label hpcai.run
    res, logs = launch(hpcai_exe, pytorch_cpu_image, run, "ddp-bench", "model=convnet",
                       "image_size=32", "batch_size=4", "iters=3", "warmup=1", "threads=1")
    check_ok(res, logs)
    result = bench_result(logs[0])
    assert result["status"] == "PASS", logs[0][-3000:]
    # no ddp, one node (1M/2G), both nodes (2M/2G): upstream's table without its 8-GPU assumption
    assert "   1 GPUs --   no ddp:  p50:" in logs[0]
    assert "   2 GPUs --    1M/2G:  p50:" in logs[0]
    assert "   4 GPUs --    2M/2G:  p50:" in logs[0]
    assert "* Distributed backend: gloo" in logs[0]
    total = result["metrics"]["ex_per_sec_total"]
    assert total > 0
    parsed = recorded(run)
    assert parsed["sec_per_iter_p50"] > 0


def test_hf_clm_tiny_gpt2_two_nodes(pytorch_cpu_image, hpcai_exe, tmp_path):
    run = tmp_path / tmp_path.name  # unique: names the docker label hpcai.run
    # the model from `--profile quick`, the sizes from var=value, which win over the profile
    res, logs = launch(hpcai_exe, pytorch_cpu_image, run, "hf-clm", "seq_len=64", "batch_size=2", "steps=4",
                       options=["--profile", "quick"])
    check_ok(res, logs)
    assert "hf-clm: model=gpt2-tiny " in logs[0]
    result = bench_result(logs[0])
    assert result["status"] == "PASS" and result["synthetic"] is True
    assert "ranks=4" in logs[0] and "SYNTHETIC" in logs[0]
    sps = result["metrics"]["samples_per_second"]
    assert sps > 0
    # TFLOP/s per device = samples/s x 6 x params x seq_len / ranks
    params = int(logs[0].split(" params=", 1)[1].split()[0])
    assert result["metrics"]["tflops_per_gpu"] == pytest.approx(sps * 6 * params * 64 / 4 / 1e12, rel=1e-3)
    assert recorded(run)["samples_per_second"] == pytest.approx(sps, rel=1e-3)  # the documented name


def test_mila_suite_on_two_nodes(pytorch_cpu_image, hpcai_exe, tmp_path):
    """Each rank trains on its own, as the Mila suite's copies do; rank 0 reports, the record agrees."""
    run = tmp_path / tmp_path.name  # unique: names the docker label hpcai.run
    res, logs = launch(hpcai_exe, pytorch_cpu_image, run, "mila-suite", "bench=convnet",
                       options=["--profile", "quick"])
    check_ok(res, logs)
    result = bench_result(logs[0])
    assert result["status"] == "PASS" and result["metrics"]["nans"] == 0
    for log in logs:  # every rank ran the benchmark
        assert "mila-suite: convnet " in log
    assert recorded(run)["score"] == pytest.approx(result["metrics"]["score"], rel=1e-6)
    assert recorded(run)["convnet_items_per_s"] > 0


def test_megatron_gpt_tensor_and_data_parallel_on_two_nodes(pytorch_cpu_image, hpcai_exe, tmp_path):
    """CARAML's LLM benchmark through Megatron Core: 4 ranks split as tp=2 x dp=2, tokens/s from
    the global batch and sequence length, the same figures in the image and in the record."""
    run = tmp_path / tmp_path.name  # unique: names the docker label hpcai.run
    res, logs = launch(hpcai_exe, pytorch_cpu_image, run, "megatron-gpt", "tp=2", "seq_len=64",
                       "iters=6", "log_interval=2", options=["--profile", "quick"])
    check_ok(res, logs)
    assert "tp=2 pp=1 dp=2 micro-batch=2 global-batch-size=4 " in logs[0]
    assert "data=SYNTHETIC" in logs[0]
    result = bench_result(logs[0])
    assert result["status"] == "PASS" and result["metrics"]["nan_iterations"] == 0
    got = result["metrics"]
    assert got["tokens_per_second"] == pytest.approx(4 * 64 / got["time_per_iteration"], rel=1e-6)
    rec = recorded(run)  # the host's Megatron parser, from rank 0's iteration lines
    assert rec["tokens_per_second"] == pytest.approx(got["tokens_per_second"], rel=1e-3)
    assert rec["tflops_per_gpu"] == pytest.approx(got["tflops_per_gpu"], rel=1e-2, abs=1e-4)


def test_unknown_variable_fails_before_any_job(pytorch_cpu_image, hpcai_exe, tmp_path):
    res, _ = launch(hpcai_exe, pytorch_cpu_image, tmp_path / "bad", "ddp-bench", "batchsize=4")
    assert res.returncode == 2
    assert "unknown variable 'batchsize' for payload ddp-bench; valid:" in res.stderr
    assert not (tmp_path / "bad" / "logs").exists()


def test_tf_resnet50_multi_worker_two_nodes(tensorflow_cpu_image, hpcai_exe, tmp_path):
    """MultiWorkerMirroredStrategy over 4 ranks on 2 nodes (TF_CONFIG built from the Slurm step)."""
    run = tmp_path / tmp_path.name
    res, logs = launch(hpcai_exe, tensorflow_cpu_image, run, "tf-resnet50", "batch_size=2",
                       "image_size=32", "steps=3", "warmup=1", timeout=900)
    check_ok(res, logs)
    result = bench_result(logs[0])
    assert result["status"] == "PASS"
    assert "strategy mwms, 4 worker(s), batch 2 per worker" in logs[0]
    assert result["metrics"]["images_per_sec"] > 0
    assert recorded(run)["images_per_sec"] == pytest.approx(result["metrics"]["images_per_sec"])


def test_tf_cnn_benchmarks_carries_the_forks_power_files_on_one_rank(tensorflow_cpu_image, hpcai_exe, tmp_path):
    """CARAML's tf_cnn_benchmarks fork, one rank (several need Horovod, which CI's images lack):
    its images/s reach the record, and its jpwr files land in HPCAI_OUTPUT_DIR (no NVML here: the
    no-op power method, said in the log)."""
    run = tmp_path / tmp_path.name
    out = tmp_path / "out"
    out.mkdir()
    res, logs = launch(hpcai_exe, tensorflow_cpu_image, run, "tf-cnn-benchmarks",
                       options=["-N", "1", "--ntasks-per-node", "1", "--profile", "quick", "--bind", str(out),
                                "--env", f"HPCAI_OUTPUT_DIR={out}"], timeout=900)
    check_ok(res, logs)
    result = bench_result(logs[0])
    assert result["status"] == "PASS" and result["synthetic"] is True
    assert "--model=resnet50_v2" in logs[0] and "--device=cpu --data_format=NHWC" in logs[0]
    assert "jpwr jpwr.gpu.pynvml cannot measure here" in logs[0]
    assert result["metrics"]["images_per_sec"] > 0
    assert recorded(run)["images_per_sec"] == pytest.approx(result["metrics"]["images_per_sec"])
    power = out / "tf-cnn-benchmarks"
    assert sorted(p.name for p in power.iterdir()) == ["CPU_power.0.csv", "CPU_power.0.energy.csv"]
    assert (power / "CPU_power.0.csv").read_text().splitlines()[0] == ",timestamps,nodename,rank"
