#!/usr/bin/env python3
"""Render the whole flavor x MPI x OFI x Horovod x hpc-libs matrix in both formats; target < 1 s.

Prints the number of files, the wall time (cold: includes Jinja template compilation and TOML
loading, as a fresh `hpcai render` pays) and the ratio to the 1 s target.
"""

from __future__ import annotations

import itertools
import tempfile
import time
from pathlib import Path

from _report import figure

TARGET_S = 1.0


def main() -> int:
    start = time.perf_counter()
    from hpcai.image.render import render
    from hpcai.image.flavors import flavors
    from hpcai.image.spec import make_spec

    with tempfile.TemporaryDirectory() as tmp:
        libs = Path(tmp)
        (libs / "libfabric.so.1").write_bytes(b"")
        count = 0
        for fl, mpi, ofi, hvd, ss in itertools.product(sorted(flavors()), ("ompi", "mpich", "none"),
                                                       ("1", "0"), ("0", "1"), (False, True)):
            if hvd == "1" and (mpi == "none" or fl == "pytorch-poplar"):
                continue
            spec = make_spec(fl, mpi=mpi, ofi=ofi, horovod=hvd, hpc_libs=str(libs) if ss else None,
                             sha="bench", build_date="2026-01-01T00:00:00Z")
            for fmt in ("docker", "apptainer"):
                render(spec, fmt)
                count += 1
    took = time.perf_counter() - start
    print(f"render_matrix: {count} files in {took:.3f} s; target {TARGET_S:.1f} s; "
          f"ratio {took / TARGET_S:.2f} ({'OK' if took < TARGET_S else 'OVER TARGET'})")
    figure("render: whole matrix, both formats", took, TARGET_S, "s", note=f"{count} files, cold")
    return 0 if took < TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
