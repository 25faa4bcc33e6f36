"""What planning knows of the rank shim (entrypoints/hpcai-shim), kept next to it: when a step
needs the shim, the names it gives containers and peer groups, which ranks share a node's
container, and its command line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hpcai import record
from hpcai.run.model import Backend, Geometry, LaunchOptions, PayloadCall
from hpcai.run.runtimes import Runtime
from hpcai.run.host import Host
from hpcai.run.site import SiteProfile


def group_word(run_dir: Path) -> str:
    """The run's part of container, peer group and instance names: letters, digits, . _ - only
    (Apptainer's instance names and docker's container names allow no more)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", run_dir.name).strip("-.") or "run"


def container_name(run_dir: Path) -> str:
    return "hpcai-" + group_word(run_dir)


def mpi_world(call: PayloadCall, opts: LaunchOptions, geom: Geometry, backend: Backend) -> bool:
    """The ranks form one MPI world, started by srun or mpiexec (the local backend's ranks are
    worlds of one): a payload that needs MPI, or a command given an MPI plugin (--mpi). Only then
    do a node's ranks share a charliecloud container: they all start before any ends (MPI_Init
    waits for every rank), which ch-run's --join needs, and the rank shim names their group."""
    return (not backend.per_rank and not geom.per_gpu
            and (call.needs_mpi or opts.mpi not in (None, "none")))


def shares_nodes(runtime: Runtime, call: PayloadCall, opts: LaunchOptions, geom: Geometry, backend: Backend) -> bool:
    """A node's ranks form a peer group: those of one MPI world (mpi_world), and for a runtime
    whose group any rank may join at any time (apptainer's instance: `groups_any_ranks`) every
    rank a launcher starts several of per node (MPI whether or not hpcai knows it, as a --cmd with
    the site's host MPI; NCCL's and MPICH's shared memory under --containall)."""
    if runtime.groups_any_ranks:
        return not backend.per_rank and not geom.per_gpu
    return mpi_world(call, opts, geom, backend)


def joins(runtime: Runtime, spec: Any) -> bool:
    """The ranks on one node join one container, a peer group named per node (charliecloud)."""
    return runtime.joins and spec.peers > 1


def needs_shim(runtime: Runtime, site: SiteProfile, backend: Backend, opts: LaunchOptions, spec: Any) -> bool:
    """The rank shim is needed for per-rank container names and environment forwarding, for the
    name of a node's peer group, for PALS logs, for --per-gpu worlds, and when no entrypoint will
    set the rank variables."""
    return (runtime.engine or joins(runtime, spec) or backend.shim_logs or opts.per_gpu or opts.no_entrypoint
            or runtime.clean_env(site))


def forward_options(runtime: Runtime) -> list[str]:
    """How the shim hands the rank's variables to the container: the runtime's declared style."""
    if runtime.shim_forward == "env":  # APPTAINERENV_ -> APPTAINER: the shim adds ENV_ and _BIND
        return ["--forward", "env", "--prefix", runtime.env_prefix.removesuffix("ENV_")]
    return ["--forward", runtime.shim_forward]


def shim_argv(host: Host, runtime: Runtime, site: SiteProfile, backend: Backend, spec: Any, run_dir: Path,
              master_addr: str | None, per_gpu: bool, grouped: bool) -> list[str]:
    # Format: /bin/sh …/entrypoints/hpcai-shim --forward flags --name hpcai-{jobid}-RUN-{rank} --pass 'SLURM_*'
    #         [--suffix i] [--master-addr A] [--port P] [--per-gpu] --exit-dir RUN/logs
    # (charliecloud: --forward join-tag --name hpcai-{jobid}-RUN-{node}, the node's peer group)
    # (apptainer: --forward env --prefix APPTAINER; --start TOKEN… is the command that starts the
    #  node's instance, named by --name)
    log_dir = str(run_dir / record.LOGS)
    shim = [*host.shim(), *forward_options(runtime)]
    if runtime.engine or grouped:
        shim += ["--name", f"hpcai-{{jobid}}-{group_word(run_dir)}-{{{'node' if grouped else 'rank'}}}"]
    if grouped:
        shim += [arg for token in runtime.group_start(spec) for arg in ("--start", token)]
    if runtime.clean_env(site):
        for pattern in site.pass_env:
            shim += ["--pass", pattern]
    if site.master_addr_suffix:
        shim += ["--suffix", site.master_addr_suffix]
    if master_addr:
        shim += ["--master-addr", master_addr]
    if site.master_port:
        shim += ["--port", str(site.master_port)]
    if per_gpu:
        shim.append("--per-gpu")
    shim += ["--exit-dir", log_dir]
    if backend.shim_logs:
        shim += ["--log-dir", log_dir]
    return shim
