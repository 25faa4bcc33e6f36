"""A launch's binds and container environment, decided from the site, the user's options and
the image: the fabric profile's defaults, the site's values over them, the user's over both;
secrets split off to travel in the process environment only; the host's MPI swapped in where the
site says so. Pure: every function returns what it decided.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from hpcai.errors import UsageError
from hpcai.run.edf import hooks_on, without_swap
from hpcai.run.model import DATA_MOUNT, LaunchOptions
from hpcai.run.runtimes import Runtime
from hpcai.run.host import Host
from hpcai.run.site import ENV_NAME, SiteProfile, bind_dest, bind_ok, site_binds, split_bind
from hpcai.run.slingshot import profile_env


class Surroundings(NamedTuple):
    """What the container is given besides its command."""

    binds: list[tuple[str, str]]
    env: dict[str, str]          # public variables, passed as runtime flags
    secret_env: dict[str, str]   # the process environment only
    user_env: dict[str, str]     # --env as given: it wins over the host MPI's variables too
    warnings: list[str]


def surroundings(opts: LaunchOptions, site: SiteProfile, host: Host, runtime: Runtime,
                 check: bool) -> Surroundings:
    """The binds and environment from the site and the user's options (before the image is read)."""
    from hpcai.redact import redact_argv, secret_flags, secret_items

    user_env = parse_env(opts.env, host.environ())
    check_master_port(user_env, "--env")
    check_rank_vars(site.env, f"site {site.name}: env")
    if "MASTER_PORT" not in user_env:  # --env wins over the site's value, a bad one included
        check_master_port(site.env, f"site {site.name}: env")
    env = {**profile_env(site.fabric_profile, site.gpu), **site.env, **user_env}
    secret_env = secret_items(env)  # by name or by value (URL user-info, AccountKey=…)
    env = {k: v for k, v in env.items() if k not in secret_env}
    binds, warnings = site_binds(site, host)
    if hooks_on(site, runtime):  # ce: its own hooks bring the host fabric, not hpcai's swap
        binds, env = without_swap(site, binds, env, keep=user_env)
    if opts.runtime and site.runtimes and opts.runtime not in site.runtimes:
        warnings.append(f"site {site.name} lists the runtimes {', '.join(site.runtimes)}; "
                        f"{opts.runtime} may not be installed there")
    warnings += [f"--cmd passes a value after {flag}: it is in the command line, which `ps` shows on every node; "
                 f"pass it in the environment (--env NAME) instead" for flag in secret_flags(opts.cmd)]
    if not secret_flags(opts.cmd) and redact_argv(list(opts.cmd)) != list(opts.cmd):
        warnings.append("--cmd passes a value shaped like a secret (a token, a Bearer credential, a URL's password): "
                        "hpcai's output hides it, but it is in the command line, which `ps` shows on every node; "
                        "pass it in the environment (--env NAME) instead")
    binds, notes = merge_binds(binds, [*parse_binds(opts.binds), *data_bind(opts.data, check)])
    if opts.data:
        env["HPCAI_DATA"] = DATA_MOUNT
    return Surroundings(binds, env, secret_env, user_env, warnings + notes)


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
# be set (MASTER_PORT must then be a port: check_master_port).
RANK_VARS = frozenset((
    "SLURM_PROCID SLURM_LOCALID SLURM_NODEID OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_LOCAL_RANK FLUX_TASK_RANK "
    "FLUX_TASK_LOCAL_ID PMI_RANK PMI_LOCAL_RANK PALS_RANKID PALS_LOCAL_RANKID PALS_NODEID MPI_LOCALRANKID PMIX_RANK "
    "RANK LOCAL_RANK NODE_RANK SLURM_STEP_NUM_TASKS SLURM_NTASKS SLURM_NPROCS SLURM_NTASKS_PER_NODE "
    "SLURM_STEP_NUM_NODES SLURM_JOB_NUM_NODES SLURM_NNODES HPCAI_NNODES OMPI_COMM_WORLD_SIZE "
    "OMPI_COMM_WORLD_LOCAL_SIZE FLUX_JOB_SIZE FLUX_JOB_NNODES PMI_SIZE PMI_LOCAL_SIZE MPI_LOCALNRANKS WORLD_SIZE "
    "LOCAL_WORLD_SIZE").split())


def check_rank_vars(env: dict[str, str], source: str) -> None:
    """Refuse a rank or size variable (RANK_VARS) set by --env or a site's env: one line naming it."""
    name = next((k for k in env if k in RANK_VARS), None)
    if name is not None:
        raise UsageError(f"{source} {name}: hpcai sets {name} for each rank from the launcher; one value for "
                         f"all ranks would make them all the same rank or size; leave it out "
                         f"(MASTER_ADDR and MASTER_PORT may be set)")


def check_master_port(env: dict[str, str], source: str) -> None:
    """A MASTER_PORT someone sets (--env, a site's env) must be a TCP port: every rank's
    rendezvous listens on or dials it, and the local backend counts ports up from it."""
    value = env.get("MASTER_PORT")
    if value is not None and not (re.fullmatch(r"[0-9]{1,5}", value) and 1 <= int(value) <= 65535):
        raise UsageError(f"{source} MASTER_PORT={value!r}: expected a port between 1 and 65535")


def check_copy_ports(base: int, copies: int, source: str, fix: str = "--env MASTER_PORT=N") -> None:
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


def data_bind(data: str, check: bool) -> list[tuple[str, str]]:
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


class HostMpi(NamedTuple):
    binds: list[tuple[str, str]]
    env: dict[str, str]
    rank_mpi: str        # the MPI the ranks run: the image's, or "mpich" when the host's is swapped in
    pmi: str             # the host MPI's own srun --mpi type, or ""
    warnings: list[str]


def host_mpi(opts: LaunchOptions, site: SiteProfile, host: Host, image_mpi: str,
             binds: list[tuple[str, str]], env: dict[str, str], needs_mpi: bool) -> HostMpi:
    """The binds and container env with the site's host MPI swapped in when run/mpi_swap.py says
    so (image_mpi: the image's hpcai.mpi label). A user's --bind or --env wins."""
    from hpcai.run import mpi_swap

    on, note = mpi_swap.wanted(site, image_mpi, opts.host_mpi)
    warnings = [note] if note and needs_mpi else []  # a payload of one MPI world: where it matters
    if not on:
        return HostMpi(binds, env, image_mpi, "", warnings)
    swap = mpi_swap.plan_swap(site, host, opts.host_mpi)
    warnings += swap.warnings
    if not swap.binds:
        return HostMpi(binds, env, image_mpi, "", warnings)
    taken = {bind_dest(dst) for _, dst in binds}
    binds = [b for b in swap.binds if bind_dest(b[1]) not in taken] + binds
    # the ranks run the host's MPICH ABI: its own PMI (Cray MPICH: cray_shasta), else MPICH's rule
    return HostMpi(binds, {**swap.env, **env}, "mpich", swap.mpi, warnings)


def secret_process_env(secrets: dict[str, str], runtime: Runtime) -> dict[str, str]:
    prefix = runtime.env_prefix
    # launcher_env: settings the runtime's own program reads (enroot: ENROOT_*)
    return {**runtime.launcher_env, **secrets,
            **{prefix + k: v for k, v in secrets.items() if prefix}}
