"""CLI commands: `launch` (run a payload or a raw command on a site) and `submit` (the same as a batch job).

`--dry-run` prints the exact command(s) on stdout, shell-quoted with secrets redacted (one line
per rank for the local backend), and the resolved site on stderr; `--json` prints the plan as JSON
on stdout; neither starts anything. Not even typer is imported at the top: `hpcai launch` is
parsed by `fast_launch` (argparse), typer only serves --help and unusual input.
"""

from __future__ import annotations

import os
import sys

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


def _options(image: str, words: list[str], cmd: bool, before: list[str] | None = None,
             **kw) -> "LaunchOptions":  # noqa: F821
    """before: the positional words before `--` (default: from RAW_ARGS)."""
    from hpcai.errors import UsageError
    from hpcai.plan import LaunchOptions

    if cmd:
        stray = _before_dashes(words, RAW_ARGS) if before is None else before
        if stray:
            raise UsageError(f"--cmd runs only the command after `--`; {' '.join(stray)!r} before it is "
                             "not part of it: drop it, or drop --cmd to run a payload")
        if not words:
            raise UsageError("--cmd needs a command after `--`, e.g. --cmd -- hostname")
        return LaunchOptions(image=image, cmd=tuple(words), **kw)
    return LaunchOptions(image=image, payload=words[0] if words else None,
                         payload_args=tuple(words[1:]), **kw)


