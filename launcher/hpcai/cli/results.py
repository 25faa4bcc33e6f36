"""CLI commands: `hpcai results parse|show|export|compare|plot` (`index|history`:
hpcai.cli.results_history; `diff` and `compare --against`: hpcai.cli.results_changes).

Human tables go to stderr (Rich), machine output (JSON, CSV) to stdout. Everything heavy
(parsers, matplotlib) is imported inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from hpcai.cli.results_tables import fmt, print_table, read_records
from hpcai.output import emit, emit_json

results_app = typer.Typer(
    help="Turn run records and logs into metrics, comparisons, exports and plots.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)

RUNS_HELP = "Run-record folders, or folders holding them (runs/, a sweep folder). Default: ./runs"


def _fact(name: str, value: str) -> str:
    """A --var run fact as given; one that reads as a number (seq_len=1024, n_params=124e6) must be
    a finite one, by the rule payload variables follow (1e400 or nan would make TFLOP/s fail), and
    one the derived figures compute with (tflops.POSITIVE: a length, a count, a size) more than 0."""
    from hpcai.payload_rules import check_number
    from hpcai.results import tflops

    if name in tflops.POSITIVE:
        tflops.check_fact(f"--var {name}", name, value)
        return value
    try:
        float(value)
    except ValueError:
        return value  # text (model=gpt2)
    check_number(f"--var {name}", value, float)
    return value


@results_app.command("parse")
def parse_cmd(
    files: list[Path] = typer.Argument(..., help="Log files (stdout and/or stderr of any run, hpcai's or not)."),
    payload: str = typer.Option(..., "--payload", "-p", help="Payload or parser name (nccl-tests, osu, hf-clm, …)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON: metrics with unit and direction, warnings, and "
                                 "the details without their per-row tables (their lengths under \"tables\")."),
    rows: bool = typer.Option(False, "--rows", help="With --json: include the per-row tables in details (the size "
                              "table, every logged step or iteration); long for big logs."),
    var: Optional[list[str]] = typer.Option(None, "--var", help="Run facts for derived metrics, e.g. seq_len=1024, "
                                            "n_params=124e6, model=gpt2 (HF TFLOP/s); repeatable."),
    gpus: Optional[int] = typer.Option(None, "--gpus", help="GPUs of the run (HF TFLOP/s per GPU)."),
) -> None:
    """Parse log files with a payload's parser and print the metrics (logs of any size: read once, line by line)."""
    from hpcai.errors import UsageError
    from hpcai.results.parsers import parse_files, parser_for_payload, summary

    if rows and not as_json:
        raise UsageError("--rows goes with --json (the table shows the metrics only)")
    result = parse_files(parser_for_payload(payload), files)
    facts = {}
    for item in var or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--var must look like NAME=VALUE, got {item!r}")
        facts[key] = _fact(key, value)
    if gpus is not None:  # the GPUs of the run: a count, from 1 (the rule of the --var facts)
        from hpcai.results import tflops

        tflops.check_fact("--gpus", "gpus", str(gpus))
    if facts or gpus:
        from hpcai.results import tflops

        tflops.add_to_result(result, {"payload_vars": facts, "nodes": 1, "gpus_per_node": gpus})
    from hpcai.results.runs import as_documented

    as_documented(payload, result, files, per_gpu=False, streamed=True)  # a payload's names and headline, as its record's
    if as_json:  # written as is (rich would scan every character of a long --rows document), and
        emit_json(summary(result, rows))  # rich is not even imported
        return
    from rich.table import Table

    from hpcai.console import cell, err, plain

    table = Table(title=cell(f"{result.parser}: {', '.join(map(str, files))}"))
    for col in ("metric", "value", "unit", "better", "formula"):
        table.add_column(col)
    for m in result.metrics:
        table.add_row(*map(cell, (("* " if m.headline else "  ") + m.name, fmt(m.value), m.unit, m.better,
                                  m.formula or "")))
    print_table(table)
    for w in result.warnings:
        err.print(f"warning: {plain(w)}", markup=False)


