"""Site profiles: what a supercomputer needs from a launch, as validated data.

A site is one TOML file (`launcher/hpcai/run/sites/*.toml`, then `~/.config/hpcai/sites/`, then each
folder of `HPCAI_SITE_PATH`, later folders overriding earlier ones by file name). The schema
below holds every key with its default; an unknown key is an error listing the valid ones.
Detection matches the host name against each site's `hostnames` regexes; with no match the site
is `generic-slurm` when `srun` exists and `local` otherwise.

Everything that looks at the host (globs, `ldconfig -p`, DNS, PATH) goes through `Host`, so plans
are pure functions of (options, site, host) and tests can pass a `FakeHost`-like object.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Iterator

from hpcai import files
from hpcai.run.backends import BACKENDS  # the registries: no implementation is imported
from hpcai.errors import UsageError, has_control, unknown
from hpcai.resources import package_file
from hpcai.run.host import Host, version_key
from hpcai.run.slurm_options import SBATCH_OWN, SRUN_OWN, owned_option
from hpcai.schema import Key, Shape, Table
from hpcai.run.options import MPI_TYPES  # declared with --mpi, the launch option
from hpcai.run.runtimes import RUNTIMES
from hpcai.run.slingshot import PROFILES

GPU_KINDS = ("nvidia", "amd", "none")
# The system tags of CARAML's JUBE files (FZJ-JSC/CARAML @59cba3e): a site naming one gets that
# system's values from a payload's `--profile caraml` ([launch.caraml] rows, payloads/*/payload.toml).
CARAML_SYSTEMS = ("JEDI", "GH200", "WAIH100", "H100", "A100", "MI250", "GC200")
# Forwarded into the container at run time even with a clean environment (values differ per rank).
DEFAULT_PASS_ENV = ("SLURM_*", "SLURMD_NODENAME", "SLINGSHOT_*", "PMI*", "PALS_*", "OMPI_*", "HPCAI_*",
                    "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")


@dataclass(frozen=True)
class MpiSwap:
    """`mpi_swap = { lib = …, deps = […] }`: the host's MPICH-ABI MPI (Cray MPICH) swapped into
    MPICH images by the entrypoint's 15-host-mpi hook; Open MPI images cannot take it."""

    lib: str                        # glob of the host folder holding libmpi.so.12; the newest match is bound
    deps: tuple[str, ...] = ()      # globs of the files it loads (GTL, PMI, PALS, libfabric): newest per name
    mpi: str = ""                   # the srun --mpi type the host MPI needs (Cray: cray_shasta); "" keeps
                                    # the image MPI's own choice (MPICH: pmi2)
    dest: str = "/host/mpi"         # in the container: DEST/lib, and DEST/depN for the deps' folders


@dataclass(frozen=True)
class SiteProfile:
    """One site. Every field's default is the schema; TOML keys use Slurm's/Apptainer's words."""

    name: str
    source: str = ""                    # file it was read from
    description: str = ""
    hostnames: tuple[str, ...] = ()     # regexes searched in the short and full host name
    backend: str = "srun"               # srun | mpiexec | flux | local
    runtime: str = "apptainer"          # the preferred runtime, used unless --runtime names another
    runtimes: tuple[str, ...] = ()      # the runtimes this site offers, preferred first; () unknown
    mpi: str = ""                       # srun --mpi value; "" leaves the cluster default
    mpi_types: tuple[str, ...] = ()     # the --mpi types this Slurm offers (srun --mpi=list); () unknown
    gpu: str = "none"                   # nvidia (--nv, --gpus) | amd (--rocm, /dev/kfd) | none
    gpus_per_node: int = 0
    cpus_per_node: int = 0              # >0: --cpus-per-task defaults to cpus_per_node / tasks
    distribution: str = ""              # srun --distribution
    cpu_bind: str = ""                  # srun --cpu-bind (mpiexec: --cpu-bind)
    srun_options: tuple[str, ...] = ()  # extra srun tokens, verbatim
    sbatch_options: tuple[str, ...] = ()  # extra `#SBATCH` options for `hpcai submit`
    pbs_resources: str = ""             # PBS Pro: added to each `select` chunk, e.g. "system=polaris"
    pbs_options: tuple[str, ...] = ()   # PBS Pro: extra `#PBS` lines for `hpcai submit`, e.g. "-l filesystems=home"
    flux_options: tuple[str, ...] = ()  # Flux: extra `# flux:` lines for `hpcai submit`, e.g. "--setattr=thp=always"
    libfabric: str = ""                 # glob of the host libfabric dir ("" = no fabric swap)
    libfabric_dest: str = "/host/lib"
    fabric_profile: str = ""            # "slingshot": entrypoints/hooks.d/slingshot-env.sh, under [env]
    fabric_hooks: bool = True           # a runtime with its own fabric hooks (ce) uses them, not the swap
    mpi_swap: MpiSwap | None = None     # the host MPI to swap into MPICH images (run/mpi_swap.py)
    binds: tuple[str, ...] = ()         # SRC[:DST], always bound
    optional_binds: tuple[str, ...] = ()  # SRC[:DST], bound only when SRC exists
    env: dict[str, str] = field(default_factory=dict)  # container environment (never overrides --env)
    pass_env: tuple[str, ...] = DEFAULT_PASS_ENV
    containall: bool = True             # apptainer --containall
    cleanenv: bool = True               # apptainer --cleanenv (pass_env is forwarded explicitly)
    apptainer_command: str = "exec"     # exec: entrypoint named explicitly | run: the %runscript
    apptainer_userns: bool = False      # apptainer --userns: user-namespace mode, for sites whose Apptainer
                                        # has no setuid starter (false: Apptainer's own choice)
    master_addr_suffix: str = ""        # JSC: "i"
    master_port: int = 0                # 0: derived from the job id
    partition: str = ""
    account: str = ""
    caraml_system: str = ""             # CARAML's tag for this machine (CARAML_SYSTEMS); "" none
    image_cache: str = ""               # hpcai stage's site cache, on a shared file system ("" = the default)
    node_cache: str = ""                # hpcai stage's node-local cache, the same path on every node


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
BIND_SHAPE = "/SRC[:/DST[:ro|rw]] with absolute paths and no ':' or ',' inside a path"
BIND_OPTIONS = ("ro", "rw")  # what Apptainer's --bind and docker -v both take after the destination


