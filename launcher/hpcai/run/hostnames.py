"""MASTER_ADDR and MASTER_PORT on the host side, so no one writes `scontrol … | head -1` again.

MASTER_ADDR is the first host of the allocation (Slurm host lists such as `nid[001234-001300]`
are expanded with python-hostlist), plus the site's suffix (JSC: `i`, the IPoIB name that crosses
InfiniBand cells), resolved to an address when it resolves. MASTER_PORT follows enroot's
`50-slurm-pytorch.sh` rule so every tool that derives it from the job id agrees.
This module is stdlib-only apart from hostlist (imported lazily, for --dry-run speed).
"""

from __future__ import annotations

from collections.abc import Callable

DEFAULT_PORT = 29500


_HOST_CHARS = "host names are letters, digits, '.', '_' and '-', with [a-b,c] ranges"


def _host_chars(nodelist: str) -> bool:
    import re

    return bool(re.fullmatch(r"[A-Za-z0-9_.\-\[\],]+", nodelist))


def check_hostlist(nodelist: str) -> str | None:
    """Why NODELIST (a user's --nodelist) is not a Slurm host list (`nid[001-004,010],login1`) or
    a file of host names (srun -w takes a path with a '/'), or None when it is one. The whole list
    is expanded: this is input to check once, not the allocation's list on every launch."""
    if "/" in nodelist:
        return None if nodelist.startswith("/") and nodelist.isprintable() else "a host file must be an absolute path"
    if not _host_chars(nodelist):
        return _HOST_CHARS
    import hostlist

    try:
        hostlist.expand_hostlist(nodelist)
    except (hostlist.BadHostlist, IndexError, ValueError) as exc:
        return f"not a host list ({exc or 'unbalanced brackets'})"
    return None


def first_host(nodelist: str) -> str:
    """First host of a Slurm host list; only the first bracket group is expanded. ValueError for a
    malformed list (e.g. a damaged SLURM_JOB_NODELIST: no MASTER_ADDR from it)."""
    nodelist = nodelist.strip()
    if not nodelist or not _host_chars(nodelist):
        raise ValueError(f"malformed host list {nodelist!r}")
    if "[" not in nodelist and "]" not in nodelist:
        return nodelist.split(",", 1)[0]
    import hostlist  # lazy: only needed for bracketed lists

    try:
        return _first_of_brackets(nodelist, hostlist)
    except (hostlist.BadHostlist, IndexError, ValueError):
        raise ValueError(f"malformed host list {nodelist!r}") from None


def _first_of_brackets(nodelist: str, hostlist) -> str:
    """The first host, expanding only the first bracket group (hostlist: the lazily imported module)."""
    # Expanding 4,096 hosts to take one is wasteful: cut the list at the first top-level comma.
    depth, end = 0, len(nodelist)
    for i, ch in enumerate(nodelist):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            end = i
            break
    head = nodelist[:end]
    if head.count("[") > 1:  # multi-dimensional names (a[1-2]b[3-4]): rare, expand fully
        return hostlist.expand_hostlist(head)[0]
    prefix, _, rest = head.partition("[")
    first_range = rest.split(",", 1)[0].rstrip("]").split("-", 1)[0]
    return hostlist.expand_hostlist(f"{prefix}[{first_range}]{head.rsplit(']', 1)[1]}")[0]


def master_addr(nodelist: str, suffix: str = "",
                resolve: Callable[[str], str | None] | None = None) -> tuple[str, str | None]:
    """(address, warning). With a suffix, `<host><suffix>` is resolved when `resolve` finds it."""
    host = first_host(nodelist)
    if not suffix:
        return host, None
    name = host + suffix
    addr = resolve(name) if resolve else None
    if addr:
        return addr, None
    return name, f"{name} does not resolve here; MASTER_ADDR={name} is passed unresolved"


def master_port(job_id: str | int | None, fixed: int = 0, copies: int = 1) -> int:
    """The site's fixed port, else enroot's `SLURM_JOB_ID % 4536 + 61000`, else 29500. With COPIES
    per-GPU copies per node listening on base … base+COPIES-1, a job-id base that would pass 65535
    becomes `61000 + id % (4536 - (COPIES-1))`: the shim's rule (entrypoints/hpcai-shim), so the
    plan and the ranks agree on the port also under sbatch, where only the shim knows the id."""
    if fixed:
        return fixed
    try:
        job = int(job_id)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return DEFAULT_PORT
    top = max(copies, 1) - 1
    base = job % 4536 + 61000
    if base + top > 65535 and top < 4536:
        base = 61000 + job % (4536 - top)
    return base
