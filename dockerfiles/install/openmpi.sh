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
# --with-rocm is Open MPI 5's (its accelerator framework moves ROCm buffers); 4.1 has no such
# option (configure warns "unrecognized" and goes on) and is ROCm-aware only through UCX, which this
# OFI build leaves out: with 4.1 (CI's ROCm recipe) GPU buffers are staged by the framework.
if with_rocm; then opts+=(--with-rocm=/opt/rocm); fi
# Open MPI before 4.1.7 takes container_of from libfabric's headers, which libfabric 2.x no longer
# exports (CI builds Debian's 4.1.4 against libfabric 2.1): define it where it is missing, as
# later releases do.
prepare_source() {
  local f=ompi/mca/mtl/ofi/mtl_ofi_request.h
  if [ -f "$f" ] && grep -q container_of "$f" && ! grep -q 'define container_of' "$f"; then
    log "defining container_of in $f (libfabric 2.x no longer exports it)"
    sed -i '0,/^#include/s||#include <stddef.h>\n#ifndef container_of\n#define container_of(ptr, type, field) ((type *) ((char *) (ptr) - offsetof(type, field)))\n#endif\n&|' "$f"
  fi
}
autotools_install OPENMPI "${opts[@]}"
"$HPCAI_PREFIX/bin/mpirun" --version