def bind_ok(spec: str) -> bool:
    """One bind, /SRC[:/DST[:ro|rw]]. Apptainer splits --bind on ',' and ':', docker -v on ':': a
    path holding either cannot be bound; a relative one would mean a different folder on each node."""
    parts = spec.split(":")
    src, dst = parts[0], (parts[1] if len(parts) > 1 else parts[0])
    return (len(parts) <= 2 or (len(parts) == 3 and parts[2] in BIND_OPTIONS)) and src.startswith("/") \
        and dst.startswith("/") and "," not in spec and not has_control(spec)


# The shape of the values the launch writes into argv, binds and generated scripts, checked when
# the site is read so a shared site file cannot smuggle a second command or a relative bind in.
_PART = r"[^:,\x00-\x1f\x7f-\x9f]*"  # a path part a bind can hold (has_control's characters left out)
_BIND = Shape(bind_ok, BIND_SHAPE, rf"^/{_PART}(:/{_PART}(:(ro|rw))?)?$")
_PATH = rf"^/{_PART}$"
_SHAPES: dict[str, Shape] = {
    "binds": _BIND,
    "optional_binds": _BIND,
    "libfabric_dest": Shape(lambda v: ":" not in v and bind_ok(v), "an absolute path without ':' or ','", _PATH),
    "libfabric": Shape(lambda v: not v or (":" not in v and bind_ok(v)), "an absolute path or glob",
                       rf"^(/{_PART})?$"),
    "image_cache": Shape(lambda v: not v or (":" not in v and bind_ok(v)), "an absolute path", rf"^(/{_PART})?$"),
    "node_cache": Shape(lambda v: not v or (":" not in v and bind_ok(v)), "an absolute path", rf"^(/{_PART})?$"),
    "pass_env": Shape(re.compile(r"[A-Za-z_][A-Za-z0-9_]*\*?").fullmatch, "a variable name, optionally ending in *",
                      r"^[A-Za-z_][A-Za-z0-9_]*\*?$"),
    "master_addr_suffix": Shape(re.compile(r"[A-Za-z0-9.-]*").fullmatch, "host name characters", r"^[A-Za-z0-9.-]*$"),
    "pbs_resources": Shape(re.compile(r"([A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9_.+-]+(:[A-Za-z_][A-Za-z0-9_]*="
                                      r"[A-Za-z0-9_.+-]+)*)?").fullmatch, "NAME=VALUE[:NAME=VALUE…]",
                           r"^([A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9_.+-]+(:[A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9_.+-]+)*)?$"),
    "pbs_options": Shape(lambda v: v.startswith("-") and not has_control(v), "a qsub option such as "
                         "'-l filesystems=home:eagle', on one line", r"^-[^\x00-\x1f\x7f-\x9f]*$"),
    "flux_options": Shape(lambda v: v.startswith("-") and not has_control(v), "a flux batch option such as "
                          "'--setattr=thp=always', on one line", r"^-[^\x00-\x1f\x7f-\x9f]*$"),
}
# Numbers: one bound each, which the launch options' checks read too (run/scheduler.py).
GPUS_PER_NODE_MAX = 64
CPUS_PER_NODE_MAX = 4096
_RANGES: dict[str, tuple[int, int, str]] = {
    "gpus_per_node": (0, GPUS_PER_NODE_MAX, f"between 0 and {GPUS_PER_NODE_MAX}"),
    "cpus_per_node": (0, CPUS_PER_NODE_MAX, f"between 0 and {CPUS_PER_NODE_MAX}"),
    "master_port": (0, 65535, "a port between 1 and 65535, or 0 (from the job id)"),
}
_OWNED = {"srun_options": SRUN_OWN, "sbatch_options": SBATCH_OWN}  # the options each list may not set
_MULTILINE = ("description",)  # shown, never written into a command or script
_CHOICES = {"backend": BACKENDS, "runtime": RUNTIMES, "runtimes": RUNTIMES, "gpu": GPU_KINDS,
            "fabric_profile": PROFILES, "caraml_system": ("",) + CARAML_SYSTEMS,
            "mpi": ("",) + MPI_TYPES, "mpi_types": MPI_TYPES, "apptainer_command": ("exec", "run")}


