"""Manifest sanity patterns and metric extractors on captured and documented logs.

The logs are the parser fixtures in tests/fixtures/logs (written from the documented formats,
plus real captured OSU output). Where a manifest metric and the host-side parser
(hpcai.results.parsers) name the same quantity, both must read the same number from the same
log: the in-image summary and the recorded results can never disagree.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcai.payloads import load_payload
from hpcai.results.parsers import parse_text

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"

CASES = [  # payload, log, metric (manifest and parser), expected value
    ("nccl-tests", "nccl_allreduce_2.21.log", "busbw_avg", None),
    ("nccl-tests", "nccl_srun_label.log", "busbw_avg", None),
    ("nccl-tests", "nccl_scientific.log", "busbw_avg", None),
    ("rccl-tests", "rccl_allreduce.log", "busbw_avg", None),
    ("rccl-tests", "rccl_tests_ae3e635_mi250x.log", "busbw_avg", 88.7136),
    ("rccl-tests", "rccl_tests_ae3e635_mi250x.log", "busbw_max_size", 125.38),
    ("hvd-synthetic", "hvd_pytorch.log", "img_per_sec_total", None),
    ("hvd-synthetic", "hvd_pytorch.log", "img_per_sec_per_device", None),
    ("hvd-synthetic", "hvd_tf_cpu_label.log", "img_per_sec_total", None),
    ("openclip", "openclip_stderr.log", "total_time_secs", 2.050 + 2.040 + 2.060),
    ("tf-resnet50", "tf_cnn.log", "images_per_sec", 2314.98),
    ("mpi-allreduce", "mpi_allreduce.log", "busbw_max_size", None),
    ("mpi-allreduce", "mpi_allreduce.log", "latency_min_size", None),
    ("osu", "osu_allreduce_latency.txt", "latency_8B", 2.53),
    ("osu", "osu_get_bw_ompi_tag.txt", "bandwidth_4MiB", 24248.76),
]


def _parser_value(payload, text, metric):
    manifest = load_payload(payload)
    result = parse_text(manifest.parser, text)
    return next((m.value for m in result.metrics if m.name == metric), None)


@pytest.mark.parametrize("payload,log,metric,expected", CASES, ids=lambda v: str(v))
def test_manifest_metric_matches_log_and_parser(payload, log, metric, expected):
    text = (LOGS / log).read_text()
    manifest = load_payload(payload)
    found = manifest.extract_metrics(text)
    assert metric in found, found
    if expected is None:
        expected = _parser_value(payload, text, metric)
        assert expected is not None, f"parser {manifest.parser} has no {metric}"
    assert found[metric] == pytest.approx(expected, rel=1e-6)
    assert manifest.check_sanity(text) == []


def test_osu_headline_follows_the_test_that_ran():
    runner_headline = load_payload("osu").raw
    from hpcai.bench_runner import bench_runner as _runner

    lat = load_payload("osu").extract_metrics((LOGS / "osu_allreduce_latency.txt").read_text())
    bw = load_payload("osu").extract_metrics((LOGS / "osu_get_bw_ompi_tag.txt").read_text())
    assert "bandwidth_4MiB" not in lat and "latency_8B" not in bw
    assert _runner().headline(runner_headline, lat) == "latency_8B"
    assert _runner().headline(runner_headline, bw) == "bandwidth_4MiB"


def test_nccl_wrong_count_and_truncated_log_fail_sanity():
    nccl = load_payload("nccl-tests")
    truncated = (LOGS / "nccl_truncated.log").read_text()
    assert "^# Out of bounds values : 0 OK" in nccl.check_sanity(truncated)
    good = (LOGS / "nccl_allreduce_2.21.log").read_text()
    assert nccl.extract_metrics(good)["wrong_max"] == 0
    bad = good.replace("      0    ", "      3    ", 1)
    assert nccl.extract_metrics(bad)["wrong_max"] == 3


def test_openclip_without_the_last_step_fails_sanity():
    text = (LOGS / "openclip_old_truncated.log").read_text()
    assert load_payload("openclip").check_sanity(text) != []


def test_sanity_payload_reads_rank_0_through_srun_labels():
    text = (LOGS / "sanity_label.log").read_text()
    m = load_payload("sanity")
    assert m.check_sanity(text) == []
    assert m.extract_metrics(text) == {"world_size": 4.0}


def test_ddp_and_hf_metrics_come_from_the_json_files_they_write(tmp_path):
    (tmp_path / "ddp-bench.json").write_text(json.dumps(
        {"summary": {"total_ex_per_sec_p50": 632.5, "sec_per_iter_p50": 0.101}}))
    assert load_payload("ddp-bench").extract_metrics("", tmp_path) == {
        "ex_per_sec_total": 632.5, "sec_per_iter_p50": 0.101}
    (tmp_path / "hpcai_summary.json").write_text(json.dumps(
        {"train_samples_per_second": 38.097, "tflops_per_gpu": 27.5, "train_runtime": 182.53,
         "train_loss": 3.13}))
    assert load_payload("hf-clm").extract_metrics("", tmp_path) == {
        "samples_per_second": 38.097, "tflops_per_gpu": 27.5, "train_runtime": 182.53, "train_loss": 3.13}
    assert load_payload("hf-clm").extract_metrics("", tmp_path / "missing") == {}


def test_ddp_bench_sanity_on_upstream_format():
    text = (LOGS / "ddp_bench.log").read_text()
    assert load_payload("ddp-bench").check_sanity(text) == []
