"""One headline name per payload, everywhere, and the counts of an export (hostile corpus,
round three, issue 25): every payload names one headline in `results parse`, its record, export
and its runner, and records of older hpcai read with today's names; every count of an export row
is a whole number and Iterations is what ran. Properties over every payload."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from hpcai.bench_runner import bench_runner
from hpcai.payloads import available_payloads, load_payload
from hpcai.results import export, loading, runs

pytestmark = pytest.mark.hostile

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
# one real log per payload; a payload added without one fails test_every_payload_has_a_sample
SAMPLES = {"ddp-bench": "ddp_bench_hpcai.log", "hf-clm": "hf_clm_hpcai.log", "hvd-synthetic": "hvd_pytorch.log",
           "megatron-gpt": "megatron.log", "mila-suite": "mila_suite_cpu.log", "mila-training": "mila_training_cpu.log", "mpi-allreduce": "mpi_allreduce.log",
           "nccl-tests": "nccl_allreduce_2.21.log", "openclip": "openclip_stderr.log",
           "osu": "osu_allreduce_latency.txt", "rccl-tests": "rccl_allreduce.log", "sanity": "sanity_label.log",
           "tf-cnn-benchmarks": "tf_cnn_benchmarks_fork.log", "tf-resnet50": "tf_cnn.log"}


def record(root: Path, payload: str, log: str, **plan) -> Path:
    run = root / "run"
    (run / "logs").mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps({"payload": payload, "nodes": 1, "ntasks_per_node": 1,
                                               "payload_vars": {}, **plan}))
    (run / "logs" / "rank-0.out").write_text(log)
    return run


def headlines(metrics: list[dict]) -> list[str]:
    return [m["name"] for m in metrics if m.get("headline")]


# --- 1. one headline name per payload, everywhere ----------------------------------------------

def test_every_payload_has_a_sample():
    assert sorted(SAMPLES) == available_payloads()


@pytest.mark.parametrize("payload", available_payloads())
def test_results_parse_the_record_export_and_runner_name_one_headline(payload, tmp_path, hpcai):
    """hf-clm was `train_samples_per_second` in `results parse` and `samples_per_second` in its
    record; megatron-gpt `tflops_per_gpu` and `tokens_per_second`; sanity `ranks_reporting` and
    `world_size`. The manifest's `headline = true` is the one definition."""
    log = LOGS / SAMPLES[payload]
    parsed = hpcai("results", "parse", str(log), "--payload", payload, "--json")
    assert parsed.exit_code == 0, parsed.stderr
    named = headlines(json.loads(parsed.stdout)["metrics"])
    run = record(tmp_path, payload, log.read_text(errors="replace"))
    assert runs.finalize(run) is not None
    recorded = headlines(json.loads((run / "metrics.json").read_text())["metrics"])
    exported = export.row(loading.load(run))["Metric"]
    found = {m["name"]: m["value"] for m in json.loads((run / "metrics.json").read_text())["metrics"]}
    runner = bench_runner().headline(load_payload(payload).raw, found)  # its HPCAI_RESULT line's rule
    assert named == recorded == [exported] == [runner], (named, recorded, exported, runner)
    assert exported in {m.name for m in load_payload(payload).metrics if m.headline}


@pytest.mark.parametrize("payload, old, new", [
    ("hf-clm", "train_samples_per_second", "samples_per_second"),
    ("megatron-gpt", "tflops_per_gpu", "tokens_per_second"),
])
def test_records_of_older_hpcai_read_with_todays_names(payload, old, new, tmp_path):
    """A metrics.json written before the names were one: its old headline and alias names read as
    today's (the manifest's `key` is the alias), in show, export and compare alike."""
    run = record(tmp_path, payload, "")
    metrics = [{"name": old, "value": 5.0, "unit": "x", "better": "higher", "headline": True},
               {"name": "tokens_per_second", "value": 7.0, "unit": "tokens/s", "better": "higher"}]
    if payload == "hf-clm":
        metrics.pop()
    (run / "metrics.json").write_text(json.dumps({"parser": "p", "metrics": metrics, "details": {}}))
    rec = loading.load(run)
    assert rec.result.headline.name == new and export.row(rec)["Metric"] == new
    assert [m.name for m in rec.result.metrics if m.headline] == [new]


