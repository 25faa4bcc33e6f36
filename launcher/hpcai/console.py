"""The two consoles: humans and progress on stderr, machine output (JSON, rendered files) on stdout.

Both are PlainConsole: every string they print passes `plain` (hpcai.output), so a message that
carries a file name, a command line or a tool's output line shows an escape sequence rather than
running it, whoever wrote the call. Rich renderables (tables) take their text from `cell`."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from hpcai.output import plain  # here too: one function for both, no rich in `say`

__all__ = ["PlainConsole", "cell", "err", "out", "plain"]


class PlainConsole(Console):
    """A rich Console whose print() passes each string through `plain` first: the one escaping
    function for every line printed (markup, where a call asks for it, is kept: `plain` leaves
    brackets alone; text from files inside markup is `rich.markup.escape`d by its caller)."""

    def print(self, *objects: Any, **kwargs: Any) -> None:  # type: ignore[override]
        super().print(*(plain(o) if isinstance(o, str) else o for o in objects), **kwargs)


# Rich resolves sys.stderr/sys.stdout at write time, so pytest's capture works with these.
# emoji=False: what they print echoes what people typed and files hold (a site named ':fire:', a
# path /tmp/a:b/ holding ':b:'), which rich would turn into emoji; hpcai's own text uses none.
err = PlainConsole(stderr=True, highlight=False, emoji=False)
out = PlainConsole(highlight=False, soft_wrap=True, emoji=False)


def cell(value: object) -> Text:
    """A table cell that shows exactly its text: no rich markup, no terminal control."""
    return Text(plain(value))
