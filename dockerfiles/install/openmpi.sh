#!/bin/bash
# openmpi.sh: Open MPI over libfabric (no UCX), with our PMIx and GPU-aware where the base has a GPU stack.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# With an external PMIx, Open MPI refuses embedded libevent/hwloc ("unsupported"): all three
# come from outside, PMIx from our prefix and libevent/hwloc from the system, as PMIx uses them.
opts=(--without-ucx --enable-mpi-thread-multiple --with-pmix="$HPCAI_PREFIX" --with-hwloc=external
      --with-libevent=external)
if [ "${HPCAI_WITH_OFI:-1}" = 1 ]; then opts+=(--with-ofi="$HPCAI_PREFIX"); fi
if with_cuda; then opts+=(--with-cuda=/usr/local/cuda); fi
if with_rocm; then opts+=(--with-rocm=/opt/rocm); fi
autotools_install OPENMPI "${opts[@]}"
"$HPCAI_PREFIX/bin/mpirun" --version