@results_app.command("show")
def show_cmd(runs: Optional[list[Path]] = typer.Argument(None, help=RUNS_HELP)) -> None:
    """Table of runs: payload, site, nodes × ranks, image, headline metric, status; sweeps add a scaling table."""
    from rich.table import Table

    from hpcai.console import cell
    from hpcai.results.sweep import aggregate

    records = read_records(runs)
    table = Table(title="runs")
    for col in ("run", "payload", "system", "nodes×ranks/node", "image", "metric", "value", "unit", "status"):
        table.add_column(col)
    for r in records:  # every field read from a record is shown as text (cell), never as markup
        head = r.result.headline if r.result else None
        table.add_row(*map(cell, (r.path.name, r.payload, r.shown_system, f"{r.nodes}×{r.ranks // max(r.nodes, 1)}",
                                  r.plan.get("image") or "-", head.name if head else "-",
                                  fmt(head.value) if head else "-", head.unit if head else "",
                                  r.shown_state if not r.error else f"{r.shown_state}: {r.error}")))
    print_table(table)
    scaling = aggregate(records)
    if len({p.nodes for p in scaling}) > 1:
        st = Table(title="scaling")
        for col in ("series", "nodes", "runs", "metric", "mean", "min", "max", "efficiency"):
            st.add_column(col)
        for p in scaling:
            st.add_row(*map(cell, (p.series, p.nodes, p.runs, f"{p.metric} ({p.unit})", fmt(p.mean), fmt(p.min),
                                   fmt(p.max), f"{p.efficiency:.2f}" if p.efficiency is not None else "-")))
        print_table(st)


