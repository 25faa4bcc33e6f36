#!/bin/bash
# aws-ofi-nccl.sh: the OFI net plugin for NCCL (CUDA) or RCCL (ROCm), linked to our libfabric.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
opts=(--with-libfabric="$HPCAI_PREFIX" --disable-tests)
if [ "${HPCAI_MPI:-none}" != none ]; then opts+=(--with-mpi="$HPCAI_PREFIX"); fi
if with_rocm; then
  opts+=(--with-rocm=/opt/rocm)
else
  opts+=(--with-cuda=/usr/local/cuda)
fi
autotools_install AWS_OFI_NCCL "${opts[@]}"
ls "$HPCAI_PREFIX"/lib/lib*-net*.so
