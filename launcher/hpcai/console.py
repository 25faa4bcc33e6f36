"""The two consoles: humans and progress on stderr, machine output (JSON, rendered files) on stdout."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from hpcai.output import plain  # here too: one function for both, no rich in `say`

__all__ = ["cell", "err", "out", "plain"]

# Rich resolves sys.stderr/sys.stdout at write time, so pytest's capture works with these.
err = Console(stderr=True, highlight=False)
out = Console(highlight=False, soft_wrap=True)


def cell(value: object) -> Text:
    """A table cell that shows exactly its text: no rich markup, no terminal control."""
    return Text(plain(value))