@results_app.command("export")
def export_cmd(
    runs: Optional[list[Path]] = typer.Argument(None, help=RUNS_HELP),
    as_csv: bool = typer.Option(False, "--csv", help="CSV, one row per run (CARAML-style columns + provenance)."),
    as_json: bool = typer.Option(False, "--json", help="JSON, one object per run, with every metric."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write to this file instead of stdout."),
) -> None:
    """Export runs as CSV or JSON."""
    from hpcai.errors import UsageError
    from hpcai.results import export

    if as_csv == as_json:
        raise UsageError("choose one format: --csv or --json")
    text = export.to_csv(read_records(runs)) if as_csv else export.to_json(read_records(runs))
    if output:
        export.write(output, text)  # a link at OUTPUT: refused, never followed
    else:
        emit(text)


@results_app.command("compare")
def compare_cmd(
    runs: Optional[list[Path]] = typer.Argument(None, help=RUNS_HELP),
    baseline: Optional[Path] = typer.Option(None, "--baseline", "-b", help="Baselines TOML (references per system)."),
    min_runs: int = typer.Option(4, "--min-runs", min=1, help="Fewest successful runs for a verdict (Mila: 4)."),
    against: Optional[Path] = typer.Option(None, "--against", metavar="A", help="Runs (a record or a folder) to "
                                           "compare RUNS with: each figure's ratio RUNS/A with a bootstrap "
                                           "interval; a regression only when the interval excludes the tolerance."),
    tolerance: float = typer.Option(0.05, "--tolerance", min=0.0, max=0.9, help="With --against: a change "
                                    "smaller than this share is no change (default 0.05)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON rows and the suite score."),
) -> None:
    """Compare runs with references: stats, ratio, pass/fail, suite score; or with other runs
    (--against): ratios with confidence intervals. Exit 1 when something fails or regressed."""
    if against is not None:
        from hpcai.cli.results_changes import compare_against

        compare_against(runs, against, tolerance, baseline, as_json)
        return
    from rich.table import Table

    from hpcai.console import cell, err, out
    from hpcai.results.baselines import load_baselines
    from hpcai.results.compare import FAIL, PASS, compare
    from hpcai.results.stats import DEVIATION_LIMIT, DEVIATION_QUANTILE

    configs = load_baselines(baseline) if baseline else None
    result = compare(read_records(runs), configs, min_runs)
    for r in result.rows:
        if r.skipped:
            err.print(f"note: {r.config} on {r.system}: {r.skipped} run(s) with {r.metric} not a finite number "
                      "(NaN or infinite) left out", markup=False, highlight=False, soft_wrap=True)
    if as_json:
        rows = [{"config": r.config, "system": r.system, "metric": r.metric, "unit": r.unit, "runs": r.runs,
                 "n": r.stats.n if r.stats else 0, "mean": r.stats.mean if r.stats else None,
                 "sd": r.stats.sd if r.stats else None, "sd_percent": r.stats.sd_percent if r.stats else None,
                 "min": r.stats.min if r.stats else None, "max": r.stats.max if r.stats else None,
                 "reference": r.reference.value if r.reference else None, "ratio": r.ratio, "verdict": r.verdict}
                for r in result.rows]
        emit_json({"rows": rows, "score": result.score, "success_ratio": result.success_ratio,
                   "deviation_quantile": result.deviation_quantile, "failed": result.failed})
    else:
        table = Table(title="comparison")
        for col in ("configuration", "system", "metric", "n", "mean", "sd%", "min", "max", "reference", "ratio",
                    "verdict"):
            table.add_column(col)
        colour = {PASS: "green", FAIL: "red"}
        for r in result.rows:
            s = r.stats
            table.add_row(*map(cell, (r.config, r.system, f"{r.metric} ({r.unit})", s.n if s else 0, fmt(s and s.mean),
                                      f"{s.sd_percent:.1f}" if s else "-", fmt(s and s.min), fmt(s and s.max),
                                      fmt(r.reference.value) if r.reference else "-", fmt(r.ratio))),
                          f"[{colour.get(r.verdict, 'yellow')}]{r.verdict}[/]")
        print_table(table)
        score = "-" if result.score is None else f"{result.score:.3f}"
        out.print(f"suite score {score} (success ratio {result.succeeded}/{result.runs})")
        spread = result.deviation_quantile
        if spread is not None:  # informative, as in the Mila report: it does not fail the run
            steady = "stable" if spread < DEVIATION_LIMIT else "unstable"
            out.print(f"sd% at the {DEVIATION_QUANTILE:.0%} quantile over the configurations: {spread:.2f} % "
                      f"({steady}: the Mila suite wants < {DEVIATION_LIMIT:g} %)")
    if result.failed:
        raise typer.Exit(1)


@results_app.command("plot")
def plot_cmd(
    runs: Optional[list[Path]] = typer.Argument(None, help=RUNS_HELP),
    output: Path = typer.Option(..., "--output", "-o", help="Image file (.png, .svg, .pdf)."),
    kind: str = typer.Option("auto", "--kind", help="auto, bars, scaling or busbw."),
) -> None:
    """Plot runs: bars with min–max error bars, scaling curves for sweeps, busbw vs size; each
    payload's metric on axes of its own."""
    from hpcai.console import err, plain
    from hpcai.errors import unknown
    from hpcai.results import plot

    kinds = ("auto", "bars", "scaling", "busbw")
    if kind not in kinds:
        raise unknown("plot kind", kind, kinds)
    notes: list[str] = []
    fig = plot.auto(read_records(runs), kind, notes)
    for line in notes:  # values that are not finite numbers: left out, and said so
        err.print(f"note: {plain(line)}", markup=False, highlight=False, soft_wrap=True)
    plot.save(fig, output)
    err.print(f"wrote {plain(output, lines=False)} ({plot.series_count(fig)} series)", soft_wrap=True, markup=False)


@results_app.command("schema")
def schema_cmd() -> None:
    """The baselines file's rules (`compare --baselines FILE`) as JSON Schema (draft 2020-12), for
    an editor to check one as it is written: its two tables, the [value, lower, upper, unit] or
    [value, unit] of each reference. hpcai checks the same when it reads the file, then what a
    schema cannot say: payloads, conditions and units that exist (hpcai.results.baselines)."""
    from hpcai.output import emit_json
    from hpcai.results.baselines import SCHEMA

    emit_json(SCHEMA.json_schema("hpcai baselines file (hpcai results compare --baselines FILE)"), sort_keys=True)


def register(app: typer.Typer) -> None:
    """Add this module's commands (and the history's: hpcai.cli.results_history) to the top-level app."""
    from hpcai.cli import results_changes, results_history

    results_history.register(results_app)
    results_changes.register(results_app)
    app.add_typer(results_app, name="results", rich_help_panel="Results")
