"""The one output object: what hpcai tells people goes to stderr, what programs read goes to stdout.

- `say` / `warn`: a line for the person at the terminal (progress, where the record is, warnings).
- `emit` / `emit_json`: machine output (JSON, a rendered file, a script path, a job id), so
  `hpcai … | jq` and `$(hpcai submit …)` see only that.

Every line hpcai prints passes `plain` once: `say`, `warn` and `emit` here, and every string
`console.err`/`console.out` print (console.PlainConsole). JSON has its control characters
escaped already (the same text); a dry-run command line or a CSV on stdout shows an ESC in a
value as `\x1b`, never sends it to the terminal (`results export -o FILE` writes the bytes).

Plain writes, no rich: the launch path cannot afford importing it (~0.1 s). Tables for people are
rich renderables printed by `console.err`/`console.out`, which write to these same streams; text
from records reaches them through `plain` (here, so that `say` needs no rich; `console.plain` is
the same function) and `console.cell`.
"""

from __future__ import annotations

import re
import sys
from typing import Any

# What a terminal would act on rather than show: C0 controls but tab and line feed (ESC starts CSI
# and OSC sequences, BEL rings, CR overwrites the line), DEL, the C1 range (U+009B is a one-byte
# CSI, U+009D a one-byte OSC), and the Unicode line separators and bidi overrides that reorder or
# hide what is shown ("Trojan source"). A character class: linear on any input.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_OR_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")  # tab, LF too


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def plain(value: object, lines: bool = True) -> str:
    """Text from a file (a record, a log, a site file, an image label), safe for a terminal and
    still readable: each control character becomes a visible escape (ESC -> \\x1b, BEL -> \\x07,
    U+202E -> \\u202e), so an escape sequence is shown, never run. Tab and line feed stay, unless
    LINES is False: a name inside a one-line message (a file the user named, an error), where a
    line feed would start a line that passes for hpcai's own (LF -> \\x0a). The one function
    every such text passes; print it with markup=False, or use console.cell()."""
    return (_CONTROL if lines else _CONTROL_OR_LINE).sub(_visible, str(value))


# A cell a spreadsheet reads as a formula starts with one of these (OWASP "CSV injection"; tab
# and CR because some spreadsheets skip them before looking for "=").
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def csv_cell(value: Any) -> Any:
    """VALUE as a CSV cell no spreadsheet runs: text gets visible escapes for control characters
    (console.plain) and a leading single quote when it would start a formula (OWASP's rule; shown
    as typed, not computed). Numbers stay numbers, a number written as text ("-5") too."""
    if value is None or isinstance(value, (int, float)):
        return value
    text = plain(value)  # any other value (a list from a damaged record, too) is written as text
    if text.startswith(FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def say(text: str) -> None:
    """A line for the person at the terminal. Every such line passes `plain` here, once: the
    messages carry text read from files (site files, records, logs, image labels), and callers
    need not remember which."""
    sys.stderr.write(plain(text) + "\n")


def warn(text: str) -> None:
    say(f"warning: {text}")


def emit(text: str) -> None:
    """TEXT on stdout, through `plain`: a dry-run's command line or an export holds values from
    the user and from records (an ESC there is shown as \\x1b, never run by the terminal)."""
    text = plain(text)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def emit_json(data: Any, indent: int | None = 2, sort_keys: bool = False) -> None:
    """DATA as JSON on stdout: valid JSON for any reader (hpcai.files.dumps: NaN and infinity as null)."""
    from hpcai.files import dumps  # here: the launch path imports this module and needs no tempfile

    emit(dumps(data, indent=indent, sort_keys=sort_keys, default=str))
