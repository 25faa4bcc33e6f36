"""Every launch option, declared once.

`hpcai launch`, `submit` and `sweep` take the options of a launch plan; `PLAN` lists them, each
with its flags, kind, default, environment variable, help and the `LaunchOptions` field it sets.
From this one table come: the typer parameters of the three commands (`command`), the
`LaunchOptions` of what was typed (`plan_fields`), and the `hpcai launch` arguments a batch script
runs again (`options_argv`).

No typer at import: a batch script's line and the plan need the table, not the CLI.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hpcai.run.backends import BACKENDS
from hpcai.run.runtimes import RUNTIMES

# srun's --mpi types a launch may name (a site's `mpi`, `--mpi`): the plugins Slurm sites build.
MPI_TYPES = ("pmi2", "pmix", "cray_shasta", "pspmix", "none")

@dataclass(frozen=True)
class Opt:
    name: str                  # the parameter; also the LaunchOptions field unless `field` says otherwise
    flags: tuple[str, ...]
    kind: str = "str"          # str | int | float | flag | list | switch (--x/--no-x: None when not given)
    help: str = ""
    default: Any = None        # None: not given (the site's or the plan's default applies)
    envvar: str | None = None
    field: str | None = None   # the LaunchOptions field, when it is not `name`
    required: bool = False

    @property
    def target(self) -> str:
        return self.field or self.name


PLAN: tuple[Opt, ...] = (  # in the order a batch script's `hpcai launch` line gives them
    Opt("image", ("--image", "-i"), help="SIF/SquashFS path or engine image.", envvar="HPCAI_IMAGE", required=True),
    Opt("nodes", ("--nodes", "-N"), "int", "Nodes (default: the payload profile's, else 1)."),
    Opt("ntasks_per_node", ("--ntasks-per-node",), "int", "Ranks per node (default: site GPUs per node, else 1)."),
    Opt("gpus_per_node", ("--gpus-per-node",), "int", "GPUs per node (default: the site's)."),
    Opt("cpus_per_task", ("--cpus-per-task", "-c"), "int", "CPUs per rank (default: the payload profile's, else node CPUs / ranks)."),
    Opt("time", ("--time", "-t"), help="Time limit, as sbatch takes it (minutes, HH:MM:SS, D-HH, …; default: the payload profile's).",
        default=""),
    Opt("partition", ("--partition", "-p"), help="Slurm partition (default: the site's).", default="",
        envvar="HPCAI_PARTITION"),
    Opt("account", ("--account", "-A"), help="Slurm account (default: the site's).", default="",
        envvar="HPCAI_ACCOUNT"),
    Opt("site", ("--site",), help="Site profile (default: autodetect, else generic-slurm, else local).",
        envvar="HPCAI_SITE"),
    Opt("runtime", ("--runtime",), help=f"{', '.join(RUNTIMES)} (default: the site's).", envvar="HPCAI_RUNTIME"),
    Opt("backend", ("--backend",), help=f"{', '.join(BACKENDS)} (default: the site's)."),
    Opt("mpi", ("--mpi",), help=f"{', '.join(MPI_TYPES)} (default: the site's)."),
    Opt("nodelist", ("--nodelist", "-w"), help="Slurm host list (mpiexec: hostfile).", default=""),
    Opt("output_dir", ("--output-dir", "-o"), help="Run record folder (default: runs/<time>-<payload>[-<jobid>)]."),
    Opt("data", ("--data",), help="Folder of real datasets and models, mounted at /data (HPCAI_DATA) for "
                                  "payloads that read them.", default="", envvar="HPCAI_DATA"),
    Opt("bind", ("--bind", "-B"), "list", "SRC[:DST[:ro|rw]], repeatable.", field="binds"),
    Opt("profile", ("--profile",), "list", "Payload profile (hpcai payloads show NAME), repeatable; var=value "
                                           "still wins.", field="profiles"),
    Opt("srun_arg", ("--srun-arg",), "list", "An srun option hpcai has no flag for, e.g. --srun-arg=--exclusive; "
                                             "repeatable.", field="srun_args"),
    Opt("env", ("--env", "-e"), "list", "KEY=VALUE (or KEY: copy this shell's value), repeatable."),
    Opt("per_gpu", ("--per-gpu",), "flag", "Independent single-GPU copies, CPUs split evenly."),
    Opt("energy", ("--energy",), "flag", "Measure power per node (jpwr) into the record."),
    Opt("no_entrypoint", ("--no-entrypoint",), "flag", "The image has no hpcai-entrypoint: run the command bare."),
    Opt("userns", ("--userns/--no-userns",), "switch", "Apptainer/Singularity in user-namespace mode (--userns), "
                                                      "for an Apptainer without setuid (default: the site's "
                                                      "apptainer_userns)."),
    Opt("host_mpi", ("--host-mpi/--no-host-mpi",), "switch", "Swap the site's host MPI (mpi_swap, e.g. Cray "
                                                            "MPICH) into an MPICH image (default: for images "
                                                            "labelled MPICH, where the site has one)."),
    Opt("stage", ("--stage",), "flag", "Stage the image first (hpcai stage): by digest into the site cache, "
                                       "then, in an allocation, broadcast to node-local storage once; every "
                                       "rank starts from the local copy."),
    Opt("done_file", ("--done-file",), help="Write FILE (the run's final state) once the run has ended and its "
                                            "record is final, whatever the outcome: for tools that wait on a "
                                            "file (JUBE's done_file).", default=""),
)
CMD = Opt("cmd", ("--cmd",), "flag", "Run the raw command given after `--` instead of a payload.")
REPEAT = Opt("repeat", ("--repeat",), "int", "Run it N times, one record each (under --output-dir when given).",
             default=1)
DRY_RUN = Opt("dry_run", ("--dry-run",), "flag", "Print the exact command and the site; start nothing.")
AS_JSON = Opt("as_json", ("--json",), "flag", "Print the plan as JSON; start nothing.")
WAIT = Opt("wait", ("--wait",), "flag", "Wait for the job(s) to end; exit with their status.")
WAIT_TIMEOUT = Opt("wait_timeout", ("--wait-timeout",), "float", "Give up waiting after SECONDS.")

LAUNCH = (*PLAN, CMD, REPEAT, DRY_RUN, AS_JSON)
SUBMIT = (*PLAN, CMD, REPEAT, Opt("no_submit", ("--no-submit",), "flag", "Write the script, do not submit it."),
          Opt("scheduler", ("--scheduler",), help="slurm, pbs or flux: the batch system to write the job for, "
                                                  "which picks its backend (srun, mpiexec, flux) (default: the "
                                                  "site backend's)."),
          Opt("clusters", ("--clusters", "-M"), help="Slurm cluster(s) of a multi-cluster site, comma-separated "
                                                     "(sbatch -M): Slurm starts the job on the one that can start it "
                                                     "first; --wait follows it there, the record names it.",
              default="", envvar="HPCAI_CLUSTERS"),
          Opt("rest", ("--rest",), help="Submit through slurmrestd at URL (http(s)://HOST:PORT, REST API v0.0.38, "
                                        "auth/jwt) instead of sbatch; the token comes from SLURM_JWT, never the "
                                        "command line.", default="", envvar="HPCAI_SLURMRESTD"),
          WAIT, WAIT_TIMEOUT)
# A sweep's points differ in node count and variables; each gets its own record under the sweep
# folder. Its image may wait: `--dry-run` lists the points without one.
SWEEP = (Opt("nodes", ("--nodes", "-N"), help="Node counts, e.g. 1,2,4,8.", required=True),
         Opt("var", ("--var",), "list", "NAME=V1,V2: one point per value (× node counts), repeatable."),
         # (a --done-file is one point's: `--jube` gives each workpackage its own)
         *(replace(o, required=False) for o in PLAN if o.name not in ("nodes", "nodelist", "output_dir", "done_file")),
         REPEAT,
         Opt("output_dir", ("--output-dir", "-o"), help="Sweep folder (default: runs/sweep-<time>)."),
         Opt("dry_run", ("--dry-run",), "flag", "List the points and exit."),
         Opt("submit", ("--submit/--no-submit",), "switch", "One batch job per point (--no-submit: write the "
                                                            "scripts only) (default: run every point now)."),
         WAIT, WAIT_TIMEOUT,
         Opt("jube", ("--jube",), help="Write the sweep as a JUBE benchmark FILE.xml (run it with `jube run`) "
                                       "and run nothing; -o: where JUBE puts its runs."))


def plan_fields(values: dict[str, Any], table: Sequence[Opt] = PLAN) -> dict[str, Any]:
    """LaunchOptions keyword arguments from parsed values (typer's): lists become
    tuples, an option not given keeps the field's default."""
    out: dict[str, Any] = {}
    plan = {o.name for o in PLAN}
    for opt in table:
        if opt.name not in values or opt.name not in plan:
            continue
        value = values[opt.name]
        if opt.kind == "list":
            value = tuple(value or ())
        elif value is None and opt.default is not None:
            value = opt.default
        out[opt.target] = value
    return out


def options_part(args: Sequence[str]) -> list[str]:
    """The words of a raw command line before `--` (after it: the user's command)."""
    return list(args[:list(args).index("--")] if "--" in args else args)


def hint(args: Sequence[str], name: str, table: Sequence[Opt] = PLAN) -> str | None:
    """Option NAME's value in a raw command line, read before typer parses it, so that `hpcai
    launch` can start asking the engine about the image while typer loads (~40 ms): the last
    `FLAG VALUE` or `FLAG=VALUE` before `--`, else the option's environment variable. Only a hint:
    typer's parse is the one that counts, and a wrong hint costs one unused answer."""
    import os

    opt = next(o for o in table if o.name == name)
    words = options_part(args)
    value = None
    for i, word in enumerate(words):
        flag, eq, rest = word.partition("=")
        if flag in opt.flags:
            value = rest if eq else (words[i + 1] if i + 1 < len(words) else None)
    return value if value is not None else (os.environ.get(opt.envvar) if opt.envvar else None)


# ---- typer ----------------------------------------------------------------------------------

def _typer_default(opt: Opt) -> Any:
    import typer

    if opt.kind == "flag":
        default: Any = False
    elif opt.required:
        default = ...
    else:
        default = opt.default
    return typer.Option(default, *opt.flags, envvar=opt.envvar, help=opt.help, show_default=opt.kind != "switch")


def command(body: Callable[..., Any], table: Sequence[Opt], argument: tuple[str, Any, Any]) -> Callable[..., Any]:
    """A function typer reads as a command: the positional ARGUMENT `(name, typer.Argument(…),
    type)` and TABLE's options; it calls BODY with every value by name. Its help is BODY's."""
    import inspect  # here: the plan and batch scripts need the table, neither inspect nor typing
    from typing import Optional

    annotations = {"str": Optional[str], "int": Optional[int], "float": Optional[float], "flag": bool,
                   "list": Optional[list[str]], "switch": Optional[bool]}
    name, info, annotation = argument
    params = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=info,
                                annotation=annotation)]
    params += [inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=_typer_default(o),
                                 annotation=annotations[o.kind]) for o in table]

    def cmd(**values: Any) -> Any:  # click passes every parameter by name
        return body(**values)

    cmd.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
    cmd.__annotations__ = {p.name: p.annotation for p in params}
    cmd.__doc__ = body.__doc__
    cmd.__name__ = body.__name__
    return cmd


# ---- the arguments that reproduce a plan ----------------------------------------------------

def options_argv(opts: Any) -> list[str]:
    """`hpcai launch` arguments that reproduce LaunchOptions `opts` (a secret --env value is left to
    the environment: `--env NAME` copies it in the job)."""
    from hpcai.redact import is_secret_pair

    out: list[str] = []
    for opt in PLAN:
        value = getattr(opts, opt.target)
        values = value if opt.kind == "list" else (value,)
        for one in values:
            if opt.kind == "flag":
                out += [opt.flags[0]] if one else []
                continue
            if opt.kind == "switch":  # --x/--no-x: None (not given) writes nothing
                out += [] if one is None else [opt.flags[0].split("/")[0 if one else 1]]
                continue
            if one in (None, ""):
                continue
            text = str(one)
            if opt.name == "env":
                name, _, secret = text.partition("=")
                text = name if is_secret_pair(name, secret) else text
            # `--srun-arg=--exclusive`: a value that starts with a dash is joined to its flag
            out += [f"{opt.flags[0]}={text}"] if text.startswith("-") else [opt.flags[0], text]
    if opts.cmd:
        return out + ["--cmd", "--", *opts.cmd]
    return out + ["--", opts.payload, *opts.payload_args]
