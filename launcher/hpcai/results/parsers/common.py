"""Helpers shared by the parsers: launcher-prefix stripping, number patterns, the no-metrics error.

Real logs arrive through `srun --label` (`12: `), torchrun `--tee` (`[default3]:`) or Open MPI
`--tag-output` (`[1,3]<stdout>:`); every parser reads lines with those prefixes removed.
"""

from __future__ import annotations

import re

from hpcai.errors import UsageError

# Values may be printed in scientific notation (1.2e+03).
FP = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"

_PREFIXES = re.compile(
    r"^(?:\s*\d+:[ \t]?"  # srun --label
    r"|\[default\d+\]:"  # torchrun --tee
    r"|\[\d+,\d+\]<std(?:out|err)>:[ \t]?"  # Open MPI --tag-output
    r")"
)


class NoMetricsError(UsageError):
    """The log holds none of the lines this parser reads (wrong payload, empty, or a failed run)."""


def strip_prefixes(text: str) -> list[str]:
    """The log's lines with launcher prefixes removed (a line keeps everything after the prefix)."""
    lines = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        lines.append(_PREFIXES.sub("", line, count=1))
    return lines


def to_float(text: str) -> float | None:
    """A number, or None for `N/A`, `-`, `nan` and friends (never a silent zero)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return None if value != value else value  # NaN -> None


def nothing_found(parser: str, expected: str, text: str) -> NoMetricsError:
    if not text.strip():
        return NoMetricsError(f"{parser}: the log is empty; expected {expected}")
    return NoMetricsError(
        f"{parser}: no {expected} found in the log (wrong payload, or the run failed before printing results)"
    )