def test_a_bare_parser_name_keeps_the_parsers_own_names(hpcai):
    """`--payload hf-trainer` reads any Trainer log, not hf-clm's: the parser's names stay."""
    r = hpcai("results", "parse", str(LOGS / "hf_clm_hpcai.log"), "--payload", "hf-trainer", "--json")
    assert r.exit_code == 0 and headlines(json.loads(r.stdout)["metrics"]) == ["train_samples_per_second"]


# --- 2. export: iterations that ran, counts as whole numbers ------------------------------------

HF_EPOCHS = (LOGS / "hf_clm_hpcai.log").read_text().replace("'epoch': 1.0,", "'epoch': 3.0, 'train_steps': 30.0,")
COUNTS = ("Nodes", "Devices", "Tasks/Node", "Threads/Task", "GlobalBatchSize", "BatchSize/Device",
          "PipelineParallel", "TensorParallel", "DataParallel", "Iterations")


def csv_row(run: Path) -> dict[str, str]:
    return next(csv.DictReader(io.StringIO(export.to_csv([loading.load(run)]))))


@pytest.mark.parametrize("log, iterations", [
    (HF_EPOCHS, "30"),  # the run's own count (hf-clm prints the Trainer's global_step)
    ((LOGS / "hf_clm_hpcai.log").read_text(), "5"),  # runtime 12.5 s × 0.4 steps/s
])
def test_hf_clm_with_epochs_exports_the_steps_that_ran(log, iterations, tmp_path):
    """epochs=3 left `steps` at its unused default 50, which the export showed as Iterations."""
    run = record(tmp_path, "hf-clm", log, gpus_per_node=2,
                 payload_values={"steps": "50", "epochs": "3.0", "batch_size": "2"})
    runs.finalize(run)
    assert csv_row(run)["Iterations"] == iterations


@pytest.mark.parametrize("line, steps", [
    # an infinite count is none: runtime × steps/s then
    ("{'train_runtime': 10.0, 'train_samples_per_second': 1.0, 'train_steps': 1e999, 'train_steps_per_second': 0.5}", 5),
    ("{'train_runtime': 1e200, 'train_samples_per_second': 1.0, 'train_steps_per_second': 1e200}", None),
    ("{'train_runtime': 10.0, 'train_samples_per_second': 1.0, 'train_steps_per_second': 1e999}", None),
    ("{'train_runtime': 10.0, 'train_samples_per_second': 1.0, 'train_steps_per_second': 'nan'}", None),
    ("Total optimization steps = " + "9" * 5000 + "\n{'train_runtime': 2.0, 'train_samples_per_second': 1.0}", None),
    ("Total optimization steps = 1,200\n{'train_runtime': 2.0, 'train_samples_per_second': 1.0}", 1200),
])
def test_the_steps_that_ran_are_a_count_or_nothing(line, steps):
    from hpcai.results.parsers import parse_text

    assert parse_text("hf-trainer", line + "\n").details.get("train_steps") == steps


def test_an_older_epochs_record_shows_no_iterations_rather_than_the_steps_default(tmp_path):
    run = record(tmp_path, "hf-clm", "", payload_values={"steps": "50", "epochs": "3.0"})
    (run / "metrics.json").write_text(json.dumps({"parser": "hf-trainer", "details": {}, "metrics": [
        {"name": "samples_per_second", "value": 1.0, "unit": "samples/s", "headline": True}]}))
    assert csv_row(run)["Iterations"] == ""


def test_every_count_column_is_a_whole_number(tmp_path):
    """JSON records and parsers hold 4.0; a CSV reader then sees GBS `4.0`."""
    run = record(tmp_path, "megatron-gpt", "", nodes=1, ntasks_per_node=4, gpus_per_node=4, cpus_per_task=8,
                 payload_values={"micro_batch_size": "1.0", "tp": "2.0", "pp": "1", "train_iters": "20.0"})
    (run / "metrics.json").write_text(json.dumps({"parser": "megatron", "metrics": [
        {"name": "tokens_per_second", "value": 10.0, "unit": "tokens/s", "headline": True}],
        "details": {"global_batch_size": 4.0, "dp": 2.0, "iterations": [{"iteration": 20.0}]}}))
    row = csv_row(run)
    assert [row[c] for c in COUNTS] == ["1", "4", "4", "8", "4", "1", "1", "2", "2", "20"]
