"""Parser registry: parser name -> module with `parse(text) -> ParseResult`.

A payload manifest may name its parser (`parser = "nccl-tests"` in payload.toml); otherwise the
payload name itself is looked up here, then the aliases (hf-clm -> hf-trainer).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from hpcai.errors import UsageError, unknown
from hpcai.results.metrics import ParseResult

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


def parse_text(parser: str, text: str) -> ParseResult:
    name = ALIASES.get(parser, parser)
    if name not in PARSERS:
        raise unknown("parser", parser, parser_names())
    module = importlib.import_module(f"hpcai.results.parsers.{PARSERS[name]}")
    result: ParseResult = module.parse(text)
    result.parser = name
    return result


def read_log(path: Path) -> str:
    if not path.is_file():
        raise UsageError(f"no such log file: {path}")
    try:
        return path.read_text(errors="replace")
    except OSError as e:  # unreadable (permissions, I/O): one line, not a traceback
        raise UsageError(f"cannot read log file {path}: {e.strerror or e}") from e


def parse_files(parser: str, paths: list[Path]) -> ParseResult:
    """Parse several files (e.g. a rank's .out and .err) as one log."""
    return parse_text(parser, "\n".join(read_log(p) for p in paths))
