"""The host MPI swap: whether a launch swaps the site's MPICH-ABI MPI (Cray MPICH) into the image,
and the binds and variables that do it. The entrypoint's 15-host-mpi hook does the rest inside.

On: the site has `mpi_swap` and the image's MPI (its `hpcai.mpi` label) is MPICH, or `--host-mpi`
asks for it (for images without labels: Charliecloud's). Off: `--no-host-mpi`, an Open MPI or
MPI-less image, a site without `mpi_swap`. `--host-mpi` where it cannot work is refused with one
line (exit 2): the MPICH ABI (libmpi.so.12) is not Open MPI's (libmpi.so.40).

Layout in the container (DEST = `mpi_swap.dest`, /host/mpi): the newest folder matching `lib`
at DEST/lib; each dependency file's folder at DEST/depN, the files named in HPCAI_HOST_MPI_DEPS
(`PATH`, or `NAME=PATH` where the host's NAME is a link to a file of another name or folder).
"""

from __future__ import annotations

import os
from typing import NamedTuple

from hpcai.errors import UsageError
from hpcai.run.host import Host, version_key
from hpcai.run.site import SiteProfile, bind_ok

MPI_NAMES = {"ompi": "Open MPI", "none": "no MPI"}


class Swap(NamedTuple):
    binds: list[tuple[str, str]]   # (host folder, container folder)
    env: dict[str, str]            # HPCAI_HOST_MPI_LIB, HPCAI_HOST_MPI_DEPS
    mpi: str                       # the srun --mpi type the host MPI needs ("" = the image's rule)
    warnings: list[str]



def wanted(site: SiteProfile, image_mpi: str, asked: bool | None) -> tuple[bool, str]:
    """(swap or not, a note for the user or ""). asked: --host-mpi (True), --no-host-mpi (False),
    neither (None). Raises UsageError for a --host-mpi that cannot work."""
    if asked is False:
        return False, ""
    if site.mpi_swap is None:
        if asked:
            raise UsageError(f"--host-mpi: site {site.name} has no mpi_swap (the host MPI to swap in); "
                             "add one to its profile (docs/launching.md), or drop --host-mpi")
        return False, ""
    if image_mpi in MPI_NAMES:
        if asked:
            raise UsageError(f"--host-mpi swaps the host's MPICH-ABI libmpi.so.12 into an MPICH image; this "
                             f"image has {MPI_NAMES[image_mpi]} (hpcai.mpi={image_mpi}): build it with --mpi mpich, "
                             "or drop --host-mpi")
        return False, ""
    if image_mpi == "mpich" or asked:
        return True, ""
    return False, (f"site {site.name} swaps its host MPI into MPICH images, and this image's MPI is unknown "
                   "(no hpcai.mpi label): give --host-mpi to swap it in, --no-host-mpi to silence this")


def newest_per_name(paths: list[str]) -> list[str]:
    """One file per name: of several versions (/opt/cray/pe/pmi/6.1.13/lib/libpmi.so.0 and 6.1.14's),
    the newest by version numbers, as for the site's libfabric."""
    best: dict[str, str] = {}
    for path in sorted(paths, key=version_key):
        best[os.path.basename(path)] = path
    return [best[name] for name in sorted(best)]


def plan_swap(site: SiteProfile, host: Host, asked: bool | None) -> Swap:
    """The binds and variables for the site's mpi_swap, as found on this host. A host without it
    is a warning (the image's MPI runs), or an error when --host-mpi asked for it by name."""
    swap = site.mpi_swap
    assert swap is not None
    libs = [p for p in sorted(host.glob(swap.lib), key=version_key, reverse=True) if bind_ok(p)]
    if not libs:
        why = f"no host MPI: nothing matches the site's mpi_swap.lib {swap.lib} on this host"
        if asked:
            raise UsageError(f"--host-mpi: {why}")
        return Swap([], {}, "", [f"{why}; the image's MPI is used"])
    binds = [(libs[0], f"{swap.dest}/lib")]
    folders: dict[str, str] = {}   # host folder -> container folder
    entries, warnings = [], []
    for pattern in swap.deps:
        found = host.glob(pattern)
        if not found:
            warnings.append(f"mpi_swap.deps {pattern} matches nothing on this host; the host MPI may not load")
        for path in newest_per_name(found):
            real = host.realpath(path)
            folder = os.path.dirname(real)
            if not bind_ok(folder) or ":" in real or "=" in real:
                warnings.append(f"mpi_swap dependency {path} cannot be bound (':' ',' or '=' in {real}); skipped")
                continue
            if folder not in folders:
                folders[folder] = f"{swap.dest}/dep{len(folders)}"
                binds.append((folder, folders[folder]))
            inside = f"{folders[folder]}/{os.path.basename(real)}"
            name = os.path.basename(path)
            entries.append(inside if name == os.path.basename(real) else f"{name}={inside}")
    env = {"HPCAI_HOST_MPI_LIB": f"{swap.dest}/lib"}
    if entries:
        env["HPCAI_HOST_MPI_DEPS"] = ":".join(entries)
    return Swap(binds, env, swap.mpi, warnings)
