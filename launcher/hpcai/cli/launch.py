"""CLI commands: `launch` (run a payload or a raw command on a site) and `submit` (the same as a batch job).

`--dry-run` prints the exact command(s) on stdout, shell-quoted with secrets redacted (one line
per rank for the local backend), and the resolved site on stderr; `--json` prints the plan as JSON
on stdout; neither starts anything. One definition of the command line: typer's, made from the
option table in run/options.py.
"""

from __future__ import annotations

from hpcai.run.options import LAUNCH, SUBMIT, command, plan_fields
from hpcai.output import emit, emit_json, say, warn

TYPE_CHECKING = False  # imports stay lazy: `hpcai launch` starts its image check before the rest
if TYPE_CHECKING:
    import typer

PANEL = "Launch"


# The command line as given, set by hpcai.cli.main before typer parses it: click merges the words
# before and after `--` into one list, and `launch sanity --cmd -- true` must not quietly become
# the command `sanity true`.
RAW_ARGS: list[str] = []


def _before_dashes(words: list[str], raw: list[str]) -> list[str]:
    """The positional words given before `--` (none when there is no `--`): click keeps the order,
    so they are the words not after it."""
    if "--" not in raw:
        return []
    after = raw[raw.index("--") + 1:]
    return words[:len(words) - len(after)]


def own_flags(table) -> set[str]:
    """The long options a command declares in its option table (run/options.py), both halves of
    a `--x/--no-x` switch. Long ones only: `-c`, `-e`, `-o`, `-t` are everyday words of commands
    (`sh -c`, `python -c`), so a short one says nothing about what the user meant."""
    return {flag for opt in table for decl in opt.flags for flag in decl.split("/") if flag.startswith("--")}


def _warn_own_options(command: list[str], table) -> None:
    """`--cmd -- hostname --dry-run`: the word is the command's (it comes after `--`), and stays
    so, but hpcai's own option was almost surely meant (nothing would start with it before `--`):
    one warning line naming it, no error."""
    own = own_flags(table)
    found = [w for w in dict.fromkeys(word.partition("=")[0] for word in command) if w in own]
    if found:
        one = len(found) == 1
        warn(f"{', '.join(found)} after `--` {'is' if one else 'are'} passed to the command, not taken by hpcai "
             f"(--cmd runs every word after `--`); put {'it' if one else 'them'} before `--` if meant for hpcai")


def _options(words: list[str], cmd: bool, before: list[str] | None = None, table=LAUNCH,
             **kw) -> "LaunchOptions":  # noqa: F821
    """LaunchOptions from the positional words and the plan fields (options.plan_fields).
    before: the positional words before `--` (default: from RAW_ARGS); table: the command's own
    options (LAUNCH, SUBMIT), which the command after `--` is checked against."""
    from hpcai.errors import UsageError
    from hpcai.run.model import LaunchOptions

    if cmd:
        stray = _before_dashes(words, RAW_ARGS) if before is None else before
        if stray:
            raise UsageError(f"--cmd runs only the command after `--`; {' '.join(stray)!r} before it is "
                             "not part of it: drop it, or drop --cmd to run a payload")
        if not words:
            raise UsageError("--cmd needs a command after `--`, e.g. --cmd -- hostname")
        _warn_own_options(words, table)
        return LaunchOptions(cmd=tuple(words), **kw)
    return LaunchOptions(payload=words[0] if words else None, payload_args=tuple(words[1:]), **kw)


def launch_cmd(words: list[str] | None, cmd: bool, repeat: int, dry_run: bool, as_json: bool,
               **plan: object) -> None:
    """Run a payload (or a raw command) in a container on every rank, and record the run."""
    if not (dry_run or as_json):
        _prefetch(plan.get("runtime"), plan.get("image"))
    from hpcai.run.plan import plan_launch
    from hpcai.run.scheduler import check_repeat

    opts = _options(list(words or []), cmd, table=LAUNCH, **plan_fields(plan))
    check_repeat(repeat)
    if dry_run or as_json:
        _preview(plan_launch(opts, check=False), as_json)
        return
    from hpcai.run.launch import run_repeated

    run_repeated(opts, repeat, echo=True)


