#!/bin/bash
# mpich.sh: MPICH with the ch4:ofi device. MPICH's ABI lets Cray MPICH replace it at run time.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# Two steps: a failed download must stop the script (set -e does not see inside "$(...)" arguments).
archive=$(fetch "$MPICH_URL" "$MPICH_SHA256")
src=$(unpack "$archive")
opts=(--prefix="$HPCAI_PREFIX" --disable-static --enable-fortran=no --with-pm=hydra)
if [ "${HPCAI_WITH_OFI:-1}" = 1 ]; then
  opts+=(--with-device=ch4:ofi --with-libfabric="$HPCAI_PREFIX")
else
  opts+=(--with-device=ch4:ucx)
fi
with_cuda && opts+=(--with-cuda=/usr/local/cuda)
cd "$src"
./configure "${opts[@]}"
make -j"$JOBS"
make install
"$HPCAI_PREFIX/bin/mpichversion"