def _default(f) -> Any:
    return f.default_factory() if callable(f.default_factory) else f.default  # type: ignore[misc]


def _owned_rule(owned: dict[str, str]):
    def rule(key: str, one: str) -> str | None:
        why = owned_option(one, owned)
        return f"{why}; {key} is for options hpcai has no setting for" if why else None
    return rule


def _batch_rule(key: str, one: str) -> str | None:
    """pbs_options and flux_options: what the scheduler's module writes itself is refused."""
    from importlib import import_module

    why = import_module({"pbs_options": "hpcai.run.pbs", "flux_options": "hpcai.run.flux_batch"}[key]).owned(one)
    return f"{why}; {key} is for options hpcai has no setting for" if why else None


_SWAP_KEYS = {f.name for f in fields(MpiSwap)}


def _mpi_swap(path: str, raw: Any) -> MpiSwap:
    """The `mpi_swap` table: every path absolute and bindable, `mpi` one of the srun types."""
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: mpi_swap must be a table like {{ lib = \"/opt/cray/pe/mpich/*/ofi/gnu/*/"
                         f"lib-abi-mpich\", deps = [...] }}, got {raw!r}")
    bad = sorted(set(raw) - _SWAP_KEYS)
    if bad or "lib" not in raw:
        raise UsageError(f"{path}: mpi_swap {'key(s) ' + ', '.join(bad) if bad else 'needs lib'}; "
                         f"valid: {', '.join(sorted(_SWAP_KEYS))} (lib required)")
    deps = raw.get("deps", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise UsageError(f"{path}: mpi_swap.deps must be a list of path globs, got {deps!r}")
    for key in ("lib", "mpi", "dest"):
        if not isinstance(raw.get(key, ""), str):
            raise UsageError(f"{path}: mpi_swap.{key} must be a string, got {raw[key]!r}")
    for key, one in [("lib", raw["lib"]), ("dest", raw.get("dest", "/host/mpi"))] + [("deps", d) for d in deps]:
        if ":" in one or not bind_ok(one) or one.rstrip("/") in ("", "/host"):
            raise UsageError(f"{path}: mpi_swap.{key} {one!r}: expected an absolute path (or glob) without "
                             "':' or ',', on one line")
    if raw.get("mpi", "") not in ("",) + MPI_TYPES:
        raise UsageError(f"{path}: mpi_swap.mpi {raw['mpi']!r} is not one of: {', '.join(MPI_TYPES)}")
    return MpiSwap(lib=raw["lib"], deps=tuple(deps), mpi=raw.get("mpi", ""), dest=raw.get("dest", "/host/mpi"))


_MPI_SWAP_JSON = {
    "type": "object", "additionalProperties": False, "required": ["lib"],
    "properties": {"lib": {"type": "string", "pattern": _PATH}, "deps": {"type": "array", "items": {"type": "string",
                   "pattern": _PATH}}, "mpi": {"type": "string", "enum": ["", *MPI_TYPES]},
                   "dest": {"type": "string", "pattern": _PATH, "default": "/host/mpi"}}}


def _key(f) -> Key:
    low, high, said = _RANGES.get(f.name, (None, None, ""))
    if f.name == "mpi_swap":
        return Key(f.name, None, parse=_mpi_swap, json=_MPI_SWAP_JSON)
    return Key(f.name, _default(f), choices=_CHOICES.get(f.name, ()), low=low, high=high, range_text=said,
               shape=_SHAPES.get(f.name), multiline=f.name in _MULTILINE,
               rule=_owned_rule(_OWNED[f.name]) if f.name in _OWNED
               else _batch_rule if f.name in ("pbs_options", "flux_options") else None)


# A site file's keys: SiteProfile's fields (their defaults are the types), with the rules above.
SCHEMA = Table([_key(f) for f in fields(SiteProfile) if f.name not in ("name", "source")], "site")


def parse_site(name: str, text: str, source: str = "") -> SiteProfile:
    """Validate one site TOML against the schema (unknown keys list the valid ones)."""
    label = source or name
    raw = files.parse_toml(text, label)  # malformed or nested too deep: one line naming the file
    values = SCHEMA.read(label, raw)
    for pattern in values.get("hostnames", ()):
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UsageError(f"{label}: bad hostnames regex {pattern!r}: {exc}") from None
    offered, preferred = values.get("runtimes", ()), values.get("runtime", SCHEMA.keys["runtime"].default)
    if offered and preferred not in offered:
        raise UsageError(f"{label}: runtime {preferred!r} is not among the site's runtimes: {', '.join(offered)}")
    return SiteProfile(name=name, source=source, **values)


def site_dirs() -> list[Path]:
    """Search path, lowest priority first."""
    dirs = [package_file("run", "sites"), Path.home() / ".config" / "hpcai" / "sites"]
    dirs += [Path(p) for p in os.environ.get("HPCAI_SITE_PATH", "").split(":") if p]
    return dirs


def site_files() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for d in site_dirs():
        for p in sorted(d.glob("*.toml")) if d.is_dir() else ():
            found[p.stem] = p
    return found


def available_sites() -> list[str]:
    return sorted(site_files())


# A site file is a page of TOML; anything far larger is not one (a link to a log, /dev/zero).
SITE_MAX_BYTES = 1 << 20


def load_site(name: str) -> SiteProfile:
    """Read and validate one site file: only a regular file up to SITE_MAX_BYTES (a FIFO in a
    shared HPCAI_SITE_PATH would hang every launch that detects its site), as UTF-8 TOML nested no
    deeper than hpcai.files allows; anything else is one UsageError line naming the file."""
    path = site_files().get(name)
    if path is None:
        raise unknown("site", name, available_sites())
    try:
        text = files.read_text(path, SITE_MAX_BYTES)
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return parse_site(name, text, str(path))


def iter_sites(context: str) -> Iterator[SiteProfile]:
    """Every readable site (alphabetical), read as they are taken. A broken site file is skipped
    with one warning line naming it and CONTEXT: one user's bad file (or FIFO) in a shared search
    path must not stop every launch or listing (asking for it by name still gives its error)."""
    for name in available_sites():
        try:
            site = load_site(name)
        except UsageError as exc:
            from hpcai.output import warn

            warn(f"site {name} skipped in {context}: {exc}")
            continue
        yield site


def detect_site(host: Host | None = None, sites: Iterable[SiteProfile] | None = None) -> str:
    """First site (alphabetical) whose hostnames regex matches; else generic-slurm or local.
    SITES: the profiles already read (default: iter_sites, warning of each broken file)."""
    host = host or Host()
    names = {host.hostname(), host.fqdn()}
    for site in iter_sites("detection") if sites is None else sites:
        for pattern in site.hostnames:
            if any(re.search(pattern, n) for n in names if n):
                return site.name
    return "generic-slurm" if host.which("srun") else "local"


def resolve_site(name: str | None, host: Host | None = None) -> SiteProfile:
    """--site, else $HPCAI_SITE, else detection."""
    return load_site(name or os.environ.get("HPCAI_SITE") or detect_site(host))


def split_bind(spec: str) -> tuple[str, str]:
    """(SRC, DST[:ro|rw]): a bind's option stays on its destination, as runtimes write it."""
    src, _, dst = spec.partition(":")
    return src, (dst or src)


def bind_dest(dst: str) -> str:
    """The destination path of a bind's DST[:ro|rw] (one mount per destination)."""
    return dst.split(":", 1)[0]


def host_libfabric(site: SiteProfile, host: Host) -> str | None:
    """Newest match of the site's libfabric glob, else the loader's libfabric.so.1 folder."""
    if not site.libfabric:
        return None
    matches = sorted(host.glob(site.libfabric), key=version_key, reverse=True)
    return matches[0] if matches else host.ldconfig_dir("libfabric.so.1")


def site_binds(site: SiteProfile, host: Host) -> tuple[list[tuple[str, str]], list[str]]:
    """(binds, warnings): libfabric first, then required binds, then optional ones that exist."""
    binds: list[tuple[str, str]] = []
    warnings: list[str] = []
    if site.libfabric:
        lib = host_libfabric(site, host)
        if lib:
            binds.append((lib, site.libfabric_dest))
        else:
            warnings.append(f"no host libfabric ({site.libfabric} or ldconfig): the image's own is used")
    binds += [split_bind(b) for b in site.binds]
    binds += [split_bind(b) for b in site.optional_binds if host.exists(split_bind(b)[0])]
    return binds, warnings
