"""The two consoles: humans and progress on stderr, machine output (JSON, rendered files) on stdout."""

from __future__ import annotations

import re

from rich.console import Console
from rich.text import Text

# Rich resolves sys.stderr/sys.stdout at write time, so pytest's capture works with these.
err = Console(stderr=True, highlight=False)
out = Console(highlight=False, soft_wrap=True)


# What a terminal would act on rather than show: C0 controls but tab and line feed (ESC starts CSI
# and OSC sequences, BEL rings, CR overwrites the line), DEL, the C1 range (U+009B is a one-byte
# CSI, U+009D a one-byte OSC), and the Unicode line separators and bidi overrides that reorder or
# hide what is shown ("Trojan source"). A character class: linear on any input.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def plain(value: object) -> str:
    """Text from a file (a record, a log, a site file, an image label), safe for a terminal and
    still readable: each control character becomes a visible escape (ESC -> \\x1b, BEL -> \\x07,
    U+202E -> \\u202e), so an escape sequence is shown, never run. Tab and line feed stay. The one
    function every such text passes; print it with markup=False, or use cell()."""
    return _CONTROL.sub(_visible, str(value))


def cell(value: object) -> Text:
    """A table cell that shows exactly its text: no rich markup, no terminal control."""
    return Text(plain(value))
