"""plan_launch: LaunchOptions → LaunchPlan, decided before anything runs.

`plan_launch(opts)` is a pure function of the options, the site profile and what `Host` reports:
it writes nothing (the record folder is claimed where the launch or submit happens:
`claimed_plan`). Every bad input (unknown site, runtime, payload or variable, malformed
--env/--bind, a missing image) raises UsageError on the way, so nothing is started for a launch
that cannot work. The decisions are small modules over the data model (run/model.py): binds and
environment (environment.py), the payload's part (payload_call.py), the scheduler's values and
the geometry (scheduler.py), the rank shim (shim.py); this module puts them together into the
commands each backend runs. Commands are token lists; `shlex.join` is only for display.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from hpcai import record
from hpcai.errors import HpcaiError, UsageError, one_line
from hpcai.labels import RUN, facts
from hpcai.run.backends import get_backend
from hpcai.run.edf import hooks_on
from hpcai.run.environment import check_copy_ports, host_mpi, secret_process_env, surroundings
from hpcai.run.gpu import choose_gpu
from hpcai.run.model import Backend, LaunchOptions, LaunchPlan, PayloadCall
from hpcai.run.payload_call import check_mpi_launch, payload_call
from hpcai.run.pmi import choose_pmi
from hpcai.paths import ENTRYPOINT
from hpcai.run.runtimes import ContainerSpec, Runtime, get_runtime, step
from hpcai.run.scheduler import geometry, with_profile
from hpcai.run.shim import container_name, joins, needs_shim, shares_nodes, shim_argv
from hpcai.run.host import Host
from hpcai.run.site import SiteProfile, resolve_site

Wrap = Callable[[list[str]], list[str]]


@dataclass
class Commands:
    """What the backend runs: one argv (srun, mpiexec), or one per rank (local)."""

    argv: list[str]
    rank_argvs: list[list[str]] = field(default_factory=list)
    rank_envs: list[dict[str, str]] = field(default_factory=list)
    container_names: list[str] = field(default_factory=list)
    master_addr: str | None = None
    master_port: int | None = None
    step_env: dict[str, str] = field(default_factory=dict)  # a plugin runtime's values for srun's environment
    files: dict[str, str] = field(default_factory=dict)     # a plugin runtime's files in the record (ce: EDF)
    warnings: list[str] = field(default_factory=list)


def plan_launch(opts: LaunchOptions, host: Host | None = None, check: bool = True) -> LaunchPlan:
    """The full plan. check=False (dry-run) does not require the image to exist here."""
    host = host or Host()
    env_now = host.environ()
    site = resolve_site(opts.site, host)
    runtime = get_runtime(opts.runtime or site.runtime)
    backend = get_backend(opts.backend or site.backend)
    here = opts.staged_from or opts.image  # a staged image is read here from its site copy
    if check:
        runtime.prefetch(here)  # an engine answers while the binds are worked out
    around = surroundings(opts, site, host, runtime, check)
    labels = check_image(runtime, here) if check else _labels_if_here(runtime, here)
    image = facts(labels)
    call = payload_call(opts, image.payloads, image.family, site)
    opts = with_profile(opts, call.launch)
    swap = host_mpi(opts, site, host, image.mpi, around.binds, around.env, call.needs_mpi)
    warnings = around.warnings + swap.warnings
    job_id = env_now.get("SLURM_JOB_ID") if backend.slurm else None
    run_dir = _run_dir(opts, call.label, job_id)
    geom = geometry(opts, site, backend, env_now, str(run_dir / record.LOGS), call.srun_args,
                    call.launch.get("cpus_per_node", 0))
    check_mpi_launch(call, backend, geom)
    warnings += _pull_per_node(opts, runtime, geom.nodes)
    if backend.slurm:
        mpi, note = ((swap.pmi, "") if swap.pmi and opts.mpi is None
                     else choose_pmi(swap.rank_mpi, opts.mpi, site, call.needs_mpi))
        geom = replace(geom, mpi=mpi)
        warnings += [note] if note else []
    gpu, note = choose_gpu(site.gpu, geom.gpus_per_node, image.family)
    warnings += [note] if note else []
    spec = ContainerSpec(
        image=opts.image, command=tuple(call.command),
        entrypoint="" if opts.no_entrypoint else ENTRYPOINT,
        payload=() if opts.cmd else tuple(call.command[1:]),  # hpcai-bench's arguments, for the runscript
        binds=tuple(swap.binds), env=tuple(swap.env.items()), secret_names=tuple(around.secret_env),
        gpu=gpu, containall=site.containall, cleanenv=site.cleanenv, apptainer_command=site.apptainer_command,
        userns=site.apptainer_userns if opts.userns is None else opts.userns,
        labels=((RUN, run_dir.name),) if runtime.engine else (),
        peers=geom.ntasks_per_node if shares_nodes(runtime, call, opts, geom, backend) else 1,
        # ch-convert always writes /ch/environment; a hand-made image folder may lack it.
        image_env=not Path(here).is_dir() or (Path(here) / "ch" / "environment").is_file(),
        fabric_hooks=hooks_on(site, runtime), mpi=image.mpi, run_dir=str(run_dir))
    _check_plugin(runtime, spec, backend, opts)
    if check:  # apptainer: can it run in the mode the site asks for?
        runtime.check_mode(spec)
    if opts.energy:
        warnings += _energy_preflight()
    wrap = _energy_wrapper(run_dir) if opts.energy else list
    plan = LaunchPlan(site=site.name, site_source=site.source, backend=backend, runtime=runtime,
                      image=opts.image, payload=call.label, payload_vars=call.overrides, command=call.command,
                      profiles=list(opts.profiles), payload_values=call.values,
                      geometry=geom, binds=swap.binds, container_env=swap.env, argv=[],
                      run_dir=str(run_dir), job_id=job_id, energy=opts.energy, warnings=warnings,
                      cluster=env_now.get("SLURM_CLUSTER_NAME") if job_id else None,
                      image_labels=labels, done_file=_done_file(opts.done_file), staged_from=opts.staged_from,
                      # once on this host, before srun starts the ranks (sarus pull)
                      prepare=runtime.prepare(opts.image) if backend.slurm else [])
    if backend.per_rank:
        made = _local_commands(plan, spec, runtime, host, wrap)
    else:
        made = _step_commands(plan, spec, runtime, backend, site, host, opts, wrap)
    return replace(plan, argv=made.argv, rank_argvs=made.rank_argvs, rank_envs=made.rank_envs,
                   container_names=made.container_names, master_addr=made.master_addr,
                   master_port=made.master_port, files=made.files, warnings=warnings + made.warnings,
                   # the plugin's values with the secrets: the process environment, never argv
                   secret_env={**made.step_env, **secret_process_env(around.secret_env, runtime)})


def claimed_plan(opts: LaunchOptions, check: bool = True) -> LaunchPlan:
    """plan_launch, its record folder claimed for this run (an exclusive mkdir; --output-dir is
    claimed when the record starts: record.claim_logs). A name another launch took between the
    plan's look and the claim (runs started together) is planned again: the next look passes it by."""
    while True:
        plan = plan_launch(opts, check=check)
        if opts.output_dir or record.claim_name(Path(plan.run_dir)):
            return plan


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


