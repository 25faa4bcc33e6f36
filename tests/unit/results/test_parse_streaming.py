"""Parsers read logs of any size (issue 12, item 8): one pass over the lines, memory bounded
whatever the log's size, `results parse --json` a summary with the per-row tables only on --rows.

A 250 MB nccl-tests log once failed with MemoryError at 11.5 GB; 25 MB took 37 s and 3.3 GB and
printed 80 MB of JSON. The memory tests run the real CLI as a process and read its own peak RSS.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from hpcai.errors import HpcaiError
from hpcai.results.parsers import PARSERS, common, parse_files, parse_text

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
NCCL = LOGS / "nccl_allreduce_2.21.log"
MB = 1 << 20
SUMMARY_BYTES = 16 * 1024  # what --json prints without --rows, whatever the log's size


def nccl_log(path: Path, size_mb: float, text: str | None = None) -> Path:
    """TEXT's (the fixture's) header, its size table repeated to SIZE_MB, its summary lines."""
    lines = (text or NCCL.read_text()).splitlines(keepends=True)
    rows = [i for i, line in enumerate(lines) if line.strip()[:1].isdigit()]
    table = "".join(lines[rows[0]:rows[-1] + 1])
    with path.open("w") as f:
        f.write("".join(lines[:rows[0]]))
        f.write(table * max(1, int(size_mb * MB // len(table))))
        f.write("".join(lines[rows[-1] + 1:]))
    return path


def _cpu_limit() -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (60, 60))  # a runaway parse ends, it does not hang the suite


def cli(tmp_path: Path, *args: str) -> tuple[int, str, str, float, float]:
    """(exit code, stdout, stderr, wall seconds, peak RSS in MB) of `hpcai ARGS` as its own process
    (wait4 gives that process's peak, not the test runner's)."""
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "hpcai", *args], stdout=stdout, stderr=stderr,
                                preexec_fn=_cpu_limit)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, out.read_text(), err.read_text(), wall, usage.ru_maxrss / 1024


def test_peak_memory_and_output_are_flat_in_the_log_size(tmp_path):
    """10 MB and 80 MB of nccl-tests log: the same peak RSS (within 30 MB), the same small JSON,
    and time linear (8x the log never takes 8x the time of the small one, interpreter start included)."""
    runs = {}
    for size in (10, 80):
        log = nccl_log(tmp_path / f"nccl-{size}.log", size)
        code, out, err, wall, peak = cli(tmp_path, "results", "parse", "-p", "nccl-tests", "--json", str(log))
        assert code == 0, err
        runs[size] = (json.loads(out), len(out), wall, peak)
        log.unlink()
    (small, small_bytes, small_wall, small_peak), (big, big_bytes, big_wall, big_peak) = runs[10], runs[80]
    assert big_peak - small_peak < 30, f"peak RSS {small_peak:.0f} MB at 10 MB, {big_peak:.0f} MB at 80 MB"
    assert big_bytes == small_bytes < SUMMARY_BYTES
    assert big["metrics"] == small["metrics"] and big["tables"] == {"rows": 6} and "rows" not in big["details"]
    assert big_wall < 8 * small_wall, f"{small_wall:.2f} s for 10 MB, {big_wall:.2f} s for 80 MB"


@pytest.mark.hostile
def test_a_log_without_line_breaks_is_read_in_bounded_memory(tmp_path):
    """64 MB on one line (a binary dump, a progress bar without breaks): one error line, exit 2,
    and the process never holds the line."""
    log = tmp_path / "one-line.log"
    with log.open("w") as f:
        for _ in range(64):
            f.write("#" + "x" * (MB - 1))
    code, out, err, _, peak = cli(tmp_path, "results", "parse", "-p", "nccl-tests", "--json", str(log))
    assert code == 2 and out == ""
    assert err.startswith("error: nccl-tests: no size/time/algbw/busbw table") and err.count("\n") == 1
    baseline = cli(tmp_path, "results", "parse", "-p", "nccl-tests", "--json", str(NCCL))[4]
    assert peak - baseline < 20, f"peak RSS {peak:.0f} MB for a 64 MB line, {baseline:.0f} MB for the fixture"


def test_json_is_a_summary_unless_rows_are_asked(hpcai):
    plain = hpcai("results", "parse", "-p", "nccl-tests", "--json", str(NCCL))
    assert plain.exit_code == 0, plain.stderr
    summary = json.loads(plain.stdout)
    assert "rows" not in summary["details"] and summary["tables"] == {"rows": 6}
    assert summary["details"]["max_size"] == 134217728 and summary["details"]["columns"][0] == "size"
    full = json.loads(hpcai("results", "parse", "-p", "nccl-tests", "--json", "--rows", str(NCCL)).stdout)
    assert len(full["details"]["rows"]) == 6 and "tables" not in full
    assert {k: v for k, v in full["details"].items() if k != "rows"} == summary["details"]
    alone = hpcai("results", "parse", "-p", "nccl-tests", "--rows", str(NCCL))
    assert alone.exit_code == 2 and alone.stderr == "error: --rows goes with --json (the table shows the metrics only)\n"


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_files_read_in_chunks_parse_like_the_text(tmp_path, monkeypatch, chunk):
    """Every fixture through every parser: read from a file in chunks of CHUNK characters, with CRLF
    line breaks split across chunks, the result (or the error) is that of the text in memory."""
    monkeypatch.setattr(common, "_CHUNK", chunk)
    for fixture in sorted(LOGS.glob("*.*")):
        if fixture.suffix not in (".log", ".txt", ".json"):
            continue
        text = fixture.read_text()
        crlf = tmp_path / fixture.name
        crlf.write_bytes(text.replace("\n", "\r\n").encode())
        for parser in sorted(PARSERS):
            try:
                expected = parse_text(parser, text).to_dict()
            except HpcaiError as e:
                expected = str(e)
            try:
                got = parse_files(parser, [crlf]).to_dict()
            except HpcaiError as e:
                got = str(e)
            assert got == expected, f"{parser} on {fixture.name}"


def test_several_files_never_run_into_each_other(tmp_path):
    """A rank's .out cut mid-line and its .err: the cut line stays cut, the next file starts afresh."""
    text = NCCL.read_text()
    cut = text.index("# Out of bounds")
    (tmp_path / "rank-0.out").write_text(text[:cut] + "   268435456  67108864  float")  # no line break
    (tmp_path / "rank-0.err").write_text(text[cut:])
    r = parse_files("nccl-tests", [tmp_path / "rank-0.out", tmp_path / "rank-0.err"])
    assert r.details["max_size"] == 134217728 and r.headline.value == pytest.approx(61.2345)


