#!/bin/bash
# libfabric.sh: libfabric from the checksummed release tarball into $HPCAI_PREFIX.
# CUDA/ROCm support is dlopen'ed so the image runs on hosts without a GPU driver.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
opts=(--enable-tcp --enable-shm --enable-rxm)
if with_cuda; then opts+=(--with-cuda=/usr/local/cuda --enable-cuda-dlopen --enable-gdrcopy-dlopen); fi
if with_rocm; then opts+=(--with-rocr=/opt/rocm --enable-rocr-dlopen); fi
autotools_install LIBFABRIC "${opts[@]}"
"$HPCAI_PREFIX/bin/fi_info" --version
