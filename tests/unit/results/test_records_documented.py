"""A run record says what the payload documents and its in-image runner reports (issue 11: results
that disagreed with themselves). For each payload, a real log of it: the record's headline is the
manifest's, and every figure the in-image runner reads from the same log (the manifest's regexes,
payloads/_runner/hpcai-bench) is in the record, under the same name, with the same value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcai.payloads import load_payload
from hpcai.results import runs

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
CASES = [("hf-clm", "hf_clm_hpcai.log"), ("ddp-bench", "ddp_bench_hpcai.log"), ("mpi-allreduce", "mpi_allreduce.log"),
         ("nccl-tests", "nccl_allreduce_2.21.log"), ("osu", "osu_allreduce_latency.txt"), ("tf-resnet50", "tf_cnn.log"),
         ("hvd-synthetic", "hvd_pytorch.log"), ("sanity", "sanity_label.log"), ("openclip", "openclip_stderr.log"),
         ("mila-suite", "mila_suite_cpu.log")]


def record_of(tmp_path: Path, payload: str, text: str, **plan) -> dict[str, dict]:
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps({"payload": payload, "nodes": 1, "ntasks_per_node": 1,
                                               "payload_vars": {}, **plan}))
    (run / "logs" / "rank-0.out").write_text(text)
    result = runs.finalize(run)
    assert result is not None, (run / "metrics.json").read_text()
    return {m.name: m for m in result.metrics}


@pytest.mark.parametrize("payload, log", CASES)
def test_the_record_agrees_with_the_payload(tmp_path, payload, log):
    text = (LOGS / log).read_text()
    manifest = load_payload(payload)
    metrics = record_of(tmp_path, payload, text)
    headline = next(m.name for m in manifest.metrics if m.headline)
    assert [n for n, m in metrics.items() if m.headline] == [headline]
    for name, value in manifest.extract_metrics(text).items():
        assert metrics[name].value == pytest.approx(value), name


def test_hf_clm_is_recorded_under_its_documented_name(tmp_path):
    metrics = record_of(tmp_path, "hf-clm", (LOGS / "hf_clm_hpcai.log").read_text())
    assert metrics["samples_per_second"].headline and "train_samples_per_second" not in metrics


def test_the_runners_own_report_wins_with_a_warning(tmp_path):
    """HPCAI_RESULT carries what only the image could read (hf-clm's hpcai_summary.json)."""
    text = (LOGS / "hf_clm_hpcai.log").read_text() + (
        'HPCAI_RESULT {"payload": "hf-clm", "metrics": {"samples_per_second": 1.6, "tflops_per_gpu": 0.2}}\n')
    metrics = record_of(tmp_path, "hf-clm", text)
    assert metrics["tflops_per_gpu"].value == 0.2
    doc = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert any(w.startswith("tflops_per_gpu: the log parser read") for w in doc["warnings"])


@pytest.mark.hostile
def test_a_log_too_big_for_the_regexes_keeps_the_parsers_figures(tmp_path, monkeypatch):
    """issue 12, item 8: finishing a run read rank 0's whole log into memory for the manifest's
    regexes. Beyond REGEX_FALLBACK_MAX they are skipped, with a warning; the streaming parser's
    figures and a runner's HPCAI_RESULT line (read a line at a time) still count."""
    text = (LOGS / "nccl_allreduce_2.21.log").read_text()
    monkeypatch.setattr(runs, "REGEX_FALLBACK_MAX", len(text) // 2)
    metrics = record_of(tmp_path, "nccl-tests", text)
    assert metrics["busbw_avg"].value > 0
    doc = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert any("the payload's own regexes were not applied" in w for w in doc["warnings"])
    reported = text + 'HPCAI_RESULT {"payload": "nccl-tests", "metrics": {"busbw_avg": 1.5}}\n'
    metrics = record_of(tmp_path / "2", "nccl-tests", "0: " + reported.replace("\n", "\n0: "))
    assert metrics["busbw_avg"].value == 1.5  # the srun --label prefix does not hide the report
