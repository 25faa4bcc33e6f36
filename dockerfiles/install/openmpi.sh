#!/bin/bash
# openmpi.sh: Open MPI over libfabric (no UCX), with our PMIx and GPU-aware where the base has a GPU stack.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# Two steps: a failed download must stop the script (set -e does not see inside "$(...)" arguments).
archive=$(fetch "$OPENMPI_URL" "$OPENMPI_SHA256")
src=$(unpack "$archive")
opts=(--prefix="$HPCAI_PREFIX" --disable-static --without-ucx --enable-mpi-thread-multiple
      --with-pmix="$HPCAI_PREFIX" --with-hwloc=internal --with-libevent=internal)
[ "${HPCAI_WITH_OFI:-1}" = 1 ] && opts+=(--with-ofi="$HPCAI_PREFIX")
with_cuda && opts+=(--with-cuda=/usr/local/cuda)
with_rocm && opts+=(--with-rocm=/opt/rocm)
cd "$src"
./configure "${opts[@]}"
make -j"$JOBS"
make install
"$HPCAI_PREFIX/bin/mpirun" --version
