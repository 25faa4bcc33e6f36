"""LaunchPlan = backend ∘ runtime ∘ entrypoint ∘ payload, each a token list, decided before anything runs.

`plan_launch(opts)` is a pure function of the options, the site profile and what `Host` reports;
every bad input (unknown site, runtime, payload or variable, malformed --env/--bind, a missing
image) raises UsageError here, so nothing is started for a launch that cannot work.
Commands are token lists; `shlex.join` is only for display.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from hpcai.run import record
from hpcai.run.backends import Backend, Geometry, get_backend
from hpcai.errors import HpcaiError, UsageError, has_control, one_line, unknown
from hpcai.run.gpu import choose_gpu
from hpcai.run.pmi import choose_pmi
from hpcai.run.runtimes import Runtime, step
from hpcai.run.slingshot import profile_env
from hpcai.run.edf import hooks_on, without_swap
from hpcai.run.site import (ENV_NAME, MPI_TYPES, SRUN_OWN, Host, SiteProfile, bind_dest, bind_ok, owned_option,
                        resolve_site, site_binds, split_bind)


DATA_MOUNT = "/data"  # where --data appears inside the container (HPCAI_DATA)


@dataclass
class LaunchOptions:
    """What `hpcai launch` was asked; also the Python API used by `hpcai sweep`."""

    image: str
    payload: str | None = None            # payload name; None with cmd
    payload_args: tuple[str, ...] = ()    # var=value overrides
    profiles: tuple[str, ...] = ()        # payload profiles (hpcai-bench --profile NAME), in order
    srun_args: tuple[str, ...] = ()       # extra srun options, verbatim (--srun-arg)
    cmd: tuple[str, ...] = ()             # raw command (--cmd … -- ARGS)
    nodes: int | None = 1                 # None (no -N): the payload profile's ([launch.<profile>]), else 1
    ntasks_per_node: int | None = None    # default: site GPUs per node, else 1
    gpus_per_node: int | None = None
    cpus_per_task: int | None = None
    time: str = ""
    partition: str = ""
    account: str = ""
    site: str | None = None               # default: $HPCAI_SITE, else autodetect
    runtime: str | None = None            # default: the site's
    backend: str | None = None            # default: the site's
    binds: tuple[str, ...] = ()           # SRC[:DST]
    data: str = ""                        # a dataset/model folder, mounted at DATA_MOUNT (--data)
    env: tuple[str, ...] = ()             # KEY=VALUE, or KEY to copy the host's value
    mpi: str | None = None
    per_gpu: bool = False
    nodelist: str = ""
    output_dir: str | None = None
    runs_root: str = "runs"
    energy: bool = False
    no_entrypoint: bool = False
    host_mpi: bool | None = None          # the site's mpi_swap: None = for MPICH images (run/mpi_swap.py)
    userns: bool | None = None            # apptainer --userns; None: the site's apptainer_userns
    done_file: str = ""                   # written once the run has ended (--done-file)


@dataclass
class LaunchPlan:
    site: str
    site_source: str
    backend: str
    runtime: str
    image: str
    payload: str                          # payload name, or "cmd"
    payload_vars: dict[str, str]
    command: list[str]                    # in-container argv after the entrypoint
    geometry: Geometry
    binds: list[tuple[str, str]]
    container_env: dict[str, str]        # public variables, passed as runtime flags
    argv: list[str]                       # srun/mpiexec: the command; local: rank 0's
    rank_argvs: list[list[str]] = field(default_factory=list)   # local backend only
    rank_envs: list[dict[str, str]] = field(default_factory=list)
    container_names: list[str] = field(default_factory=list)
    run_dir: str = ""
    job_id: str | None = None
    master_addr: str | None = None        # None: computed per step by the rank shim
    master_port: int | None = None
    energy: bool = False
    image_labels: dict[str, str] = field(default_factory=dict)
    secret_env: dict[str, str] = field(default_factory=dict, repr=False)  # process env only (secrets, pyxis values)
    warnings: list[str] = field(default_factory=list)
    profiles: list[str] = field(default_factory=list)  # payload profiles, as given
    payload_values: dict[str, str] = field(default_factory=dict)  # every variable, resolved
    files: dict[str, str] = field(default_factory=dict)  # name in the run record -> text (ce: its EDF)
    prepare: list[list[str]] = field(default_factory=list)  # run once before the step (sarus pull)
    done_file: str = ""                   # absolute; written with the final state once the record is final

    @property
    def commands(self) -> list[list[str]]:
        return self.rank_argvs or [self.argv]

    def display(self) -> str:
        """Every command, shell-quoted with secrets redacted: one line per rank for local."""
        from hpcai.redact import redact_argv

        return "\n".join(shlex.join(redact_argv(a)) for a in self.commands)

    def to_json(self) -> dict[str, Any]:
        """plan.json (argv and environment redacted)."""
        from hpcai import __version__
        from hpcai.redact import redact_argv, redact_env
        from hpcai.resources import git_sha

        g = self.geometry
        return {
            "hpcai_version": __version__, "git_sha": git_sha(),
            "site": self.site, "site_source": self.site_source,
            "backend": self.backend, "runtime": self.runtime, "image": self.image,
            "payload": self.payload, "payload_vars": self.payload_vars, "profiles": self.profiles,
            "payload_values": self.payload_values,
            "command": redact_argv(self.command),
            "argv": redact_argv(self.argv),
            "rank_argvs": [redact_argv(a) for a in self.rank_argvs],
            "env": redact_env({**self.container_env, **self.secret_env}),
            "binds": [f"{s}:{d}" for s, d in self.binds],
            "nodes": g.nodes, "ntasks_per_node": g.ntasks_per_node, "ntasks": g.ntasks,
            "gpus_per_node": g.gpus_per_node, "cpus_per_task": g.cpus_per_task,
            "per_gpu": g.per_gpu, "mpi": g.mpi, "partition": g.partition, "account": g.account,
            "time": g.time, "in_allocation": g.in_allocation, "geometry": asdict(g),
            "job_id": self.job_id, "master_addr": self.master_addr,
            "master_port": self.master_port, "energy": self.energy,
            "image_labels": self.image_labels, "run_dir": self.run_dir, "warnings": self.warnings,
        }


def parse_env(items: tuple[str, ...], host_env: dict[str, str]) -> dict[str, str]:
    from hpcai.redact import REDACTED

    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not ENV_NAME.fullmatch(name):
            # the key only: the value of a mistyped item is often the secret (`--env 'HF TOKEN=hf_…'`)
            shown = f"{name}={REDACTED}" if sep else name
            raise UsageError(f"--env {shown!r}: expected KEY=VALUE or KEY with KEY a variable name")
        if not sep:
            if name not in host_env:
                raise UsageError(f"--env {name}: not set in this environment; use --env {name}=VALUE")
            value = host_env[name]
        out[name] = value
    check_rank_vars(out, "--env")
    return out


# The rank and size variables hpcai sets for each rank, from the launcher (Slurm, PMI/PALS, Open
# MPI, PMIx) or the local backend, and the entrypoint reads: its HPCAI__RANKS and HPCAI__SIZES
# (entrypoints/hpcai-entrypoint; a test keeps the two lists equal). One value from --env or a
# site's env would reach every rank after hpcai's own and win (`docker run -e` takes the last), so
# every rank would be the same rank of a wrong world size and the run would end "successfully".
# MASTER_ADDR and MASTER_PORT are not here: one value for all ranks is what they are, and they may
# be set (MASTER_PORT must then be a port: _check_master_port).
RANK_VARS = frozenset((
    "SLURM_PROCID SLURM_LOCALID SLURM_NODEID OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_LOCAL_RANK PMI_RANK "
    "PMI_LOCAL_RANK PALS_RANKID PALS_LOCAL_RANKID PALS_NODEID MPI_LOCALRANKID PMIX_RANK RANK LOCAL_RANK NODE_RANK "
    "SLURM_STEP_NUM_TASKS SLURM_NTASKS SLURM_NPROCS SLURM_NTASKS_PER_NODE SLURM_STEP_NUM_NODES SLURM_JOB_NUM_NODES "
    "SLURM_NNODES HPCAI_NNODES OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_SIZE PMI_SIZE PMI_LOCAL_SIZE "
    "MPI_LOCALNRANKS WORLD_SIZE LOCAL_WORLD_SIZE").split())


def check_rank_vars(env: dict[str, str], source: str) -> None:
    """Refuse a rank or size variable (RANK_VARS) set by --env or a site's env: one line naming it."""
    name = next((k for k in env if k in RANK_VARS), None)
    if name is not None:
        raise UsageError(f"{source} {name}: hpcai sets {name} for each rank from the launcher; one value for "
                         f"all ranks would make them all the same rank or size; leave it out "
                         f"(MASTER_ADDR and MASTER_PORT may be set)")


