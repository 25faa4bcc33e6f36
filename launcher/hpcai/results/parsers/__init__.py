"""Parser registry: parser name -> module with `parse(log: LogLines) -> ParseResult` and `ROWS`, the
details keys holding per-row tables (left out of `results parse --json` unless --rows).

A payload manifest may name its parser (`parser = "nccl-tests"` in payload.toml); otherwise the
payload name itself is looked up here, then the aliases (hf-clm -> hf-trainer).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from hpcai.errors import UsageError, unknown
from hpcai.results.metrics import ParseResult
from hpcai.results.parsers.common import MAX_LINE, LogLines

# parser name -> module under hpcai.results.parsers (imported only when used)
PARSERS: dict[str, str] = {
    "nccl-tests": "nccl",
    "rccl-tests": "nccl",  # same printer (util.cu) in the ROCm fork
    "osu": "osu",
    "hvd-synthetic": "horovod",
    "ddp-bench": "ddp",
    "hf-trainer": "hf",
    "openclip": "openclip",
    "megatron": "megatron",
    "tf-resnet50": "tf_cnn",
    "mpi-allreduce": "mpi_allreduce",
    "sanity": "sanity",
    "mila": "mila",
}
ALIASES = {"hf-clm": "hf-trainer", "horovod": "hvd-synthetic", "tf-cnn": "tf-resnet50"}


def parser_names() -> list[str]:
    return sorted(set(PARSERS) | set(ALIASES))


def parser_for_payload(payload: str) -> str:
    """The parser a payload's output needs: the manifest's `parser` key, else its name/alias."""
    try:
        from hpcai.payloads import load_payload

        declared = load_payload(payload).raw.get("parser")
    except UsageError:  # not a known payload: the name may be a parser name itself
        declared = None
    name = declared or payload
    name = ALIASES.get(name, name)
    if name not in PARSERS:
        raise unknown("parser", payload, parser_names())
    return name


def _module(parser: str):
    name = ALIASES.get(parser, parser)
    if name not in PARSERS:
        raise unknown("parser", parser, parser_names())
    return name, importlib.import_module(f"hpcai.results.parsers.{PARSERS[name]}")


def parse_lines(parser: str, log: LogLines) -> ParseResult:
    """Parse a log in one pass over its lines (each parser keeps a bounded amount per line)."""
    name, module = _module(parser)
    result: ParseResult = module.parse(log)
    result.parser = name
    if log.cut:
        result.warnings.append(f"{log.cut} line(s) longer than {MAX_LINE} characters: the rest of each was skipped")
    return result


def parse_text(parser: str, text: str) -> ParseResult:
    """Parse a log held in memory (tests, captured output)."""
    return parse_lines(parser, LogLines.from_text(text))


def parse_files(parser: str, paths: list[Path]) -> ParseResult:
    """Parse several files (e.g. a rank's .out and .err) as one log, streamed line by line."""
    for path in paths:  # before any parsing: a wrong path is the error, not "no metrics"
        if not path.is_file():
            raise UsageError(f"no such log file: {path}")
    return parse_lines(parser, LogLines.from_files(paths))


def summary(result: ParseResult, rows: bool = False) -> dict:
    """The result as `results parse --json` prints it: the per-row tables of details (a size table,
    every step) only when ROWS asks, else their lengths under "tables" (they grow with the log)."""
    data = result.to_dict()
    tables = getattr(_module(result.parser)[1], "ROWS", ())
    if not rows:
        left_out = {k: len(data["details"][k]) for k in tables if k in data["details"]}
        data["details"] = {k: v for k, v in data["details"].items() if k not in left_out}
        data["tables"] = left_out
    return data
