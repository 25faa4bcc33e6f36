"""Each source workflow's profile, run as its users would on the CPU image under the Slurm test
cluster (2 nodes, docker runtime), checking the recorded figures and columns.

The sizes are overridden to CPU scale with var=value (which wins over a profile); everything
else is the profile's. OpenCLIP (MMoCLIP) and nccl-tests are not in the CPU image: their profiles
are checked as rendered commands in tests/unit (test_payloads_manifest, test_launch_cli).
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
from pathlib import Path

import pytest
from test_payloads_slurm import ENV, bench_result, check_ok, launch, recorded

pytestmark = [pytest.mark.slurm, pytest.mark.docker, pytest.mark.slow]


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet (printable stand-ins for the 256 byte values)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = list(keep), 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(keep, map(chr, chars)))


def wikitext_folder(root: Path) -> Path:
    """A --data folder as a user lays it out: WikiText-2's raw files (here: made-up text in its
    format) and a tokenizer (GPT-2's byte alphabet with no merges, so no hub is needed)."""
    text = "\n".join(f" = Section {i} = \n The {i} th paragraph was written in {1900 + i} and it is here ."
                     for i in range(400))
    wiki = root / "wikitext-2-raw-v1"
    wiki.mkdir(parents=True)
    (wiki / "wiki.train.raw").write_text(text)
    (wiki / "wiki.valid.raw").write_text(text[: len(text) // 4])
    tok = root / "gpt2-bytes"
    tok.mkdir()
    vocab = {ch: i for i, ch in enumerate(_bytes_to_unicode().values())}
    vocab["<|endoftext|>"] = len(vocab)
    (tok / "vocab.json").write_text(json.dumps(vocab))
    (tok / "merges.txt").write_text("#version: 0.2\n")
    (tok / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "GPT2Tokenizer", "model_max_length": 1024, "eos_token": "<|endoftext|>",
         "bos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}))
    return root


CPU_SCALE = ("model=gpt2-tiny", "pretrained=false", "tokenizer=gpt2-bytes", "seq_len=64", "batch_size=4",
             "epochs=1")


def test_wikitext2_profile_trains_and_evaluates_on_real_data_from_data(pytorch_cpu_image, hpcai_exe, tmp_path):
    data = wikitext_folder(tmp_path / "datasets")
    run = tmp_path / tmp_path.name
    res, logs = launch(hpcai_exe, pytorch_cpu_image, run, "hf-clm", *CPU_SCALE,
                       options=["--profile", "wikitext2", "--data", str(data)])
    check_ok(res, logs)
    assert "data=wikitext-2-raw-v1 from /data/wikitext-2-raw-v1" in logs[0]
    assert "SYNTHETIC" not in logs[0] and "***** eval metrics *****" in logs[0]
    result = bench_result(logs[0])
    assert result["status"] == "PASS" and result["synthetic"] is False
    plan = json.loads((run / "plan.json").read_text())
    values = plan["payload_values"]  # the profile's, where var=value did not override them
    assert (values["dataset"], values["eval"], values["lr"], values["seed"], values["precision"]) == \
        ("wikitext-2-raw-v1", "true", "5e-05", "42", "fp32")
    rec = recorded(run)
    assert rec["perplexity"] > 1 and rec["samples_per_second"] > 0
    assert rec["perplexity"] == pytest.approx(result["metrics"]["perplexity"], rel=1e-6)


def test_wikitext2_profile_without_data_says_it_falls_back(pytorch_cpu_image, hpcai_exe, tmp_path):
    run = tmp_path / tmp_path.name
    res, logs = launch(hpcai_exe, pytorch_cpu_image, run, "hf-clm", *CPU_SCALE, "tokenizer=", "steps=2",
                       "epochs=0", options=["--profile", "wikitext2"])
    check_ok(res, logs)
    assert "hf-clm: FALLING BACK TO SYNTHETIC data and random weights: wikitext-2-raw-v1 not found in --data " \
           "(none given)" in logs[0]
    assert bench_result(logs[0])["synthetic"] is True
    meta = json.loads((run / "metrics.json").read_text())  # the record says so too
    assert meta["details"]["synthetic"] is True
    assert any("synthetic data" in w for w in meta["warnings"])


def test_caraml_profile_megatron_gpt_and_its_csv_columns(pytorch_cpu_image, hpcai_exe, tmp_path):
    run = tmp_path / tmp_path.name
    res, logs = launch(hpcai_exe, pytorch_cpu_image, run, "megatron-gpt", "model_size=tiny", "micro_batch_size=2",
                       "global_batch_size=8", "seq_len=64", "iters=4", "log_interval=2",
                       options=["--profile", "caraml"])
    check_ok(res, logs)
    assert "tp=1 pp=1 dp=4 micro-batch=2 global-batch-size=8 microbatches=1" in logs[0]
    # the record names the implementation that ran: the CPU image has Megatron Core only
    assert json.loads((run / "metrics.json").read_text())["details"]["implementation"] == "core"
    export = subprocess.run([*hpcai_exe, "results", "export", str(run), "--csv"],
                            capture_output=True, text=True, env=ENV, timeout=120)
    assert export.returncode == 0, export.stderr
    got = next(csv.DictReader(io.StringIO(export.stdout)))
    assert (got["Model"], got["ModelSize"], got["GlobalBatchSize"], got["BatchSize/Device"]) == ("GPT", "tiny", "8", "2")
    assert (got["PipelineParallel"], got["TensorParallel"], got["DataParallel"], got["Iterations"]) == ("1", "1", "4", "4")
    tokens, per_iter = float(got["Tokens/second"]), float(got["Time/iteration(s)"])
    assert tokens == pytest.approx(8 * 64 / per_iter, rel=1e-6) and float(got["Avg_TFLOPs/GPU"]) > 0


def test_hpe_profile_runs_with_its_srun_shape(pytorch_cpu_image, hpcai_exe, tmp_path):
    """HPE's DDP example: its iterations and its srun binding (one rank per socket; the test nodes
    have one socket, so one rank per node)."""
    run = tmp_path / tmp_path.name
    res, logs = launch(hpcai_exe, pytorch_cpu_image, run, "ddp-bench", "model=convnet", "image_size=32",
                       "threads=1", options=["--profile", "hpe", "--ntasks-per-node", "1"])
    logs = logs[:2]
    check_ok(res, logs)
    argv = json.loads((run / "plan.json").read_text())["argv"]
    for option in ("--distribution=*:block", "--cpu-bind=socket", "--ntasks-per-socket=1"):
        assert option in argv
    assert json.loads((run / "plan.json").read_text())["payload_values"]["iters"] == "10"
    assert "   2 GPUs --    2M/1G:  p50:" in logs[0]
    assert bench_result(logs[0])["status"] == "PASS"


def test_mila_profile_repeats_and_reports_the_deviation_quantile(pytorch_cpu_image, hpcai_exe, tmp_path):
    """toy_reg as the Mila suite runs it (20 x 100 batches of 256, the first 10 dropped), twice,
    then compared: mean, sd and the suite's sd% quantile."""
    runs = tmp_path / "runs"
    res, logs = launch(hpcai_exe, pytorch_cpu_image, runs, "mila-suite", "bench=toy_reg", "threads=1",
                       options=["--profile", "mila", "--repeat", "2", "-N", "1"])
    assert res.returncode == 0, res.stderr[-3000:]
    records = sorted(p for p in runs.iterdir() if (p / "plan.json").is_file())
    assert len(records) == 2
    for rec in records:
        log = (rec / "logs" / "rank-0.out").read_text()
        report = json.loads(next(line for line in log.splitlines() if line.startswith("mila-report: "))[13:])
        assert (report["repeat"], report["number"], report["batch_size"], report["skip"], report["count"]) == \
            (20, 100, 256, 10, 10)
    compare = subprocess.run([*hpcai_exe, "results", "compare", str(runs), "--json"], capture_output=True, text=True,
                             env=ENV, timeout=120)
    assert compare.returncode == 0, compare.stderr
    data = json.loads(compare.stdout)
    assert data["rows"][0]["n"] == 2 and data["deviation_quantile"] == pytest.approx(data["rows"][0]["sd_percent"])


def test_mila_training_on_two_nodes_records_milas_reports(mila_cpu_image, hpcai_exe, tmp_path):
    """`hpcai launch … mila-training`: Mila's run.py once per node (it starts the per-GPU copies
    itself; one on a CPU node), toy_reg at the quick size; the record's metrics come from Mila's
    printed report through the host parser."""
    run = tmp_path / tmp_path.name
    res, logs = launch(hpcai_exe, mila_cpu_image, run, "mila-training", "bench=toy_reg",
                       options=["--profile", "quick", "-N", "2", "--ntasks-per-node", "1"])
    assert res.returncode == 0, res.stderr[-3000:] + logs[0][-3000:]
    for log in logs[:2]:  # both nodes ran Mila's harness, one copy each
        assert "./regression/polynome/pytorch/run.sh" in log and '"name": "toy_reg"' in log
    got = recorded(run)
    assert got["toy_reg_items_per_s"] > 0 and got["score"] == pytest.approx(got["toy_reg_items_per_s"])
    assert bench_result(logs[0])["synthetic"] is False  # toy_reg's generated data is the benchmark's own