def test_a_repeated_sweep_keeps_the_last_row_of_each_size_and_every_wrong_count():
    """nccl-tests -N (or reruns appended): the table is the last sweep's, as the payload's in-image
    `last` reading takes it; a wrong count in any sweep stays reported."""
    text = NCCL.read_text()
    first = text.replace("  16             4     float     sum      -1    12.10    0.00    0.00      0",
                         "  16             4     float     sum      -1    12.10    0.00    0.00      2")
    second = text.replace("175.73      0   1429.8", "170.00      0   1429.8")
    assert first != text and second != text
    r = parse_text("nccl-tests", first + second)
    assert len(r.details["rows"]) == 6 and r.details["rows"][-1]["oop_busbw"] == pytest.approx(170.0)
    assert r.get("busbw_max_size").value == pytest.approx(170.0)
    assert r.details["wrong_sizes"] == [16] and "#wrong > 0 at sizes [16]" in r.warnings
    from hpcai.bench_runner import bench_runner as _runner
    from hpcai.payloads import load_payload

    in_image = _runner().extract(load_payload("nccl-tests").raw, first + second)
    assert r.get("busbw_max_size").value == pytest.approx(in_image["busbw_max_size"])


@pytest.mark.hostile
def test_sizes_beyond_the_table_cap_are_left_out_with_a_warning():
    header = "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
    rows = "".join(f"{8 * i} {2 * i} float sum -1 1.0 2.0 3.0 0 1.0 2.0 3.0 0\n" for i in range(1, 5001))
    r = parse_text("nccl-tests", header + rows + "# Avg bus bandwidth : 3.0\n")
    assert len(r.details["rows"]) == common.MAX_SIZES
    assert r.warnings == [f"{5000 - common.MAX_SIZES} rows at sizes beyond the first {common.MAX_SIZES} sizes "
                          "are left out of the table and its metrics"]


@pytest.mark.hostile
@pytest.mark.parametrize("prefix", ["", "0: "])
@pytest.mark.parametrize("chunk", [4093, common._CHUNK])
def test_an_over_long_line_is_cut_and_the_log_still_parses(monkeypatch, prefix, chunk):
    monkeypatch.setattr(common, "_CHUNK", chunk)
    long_line = prefix + "NCCL INFO " + "x" * (3 * common.MAX_LINE) + "\n"
    text = NCCL.read_text()
    r = parse_text("nccl-tests", long_line + text)
    assert [m.to_dict() for m in r.metrics] == [m.to_dict() for m in parse_text("nccl-tests", text).metrics]
    assert r.warnings == [f"1 line(s) longer than {common.MAX_LINE} characters: the rest of each was skipped"]


