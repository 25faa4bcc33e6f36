"""The scheduler's values of a launch: sizes, --time, one-word values, srun options, and the
Geometry (where and how many ranks) decided from them, the site and the payload's profile.
Refused here, for launch, submit and sweep alike, before anything is planned or written.
"""

from __future__ import annotations

import re
from typing import Any

from hpcai.errors import UsageError, has_control, one_line, unknown
from hpcai.run.model import Backend, Geometry, LaunchOptions
from hpcai.run.options import MPI_TYPES
from hpcai.run.site import GPUS_PER_NODE_MAX, SiteProfile
from hpcai.run.slurm_options import SRUN_OWN, owned_option


def check_srun_args(args: tuple[str, ...], source: str = "--srun-arg") -> tuple[str, ...]:
    """`--srun-arg=--exclusive` …: options srun takes that hpcai has no flag for (HPE's Llama runs:
    --ntasks-per-socket=1 --sockets-per-node=4 --exclusive), after the site's own srun_options.
    source names where they came from (--srun-arg, or a payload profile's srun_args) in the error;
    slurm_options.owned_option is the one check of the options hpcai sets itself, for every source."""
    for arg in args:
        if not arg.startswith("-") or arg in ("-", "--") or has_control(arg):
            raise UsageError(f"{source} {arg!r}: expected one srun option such as --exclusive or "
                             "--ntasks-per-socket=1, on one line")
        why = owned_option(arg, SRUN_OWN)
        if why:
            raise UsageError(f"{source} {arg!r}: {why}; {source} is for options hpcai has no flag for")
    return tuple(args)


# Sizes beyond any machine: a typo (an extra digit), refused before Slurm sees it.
_LIMITS = {"--nodes": 100_000, "--ntasks-per-node": 4096, "--gpus-per-node": GPUS_PER_NODE_MAX, "--cpus-per-task": 4096}


def check_size(name: str, value: int | None) -> None:
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


def check_scheduler_values(opts: LaunchOptions) -> None:
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


def with_profile(opts: LaunchOptions, launch: dict[str, Any]) -> LaunchOptions:
    """The payload profile's -N, --time and --cpus-per-task ([launch.<profile>]) where the command
    line gave none (cpus_per_node is split over the ranks in geometry)."""
    from dataclasses import replace

    return replace(opts, nodes=launch.get("nodes", 1) if opts.nodes is None else opts.nodes,
                   time=opts.time or launch.get("time", ""),
                   cpus_per_task=launch.get("cpus_per_task") if opts.cpus_per_task is None else opts.cpus_per_task)


def geometry(opts: LaunchOptions, site: SiteProfile, backend: Backend, env: dict[str, str],
              log_dir: str, profile_srun_args: tuple[str, ...] = (), profile_cpus_per_node: int = 0) -> Geometry:
    for name, value in (("--nodes", opts.nodes), ("--ntasks-per-node", opts.ntasks_per_node),
                        ("--gpus-per-node", opts.gpus_per_node), ("--cpus-per-task", opts.cpus_per_task)):
        check_size(name, value)
    check_scheduler_values(opts)
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
    if opts.srun_args and not backend.slurm:  # else dropped without a word
        raise UsageError(f"--srun-arg is for srun; the {backend.name} backend starts the ranks without it: "
                         "drop it, or launch on a Slurm site")
    if backend.per_rank and opts.nodes != 1:
        raise UsageError(f"the local backend runs on this machine only: --nodes must be 1, got {opts.nodes}")
    return Geometry(
        nodes=opts.nodes, ntasks_per_node=tasks, cpus_per_task=cpus or 0, gpus_per_node=gpus,
        per_gpu=opts.per_gpu, mpi=mpi, distribution=site.distribution, cpu_bind=site.cpu_bind,
        partition=opts.partition or site.partition, account=opts.account or site.account,
        time=opts.time, nodelist=opts.nodelist,
        in_allocation=bool(backend.allocation_var and env.get(backend.allocation_var)),
        log_dir=log_dir if backend.slurm else "",
        # the site's srun options, then the profile's workflow's, then the user's own (last wins)
        extra=(*site.srun_options, *check_srun_args(profile_srun_args, "payload profile srun_args"),
               *check_srun_args(opts.srun_args))
        if backend.slurm else ())
