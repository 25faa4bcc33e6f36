"""Which `srun --mpi` type lets the image's MPI form one world: the rule, in one place.

An MPI library finds its peers through the process manager's PMI, and each one speaks only some:
- Open MPI (5.x as hpcai builds it, `--with-pmix` only; Debian's 4.1 likewise) needs a PMIx server:
  Slurm's `pmix`, or ParaStation's `pspmix` (JSC). Under `pmi2` it finds none and every rank starts
  as a singleton (its own words: "No PMIx server was reachable, but a PMI1/2 was detected …
  singletons will be started").
- MPICH (hydra, the simple PMI-1/2 client) needs Slurm's `pmi2`; under `pmix` or `cray_shasta` its
  ranks are singletons too. (`cray_shasta` serves Cray PMI, which only the host's Cray MPICH
  brings: a site's `mpi_swap` binds it into an MPICH image, see run/mpi_swap.py.)
`none` gives no PMI at all. The image says which MPI it has in its `hpcai.mpi` label; a site says
which types its Slurm offers in `mpi_types` (`srun --mpi=list`), and prefers `mpi`.
"""

from __future__ import annotations

from hpcai.errors import UsageError
from hpcai.run.site import SiteProfile

PMI_FOR_MPI = {"ompi": ("pmix", "pspmix"), "mpich": ("pmi2",)}
MPI_NAMES = {"ompi": "Open MPI (PMIx only)", "mpich": "MPICH (PMI-1/2)"}


def choose_pmi(image_mpi: str, requested: str | None, site: SiteProfile, needs_mpi: bool) -> tuple[str, str]:
    """(the `srun --mpi` type to use, a note for the user or "").

    image_mpi: the image's `hpcai.mpi` label ("" when unknown: the site's `mpi` stands).
    requested: `--mpi` as given (None: not given). needs_mpi: the payload forms one MPI world;
    for other payloads the type does not matter and the site's `mpi` stands.
    Not given, the site's `mpi` is kept when the image's MPI can use it, else the first of the
    site's `mpi_types` (its declared order) that it can use, else (no `mpi_types`) the MPI's own
    first choice, with a note. A pair known to start singletons is refused before anything starts.
    """
    chosen = site.mpi if requested is None else requested
    good = PMI_FOR_MPI.get(image_mpi)
    if not needs_mpi or good is None or chosen in good:
        return chosen, ""
    what = MPI_NAMES[image_mpi]
    if requested is not None:
        raise UsageError(f"--mpi {requested} cannot start one MPI world for this image's {what}: its ranks "
                         f"would start as singletons; use --mpi {' or --mpi '.join(good)}")
    if not site.mpi_types:
        default = f"the site's --mpi={chosen}" if chosen else "the cluster's default --mpi"
        return good[0], f"--mpi={good[0]} for this image's {what}: it would start as singletons under {default}"
    offered = [t for t in site.mpi_types if t in good]
    if not offered:
        raise UsageError(f"site {site.name} offers srun --mpi {', '.join(site.mpi_types)}, none of which starts "
                         f"one MPI world for this image's {what} (it needs {' or '.join(good)}): build the "
                         "image with the other MPI (--mpi ompi|mpich), or give --mpi if the site has more")
    return offered[0], ""