def submit_cmd(words: list[str] | None, cmd: bool, repeat: int, no_submit: bool, wait: bool,
               wait_timeout: float | None, **plan: object) -> None:
    """Write a batch script (sbatch, PBS Pro or Flux) for the same plan as `launch` and submit it
    (unless --no-submit)."""
    from dataclasses import replace

    import typer

    from hpcai.run import submit as batch
    from hpcai.errors import UsageError
    from hpcai.run.scheduler import check_repeat

    check_repeat(repeat)
    if (wait or wait_timeout is not None) and no_submit:
        raise UsageError("--wait needs a submitted job; drop --no-submit")
    from hpcai.run.rest import check_url

    rest = plan.get("rest") or ""
    opts = replace(_options(list(words or []), cmd, table=SUBMIT, **plan_fields(plan)),
                   clusters=batch.check_clusters(str(plan.get("clusters") or "")), rest=rest and check_url(rest))
    opts = replace(opts, backend=batch.backend_for(plan.get("scheduler"), opts.backend))
    if repeat > 1:  # as launch --repeat: --output-dir holds the N records
        opts = replace(opts, output_dir=None, runs_root=opts.output_dir or opts.runs_root)
    jobs = []
    for _ in range(repeat):  # planned one after the other: each takes the next free record name
        each = replace(opts)  # submit_plan sets its output_dir to the record it writes
        script, job_id = _submit_one(batch, each, not no_submit)
        emit(job_id or str(script))
        jobs.append((script, job_id))
    if wait or wait_timeout is not None:
        raise typer.Exit(max(batch.wait_for(job, script.parent, wait_timeout, opts.rest) for script, job in jobs))


def _submit_one(batch, opts, submit: bool):
    """One batch job: its record folder claimed, then its script written (and submitted). A
    folder claimed here is given back when no script could be written in it (a refused value)."""
    from pathlib import Path

    from hpcai import record

    given, root = opts.output_dir, Path(opts.runs_root)
    made = [] if given else [p for p in (root, *root.parents) if not p.exists()]  # what the claim makes
    plan = None
    try:
        plan = batch.plan_record(opts, check=submit)  # gives its claim back when it refuses
        return batch.submit_plan(plan, opts, submit=submit)
    except BaseException:
        if not given and (plan is None or not batch.script_path(plan).exists()):
            if plan is not None:
                record.abandon(Path(plan.run_dir))
            for folder in made:  # the runs folder this submit made, while it is still empty
                try:
                    folder.rmdir()
                except OSError:
                    break
        raise


def register(app: typer.Typer) -> None:
    """Add `launch` and `submit` to the top-level app, their options from hpcai/options.py."""
    from typing import Optional

    import typer  # here, not at the top: only when the app is assembled

    words = ("words", typer.Argument(None, metavar="PAYLOAD [VAR=VALUE…] | --cmd -- CMD…",
                                     help="Payload name and var=value overrides, or with --cmd the raw command."),
             Optional[list[str]])
    settings = {"allow_interspersed_args": True}
    app.command("launch", rich_help_panel=PANEL, context_settings=settings)(command(launch_cmd, LAUNCH, words))
    app.command("submit", rich_help_panel=PANEL, context_settings=settings)(command(submit_cmd, SUBMIT, words))


def _describe(plan) -> None:
    g = plan.geometry
    say(f"# site: {plan.site} ({plan.site_source})\n"
        f"# backend: {plan.backend.name}  runtime: {plan.runtime.name}  nodes: {g.nodes}  "
        f"ranks/node: {g.ntasks_per_node}  gpus/node: {g.gpus_per_node}  "
        f"mpi: {g.mpi or 'default'}\n# run record: {plan.run_dir}")
    for w in plan.warnings:
        say(f"# warning: {w}")


def prefetch_hint(args: list[str]) -> None:
    """`hpcai launch …` that will run: ask the engine about the image before typer even loads,
    from the raw words (options.hint). launch_cmd asks again with the parsed values: the same
    question is not asked twice, and an answer nobody collects is dropped at exit."""
    from hpcai.run.options import AS_JSON, DRY_RUN, hint, options_part

    before = options_part(args)
    if any(flag in before for o in (DRY_RUN, AS_JSON) for flag in o.flags) or "--help" in before:
        return  # nothing will start: the image need not even be here
    _prefetch(hint(args, "runtime"), hint(args, "image"))


def _prefetch(runtime: object, image: object) -> None:
    """Ask the container engine about the image now: it answers while hpcai imports and plans."""
    from hpcai.run.runtimes import RUNTIMES, get_runtime

    if isinstance(runtime, str) and runtime in RUNTIMES and image and get_runtime(runtime).engine:
        from hpcai.image.engine import prefetch

        prefetch(runtime, str(image))


def _preview(plan, as_json: bool) -> None:
    if as_json:
        emit_json(plan.to_json(), sort_keys=True)
        return
    _describe(plan)
    emit(plan.display())