def _check_master_port(env: dict[str, str], source: str) -> None:
    """A MASTER_PORT someone sets (--env, a site's env) must be a TCP port: every rank's
    rendezvous listens on or dials it, and the local backend counts ports up from it."""
    value = env.get("MASTER_PORT")
    if value is not None and not (re.fullmatch(r"[0-9]{1,5}", value) and 1 <= int(value) <= 65535):
        raise UsageError(f"{source} MASTER_PORT={value!r}: expected a port between 1 and 65535")


def _check_copy_ports(base: int, copies: int, source: str, fix: str = "--env MASTER_PORT=N") -> None:
    """--per-gpu copies on a node listen on base, base+1, … base+copies-1: the last one must still
    be a TCP port, or the highest copies would fail to bind long after the launch."""
    if base + copies - 1 > 65535:
        raise UsageError(f"{source} is {base}: {copies} per-GPU copies per node would use ports up to "
                         f"{base + copies - 1}, past 65535; use a base port of at most {65536 - copies} ({fix})")


def parse_binds(items: tuple[str, ...]) -> list[tuple[str, str]]:
    """`--bind /SRC[:/DST]`, repeatable, each also a comma list as Apptainer takes it
    (`--bind A:/host/lib,/usr:/host/usr`)."""
    out = []
    for item in items:
        for one in item.split(","):
            if not bind_ok(one):
                raise UsageError(f"--bind {item!r}: expected /SRC[:/DST[:ro|rw]][,…] with absolute paths "
                                 "and no ':' inside a path")
            out.append(split_bind(one))
    return out


