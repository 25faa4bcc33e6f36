"""nccl-tests / rccl-tests parser on every documented variant (fixtures written from util.cu)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcai.errors import UsageError
from hpcai.results.parsers import parse_text

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def parse(name: str, parser: str = "nccl-tests"):
    return parse_text(parser, (LOGS / name).read_text())


def test_modern_table_columns_and_headline():
    r = parse("nccl_allreduce_2.21.log")
    assert r.headline.name == "busbw_avg" and r.headline.value == pytest.approx(61.2345)
    assert r.get("busbw_max_size").value == pytest.approx(175.73)  # out-of-place (in-place: 176.01)
    assert r.get("latency_min_size").value == pytest.approx(11.98)
    assert r.details["nccl_version"] == "2.21.5+cuda12.4"
    assert r.details["max_size"] == 134217728
    assert len(r.details["rows"]) == 6
    assert r.details["rows"][-1]["oop_wrong"] == 0 and r.details["rows"][-1]["root"] == -1
    assert r.details["out_of_bounds_ok"] is True and r.warnings == []


def test_old_format_without_root_has_error_column():
    r = parse("nccl_old_noroot.log")
    assert "root" not in r.details["columns"]
    assert "oop_error" in r.details["columns"] and "ip_error" in r.details["columns"]
    assert r.get("busbw_max_size").value == pytest.approx(7.96)  # out-of-place
    assert r.details["nccl_version"] == "2.7.8+cuda11.0"


def test_na_wrong_counts_are_none_not_zero():
    r = parse("nccl_na_wrong.log")
    assert all(row["oop_wrong"] is None and row["ip_wrong"] is None for row in r.details["rows"])
    assert r.get("busbw_max_size").value == pytest.approx(74.67)  # out-of-place


def test_scientific_notation():
    r = parse("nccl_scientific.log")
    assert r.headline.value == pytest.approx(162.05)
    assert r.get("busbw_max_size").value == pytest.approx(323.0)  # out-of-place
    assert r.details["rows"][0]["oop_time"] == pytest.approx(12.34)


def test_srun_label_prefix_gives_same_result():
    plain, labelled = parse("nccl_allreduce_2.21.log"), parse("nccl_srun_label.log")
    assert [m.to_dict() for m in labelled.metrics] == [m.to_dict() for m in plain.metrics]


def test_truncated_log_keeps_complete_rows_and_warns():
    r = parse("nccl_truncated.log")
    assert r.get("busbw_avg") is None
    assert r.headline.name == "busbw_max_size" and r.headline.value == pytest.approx(25.45)  # out-of-place
    assert any("truncated" in w for w in r.warnings)


def test_rccl_uses_same_parser():
    r = parse("rccl_allreduce.log", "rccl-tests")
    assert r.parser == "rccl-tests" and r.details["nccl_version"] == "2.20.5+hip6.2"
    assert r.headline.value == pytest.approx(61.2345)


def test_rccl_tests_at_the_pinned_commit_with_its_header_lines():
    """The output of rccl-tests ae3e635 (components.toml) as its common.cu prints it with MPI=1:
    its version line, `#   Rank … Pid … on HOST device N [bus] NAME` per rank, no RCCL line,
    the asterisk note before the summary. 16 ranks: two MI250X nodes of 8 GCDs."""
    r = parse("rccl_tests_ae3e635_mi250x.log", "rccl-tests")
    assert r.headline.name == "busbw_avg" and r.headline.value == pytest.approx(88.7136)
    assert r.get("busbw_max_size").value == pytest.approx(125.38)  # out-of-place, 64 MiB
    assert r.details["max_size"] == 67108864 and len(r.details["rows"]) == 7
    assert r.details["out_of_bounds_ok"] is True and r.warnings == []
    assert all(row["oop_wrong"] == 0 and row["ip_wrong"] == 0 for row in r.details["rows"])


def test_wrong_payload_log_is_a_clear_error():
    with pytest.raises(UsageError, match="nccl-tests: no size/time/algbw/busbw table"):
        parse_text("nccl-tests", (LOGS / "hvd_pytorch.log").read_text())


def test_empty_log_says_empty():
    with pytest.raises(UsageError, match="log is empty"):
        parse_text("nccl-tests", "")


def test_wrong_count_is_warned():
    text = (LOGS / "nccl_allreduce_2.21.log").read_text().replace(
        "175.73      0   1429.8", "175.73      3   1429.8")
    r = parse_text("nccl-tests", text)
    assert r.details["wrong_sizes"] == [134217728] and any("#wrong" in w for w in r.warnings)


@pytest.mark.parametrize("log", ["nccl_allreduce_2.21.log", "nccl_na_wrong.log", "nccl_scientific.log", "nccl_srun_label.log"])
def test_host_parser_and_in_image_metric_agree(log):
    """payloads/nccl-tests reads busbw_max_size in the image by its manifest regex; the host parser
    must record the same number for the same log (issue 11: they were out-of-place vs best of both)."""
    from hpcai.bench_runner import bench_runner as _runner
    from hpcai.payloads import load_payload

    text = (LOGS / log).read_text()
    in_image = _runner().extract(load_payload("nccl-tests").raw, text)
    host = parse(log)
    for name in ("busbw_max_size", "busbw_avg"):
        assert host.get(name).value == pytest.approx(in_image[name]), name
