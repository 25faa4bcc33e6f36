"""Parsers for OSU, Horovod, DDP, HF Trainer, OpenCLIP, Megatron, tf_cnn, mpi-allreduce, sanity.

Real logs from tests/fixtures/samples (HF run_clm.py, OSU 7.5.2) and hand-written fixtures for each
documented variant: launcher prefixes, stderr logging, JSON outputs, truncated logs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hpcai.errors import UsageError
from hpcai.results.parsers import parse_text, parser_for_payload

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
SAMPLES = Path(__file__).resolve().parents[2] / "fixtures" / "samples"  # real captured logs


def parse(parser: str, path: Path):
    return parse_text(parser, path.read_text())


def test_hf_real_log_with_repetitions():
    r = parse("hf-clm", SAMPLES / "hf_run_clm.log")
    runs = r.details["runs"]
    assert r.details["repetitions"] == len(runs) >= 3
    assert runs[0]["train_samples_per_second"] == pytest.approx(38.097)
    assert runs[0]["train_runtime"] == pytest.approx(182.5347)  # full precision from the dict line
    assert runs[0]["perplexity"] == pytest.approx(21.1048)  # merged from the eval block
    mean = sum(x["train_samples_per_second"] for x in runs) / len(runs)
    assert r.headline.name == "train_samples_per_second" and r.headline.value == pytest.approx(mean)
    assert r.details["n_params"] == 124439808 and r.details["model"] == "gpt2" and r.details["n_gpu"] == 1


def test_osu_real_get_bw():
    r = parse("osu", SAMPLES / "osu_get_bw.txt")
    assert r.details["title"] == "MPI_Get Bandwidth" and r.details["version"] == "7.5.2"
    assert r.headline.name == "bandwidth_4194304B" and r.headline.value == pytest.approx(24248.76)
    assert r.headline.better == "higher" and r.headline.unit == "MB/s" and len(r.details["rows"]) == 23


def test_osu_latency_headline_is_8_bytes_lower_is_better():
    r = parse("osu", LOGS / "osu_allreduce_latency.txt")
    assert r.headline.name == "latency_8B" and r.headline.value == pytest.approx(2.53)
    assert r.headline.better == "lower" and r.headline.unit == "us"


def test_osu_7x_tail_columns_and_validation():
    r = parse("osu", LOGS / "osu_latency_7x_validation.txt")
    assert r.details["columns"][1] == "P50 Tail Lat(us)"
    assert r.details["rows"][1]["Validation"] == "Pass" and r.warnings == []
    failing = (LOGS / "osu_latency_7x_validation.txt").read_text().replace("6.00              Pass", "6.00              Fail")
    assert "validation failed" in parse_text("osu", failing).warnings[0]


def test_osu_open_mpi_tag_prefix():
    assert parse("osu", LOGS / "osu_get_bw_ompi_tag.txt").headline.value == pytest.approx(24248.76)


def test_horovod_total_and_ci():
    r = parse("hvd-synthetic", LOGS / "hvd_pytorch.log")
    assert r.headline.name == "img_per_sec_total" and r.headline.value == pytest.approx(3247.6)
    assert r.details["ci95_total"] == pytest.approx(9.6) and r.details["iterations"] == [812.3, 811.0, 812.8]
    assert r.get("img_per_sec_per_device").value == pytest.approx(811.9)


def test_horovod_cpu_with_srun_labels_and_noise():
    r = parse("hvd-synthetic", LOGS / "hvd_tf_cpu_label.log")
    assert r.headline.value == pytest.approx(10.4) and r.details["devices"] == 2


def test_ddp_every_configuration_and_percentile():
    r = parse("ddp-bench", LOGS / "ddp_bench.log")
    configs = r.details["configurations"]
    assert [c["config"] for c in configs] == ["no ddp", "1M/1G", "1M/2G", "1M/4G", "2M/4G"]
    assert set(configs[0]["percentiles"]) == {"p50", "p75", "p90", "p95"}
    assert configs[3]["percentiles"]["p95"] == {"sec_per_iter": 0.103, "ex_per_sec": 311.0, "ex_per_sec_total": 1244.0}
    assert r.details["headline_config"] == "2M/4G"
    assert r.headline.name == "ex_per_sec_total" and r.headline.value == pytest.approx(307 * 8)
    assert r.get("scaling_efficiency").value == pytest.approx(307 / 329)


def test_ddp_two_models_report_the_first_under_its_own_name():
    """Upstream's suite runs resnet50 then resnet101: resnet50's number must not be filed under resnet101."""
    one = (LOGS / "ddp_bench.log").read_text()
    second = one[one.index("Benchmark: resnet50"):].replace("resnet50", "resnet101").replace("307/s", "150/s")
    r = parse_text("ddp-bench", one + "\n" + second)
    assert r.details["model"] == "resnet50" and r.details["models"] == ["resnet50", "resnet101"]
    assert r.headline.value == pytest.approx(307 * 8)  # resnet50's 2M/4G p50, not resnet101's 150/s
    assert r.warnings == ["the log benchmarks 2 models (resnet50, resnet101): the figures are resnet50's; "
                          "every model's rows are in details.configurations"]
    assert len(r.details["configurations"]) == 10


def test_hf_fp32_and_fp16_runs_are_never_averaged():
    """The WikiText-2 benchmark trains in FP32, then FP16: two figures, not their mean."""
    def run(fp16: bool, sps: float) -> str:
        return (f"INFO - Training/evaluation parameters TrainingArguments(bf16=False, fp16={fp16}, per_device_train_batch_size=8)\n"
                f"{{'train_runtime': 10.0, 'train_samples_per_second': {sps}, 'train_steps_per_second': 1.0, "
                "'train_loss': 3.2, 'epoch': 1.0}\n")
    r = parse_text("hf-trainer", run(False, 40.0) + run(False, 42.0) + run(True, 90.0))
    assert r.headline.name == "train_samples_per_second" and r.headline.value == pytest.approx(41.0)  # fp32 mean
    assert r.get("train_samples_per_second_fp16").value == pytest.approx(90.0)
    assert not r.get("train_samples_per_second_fp16").headline
    assert r.warnings[0] == "runs in 2 precisions (fp32, fp16): each is reported apart, fp32 under the plain names"
    assert [x["precision"] for x in r.details["runs"]] == ["fp32", "fp32", "fp16"]


def test_hf_clm_payload_says_its_precision():
    r = parse_text("hf-trainer", "hf-clm: model=gpt2 params=1 seq_len=8 batch_size=1 ranks=1 precision=bf16 data=x\n"
                                 "{'train_runtime': 1.0, 'train_samples_per_second': 5.0}\n")
    assert r.details["runs"][0]["precision"] == "bf16" and r.warnings == []


def test_ddp_json_output():
    r = parse("ddp-bench", LOGS / "ddp_bench.json")
    assert r.headline.value == pytest.approx(32 / 0.1 * 2)


def test_ddp_hpcai_payload_text_uses_exact_total():
    r = parse("ddp-bench", LOGS / "ddp_bench_hpcai.log")
    assert r.details["headline_config"] == "2M/2G" and r.headline.value == pytest.approx(914.29)
    assert r.get("scaling_efficiency").value == pytest.approx(228 / 307)


def test_ddp_hpcai_payload_json():
    r = parse("ddp-bench", LOGS / "ddp_bench_hpcai.json")
    assert [c["config"] for c in r.details["configurations"]] == ["no ddp", "2M/2G"]
    assert r.headline.value == pytest.approx(228.57 * 4)


def test_hf_results_json_and_torchrun_prefix():
    assert parse("hf-clm", LOGS / "hf_train_results.json").headline.value == pytest.approx(38.097)
    r = parse("hf-clm", LOGS / "hf_torchrun_stderr.log")
    assert r.headline.value == pytest.approx(147.57) and r.details["global_batch_size"] == 32
    assert r.details["n_params"] == 124439808


def test_hf_clm_payload_shape_line_and_synthetic_flag():
    from hpcai.results.tflops import add_to_result

    r = parse("hf-clm", LOGS / "hf_clm_hpcai.log")
    assert (r.details["n_params"], r.details["seq_len"], r.details["n_gpu"]) == (124439808, 128, 2)
    assert r.details["synthetic"] is True and "synthetic" in r.warnings[0]
    add_to_result(r, {"nodes": 2, "ntasks_per_node": 1})
    # same figure the payload prints: 1.6 × 6 × 124439808 × 128 / 2 / 1e12
    assert r.get("tflops_per_gpu").value == pytest.approx(1.6 * 6 * 124439808 * 128 / 2 / 1e12)


def test_hf_metrics_block_only_with_days_runtime():
    r = parse("hf-trainer", LOGS / "hf_block_only_days.log")
    assert r.get("train_runtime").value == pytest.approx(86400 + 2 * 3600 + 3 * 60 + 4.5)
    assert r.headline.value == pytest.approx(10.628)


def test_hf_transformers5_string_values():
    r = parse("hf-trainer", LOGS / "hf_transformers5_strings.log")
    run = r.details["runs"][0]
    assert r.headline.name == "train_samples_per_second" and r.headline.value == pytest.approx(38.097)
    assert run["train_runtime"] == pytest.approx(182.53)  # from the dict line, read as a number
    assert r.get("perplexity").value == pytest.approx(21.1048)  # merged from the eval block
    assert r.details["n_params"] == 124439808 and r.details["repetitions"] == 1
    # the dict line alone (no metrics block) is enough
    dict_only = "\n".join(x for x in (LOGS / "hf_transformers5_strings.log").read_text().splitlines()
                          if "train_runtime" in x and x.startswith("{"))
    assert parse_text("hf-trainer", dict_only).headline.value == pytest.approx(38.097)


@pytest.mark.parametrize("text", [
    "{'train_runtime': 'n/a', 'train_samples_per_second': 'fast'}",  # strings that are no numbers
    "{'train_runtime': 1.0}",  # a dict without any throughput
    "{'train_runtime': '182.5', 'train_samples_per_second': [38.0]}",
    "{[1]: 2, 'train_runtime': 1}",  # unhashable key: literal_eval raises TypeError
    "{'train_runtime', 'train_samples_per_second'}",  # a set, not a dict
    '{"train_samples_per_second": "x"}',  # a *_results.json with a non-number
])
def test_hf_unreadable_dicts_are_found_nothing_errors(text):
    with pytest.raises(UsageError, match="hf-trainer: no train/eval metrics"):
        parse_text("hf-trainer", text)


def test_openclip_total_time_skips_first_step():
    r = parse("openclip", LOGS / "openclip_stderr.log")
    assert r.headline.name == "total_time_secs" and r.headline.value == pytest.approx(2.050 + 2.040 + 2.060)
    assert r.headline.better == "lower" and r.warnings == []
    assert r.get("samples_per_s_per_gpu").value == pytest.approx((999.02 + 1003.9 + 994.17) / 3)


def test_openclip_old_format_truncated_warns():
    r = parse("openclip", LOGS / "openclip_old_truncated.log")
    assert r.get("samples_per_s_per_gpu") is None
    assert r.headline.value == pytest.approx(0.5 + 0.51) and "truncated" in r.warnings[0]


def test_megatron_skips_warmup_and_derives_tokens():
    r = parse("megatron", LOGS / "megatron.log")
    assert r.headline.name == "tflops_per_gpu" and r.headline.value == pytest.approx((168.2 + 167.6) / 2)
    assert "TFLOP/s/GPU" in r.headline.formula
    secs = (0.6174 + 0.6196) / 2
    assert r.get("time_per_iteration").value == pytest.approx(secs)
    assert r.get("tokens_per_second").value == pytest.approx(1024 * 2048 / secs)


def test_megatron_caraml_seconds_and_tflops_label():
    r = parse("megatron", LOGS / "megatron_caraml.log")
    assert r.headline.value == pytest.approx((168.51 + 167.13) / 2)
    assert r.get("time_per_iteration").value == pytest.approx(2.42)


def test_tf_cnn_total_and_truncated():
    assert parse("tf-resnet50", LOGS / "tf_cnn.log").headline.value == pytest.approx(2314.98)
    r = parse("tf-resnet50", LOGS / "tf_cnn_truncated.log")
    assert r.headline.value == pytest.approx(2315.4) and "truncated" in r.warnings[0]


def test_tf_cnn_reads_the_fork_itself():
    """A captured run of CARAML's tf_cnn_benchmarks fork (TensorFlow's warnings, jpwr's energy
    lines and all): its total and both step lines."""
    r = parse("tf-resnet50", LOGS / "tf_cnn_benchmarks_fork.log")
    assert r.headline.value == pytest.approx(3.80) and not r.warnings
    assert [row["step"] for row in r.details["steps"]] == [1, 10]


def test_mpi_allreduce_table():
    r = parse("mpi-allreduce", LOGS / "mpi_allreduce.log")
    assert r.headline.name == "busbw_max_size" and r.headline.value == pytest.approx(2079.83)
    assert r.get("latency_min_size").value == pytest.approx(12.31) and r.details["ranks"] == 4
    assert r.warnings == []


def test_sanity_counts_ranks_and_keeps_fields():
    r = parse("sanity", LOGS / "sanity_label.log")
    assert r.headline.value == 3 and r.get("ranks_missing").value == 1
    assert r.details["hosts"] == ["nid001", "nid002"]
    assert r.details["ranks"]["1"]["gpu"] == "NVIDIA H100 80GB HBM3 visible=1"
    assert r.details["ranks"]["0"]["version"]  # MPI and libfabric fields kept


@pytest.mark.parametrize("parser", ["osu", "hvd-synthetic", "ddp-bench", "hf-clm", "openclip", "megatron",
                                    "tf-resnet50", "mpi-allreduce", "sanity"])
def test_wrong_payload_and_empty_logs_are_errors(parser):
    with pytest.raises(UsageError, match="no .* found"):
        parse_text(parser, (LOGS / "nccl_allreduce_2.21.log").read_text())
    with pytest.raises(UsageError, match="empty"):
        parse_text(parser, "\n")


def test_parser_lookup_by_payload_and_alias():
    assert parser_for_payload("hf-clm") == "hf-trainer"
    assert parser_for_payload("nccl-tests") == "nccl-tests"
    with pytest.raises(UsageError, match="unknown parser 'nope'; valid: .*nccl-tests"):
        parser_for_payload("nope")


def test_megatron_tokens_per_second_from_the_runs_seq_len(hpcai):
    """CARAML's log prints the global batch but not the sequence length: --var seq_len gives tokens/s."""
    log = str(LOGS / "megatron_caraml.log")
    without = json.loads(hpcai("results", "parse", "--payload", "megatron", log, "--json").stdout)
    assert "tokens_per_second" not in {m["name"] for m in without["metrics"]}
    res = hpcai("results", "parse", "--payload", "megatron", log, "--var", "seq_len=2048", "--json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    tokens = next(m for m in doc["metrics"] if m["name"] == "tokens_per_second")
    per_iter = next(m for m in doc["metrics"] if m["name"] == "time_per_iteration")["value"]
    gbs = doc["details"]["global_batch_size"]
    assert tokens["value"] == pytest.approx(gbs * 2048 / per_iter)
    assert tokens["formula"] == "global_batch * seq_len / time_per_iteration"


def test_mila_suite_reports_every_benchmark_and_the_score():
    """A captured run of payloads/mila-suite (six benchmarks, number 2 x repeat 3, first dropped)."""
    text = (LOGS / "mila_suite_cpu.log").read_text()
    r = parse("mila", LOGS / "mila_suite_cpu.log")
    assert r.details["benchmarks"] == ["convnet", "dcgan", "vae", "toy_lstm", "toy_reg", "wordlm"]
    rates = [r.get(f"{b}_items_per_s").value for b in r.details["benchmarks"]]
    assert r.headline.name == "score"
    assert r.headline.value == pytest.approx(math.exp(sum(map(math.log, rates)) / 6))
    printed = float(text.split("mila-suite: score ", 1)[1].split()[0])
    assert r.headline.value == pytest.approx(printed, rel=1e-6) and r.get("nans").value == 0
    for report in r.details["reports"]:  # the Mila report shape
        assert set(report["train"]) == set(report["train_item"]) == {"avg", "min", "max", "sd", "range", "unit"}
        assert report["train_item"]["unit"] == "items/s" and report["repeat"] == 3 and report["number"] == 2
        assert {"unique_id", "version", "gpu", "hostname"} <= set(report)


def test_mila_nan_losses_are_counted_and_cut_lines_skipped():
    good = (LOGS / "mila_suite_cpu.log").read_text().splitlines()
    first = next(line for line in good if line.startswith("mila-report: "))
    bad = first.replace('"nans": 0', '"nans": 3')
    r = parse_text("mila", bad + "\n" + first[: len(first) // 2] + "\n")
    assert r.get("nans").value == 3 and r.warnings == ["3 NaN loss(es) in convnet"]
    with pytest.raises(UsageError, match="mila"):
        parse_text("mila", "mila-suite: score 12 items/s\n")


def test_mila_training_reads_milas_own_printed_reports():
    """A captured run of Mila's own code (payloads/mila-training): its reports printed as indented
    JSON between rules, one per benchmark, named by run.py's BENCH_NAME."""
    text = (LOGS / "mila_training_cpu.log").read_text()
    r = parse("mila", LOGS / "mila_training_cpu.log")
    assert r.details["benchmarks"] == ["toy_reg", "toy_lstm", "wlm"]
    for report in r.details["reports"]:  # Mila's report shape (its README's sample)
        assert set(report["train"]) == {"avg", "min", "max", "sd", "count", "unit"}
        assert set(report["train_item"]) == {"avg", "min", "max", "range", "unit"}
        assert report["train_item"]["unit"] == "items/sec" and report["number"] == 2
        # Mila drops 10 observations; wlm's loop makes repeat - 1 of them
        assert report["train"]["count"] == (2 if report["name"] == "wlm" else 3)
        expected = report["batch_size"] * report["number"] / report["train"]["avg"]
        assert report["train_item"]["avg"] == pytest.approx(expected)
    printed = float(text.split("mila-training: score ", 1)[1].split()[0])  # the wrapper's own summary
    assert r.headline.value == pytest.approx(printed, rel=1e-5)
    wlm = r.details["reports"][2]
    assert r.get("wlm_sd_pct").value == pytest.approx(100 * wlm["train"]["sd"] / wlm["train"]["avg"])


def test_mila_training_reads_milas_unclosed_report_file():
    """Mila's report file: `[` then `{…},` per benchmark, never closed."""
    path = LOGS / "mila_training_report_0.json"
    assert path.read_text().rstrip().endswith("},")
    from_file, from_stdout = parse("mila", path), parse("mila", LOGS / "mila_training_cpu.log")
    assert from_file.details["benchmarks"] == ["toy_reg", "toy_lstm", "wlm"]
    assert from_file.headline.value == pytest.approx(from_stdout.headline.value)


def test_mila_training_copies_count_once_and_a_cut_report_is_skipped():
    """Mila runs one copy per GPU: a benchmark reported by two copies counts once, at their mean;
    copies printing at once can cut a report, which is skipped."""
    text = (LOGS / "mila_training_cpu.log").read_text()
    start = text.index("\n{\n") + 1
    block = text[start:text.index("\n}\n", start) + 3]
    doc = json.loads(block)
    doubled = dict(json.loads(block), jr_id="1")  # the second GPU's copy, three times as fast
    doubled["train_item"]["avg"] *= 3
    log = block + json.dumps(doubled, indent=4) + "\n" + block[: len(block) // 2] + "\n"
    r = parse_text("mila", log)
    assert r.details["benchmarks"] == ["toy_reg"] and len(r.details["reports"]) == 2
    assert r.headline.value == pytest.approx(2 * doc["train_item"]["avg"])
    assert r.get("toy_reg_sd_pct") is None  # no single spread for two copies


def test_megatron_lm_runs_average_every_interval_as_caraml():
    """CARAML's own code (shape line `implementation=megatron-lm`): every logged interval counts,
    as its JUBE result's elp_pat_avg; the Megatron Core stand-in leaves the first out."""
    lines = (LOGS / "megatron_caraml.log").read_text().splitlines()
    shape = ("megatron-gpt: model=800M layers=16 hidden=2048 heads=8 ffn=8192 seq-length=2048 vocab=50304 tp=1 "
             "pp=1 dp=4 micro-batch=4 global-batch-size=512 microbatches=32 precision=fp16 attention=local "
             "device=cuda iters=0 exit-duration=30 min implementation={} data=/d/corpus_text_document")
    secs = [float(ln.split("elapsed time per iteration (s):")[1].split("|")[0]) for ln in lines
            if "elapsed time per iteration (s):" in ln]
    caraml = parse_text("megatron", "\n".join([shape.format("megatron-lm"), *lines]))
    core = parse_text("megatron", "\n".join([shape.format("core"), *lines]))
    assert caraml.get("time_per_iteration").value == pytest.approx(sum(secs) / len(secs))
    assert core.get("time_per_iteration").value == pytest.approx(sum(secs[1:]) / len(secs[1:]))
    assert caraml.details["implementation"] == "megatron-lm" and core.details["implementation"] == "core"
