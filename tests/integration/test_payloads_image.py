"""Payloads inside the real CPU images: `docker run IMG` runs the flavor's default suite.

The images come from the session fixtures in tests/conftest.py (the real `hpcai build`). Sizes
come from the payloads' `quick` profile (HPCAI_BENCH_PROFILE=quick), which the runner applies on
top of the CPU family's profile, so the whole suite takes about a minute on two cores.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from hpcai.payloads import payloads_root
from hpcai.results.parsers import parse_text

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def docker_run(image: str, *args: str, env: dict[str, str] | None = None, timeout: int = 900):
    argv = ["docker", "run", "--rm", "--shm-size", "1g"]
    for key, value in (env or {}).items():
        argv += ["-e", f"{key}={value}"]
    return subprocess.run([*argv, image, *args], capture_output=True, text=True, timeout=timeout)


def results(stdout: str) -> dict[str, dict]:
    return {r["payload"]: r for r in (json.loads(line.split(" ", 1)[1]) for line in stdout.splitlines()
                                      if line.startswith("HPCAI_RESULT "))}


def section(stdout: str, payload: str) -> str:
    """The output of one payload in a suite run (between its === banner and its result line)."""
    start = stdout.index(f"=== hpcai-bench: {payload}:")
    return stdout[start:stdout.index("HPCAI_RESULT", start)]


def test_pytorch_cpu_default_suite(pytorch_cpu_image):
    res = docker_run(pytorch_cpu_image, env={"HPCAI_BENCH_PROFILE": "quick"})
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    got = results(res.stdout)
    # The image's HPCAI_DEFAULT_SUITE: the flavor's default payloads in flavors.toml order.
    suite = ["sanity", "mpi-allreduce", "ddp-bench", "hf-clm", "mila-suite", "megatron-gpt"]
    assert list(got) == suite
    assert all(r["status"] == "PASS" for r in got.values()), got
    assert got["sanity"]["metrics"] == {"world_size": 1.0}
    assert got["ddp-bench"]["metrics"]["ex_per_sec_total"] > 0
    assert 0 < got["ddp-bench"]["metrics"]["sec_per_iter_p50"] < 60
    hf = got["hf-clm"]
    assert hf["synthetic"] is True and hf["vars"]["model"] == "gpt2-tiny"
    assert hf["metrics"]["samples_per_second"] > 0 and hf["metrics"]["tflops_per_gpu"] > 0
    assert got["mpi-allreduce"]["metrics"]["busbw_max_size"] > 0
    mila = parse_text("mila", section(res.stdout, "mila-suite"))  # six benchmarks, the same score
    assert len(mila.details["benchmarks"]) == 6 and got["mila-suite"]["metrics"]["nans"] == 0
    assert mila.headline.value == pytest.approx(got["mila-suite"]["metrics"]["score"], rel=1e-6)
    megatron = got["megatron-gpt"]  # the tiny GPT through Megatron Core on one CPU rank
    assert megatron["vars"]["model_size"] == "tiny" and megatron["synthetic"] is True
    assert megatron["metrics"]["tokens_per_second"] > 0 and megatron["metrics"]["nan_iterations"] == 0
    host = parse_text("megatron", section(res.stdout, "megatron-gpt"))
    assert host.get("tokens_per_second").value == pytest.approx(megatron["metrics"]["tokens_per_second"], rel=1e-3)
    # the summary table closes the run
    table = res.stdout[res.stdout.rindex("\npayload "):].splitlines()[1:]
    assert [row.split()[0] for row in table[2:]] == suite
    # the host-side parsers read the same logs the same way
    sanity = parse_text("sanity", section(res.stdout, "sanity"))
    assert sanity.details["ranks"]["0"]["libfabric"].startswith("/usr/lib/x86_64-linux-gnu/libfabric.so.1")
    assert sanity.details["ranks"]["0"]["mpi_version"].startswith("Open MPI v4")
    mpi = parse_text("mpi-allreduce", section(res.stdout, "mpi-allreduce"))
    assert mpi.headline.value == pytest.approx(got["mpi-allreduce"]["metrics"]["busbw_max_size"])


def test_one_payload_with_variables_and_bad_input(pytorch_cpu_image):
    res = docker_run(pytorch_cpu_image, "hpcai-bench", "ddp-bench", "model=mlp", "image_size=16",
                     "batch_size=2", "iters=2", "warmup=1")
    assert res.returncode == 0, res.stdout[-3000:]
    assert "Benchmark: mlp with batch size 2" in res.stdout
    assert "hpcai-bench: ddp-bench ex_per_sec_total = " in res.stdout
    bad = docker_run(pytorch_cpu_image, "hpcai-bench", "ddp-bench", "batchsize=2")
    assert bad.returncode == 2
    assert "unknown variable 'batchsize' for payload ddp-bench; valid: backend, batch_size" in bad.stderr


def test_two_mpi_ranks_in_one_container(pytorch_cpu_image):
    res = docker_run(pytorch_cpu_image, "mpirun", "-np", "2", "--oversubscribe", "hpcai-bench",
                     "mpi-allreduce", "max_bytes=65536", "iters=10", "warmup=2")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    got = results(res.stdout)["mpi-allreduce"]  # one result line: only rank 0 reports
    assert res.stdout.count("HPCAI_RESULT") == 1
    assert got["metrics"]["ranks"] == 2.0 and got["metrics"]["busbw_max_size"] > 0


def test_self_test_and_listing(pytorch_cpu_image, hpcai):
    res = docker_run(pytorch_cpu_image, "hpcai-bench", "--self-test")
    assert res.returncode == 0, res.stdout + res.stderr
    for check in ("import torch", "MPI init", "libfabric load"):
        assert f"self-test: ok   {check}" in res.stdout
    listing = hpcai("payloads", "list", "--image", pytorch_cpu_image, "--json")
    assert listing.exit_code == 0, listing.stderr
    names = [e["name"] for e in json.loads(listing.stdout)]
    assert names == ["ddp-bench", "hf-clm", "megatron-gpt", "mila-suite", "mpi-allreduce", "sanity"]


def test_tensorflow_cpu_default_suite(tensorflow_cpu_image):
    res = docker_run(tensorflow_cpu_image, env={"HPCAI_BENCH_PROFILE": "quick"})
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    got = results(res.stdout)
    assert list(got) == ["sanity", "mpi-allreduce", "tf-cnn-benchmarks", "tf-resnet50"]
    assert all(r["status"] == "PASS" for r in got.values()), got
    for name in ("tf-cnn-benchmarks", "tf-resnet50"):  # CARAML's fork itself, and the Keras re-creation
        tf = got[name]
        assert tf["synthetic"] is True and tf["metrics"]["images_per_sec"] > 0
        parsed = parse_text("tf-resnet50", section(res.stdout, name))
        assert parsed.headline.value == pytest.approx(tf["metrics"]["images_per_sec"], rel=1e-3)
    fork = section(res.stdout, "tf-cnn-benchmarks")
    assert "Model:       resnet50_v2" in fork and "Dataset:     imagenet (synthetic)" in fork


# A stand-in for Horovod (a MOCK: one process, identity optimizer wrapper), for images built
# without WITH_HVD=1 as CI's are. It exercises the payload's real PyTorch training loop, output
# format and metric extraction; real Horovod runs need an image built with --horovod 1.
HOROVOD_MOCK = '''
class Compression:
    none = fp16 = None
def init(): pass
def size(): return 1
def rank(): return 0
def local_rank(): return 0
def DistributedOptimizer(optimizer, named_parameters=None, compression=None): return optimizer
def broadcast_parameters(params, root_rank): pass
def broadcast_optimizer_state(optimizer, root_rank): pass
'''


def test_hvd_synthetic_pytorch_loop_with_a_mock_horovod(pytorch_cpu_image, tmp_path):
    (tmp_path / "horovod" / "torch").mkdir(parents=True)
    (tmp_path / "horovod" / "__init__.py").write_text("")
    (tmp_path / "horovod" / "torch" / "__init__.py").write_text(HOROVOD_MOCK)
    folder = payloads_root() / "hvd-synthetic"  # CPU images do not bake it by default: mount it
    res = subprocess.run(["docker", "run", "--rm", "-v", f"{tmp_path}:/mock:ro", "-e", "PYTHONPATH=/mock",
                          "-v", f"{folder}:/opt/hpcai/payloads/hvd-synthetic:ro",
                          "-e", "HPCAI_BENCH_PROFILE=quick", pytorch_cpu_image, "hpcai-bench", "hvd-synthetic"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "Number of CPUs: 1" in res.stdout and "Iter #2: " in res.stdout
    got = results(res.stdout)["hvd-synthetic"]
    assert got["metrics"]["img_per_sec_total"] == pytest.approx(got["metrics"]["img_per_sec_per_device"])
    parsed = parse_text("hvd-synthetic", section(res.stdout, "hvd-synthetic"))
    assert parsed.headline.value == pytest.approx(got["metrics"]["img_per_sec_total"])


def test_mila_training_runs_milas_own_code_through_its_harness(mila_cpu_image, tmp_path):
    """The Mila training suite's own scripts (224a69c3, ported) through its run.py on the CPU: the
    five benchmarks that need no GPU or dataset, at the quick profile (12 observations, Mila
    drops 10), recom on the stand-in MovieLens that Mila's convert.py turns into its training
    files. Mila's report file and printed reports parse to the wrapper's own score."""
    out = tmp_path / "out"
    out.mkdir()
    res = subprocess.run(["docker", "run", "--rm", "-v", f"{out}:/out", "-e", "HPCAI_BENCH_PROFILE=quick",
                          "-e", "HPCAI_OUTPUT_DIR=/out", mila_cpu_image, "hpcai-bench", "mila-training"],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    got = results(res.stdout)["mila-training"]
    assert got["status"] == "PASS" and got["synthetic"] is True  # stand-in WikiText-2 and MovieLens
    assert "mila-training: stand-in MovieLens-20M for recom: 1000 users x 30 ratings" in res.stdout
    run = out / "mila-training"
    summary = (run / "mila" / "output" / "summary.txt").read_text()  # Mila's own summary
    for script in ("regression/polynome", "time_sequence_prediction/lstm", "word_language_model", "cart_pole",
                   "neural_collaborative_filtering"):
        assert re.search(rf"{script}/pytorch/run\.sh +[\d.]+ min passed", summary), summary
    report = run / "mila" / "output" / "hpcai_0.json"  # one copy (no GPU), Mila's unclosed list
    text = report.read_text()
    assert text.startswith("[{") and text.rstrip().endswith("},")
    from_file, printed = parse_text("mila", text), parse_text("mila", section(res.stdout, "mila-training"))
    assert from_file.details["benchmarks"] == printed.details["benchmarks"] == ["toy_reg", "toy_lstm", "wlm", "cart", "recom"]
    assert from_file.headline.value == pytest.approx(got["metrics"]["score"], rel=1e-6)
    assert printed.headline.value == pytest.approx(got["metrics"]["score"], rel=1e-6)
    for r in from_file.details["reports"]:  # Mila's timing: `number` batches per observation, 10 dropped
        assert r["number"] == 2 and r["repeat"] == 12 and r["cuda"] is False
        assert r["train"]["count"] == (1 if r["name"] == "wlm" else 2)  # wlm observes repeat - 1 times
        assert r["train_item"]["avg"] == pytest.approx(r["batch_size"] * 2 / r["train"]["avg"])
    jobs = json.loads((run / "mila" / "hpcai.json").read_text())  # Mila's fast.json jobs, resized
    assert [j["cmd"] for j in jobs] == ["./regression/polynome/pytorch/run.sh",
                                        "./time_sequence_prediction/lstm/pytorch/run.sh",
                                        "./natural_language_processing/word_language_model/pytorch/run.sh",
                                        "./reinforcement/cart_pole/pytorch/run.sh",
                                        "./recommendation/neural_collaborative_filtering/pytorch/run.sh"]
    converted = run / "mila" / "data" / "ml-20m"  # by Mila's convert.py, in the same job as its training
    assert all((converted / f).stat().st_size > 0 for f in ("train-ratings.csv", "test-ratings.csv", "test-negative.csv"))
    assert jobs[0]["args"]["--batch-size"] == 256 and "--cuda" not in jobs[0]["args"]


def test_mila_translator_runs_gnmt_on_the_stand_in_wmt16(mila_cpu_image, tmp_path):
    """Mila's rnn_translator (GNMT) through run.py on the stand-in WMT16, at a tiny size (GNMT takes
    seconds a batch on 2 cores): 11 observations of 1 batch of 2, Mila drops 10. The ported trainer
    times --number batches, so the report's items/s is batch x number over the observed time."""
    out = tmp_path / "out"
    out.mkdir()
    res = subprocess.run(["docker", "run", "--rm", "-v", f"{out}:/out", "-e", "HPCAI_OUTPUT_DIR=/out", mila_cpu_image,
                          "hpcai-bench", "mila-training", "bench=translator", "number=1", "repeat=11", "batch_size=2",
                          "device=cpu"], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "mila-training: stand-in WMT16 for translator: 16630 WikiText-2 sentences" in res.stdout
    got = results(res.stdout)["mila-training"]
    assert got["status"] == "PASS" and got["synthetic"] is True
    report = parse_text("mila", (out / "mila-training" / "mila" / "output" / "hpcai_0.json").read_text())
    (translator,) = report.details["reports"]
    assert translator["name"] == "translator" and translator["number"] == 1 and translator["train"]["count"] == 1
    assert translator["train_item"]["avg"] == pytest.approx(2 * 1 / translator["train"]["avg"])
    assert report.headline.value == pytest.approx(got["metrics"]["score"], rel=1e-6)


def test_hf_clm_seed_variant_trains_on_the_seeds_own_stack(hf_seed_cpu_image):
    """`hpcai build --variant hf-clm=seed`: the same hf_clm.py on the WikiText-2 benchmark's
    transformers 4.37.0 / datasets 2.14.5 / evaluate 0.4.1, named by the image and the run."""
    labels = subprocess.run(["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", hf_seed_cpu_image],
                            capture_output=True, text=True, timeout=60)
    assert json.loads(labels.stdout)["hpcai.payload-variants"] == "hf-clm=seed"
    res = docker_run(hf_seed_cpu_image, "hpcai-bench", "hf-clm", env={"HPCAI_BENCH_PROFILE": "quick"})
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "hf-clm: transformers 4.37.0, accelerate 0.26.1, datasets 2.14.5, evaluate 0.4.1" in res.stdout
    got = results(res.stdout)["hf-clm"]
    assert got["status"] == "PASS" and got["metrics"]["samples_per_second"] > 0
