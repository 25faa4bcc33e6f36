#!/bin/bash
# libfabric.sh: libfabric from the checksummed release tarball into $HPCAI_PREFIX.
# CUDA/ROCm support is dlopen'ed so the image runs on hosts without a GPU driver.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# Two steps: a failed download must stop the script (set -e does not see inside "$(...)" arguments).
archive=$(fetch "$LIBFABRIC_URL" "$LIBFABRIC_SHA256")
src=$(unpack "$archive")
opts=(--prefix="$HPCAI_PREFIX" --disable-static --enable-tcp --enable-shm --enable-rxm)
with_cuda && opts+=(--with-cuda=/usr/local/cuda --enable-cuda-dlopen --enable-gdrcopy-dlopen)
with_rocm && opts+=(--with-rocr=/opt/rocm --enable-rocr-dlopen)
cd "$src"
./configure "${opts[@]}"
make -j"$JOBS"
make install
"$HPCAI_PREFIX/bin/fi_info" --version