def check_image(runtime: Runtime, image: str) -> dict[str, str]:
    """Fail (exit 2) when the image is missing; return its labels where the runtime can read them."""
    if runtime.image_is_file and not Path(image).exists():
        raise UsageError(f"image not found: {image} (the {runtime.name} runtime takes a file "
                         "or folder path)")
    return runtime.labels(image)


def _labels_if_here(runtime: Runtime, image: str) -> dict[str, str]:
    """A dry-run's labels: the image need not be here, but where it is, its labels (its MPI) count."""
    if runtime.image_is_file and not Path(image).exists():
        return {}
    try:
        return runtime.labels(image)
    except (HpcaiError, OSError):
        return {}


def _local_commands(plan: LaunchPlan, spec: ContainerSpec, runtime: Runtime, host: Host, wrap: Wrap) -> Commands:
    """One command per rank, each with its rank variables (and container name for docker)."""
    from hpcai.run.backends.local import rank_env

    port = int(plan.container_env.get("MASTER_PORT") or host.free_port())
    made = Commands(argv=[], master_addr="127.0.0.1", master_port=port)
    g = plan.geometry
    if g.per_gpu:
        check_copy_ports(port, g.ntasks, "MASTER_PORT" if "MASTER_PORT" in plan.container_env
                         else "the free port for MASTER_PORT")
    for rank in range(g.ntasks):
        renv = rank_env(rank, g.ntasks, port, g.per_gpu, spec.gpu)
        renv = {k: v for k, v in renv.items() if k not in plan.container_env}  # --env wins
        name = f"{container_name(Path(plan.run_dir))}-{rank}" if runtime.engine else ""
        rspec = replace(spec, env=tuple({**renv, **plan.container_env}.items()), name=name)
        made.rank_argvs.append(wrap(runtime.argv(rspec)))
        made.rank_envs.append(renv)
        made.container_names += [name] if name else []
    made.argv = made.rank_argvs[0]
    return made