def test_details_lists_keep_the_first_and_last_rows_and_exact_means():
    """Megatron and OpenCLIP logs of many steps: details keep LIMIT rows (the first and last half),
    the metrics are still over every step (running sums), in the order the old lists summed them."""
    n = 3 * common.LIMIT
    megatron = "".join(f" iteration {i:8d}/ {n:8d} | elapsed time per iteration (ms): {100 + i % 7}.5 | "
                       f"global batch size: {64 + i % 3} | throughput per GPU (TFLOP/s/GPU): {150 + i % 11}.25 |\n"
                       for i in range(1, n + 1))
    r = parse_text("megatron", megatron)
    iters = r.details["iterations"]
    assert len(iters) == common.LIMIT and iters[0]["iteration"] == 1 and iters[-1]["iteration"] == n
    secs = [(100 + i % 7 + 0.5) / 1000 for i in range(2, n + 1)]
    tflops = [150 + i % 11 + 0.25 for i in range(2, n + 1)]
    assert r.get("time_per_iteration").value == sum(secs) / len(secs)
    assert r.get("tflops_per_gpu").value == sum(tflops) / len(tflops)
    assert r.details["global_batch_size"] == 64 + n % 3
    assert any(f"{n} iteration lines in the log" in w for w in r.warnings)
    clip = "".join(f"Train Epoch: 0 [{i * 8}/{n * 8} ({100 * i // n}%)] Data (t): 0.1 Batch (t): {1 + i % 5}.5, "
                   f"{300 + i % 13}.0/s, {75 + i % 13}.0/s/gpu LR: 0\n" for i in range(1, n + 1))
    r = parse_text("openclip", clip)
    assert len(r.details["steps"]) == common.LIMIT and r.details["logged_steps"] == n
    assert r.headline.value == sum(1 + i % 5 + 0.5 for i in range(2, n + 1))
    assert r.get("samples_per_s").value == sum(300 + i % 13 for i in range(2, n + 1)) / (n - 1)


# A long log per parser: lines it reads, repeated, then what closes a complete log.
_REPEATED = {
    "megatron": (" iteration 10/ 5000 | elapsed time per iteration (ms): 617.4 | throughput per GPU "
                 "(TFLOP/s/GPU): 168.2 |\n", ""),
    "openclip": ("Train Epoch: 0 [8192/32768 (25%)] Data (t): 0.1 Batch (t): 2.050, 3996.1/s, 999.02/s/gpu LR: 0\n", ""),
    "tf-resnet50": ("10\timages/sec: 2310.2 +/- 3.1 (jitter = 9.2)\t7.782\n", "total images/sec: 2314.98\n"),
    "hvd-synthetic": ("Iter #1: 811.0 img/sec per GPU\n", "Total img/sec on 4 GPU(s): 3247.6 +-9.6\n"),
    "osu": ("# OSU MPI Latency Test v7.5\n# Size          Latency (us)\n8                       1.53\n", ""),
    "mpi-allreduce": ("# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)   BusBW(MB/s)\n"
                      "8                       12.31             11.90             12.80          1.25\n",
                      "# mpi-allreduce: done, 4 ranks\n"),
    "ddp-bench": ("   1 GPUs --   no ddp:  p50:  0.097s     329/s  p75:  0.097s     329/s\n", ""),
    "mila": ((LOGS / "mila_suite_cpu.log").read_text().splitlines()[0] + "\n", ""),
    "sanity": ("hpcai-sanity: rank=3 host=nid001 world_size=4 local_rank=3\n", ""),
    "hf-trainer": ("{'train_runtime': 182.53, 'train_samples_per_second': 38.097, 'train_loss': 3.1}\n", ""),
    "nccl-tests": ("           8             2     float     sum      -1    12.34    0.00    0.00      0    11.98"
                   "    0.00    0.00      0\n", "# Avg bus bandwidth    : 61.2345\n"),
}
_HEADER = {"nccl-tests": NCCL.read_text().split("           8  ")[0], "hf-trainer": "Running training\n"}


def _traced_peak(parser: str, repeats: int) -> int:
    """The peak of what the parser allocates reading its line REPEATS times (the text is made before)."""
    line, tail = _REPEATED[parser]
    text = _HEADER.get(parser, "") + line * repeats + tail
    tracemalloc.start()
    try:
        assert parse_text(parser, text).metrics
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("parser", sorted(_REPEATED))
def test_what_each_parser_keeps_is_bounded(parser):
    """The same lines 4x more often: the parser's peak allocation grows by less than 1 MB once its
    lists are full (they hold LIMIT rows at most)."""
    grow = _traced_peak(parser, 12 * common.LIMIT) - _traced_peak(parser, 3 * common.LIMIT)
    assert grow < MB, f"{parser}: {grow / MB:.1f} MB more for a 4x longer log"


def test_a_json_document_is_read_up_to_max_doc():
    """The JSON a parser may find in a log (hf's *_results.json, ddp's --json) is kept up to MAX_DOC:
    a log that only looks like one never costs more."""
    doc = common.Capture("{", leading=True)
    for _ in range(common.MAX_DOC // 1000 + 2):
        doc.feed("{" + "x" * 999)
    assert doc.started and doc.text is None
    assert common.Capture("{", leading=True).text is None
    doc = common.Capture("{", leading=False)
    for line in ("log line", 'at last {"a":', ' 1} and after'):
        doc.feed(line)
    assert doc.text == '{"a":\n 1} and after'
