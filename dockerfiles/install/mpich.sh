#!/bin/bash
# mpich.sh: MPICH with the ch4:ofi device. MPICH's ABI lets Cray MPICH replace it at run time.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
opts=(--enable-fortran=no --with-pm=hydra)
if [ "${HPCAI_WITH_OFI:-1}" = 1 ]; then
  opts+=(--with-device=ch4:ofi --with-libfabric="$HPCAI_PREFIX")
else
  opts+=(--with-device=ch4:ucx)
fi
if with_cuda; then opts+=(--with-cuda=/usr/local/cuda); fi
autotools_install MPICH "${opts[@]}"
"$HPCAI_PREFIX/bin/mpichversion"
