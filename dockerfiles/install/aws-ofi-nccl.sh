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
# A GitHub tag archive has neither configure nor git: its autogen asks git for the version unless
# .release_version holds it, so write the one the archive's folder is named after (…-1.19.0).
prepare_source() {
  if [ ! -x configure ] && [ ! -f .release_version ]; then printf '%s\n' "${PWD##*-}" > .release_version; fi
}
autotools_install AWS_OFI_NCCL "${opts[@]}"
ls "$HPCAI_PREFIX"/lib/lib*-net*.so