def register(app: typer.Typer) -> None:
    """Add `launch` and `submit` to the top-level app."""
    import typer  # here, not at the top: `hpcai launch` is parsed without typer (fast_launch)

    def launch(
        words: list[str] | None = typer.Argument(None, metavar="PAYLOAD [VAR=VALUE…] | --cmd -- CMD…",
                                                    help="Payload name and var=value overrides, or with --cmd the raw command."),
        image: str = typer.Option(..., "--image", "-i", envvar="HPCAI_IMAGE", help="SIF/SquashFS path or engine image."),
        cmd: bool = typer.Option(False, "--cmd", help="Run the raw command given after `--` instead of a payload."),
        nodes: int = typer.Option(1, "--nodes", "-N", help="Nodes."),
        ntasks_per_node: int | None = typer.Option(None, "--ntasks-per-node", help="Ranks per node [default: site GPUs per node, else 1]."),
        gpus_per_node: int | None = typer.Option(None, "--gpus-per-node", help="GPUs per node [default: the site's]."),
        cpus_per_task: int | None = typer.Option(None, "--cpus-per-task", "-c", help="CPUs per rank [default: node CPUs / ranks]."),
        time_: str = typer.Option("", "--time", "-t", help="Time limit (Slurm format)."),
        partition: str = typer.Option("", "--partition", "-p", envvar="HPCAI_PARTITION"),
        account: str = typer.Option("", "--account", "-A", envvar="HPCAI_ACCOUNT"),
        site: str | None = typer.Option(None, "--site", envvar="HPCAI_SITE", help="Site profile [default: autodetect, else generic-slurm, else local]."),
        runtime: str | None = typer.Option(None, "--runtime", envvar="HPCAI_RUNTIME", help="apptainer, singularity, charliecloud, docker, podman [default: the site's]."),
        backend: str | None = typer.Option(None, "--backend", help="srun, mpiexec, local [default: the site's]."),
        bind: list[str] = typer.Option([], "--bind", "-B", help="SRC[:DST], repeatable."),
        data: str = typer.Option("", "--data", envvar="HPCAI_DATA", help="Folder of real datasets and models, mounted at /data (HPCAI_DATA) for payloads that read them."),
        env: list[str] = typer.Option([], "--env", "-e", help="KEY=VALUE (or KEY: copy this shell's value), repeatable."),
        mpi: str | None = typer.Option(None, "--mpi", help="pmi2, pmix, cray_shasta, pspmix, none [default: the site's]."),
        per_gpu: bool = typer.Option(False, "--per-gpu", help="Independent single-GPU copies, CPUs split evenly."),
        nodelist: str = typer.Option("", "--nodelist", "-w", help="Slurm host list (mpiexec: hostfile)."),
        output_dir: str | None = typer.Option(None, "--output-dir", "-o", help="Run record folder [default: runs/<time>-<payload>[-<jobid>]]."),
        profile: list[str] = typer.Option([], "--profile", help="Payload profile (hpcai payloads show NAME), repeatable; var=value still wins."),
        srun_arg: list[str] = typer.Option([], "--srun-arg", help="An srun option hpcai has no flag for, e.g. --srun-arg=--exclusive; repeatable."),
        repeat: int = typer.Option(1, "--repeat", help="Run it N times, one record each (under --output-dir when given)."),
        energy: bool = typer.Option(False, "--energy", help="Measure power per node (jpwr) into the record."),
        no_entrypoint: bool = typer.Option(False, "--no-entrypoint", help="The image has no hpcai-entrypoint: run the command bare."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the exact command and the site; start nothing."),
        as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON; start nothing."),
    ) -> None:
        """Run a payload (or a raw command) in a container on every rank, and record the run."""
        opts = _options(image, list(words or []), cmd, nodes=nodes, ntasks_per_node=ntasks_per_node,
                        gpus_per_node=gpus_per_node, cpus_per_task=cpus_per_task, time=time_,
                        partition=partition, account=account, site=site, runtime=runtime,
                        backend=backend, binds=tuple(bind), env=tuple(env), mpi=mpi, per_gpu=per_gpu,
                        nodelist=nodelist, output_dir=output_dir, energy=energy,
                        no_entrypoint=no_entrypoint, profiles=tuple(profile), srun_args=tuple(srun_arg),
                        data=data)
        from hpcai.plan import check_repeat, plan_launch

        check_repeat(repeat)
        if dry_run or as_json:  # normally handled by fast_launch before typer parses anything
            _preview(plan_launch(opts, check=False), as_json)
            return
        from hpcai.launch import run_repeated

        run_repeated(opts, repeat, echo=True)

    app.command("launch", rich_help_panel=PANEL,
                context_settings={"allow_interspersed_args": True})(launch)

    def submit(
        words: list[str] | None = typer.Argument(None, metavar="PAYLOAD [VAR=VALUE…] | --cmd -- CMD…"),
        image: str = typer.Option(..., "--image", "-i", envvar="HPCAI_IMAGE"),
        cmd: bool = typer.Option(False, "--cmd"),
        nodes: int = typer.Option(1, "--nodes", "-N"),
        ntasks_per_node: int | None = typer.Option(None, "--ntasks-per-node"),
        gpus_per_node: int | None = typer.Option(None, "--gpus-per-node"),
        cpus_per_task: int | None = typer.Option(None, "--cpus-per-task", "-c"),
        time_: str = typer.Option("", "--time", "-t"),
        partition: str = typer.Option("", "--partition", "-p", envvar="HPCAI_PARTITION"),
        account: str = typer.Option("", "--account", "-A", envvar="HPCAI_ACCOUNT"),
        site: str | None = typer.Option(None, "--site", envvar="HPCAI_SITE"),
        runtime: str | None = typer.Option(None, "--runtime", envvar="HPCAI_RUNTIME"),
        bind: list[str] = typer.Option([], "--bind", "-B"),
        data: str = typer.Option("", "--data", envvar="HPCAI_DATA"),
        env: list[str] = typer.Option([], "--env", "-e"),
        mpi: str | None = typer.Option(None, "--mpi"),
        per_gpu: bool = typer.Option(False, "--per-gpu"),
        nodelist: str = typer.Option("", "--nodelist", "-w"),
        output_dir: str | None = typer.Option(None, "--output-dir", "-o"),
        profile: list[str] = typer.Option([], "--profile"),
        srun_arg: list[str] = typer.Option([], "--srun-arg"),
        repeat: int = typer.Option(1, "--repeat", help="Submit N jobs of the same plan, one record each."),
        energy: bool = typer.Option(False, "--energy"),
        no_entrypoint: bool = typer.Option(False, "--no-entrypoint"),
        no_submit: bool = typer.Option(False, "--no-submit", help="Write the script, do not call sbatch."),
        wait: bool = typer.Option(False, "--wait", help="Wait for the job to end; exit with its status."),
        wait_timeout: float | None = typer.Option(None, "--wait-timeout", help="Give up waiting after SECONDS."),
    ) -> None:
        """Write an sbatch script for the same plan as `launch` and submit it (unless --no-submit)."""
        from hpcai import submit as batch
        from hpcai.errors import UsageError
        from hpcai.plan import check_repeat, plan_launch

        check_repeat(repeat)
        if (wait or wait_timeout is not None) and no_submit:
            raise UsageError("--wait needs a submitted job; drop --no-submit")

        opts = _options(image, list(words or []), cmd, nodes=nodes, ntasks_per_node=ntasks_per_node,
                        gpus_per_node=gpus_per_node, cpus_per_task=cpus_per_task, time=time_,
                        partition=partition, account=account, site=site, runtime=runtime,
                        binds=tuple(bind), env=tuple(env), mpi=mpi, per_gpu=per_gpu, nodelist=nodelist,
                        output_dir=output_dir, energy=energy, no_entrypoint=no_entrypoint,
                        profiles=tuple(profile), srun_args=tuple(srun_arg), data=data)
        from dataclasses import replace

        if repeat > 1:  # as launch --repeat: --output-dir holds the N records
            opts = replace(opts, output_dir=None, runs_root=opts.output_dir or opts.runs_root)
        jobs = []
        for _ in range(repeat):  # planned one after the other: each takes the next free record name
            each = replace(opts)  # submit_plan sets its output_dir to the record it writes
            script, job_id = batch.submit_plan(plan_launch(each, check=not no_submit), each, submit=not no_submit)
            sys.stdout.write((job_id or str(script)) + "\n")
            jobs.append((script, job_id))
        if wait or wait_timeout is not None:
            raise typer.Exit(max(batch.wait_for(job_id, script.parent, wait_timeout) for script, job_id in jobs))

    app.command("submit", rich_help_panel=PANEL,
                context_settings={"allow_interspersed_args": True})(submit)


def _describe(plan) -> None:
    g = plan.geometry
    sys.stderr.write(f"# site: {plan.site} ({plan.site_source})\n"
                     f"# backend: {plan.backend}  runtime: {plan.runtime}  nodes: {g.nodes}  "
                     f"ranks/node: {g.ntasks_per_node}  gpus/node: {g.gpus_per_node}  "
                     f"mpi: {g.mpi or 'default'}\n# run record: {plan.run_dir}\n")
    for w in plan.warnings:
        sys.stderr.write(f"# warning: {w}\n")


# ---- fast preview ---------------------------------------------------------------------------
# typer 0.29 builds a pydantic TypeAdapter per parameter, which alone costs more than the 0.5 s
# budget of `hpcai launch --dry-run` and ~0.4 s of every launch. `hpcai launch` is therefore parsed
# here with argparse from this table (typer still serves --help and anything unusual);
# test_launch_cli checks that the table matches the typer command exactly.
# (dest, flags, kind, envvar) — kind: str, int, flag, list
FAST_OPTIONS = [
    ("image", ("--image", "-i"), "str", "HPCAI_IMAGE"), ("cmd", ("--cmd",), "flag", None),
    ("nodes", ("--nodes", "-N"), "int", None), ("ntasks_per_node", ("--ntasks-per-node",), "int", None),
    ("gpus_per_node", ("--gpus-per-node",), "int", None),
    ("cpus_per_task", ("--cpus-per-task", "-c"), "int", None), ("time_", ("--time", "-t"), "str", None),
    ("partition", ("--partition", "-p"), "str", "HPCAI_PARTITION"),
    ("account", ("--account", "-A"), "str", "HPCAI_ACCOUNT"), ("site", ("--site",), "str", "HPCAI_SITE"),
    ("runtime", ("--runtime",), "str", "HPCAI_RUNTIME"), ("backend", ("--backend",), "str", None),
    ("bind", ("--bind", "-B"), "list", None), ("data", ("--data",), "str", "HPCAI_DATA"),
    ("env", ("--env", "-e"), "list", None),
    ("mpi", ("--mpi",), "str", None), ("per_gpu", ("--per-gpu",), "flag", None),
    ("nodelist", ("--nodelist", "-w"), "str", None), ("output_dir", ("--output-dir", "-o"), "str", None),
    ("profile", ("--profile",), "list", None), ("srun_arg", ("--srun-arg",), "list", None),
    ("repeat", ("--repeat",), "int", None),
    ("energy", ("--energy",), "flag", None), ("no_entrypoint", ("--no-entrypoint",), "flag", None),
    ("dry_run", ("--dry-run",), "flag", None), ("as_json", ("--json",), "flag", None),
]


class _Unsupported(Exception):
    """Anything argparse cannot take exactly like click: let typer handle it."""


class _Parser:
    def __new__(cls):
        import argparse

        class P(argparse.ArgumentParser):
            def error(self, message):
                raise _Unsupported(message)

        # a fixed width: argparse's default formatter imports shutil (and zlib, bz2, lzma) to ask
        # the terminal, ~3 ms of every launch for help text that typer prints anyway
        p = P(add_help=False, allow_abbrev=False,
              formatter_class=lambda prog: argparse.HelpFormatter(prog, width=100))
        for dest, flags, kind, envvar in FAST_OPTIONS:
            default = os.environ.get(envvar) if envvar else None
            if kind == "flag":
                p.add_argument(*flags, dest=dest, action="store_true")
            elif kind == "list":
                p.add_argument(*flags, dest=dest, action="append", default=[])
            else:
                p.add_argument(*flags, dest=dest, type=int if kind == "int" else str, default=default)
        p.add_argument("words", nargs="*")
        return p


def fast_launch(argv: list[str]) -> int | None:
    """Handle `hpcai launch …` without typer; None when typer should do it (--help, odd input)."""
    if argv[:1] != ["launch"] or "--help" in argv[:argv.index("--") if "--" in argv else len(argv)]:
        return None
    args = args_all = argv[1:]
    words_after: list[str] = []
    if "--" in args:  # like click: everything after `--` is positional
        i = args.index("--")
        args, words_after = args[:i], args[i + 1:]
    try:
        ns = _Parser().parse_intermixed_args(args)
    except _Unsupported:
        return None
    if not ns.image or (ns.dry_run and ns.as_json):
        return None
    if ns.runtime in ("docker", "podman") and not (ns.dry_run or ns.as_json):
        from hpcai.engine import prefetch

        prefetch(ns.runtime, ns.image)  # the engine answers while hpcai imports and plans
    from hpcai.plan import plan_launch

    kw = {k: getattr(ns, k) for k in ("ntasks_per_node", "gpus_per_node", "cpus_per_task", "site",
                                       "runtime", "backend", "mpi", "per_gpu", "output_dir", "energy",
                                       "no_entrypoint")}
    opts = _options(ns.image, [*ns.words, *words_after], ns.cmd, ns.words if "--" in args_all else [],
                    nodes=1 if ns.nodes is None else ns.nodes,
                    time=ns.time_ or "", partition=ns.partition or "", account=ns.account or "",
                    binds=tuple(ns.bind), env=tuple(ns.env), nodelist=ns.nodelist or "",
                    profiles=tuple(ns.profile), srun_args=tuple(ns.srun_arg), data=ns.data or "", **kw)
    if ns.repeat is not None:
        from hpcai.plan import check_repeat

        check_repeat(ns.repeat)
    if ns.dry_run or ns.as_json:
        _preview(plan_launch(opts, check=False), ns.as_json)
        return 0
    from hpcai.launch import run_repeated

    run_repeated(opts, 1 if ns.repeat is None else ns.repeat, echo=True)
    return 0


def _preview(plan, as_json: bool) -> None:
    if as_json:
        import json

        sys.stdout.write(json.dumps(plan.to_json(), indent=2, sort_keys=True) + "\n")
        return
    _describe(plan)
    sys.stdout.write(plan.display() + "\n")
