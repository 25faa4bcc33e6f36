"""The two consoles: humans and progress on stderr, machine output (JSON, rendered files) on stdout."""

from __future__ import annotations

from rich.console import Console

# Rich resolves sys.stderr/sys.stdout at write time, so pytest's capture works with these.
err = Console(stderr=True, highlight=False)
out = Console(highlight=False, soft_wrap=True)
