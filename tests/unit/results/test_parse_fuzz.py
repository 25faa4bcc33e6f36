"""Truncated and foreign logs never crash a parser: metrics, or the project's clear parse error.

Every parser reads every fixture (and the real samples) cut at every 10 % of its length, so
a half-written line, a table without its header or a JSON document cut mid-way all occur.
The only acceptable failure is an HpcaiError (printed as one line, no traceback).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hpcai.errors import HpcaiError
from hpcai.results.metrics import ParseResult
from hpcai.results.parsers import PARSERS, parse_text

pytestmark = pytest.mark.hostile  # issue 12's corpus

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
SAMPLES = Path(__file__).resolve().parents[2] / "fixtures" / "samples"
TEXTS = sorted(p for d in (LOGS, SAMPLES) if d.is_dir() for p in d.iterdir()
               if p.is_file() and p.suffix in (".log", ".txt", ".json", ".out", ".err"))


_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_MEASURED = re.compile(r"\d+\.\d+|\d+(?=/s)")  # times, rates, bandwidths (not sizes, ranks, p50)


def _prefixes(text: str) -> list[str]:
    return [text[: len(text) * tenth // 10] for tenth in range(11)]


def _variants(text: str) -> list[str]:
    """The log, then with measured values zero (divisions) or `N/A` (empty maxima), then all numbers 0."""
    return [text, _MEASURED.sub("0.0", text), _MEASURED.sub("N/A", text), _NUMBER.sub("0", text)]


@pytest.mark.parametrize("parser", sorted(PARSERS))
def test_every_prefix_of_every_log_parses_or_fails_cleanly(parser):
    assert TEXTS, "no fixtures found"
    outcomes = {"parsed": 0, "clean_error": 0}
    for path in TEXTS:
        cuts = [t for v in _variants(path.read_text(errors="replace")) for t in _prefixes(v)]
        for n, text in enumerate(cuts):
            i, variant = n % 11, n // 11
            try:
                result = parse_text(parser, text)
            except HpcaiError as e:
                assert str(e) and "\n" not in str(e), f"{path.name} @ {i * 10}%: multi-line error"
                outcomes["clean_error"] += 1
                continue
            except Exception as e:  # noqa: BLE001 — the point of the test
                pytest.fail(f"{parser} on {path.name} (variant {variant}) cut at {i * 10}%: {type(e).__name__}: {e}")
            assert isinstance(result, ParseResult) and result.metrics, f"{path.name} @ {i * 10}%: no metrics"
            assert result.headline is not None
            outcomes["parsed"] += 1
    # each parser understands at least its own fixtures in full, and rejects the empty prefix
    assert outcomes["parsed"] > 0 and outcomes["clean_error"] > 0


# Shapes found by reading the parsers: each one crashed before (TypeError, AttributeError, KeyError,
# RecursionError, ValueError from int('²') or max(), ZeroDivisionError) and must now be metrics or a clear error.
MALFORMED = [
    ("ddp-bench", '{"benchmark_results": 5}'),
    ("ddp-bench", '{"benchmark_results": [{"result": [7, {"sec_per_iter": "x"}]}]}'),
    ("ddp-bench", '{"benchmark_results": [{"result": {"sec_per_iter": {}, "world_size": "two"}}]}'),
    ("ddp-bench", '{"benchmark_results": [{"batch_size": 32, "result": {"sec_per_iter": {"p50": "0.1"}}}]}'),
    ("ddp-bench", "   1 GPUs --   no ddp:  p50:  0.0s     0/s\n   2 GPUs --    1M/2G:  p50:  0.1s     300/s"),
    ("hf-trainer", "{[1]: 2, 'train_runtime': 1}"),
    ("hf-trainer", "[" * 100_000),
    ("megatron", "seq_length 2048\niteration 1/ 9 | global batch size: 8 | elapsed time per iteration (ms): 0.0 |"),
    ("mpi-allreduce", "# Size  Avg Latency(us)  BusBW(MB/s)\n8\u00b2 1.0 2.0"),
    ("mpi-allreduce", "# Size  Min Latency(us)  BusBW(MB/s)\n8 1.0 2.0"),
    ("nccl-tests", "#  size  count  type  redop  root  time  algbw  busbw  #wrong\n\u00b2 2 float sum -1 1 x y 0"),
    ("nccl-tests", "#  size  count  type  redop  root  time  algbw  busbw  #wrong\n8 2 float sum -1 N/A N/A N/A 0"),
    ("sanity", "hpcai-sanity: rank=0 host=a world_size=\u00b2"),
]


@pytest.mark.parametrize(("parser", "text"), MALFORMED, ids=[f"{p}-{i}" for i, (p, _) in enumerate(MALFORMED)])
def test_malformed_shapes_parse_or_fail_cleanly(parser, text):
    try:
        result = parse_text(parser, text)
    except HpcaiError as e:
        assert "\n" not in str(e) and parser.split("-")[0] in str(e)
        return
    assert result.metrics and result.headline is not None