def _step_commands(plan: LaunchPlan, spec: ContainerSpec, runtime: Runtime, backend: Backend, site: SiteProfile,
                   host: Host, opts: LaunchOptions, wrap: Wrap) -> Commands:
    """srun / mpiexec: one argv for every task; the shim does the per-rank part on the node."""
    g, container_env, run_dir = plan.geometry, plan.container_env, Path(plan.run_dir)
    made = Commands(argv=[])
    made.master_addr, made.master_port, made.warnings = _rendezvous(plan, site, host, opts)
    if not needs_shim(runtime, site, backend, opts, spec):
        # ch-run (and apptainer without --cleanenv) inherit SLURM_*; the image's entrypoint turns
        # them into rank variables, so no per-rank shim is needed.
        extra = {"MASTER_ADDR": made.master_addr, "MASTER_PORT": made.master_port,
                 "HPCAI_MASTER_ADDR_SUFFIX": None if made.master_addr else site.master_addr_suffix}
        extra = {k: str(v) for k, v in extra.items() if v and k not in container_env}
        spec = replace(spec, env=tuple({**extra, **container_env}.items()))
        command = wrap(runtime.argv(spec))
    else:
        if step(runtime, spec) is not None:
            # A plugin runtime runs srun's command, the shim included, inside the container: the
            # shim's folder (it sources the entrypoint beside it) and its exit files' are mounted.
            shim_dir, log_dir = str(Path(host.shim()[-1]).parent), str(run_dir / record.LOGS)
            spec = replace(spec, binds=(*spec.binds, (shim_dir, f"{shim_dir}:ro"), (log_dir, log_dir)))
        shim = shim_argv(host, runtime, site, backend, spec, run_dir, made.master_addr, g.per_gpu,
                         joins(runtime, spec))
        command = wrap(shim + ["--"] + runtime.argv(spec))
    part = step(runtime, spec)  # a plugin runtime's srun options, the values they name, its files
    if part:
        made.step_env, made.files = dict(part.env), dict(part.files)
    made.argv = backend.prefix(g) + (list(part.options) if part else []) + command
    return made


def _rendezvous(plan: LaunchPlan, site: SiteProfile, host: Host,
                opts: LaunchOptions) -> tuple[str | None, int | None, list[str]]:
    """(MASTER_ADDR, MASTER_PORT, warnings) known at planning time; None: the rank shim or the
    entrypoint computes it per step. --per-gpu copies use a port each, which must all fit."""
    from hpcai.run import hostnames

    g, env_now, warnings = plan.geometry, host.environ(), []
    addr = port = None
    # The allocation's first host is the step's only when the step spans the whole allocation.
    nodelist = opts.nodelist or (env_now.get("SLURM_JOB_NODELIST", "")
                                 if str(opts.nodes) == env_now.get("SLURM_JOB_NUM_NODES") else "")
    if nodelist and not g.per_gpu and not nodelist.startswith("/"):
        try:
            addr, warn = hostnames.master_addr(nodelist, site.master_addr_suffix, host.resolve)
        except ValueError as exc:  # SLURM_JOB_NODELIST damaged: the entrypoint finds the address itself
            warn = f"{exc}: MASTER_ADDR is left to the entrypoint"
        warnings += [warn] if warn else []
    if plan.job_id or site.master_port:
        port = hostnames.master_port(plan.job_id, site.master_port, g.ntasks_per_node if g.per_gpu else 1)
    if g.per_gpu:  # the shim gives each copy base + its local rank (entrypoints/hpcai-shim)
        if plan.container_env.get("MASTER_PORT"):
            check_copy_ports(int(plan.container_env["MASTER_PORT"]), g.ntasks_per_node, "MASTER_PORT")
        if site.master_port:  # a job-id port is moved down to fit (hostnames.master_port)
            check_copy_ports(port, g.ntasks_per_node, f"site {site.name}: master_port",
                             f"master_port = N in site {site.name}")
    return addr, port, warnings


def _check_plugin(runtime: Runtime, spec: ContainerSpec, backend: Backend, opts: LaunchOptions) -> None:
    """A plugin runtime (pyxis) exists only as srun options, and runs everything srun starts
    inside the container, where the host's Python of --energy's wrapper is not."""
    if step(runtime, spec) is None:
        return
    if not backend.slurm:
        raise UsageError(f"the {runtime.name} runtime is a plugin of srun: use --backend srun "
                         f"(for --backend {backend.name}, --runtime enroot starts the same image)")
    if opts.energy:
        raise UsageError(f"--energy wraps each rank in the host's Python, which the {runtime.name} container "
                         "does not have; measure with another runtime")


def _pull_per_node(opts: LaunchOptions, runtime: Runtime, nodes: int) -> list[str]:
    """Many nodes, each pulling the image from a registry itself: say so, and offer the stage."""
    from hpcai.run.runtimes.enroot import is_file

    pulled = "://" in opts.image or (runtime.name == "pyxis" and not is_file(opts.image))
    if nodes <= 1 or not pulled or opts.stage or runtime.engine:
        return []
    return [f"each of the {nodes} nodes pulls and converts {opts.image} itself; --stage converts it once by digest "
            "and broadcasts it to node-local storage (hpcai stage)"]


def _done_file(name: str) -> str:
    """--done-file NAME, absolute (a batch job runs where it was submitted from; a JUBE step in its
    work folder), refused now if it could not be written then (files.check_output's rules)."""
    if not name:
        return ""
    from hpcai import files

    return str(files.check_output(Path(one_line("--done-file", name)).absolute(), "--done-file"))


def _energy_preflight() -> list[str]:
    """Why --energy will measure nothing on this host, if so (the run goes on unmeasured)."""
    from hpcai.run import energy

    _, why = energy.preflight()
    return [why] if why else []


def _energy_wrapper(run_dir: Path) -> Wrap:
    from hpcai.run.energy import wrap_argv

    energy_dir = str(run_dir / record.ENERGY)
    return lambda argv: wrap_argv(list(argv), energy_dir)


__all__ = ["Commands", "LaunchOptions", "LaunchPlan", "PayloadCall", "check_image", "claimed_plan", "plan_launch"]
