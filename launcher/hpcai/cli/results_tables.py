"""What the results commands share: reading the records they are given (a damaged one a warning
line) and printing their tables and numbers (hpcai.cli.results, results_history, results_changes)."""

from __future__ import annotations

from pathlib import Path


def read_records(paths: list[Path] | None):
    """The readable records; a damaged one is skipped with one warning line on stderr. A path
    spelled `history:PAYLOAD[,key=value…]` is a query of the run history (hpcai.results.history)."""
    from hpcai.console import err, plain
    from hpcai.results.loading import read_all

    records, skipped = read_all(_expand(list(paths) if paths else [Path("runs")]))
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


def _expand(paths: list[Path]) -> list[Path]:
    """History queries replaced by the record folders they name (those still on disk)."""
    from hpcai.errors import UsageError
    from hpcai.results import history

    if not any(str(p).startswith(history.QUERY_PREFIX) for p in paths):
        return paths
    db = history.connect()
    try:
        out: list[Path] = []
        for p in paths:
            if not str(p).startswith(history.QUERY_PREFIX):
                out.append(p)
                continue
            found = [d for d in history.query_dirs(db, str(p)) if d.is_dir()]
            if not found:
                raise UsageError(f"query {str(p)!r}: no run records in the history ({history.default_path()}); "
                                 "`hpcai results index DIR` adds existing ones")
            out.extend(found)
        return out
    finally:
        db.close()
