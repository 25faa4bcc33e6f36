#!/bin/bash
# aws-ofi-nccl.sh: the OFI net plugin for NCCL (CUDA) or RCCL (ROCm), linked to our libfabric.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# Two steps: a failed download must stop the script (set -e does not see inside "$(...)" arguments).
archive=$(fetch "$AWS_OFI_NCCL_URL" "$AWS_OFI_NCCL_SHA256")
src=$(unpack "$archive")
cd "$src"
[ -x configure ] || ./autogen.sh  # GitHub archives (< 1.19.0) ship no configure
opts=(--prefix="$HPCAI_PREFIX" --disable-static --with-libfabric="$HPCAI_PREFIX" --disable-tests)
[ "${HPCAI_MPI:-none}" != none ] && opts+=(--with-mpi="$HPCAI_PREFIX")
if with_rocm; then
  opts+=(--with-rocm=/opt/rocm)
else
  opts+=(--with-cuda=/usr/local/cuda)
fi
./configure "${opts[@]}"
make -j"$JOBS"
make install
ls "$HPCAI_PREFIX"/lib/lib*-net*.so
