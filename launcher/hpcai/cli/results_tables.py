"""What the results commands share: reading the records they are given (a damaged one a warning
line) and printing their tables and numbers (hpcai.cli.results, results_history, results_changes)."""

from __future__ import annotations

from pathlib import Path


def read_records(paths: list[Path] | None):
    """The readable records; a damaged one is skipped with one warning line on stderr."""
    from hpcai.console import err, plain
    from hpcai.results.loading import read_all

    records, skipped = read_all(list(paths) if paths else [Path("runs")])
    for line in skipped:
        err.print(f"warning: {plain(line)}", markup=False, highlight=False, soft_wrap=True)
    return records


def print_table(table) -> None:
    """Tables on stdout; when piped, wide enough that names are never cut to '…'."""
    from rich.console import Console

    from hpcai.console import out

    if out.is_terminal:
        out.print(table)
    else:  # Console.print(width=) can only narrow, so a wide console for pipes and files
        Console(width=250, highlight=False, color_system=None, emoji=False).print(table)


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1e9:
        return f"{value:.4e}"
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