def _data_bind(data: str, check: bool) -> list[tuple[str, str]]:
    """`--data DIR`: the folder payloads read real datasets and weights from (hf-clm: WikiText-2,
    GPT-2), mounted at DATA_MOUNT with HPCAI_DATA pointing there. It must exist where hpcai runs
    (on a cluster, the shared file system the nodes see)."""
    if not data:
        return []
    path = Path(data).absolute()
    if check and not path.is_dir():
        raise UsageError(f"--data {data}: no such folder (give the folder that holds the datasets and models)")
    return parse_binds((f"{path}:{DATA_MOUNT}",))


def merge_binds(site: list[tuple[str, str]], user: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[str]]:
    """(binds, notes): a user's bind replaces the site's bind to the same destination (one mount
    per destination; the last --bind of several to one destination wins)."""
    mine = {bind_dest(dst): (src, dst) for src, dst in user}
    notes = [f"--bind {':'.join(mine[bind_dest(dst)])} replaces the site's {src}:{dst}" for src, dst in site
             if bind_dest(dst) in mine and mine[bind_dest(dst)] != (src, dst)]
    kept = [(src, dst) for src, dst in site if bind_dest(dst) not in mine]
    return kept + list(mine.values()), notes


def parse_vars(args: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for arg in args:
        name, sep, value = arg.partition("=")
        if not sep or not ENV_NAME.fullmatch(name):
            raise UsageError(f"payload argument {arg!r}: expected var=value (or use --cmd for a raw command)")
        out[name] = value
    return out


class PayloadCall(NamedTuple):
    label: str                 # payload name, or "cmd"
    overrides: dict[str, str]  # var=value as given
    command: list[str]         # in-container argv after the entrypoint
    values: dict[str, str]     # every variable as the image's runner resolves it
    needs_mpi: bool            # the manifest's requires.mpi
    srun_args: tuple[str, ...] = ()  # the chosen profiles' workflow scheduler options ([launch.*])
    launch: dict[str, Any] = {}      # and their nodes, time, cpus_per_node/_task ([launch.*])


def _payload(opts: LaunchOptions, valid: list[str] | None, family: str | None = None,
             site: SiteProfile | None = None) -> PayloadCall:
    """What runs in the container; the variables resolved as the image's runner will resolve them
    (defaults, the family's profile, --profile, overrides). The manifest is read once, here."""
    if opts.cmd:
        if opts.payload or opts.payload_args:
            raise UsageError("give either a payload name or --cmd with a raw command, not both")
        if opts.profiles:
            raise UsageError("--profile sets a payload's variables; a --cmd command has none")
        return PayloadCall("cmd", {}, list(opts.cmd), {}, False)
    from hpcai import payloads
    from hpcai.run.runtimes import BENCH

    packaged = payloads.available_payloads()
    known = valid if valid is not None else packaged
    if not opts.payload:
        raise UsageError(f"no payload given; valid: {', '.join(known)}")
    if opts.payload not in known:
        raise unknown("payload", opts.payload, known)
    overrides = parse_vars(opts.payload_args)
    values: dict[str, str] = {}
    needs_mpi = False
    srun_args: tuple[str, ...] = ()
    launch: dict[str, Any] = {}
    if opts.payload in packaged:  # unknown profiles and variables fail here
        manifest = payloads.load_payload(opts.payload)
        known_profiles = sorted(manifest.raw.get("profiles", {}))
        for name in opts.profiles:
            if name not in known_profiles:
                raise UsageError(f"payload {opts.payload} has no profile {name!r}; its profiles: "
                                 f"{', '.join(known_profiles) or 'none'}")
        values = manifest.validate_vars(overrides, family=family, profiles=opts.profiles)
        needs_mpi = manifest.needs_mpi
        srun_args = manifest.srun_args(opts.profiles)
        facts = {name: getattr(site, name) for name in payloads.SITE_FACTS} if site else {}
        launch = manifest.launch_defaults(opts.profiles, values, facts)
    profile_args = [arg for name in opts.profiles for arg in ("--profile", name)]
    command = [BENCH, *profile_args, opts.payload, *(f"{k}={v}" for k, v in overrides.items())]
    return PayloadCall(opts.payload, overrides, command, values, needs_mpi, srun_args, launch)


def _check_mpi_launch(call: PayloadCall, backend: Backend, geom: Geometry) -> None:
    """A payload that needs one MPI world cannot run under the local backend with several ranks:
    its N containers would each be an MPI world of one (and report "ranks 1")."""
    if call.needs_mpi and backend.per_rank and geom.ntasks > 1 and not geom.per_gpu:
        raise UsageError(f"payload {call.label} needs an MPI process manager, which the local backend is not "
                         f"({geom.ntasks} ranks would be {geom.ntasks} MPI worlds of 1): launch it with "
                         "srun --mpi=pmix (--backend srun) or mpirun (--backend mpiexec)")


def _srun_args(args: tuple[str, ...], source: str = "--srun-arg") -> tuple[str, ...]:
    """`--srun-arg=--exclusive` …: options srun takes that hpcai has no flag for (HPE's Llama runs:
    --ntasks-per-socket=1 --sockets-per-node=4 --exclusive), after the site's own srun_options.
    source names where they came from (--srun-arg, or a payload profile's srun_args) in the error;
    site.owned_option is the one check of the options hpcai sets itself, for every source."""
    for arg in args:
        if not arg.startswith("-") or arg in ("-", "--") or has_control(arg):
            raise UsageError(f"{source} {arg!r}: expected one srun option such as --exclusive or "
                             "--ntasks-per-socket=1, on one line")
        why = owned_option(arg, SRUN_OWN)
        if why:
            raise UsageError(f"{source} {arg!r}: {why}; {source} is for options hpcai has no flag for")
    return tuple(args)


# Sizes beyond any machine: a typo (an extra digit), refused before Slurm sees it.
_LIMITS = {"--nodes": 100_000, "--ntasks-per-node": 4096, "--gpus-per-node": 64, "--cpus-per-task": 4096}


def _positive(name: str, value: int | None) -> None:
    if value is None:
        return
    low = 1 if name in ("--nodes", "--ntasks-per-node") else 0
    if not low <= value <= _LIMITS[name]:
        raise UsageError(f"{name} must be between {low} and {_LIMITS[name]}, got {value}")


# Slurm's --time formats (sbatch(1)): minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
_TIME = re.compile(r"\d+(:\d+){0,2}|\d+-\d+(:\d+){0,2}|(?i:infinite|unlimited)")


def check_repeat(repeat: int) -> None:
    if repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {repeat}")


def _scheduler_values(opts: LaunchOptions) -> None:
    """The values srun, sbatch and the record take as one word each: refused here, for launch,
    submit and sweep alike, before anything is planned or written."""
    from hpcai.run import hostnames

    for flag, value in (("--partition", opts.partition), ("--account", opts.account), ("--time", opts.time),
                        ("--nodelist", opts.nodelist), ("--image", opts.image)):
        one_line(flag, value)
    if opts.time and not _TIME.fullmatch(opts.time):
        raise UsageError(f"--time {opts.time!r}: expected minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, "
                         "D-HH:MM:SS or UNLIMITED (as sbatch takes it)")
    why = hostnames.check_hostlist(opts.nodelist) if opts.nodelist else None
    if why:
        raise UsageError(f"--nodelist {opts.nodelist!r}: {why}")
    if not opts.image.strip():
        raise UsageError("--image is empty: give a SIF or SquashFS file, an image folder or an image name")


def _with_profile(opts: LaunchOptions, launch: dict[str, Any]) -> LaunchOptions:
    """The payload profile's -N, --time and --cpus-per-task ([launch.<profile>]) where the command
    line gave none (cpus_per_node is split over the ranks in _geometry)."""
    from dataclasses import replace

    return replace(opts, nodes=launch.get("nodes", 1) if opts.nodes is None else opts.nodes,
                   time=opts.time or launch.get("time", ""),
                   cpus_per_task=launch.get("cpus_per_task") if opts.cpus_per_task is None else opts.cpus_per_task)


def _geometry(opts: LaunchOptions, site: SiteProfile, backend: Backend, env: dict[str, str],
              log_dir: str, profile_srun_args: tuple[str, ...] = (), profile_cpus_per_node: int = 0) -> Geometry:
    for name, value in (("--nodes", opts.nodes), ("--ntasks-per-node", opts.ntasks_per_node),
                        ("--gpus-per-node", opts.gpus_per_node), ("--cpus-per-task", opts.cpus_per_task)):
        _positive(name, value)
    _scheduler_values(opts)
    gpus = site.gpus_per_node if opts.gpus_per_node is None else opts.gpus_per_node
    tasks = opts.ntasks_per_node or (gpus or 1)
    if opts.per_gpu:
        if not gpus:
            raise UsageError("--per-gpu needs GPUs: give --gpus-per-node (the site has none)")
        tasks = gpus  # one independent copy per GPU
    cpus = opts.cpus_per_task
    if cpus is None and profile_cpus_per_node:  # the workflow's CPUs per node, split as the site's
        cpus = max(profile_cpus_per_node // tasks, 1)
    if cpus is None and site.cpus_per_node:
        cpus = max(site.cpus_per_node // tasks, 1)  # the node's CPUs split evenly
    mpi = site.mpi if opts.mpi is None else opts.mpi
    if mpi and mpi not in MPI_TYPES:
        raise unknown("mpi type", mpi, MPI_TYPES)
    if backend.per_rank and opts.nodes != 1:
        raise UsageError(f"the local backend runs on this machine only: --nodes must be 1, got {opts.nodes}")
    return Geometry(
        nodes=opts.nodes, ntasks_per_node=tasks, cpus_per_task=cpus or 0, gpus_per_node=gpus,
        per_gpu=opts.per_gpu, mpi=mpi, distribution=site.distribution, cpu_bind=site.cpu_bind,
        partition=opts.partition or site.partition, account=opts.account or site.account,
        time=opts.time, nodelist=opts.nodelist, in_allocation=bool(env.get("SLURM_JOB_ID")),
        log_dir=log_dir if backend.slurm else "",
        # the site's srun options, then the profile's workflow's, then the user's own (last wins)
        extra=(*site.srun_options, *_srun_args(profile_srun_args, "payload profile srun_args"),
               *_srun_args(opts.srun_args))
        if backend.slurm else ())


def _run_dir(opts: LaunchOptions, label: str, job_id: str | None) -> Path:
    given, what = (opts.output_dir, "--output-dir") if opts.output_dir else (opts.runs_root, "the runs folder")
    if given:  # a file where a folder belongs, anywhere on the path: one line before anything starts
        for part in [Path(given), *Path(given).parents]:
            if part.exists() and not part.is_dir():
                raise UsageError(f"{what} {given}: {part} is a file, not a folder")
    if opts.output_dir:
        out = Path(opts.output_dir)
        if record.is_run_dir(out):
            raise UsageError(f"--output-dir {out} already holds a run record; a run never overwrites another")
        return out.absolute()
    return record.new_run_dir(Path(opts.runs_root).absolute(), label, job_id)


def _container_name(run_dir: Path) -> str:
    return "hpcai-" + group_word(run_dir)


def check_image(runtime_name: str, runtime: Any, image: str) -> dict[str, str]:
    """Fail (exit 2) when the image is missing; return its labels where the runtime can read them."""
    if runtime.image_is_file and not Path(image).exists():
        raise UsageError(f"image not found: {image} (the {runtime_name} runtime takes a file "
                         "or folder path)")
    return runtime.labels(image)


def _labels_if_here(runtime: Any, image: str) -> dict[str, str]:
    """A dry-run's labels: the image need not be here, but where it is, its labels (its MPI) count."""
    if runtime.image_is_file and not Path(image).exists():
        return {}
    try:
        return runtime.labels(image)
    except (HpcaiError, OSError):
        return {}


def plan_launch(opts: LaunchOptions, host: Host | None = None, check: bool = True) -> LaunchPlan:
    """The full plan. check=False (dry-run) does not require the image to exist here."""
    from hpcai.redact import redact_argv, secret_flags, secret_items
    from hpcai.run.runtimes import ENTRYPOINT, ContainerSpec, get_runtime

    host = host or Host()
    env_now = host.environ()
    site = resolve_site(opts.site, host)
    runtime_name = opts.runtime or site.runtime
    runtime = get_runtime(runtime_name)
    backend = get_backend(opts.backend or site.backend)
    if check:
        runtime.prefetch(opts.image)  # an engine answers while the binds are worked out
    # the fabric profile's defaults, the site's own values over them, the user's over both
    user_env = parse_env(opts.env, env_now)
    _check_master_port(user_env, "--env")
    check_rank_vars(site.env, f"site {site.name}: env")
    if "MASTER_PORT" not in user_env:  # --env wins over the site's value, a bad one included
        _check_master_port(site.env, f"site {site.name}: env")
    container_env = {**profile_env(site.fabric_profile, site.gpu), **site.env, **user_env}
    secret_env = secret_items(container_env)  # by name or by value (URL user-info, AccountKey=…)
    container_env = {k: v for k, v in container_env.items() if k not in secret_env}
    binds, warnings = site_binds(site, host)
    if hooks_on(site, runtime):  # ce: its own hooks bring the host fabric, not hpcai's swap
        binds, container_env = without_swap(site, binds, container_env, keep=user_env)
    if opts.runtime and site.runtimes and opts.runtime not in site.runtimes:
        warnings.append(f"site {site.name} lists the runtimes {', '.join(site.runtimes)}; "
                        f"{opts.runtime} may not be installed there")
    warnings += [f"--cmd passes a value after {flag}: it is in the command line, which `ps` shows on every node; "
                 f"pass it in the environment (--env NAME) instead" for flag in secret_flags(opts.cmd)]
    if not secret_flags(opts.cmd) and redact_argv(list(opts.cmd)) != list(opts.cmd):
        warnings.append("--cmd passes a value shaped like a secret (a token, a Bearer credential, a URL's password): "
                        "hpcai's output hides it, but it is in the command line, which `ps` shows on every node; "
                        "pass it in the environment (--env NAME) instead")
    binds, notes = merge_binds(binds, [*parse_binds(opts.binds), *_data_bind(opts.data, check)])
    if opts.data:
        container_env["HPCAI_DATA"] = DATA_MOUNT
    warnings += notes
    labels = check_image(runtime_name, runtime, opts.image) if check else _labels_if_here(runtime, opts.image)
    image_payloads = [p for p in labels.get("hpcai.payloads", "").split(",") if p] or None
    call = _payload(opts, image_payloads, labels.get("hpcai.family"), site)
    opts = _with_profile(opts, call.launch)
    binds, container_env, image_mpi, host_pmi = _host_mpi(opts, site, host, labels, binds, container_env, warnings,
                                                          call.needs_mpi)
    label, command = call.label, call.command
    job_id = env_now.get("SLURM_JOB_ID") if backend.slurm else None
    run_dir = _run_dir(opts, label, job_id)
    log_dir = str(run_dir / record.LOGS)
    geom = _geometry(opts, site, backend, env_now, log_dir, call.srun_args, call.launch.get("cpus_per_node", 0))
    _check_mpi_launch(call, backend, geom)
    if backend.slurm:
        mpi, note = ((host_pmi, "") if host_pmi and opts.mpi is None
                     else choose_pmi(image_mpi, opts.mpi, site, call.needs_mpi))
        geom = _replace(geom, mpi=mpi)
        warnings += [note] if note else []
    gpu, note = choose_gpu(site.gpu, geom.gpus_per_node, labels)
    warnings += [note] if note else []

    spec = ContainerSpec(
        image=opts.image, command=tuple(command),
        entrypoint="" if opts.no_entrypoint else ENTRYPOINT,
        payload=() if opts.cmd else tuple(command[1:]),  # hpcai-bench's arguments, for the runscript
        binds=tuple(binds), env=tuple(container_env.items()), secret_names=tuple(secret_env),
        gpu=gpu, containall=site.containall, cleanenv=site.cleanenv, apptainer_command=site.apptainer_command,
        userns=site.apptainer_userns if opts.userns is None else opts.userns,
        labels=(("hpcai.run", run_dir.name),) if runtime.engine else (),
        peers=geom.ntasks_per_node if _shares_nodes(runtime, call, opts, geom, backend) else 1,
        # ch-convert always writes /ch/environment; a hand-made image folder may lack it.
        image_env=not Path(opts.image).is_dir() or (Path(opts.image) / "ch" / "environment").is_file(),
        fabric_hooks=hooks_on(site, runtime), mpi=labels.get("hpcai.mpi", ""), run_dir=str(run_dir))
    _check_plugin(runtime_name, runtime, spec, backend, opts)
    if check:  # apptainer: can it run in the mode the site asks for?
        runtime.check_mode(spec)
    plan = LaunchPlan(site=site.name, site_source=site.source, backend=backend.name, runtime=runtime_name,
                      image=opts.image, payload=label, payload_vars=call.overrides, command=command,
                      profiles=list(opts.profiles), payload_values=call.values,
                      geometry=geom, binds=binds, container_env=container_env, argv=[],
                      run_dir=str(run_dir), job_id=job_id, energy=opts.energy, warnings=warnings,
                      secret_env=_secret_process_env(secret_env, runtime), done_file=_done_file(opts.done_file))
    plan.image_labels = labels
    if backend.slurm:  # once on this host, before srun starts the ranks (sarus pull)
        plan.prepare = runtime.prepare(opts.image)
    wrap = _energy_wrapper(run_dir) if opts.energy else (lambda argv: argv)
    if opts.energy:
        plan.warnings += _energy_preflight()
    if backend.per_rank:
        plan = _plan_local(plan, spec, runtime, site, host, wrap)
    else:
        plan = _plan_step(plan, spec, runtime, backend, site, host, opts, wrap)
    if check and not opts.output_dir and not record.claim_name(Path(plan.run_dir)):
        # Another launch took this name between our look and our claim (runs started together):
        # plan again; the next look sees it taken and picks the following name.
        return plan_launch(opts, host, check)
    return plan


def _host_mpi(opts: LaunchOptions, site: SiteProfile, host: Host, labels: dict[str, str],
              binds: list[tuple[str, str]], env: dict[str, str],
              warnings: list[str], needs_mpi: bool) -> tuple[list[tuple[str, str]], dict[str, str], str, str]:
    """(binds, container env, the MPI the ranks run, the host MPI's own srun --mpi type or "") with
    the site's host MPI swapped in when run/mpi_swap.py says so. A user's --bind or --env wins."""
    from hpcai.run import mpi_swap

    image_mpi = labels.get("hpcai.mpi", "")
    on, note = mpi_swap.wanted(site, image_mpi, opts.host_mpi)
    warnings += [note] if note and needs_mpi else []  # a payload of one MPI world: where it matters
    if not on:
        return binds, env, image_mpi, ""
    swap = mpi_swap.plan_swap(site, host, opts.host_mpi)
    warnings += swap.warnings
    if not swap.binds:
        return binds, env, image_mpi, ""
    taken = {bind_dest(dst) for _, dst in binds}
    binds = [b for b in swap.binds if bind_dest(b[1]) not in taken] + binds
    env = {**swap.env, **env}
    # the ranks run the host's MPICH ABI: its own PMI (Cray MPICH: cray_shasta), else MPICH's rule
    return binds, env, "mpich", swap.mpi


def _plan_local(plan: LaunchPlan, spec: Any, runtime: Any, site: SiteProfile, host: Host,
                wrap: Any) -> LaunchPlan:
    """One command per rank, each with its rank variables (and container name for docker)."""
    from hpcai.run.backends.local import rank_env

    port = int(plan.container_env.get("MASTER_PORT") or host.free_port())
    plan.master_addr, plan.master_port = "127.0.0.1", port
    g, named = plan.geometry, runtime.engine
    if g.per_gpu:
        _check_copy_ports(port, g.ntasks, "MASTER_PORT" if "MASTER_PORT" in plan.container_env
                          else "the free port for MASTER_PORT")
    for rank in range(g.ntasks):
        renv = rank_env(rank, g.ntasks, port, g.per_gpu, spec.gpu)
        renv = {k: v for k, v in renv.items() if k not in plan.container_env}  # --env wins
        name = f"{_container_name(Path(plan.run_dir))}-{rank}" if named else ""
        rspec = _replace(spec, env=tuple({**renv, **plan.container_env}.items()), name=name)
        plan.rank_argvs.append(wrap(runtime.argv(rspec)))
        plan.rank_envs.append(renv)
        plan.container_names += [name] if name else []
    plan.argv = plan.rank_argvs[0]
    return plan


def _plan_step(plan: LaunchPlan, spec: Any, runtime: Runtime, backend: Backend, site: SiteProfile, host: Host,
               opts: LaunchOptions, wrap: Any) -> LaunchPlan:
    """srun / mpiexec: one argv for every task; the shim does the per-rank part on the node."""
    from hpcai.run import hostnames

    g, env_now = plan.geometry, host.environ()
    container_env, run_dir = plan.container_env, Path(plan.run_dir)
    # The allocation's first host is the step's only when the step spans the whole allocation.
    nodelist = opts.nodelist or (env_now.get("SLURM_JOB_NODELIST", "")
                                 if str(opts.nodes) == env_now.get("SLURM_JOB_NUM_NODES") else "")
    if nodelist and not g.per_gpu and not nodelist.startswith("/"):
        try:
            plan.master_addr, warn = hostnames.master_addr(nodelist, site.master_addr_suffix, host.resolve)
        except ValueError as exc:  # SLURM_JOB_NODELIST damaged: the entrypoint finds the address itself
            warn = f"{exc}: MASTER_ADDR is left to the entrypoint"
        plan.warnings += [warn] if warn else []
    if plan.job_id or site.master_port:
        plan.master_port = hostnames.master_port(plan.job_id, site.master_port,
                                                 g.ntasks_per_node if g.per_gpu else 1)
    if g.per_gpu:  # the shim gives each copy base + its local rank (entrypoints/hpcai-shim)
        if plan.container_env.get("MASTER_PORT"):
            _check_copy_ports(int(plan.container_env["MASTER_PORT"]), g.ntasks_per_node, "MASTER_PORT")
        if site.master_port:  # a job-id port is moved down to fit (hostnames.master_port)
            _check_copy_ports(plan.master_port, g.ntasks_per_node, f"site {site.name}: master_port",
                              f"master_port = N in site {site.name}")
    if not _needs_shim(runtime, site, backend, opts, spec):
        # ch-run (and apptainer without --cleanenv) inherit SLURM_*; the image's entrypoint turns
        # them into rank variables, so no per-rank shim is needed.
        extra = {"MASTER_ADDR": plan.master_addr, "MASTER_PORT": plan.master_port,
                 "HPCAI_MASTER_ADDR_SUFFIX": None if plan.master_addr else site.master_addr_suffix}
        extra = {k: str(v) for k, v in extra.items() if v and k not in container_env}
        spec = _replace(spec, env=tuple({**extra, **container_env}.items()))
        plan.argv = backend.prefix(g) + _step_options(plan, runtime, spec) + wrap(runtime.argv(spec))
        return plan
    if step(runtime, spec) is not None:
        # A plugin runtime runs srun's command, the shim included, inside the container: the
        # shim's folder (it sources the entrypoint beside it) and its exit files' are mounted.
        shim_dir, log_dir = str(Path(host.shim()[-1]).parent), str(run_dir / record.LOGS)
        spec = _replace(spec, binds=(*spec.binds, (shim_dir, f"{shim_dir}:ro"), (log_dir, log_dir)))
    plan.argv = backend.prefix(g) + _step_options(plan, runtime, spec) + wrap(
        _shim(host, runtime, site, plan, run_dir, backend, _joins(runtime, spec), spec) + ["--"] + runtime.argv(spec))
    return plan


def _check_plugin(name: str, runtime: Runtime, spec: Any, backend: Backend, opts: LaunchOptions) -> None:
    """A plugin runtime (pyxis) exists only as srun options, and runs everything srun starts
    inside the container, where the host's Python of --energy's wrapper is not."""
    if step(runtime, spec) is None:
        return
    if not backend.slurm:
        raise UsageError(f"the {name} runtime is a plugin of srun: use --backend srun "
                         f"(for --backend {backend.name}, --runtime enroot starts the same image)")
    if opts.energy:
        raise UsageError(f"--energy wraps each rank in the host's Python, which the {name} container "
                         "does not have; measure with another runtime")


def _step_options(plan: LaunchPlan, runtime: Runtime, spec: Any) -> list[str]:
    """A plugin runtime's srun options; the values they name go into srun's environment (with
    the secrets: the process environment, never argv)."""
    part = step(runtime, spec)
    if part is None:
        return []
    plan.secret_env = {**dict(part.env), **plan.secret_env}
    plan.files.update(part.files)
    return list(part.options)


def _mpi_world(call: PayloadCall, opts: LaunchOptions, geom: Geometry, backend: Backend) -> bool:
    """The ranks form one MPI world, started by srun or mpiexec (the local backend's ranks are
    worlds of one): a payload that needs MPI, or a command given an MPI plugin (--mpi). Only then
    do a node's ranks share a charliecloud container: they all start before any ends (MPI_Init
    waits for every rank), which ch-run's --join needs, and the rank shim names their group."""
    return (not backend.per_rank and not geom.per_gpu
            and (call.needs_mpi or opts.mpi not in (None, "none")))


def _shares_nodes(runtime: Runtime, call: PayloadCall, opts: LaunchOptions, geom: Geometry, backend: Backend) -> bool:
    """A node's ranks form a peer group: those of one MPI world (_mpi_world), and for a runtime
    whose group any rank may join at any time (apptainer's instance: `groups_any_ranks`) every
    rank a launcher starts several of per node (MPI whether or not hpcai knows it, as a --cmd with
    the site's host MPI; NCCL's and MPICH's shared memory under --containall)."""
    if runtime.groups_any_ranks:
        return not backend.per_rank and not geom.per_gpu
    return _mpi_world(call, opts, geom, backend)


def _joins(runtime: Runtime, spec: Any) -> bool:
    """The ranks on one node join one container, a peer group named per node (charliecloud)."""
    return runtime.joins and spec.peers > 1


def _needs_shim(runtime: Runtime, site: SiteProfile, backend: Backend, opts: LaunchOptions, spec: Any) -> bool:
    """The rank shim is needed for per-rank container names and environment forwarding, for the
    name of a node's peer group, for PALS logs, for --per-gpu worlds, and when no entrypoint will
    set the rank variables."""
    return (runtime.engine or _joins(runtime, spec) or backend.shim_logs or opts.per_gpu or opts.no_entrypoint
            or runtime.clean_env(site))


def _done_file(name: str) -> str:
    """--done-file NAME, absolute (a batch job runs where it was submitted from; a JUBE step in its
    work folder), refused now if it could not be written then (files.check_output's rules)."""
    if not name:
        return ""
    from hpcai import files

    return str(files.check_output(Path(one_line("--done-file", name)).absolute(), "--done-file"))


def group_word(run_dir: Path) -> str:
    """The run's part of container, peer group and instance names: letters, digits, . _ - only
    (Apptainer's instance names and docker's container names allow no more)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", run_dir.name).strip("-.") or "run"


def _shim(host: Host, runtime: Runtime, site: SiteProfile, plan: LaunchPlan, run_dir: Path,
          backend: Backend, joins: bool, spec: Any) -> list[str]:
    # Format: /bin/sh …/entrypoints/hpcai-shim --kind docker --name hpcai-{jobid}-RUN-{rank} --pass 'SLURM_*'
    #         [--suffix i] [--master-addr A] [--port P] [--per-gpu] --exit-dir RUN/logs
    # (charliecloud: --name hpcai-{jobid}-RUN-{node}, the node's peer group)
    # (apptainer: --start TOKEN… is the command that starts the node's instance, named by --name)
    log_dir = str(run_dir / record.LOGS)
    shim = [*host.shim(), "--kind", runtime.name]
    if runtime.engine or joins:
        shim += ["--name", f"hpcai-{{jobid}}-{group_word(run_dir)}-{{{'node' if joins else 'rank'}}}"]
    if joins:
        shim += [arg for token in runtime.group_start(spec) for arg in ("--start", token)]
    if runtime.clean_env(site):
        for pattern in site.pass_env:
            shim += ["--pass", pattern]
    if site.master_addr_suffix:
        shim += ["--suffix", site.master_addr_suffix]
    if plan.master_addr:
        shim += ["--master-addr", plan.master_addr]
    if site.master_port:
        shim += ["--port", str(site.master_port)]
    if plan.geometry.per_gpu:
        shim.append("--per-gpu")
    shim += ["--exit-dir", log_dir]
    if backend.shim_logs:
        shim += ["--log-dir", log_dir]
    return shim


def _secret_process_env(secrets: dict[str, str], runtime: Runtime) -> dict[str, str]:
    prefix = runtime.env_prefix
    # launcher_env: settings the runtime's own program reads (enroot: ENROOT_*)
    return {**runtime.launcher_env, **secrets,
            **{prefix + k: v for k, v in secrets.items() if prefix}}


def _replace(spec, **changes):
    from dataclasses import replace

    return replace(spec, **changes)


def _energy_preflight() -> list[str]:
    """Why --energy will measure nothing on this host, if so (the run goes on unmeasured)."""
    from hpcai.results import energy

    _, why = energy.preflight()
    return [why] if why else []


def _energy_wrapper(run_dir: Path):
    from hpcai.results.energy import wrap_argv

    energy_dir = str(run_dir / record.ENERGY)
    return lambda argv: wrap_argv(list(argv), energy_dir)
