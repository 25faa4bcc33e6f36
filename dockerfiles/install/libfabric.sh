#!/bin/bash
# libfabric.sh: libfabric from the checksummed release tarball into $HPCAI_PREFIX.
# CUDA/ROCm support is dlopen'ed so the image runs on hosts without a GPU driver.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
opts=(--enable-tcp --enable-shm --enable-rxm)
if with_cuda; then
  opts+=(--with-cuda=/usr/local/cuda --enable-cuda-dlopen)
  # GDRCopy is optional: configure fails on --enable-gdrcopy-dlopen without its header (NGC ships
  # GDRCopy; a plain CUDA base may not), so it is enabled only where gdrapi.h is installed.
  if [ -f /usr/include/gdrapi.h ]; then opts+=(--enable-gdrcopy-dlopen); else log "no gdrapi.h: libfabric without GDRCopy"; fi
fi
if with_rocm; then opts+=(--with-rocr=/opt/rocm --enable-rocr-dlopen); fi
# --cxi: libcxi and the Cassini/CXI headers were installed into the prefix by the steps before;
# --enable-cxi then makes configure fail rather than quietly leave the provider out.
# The cxi provider's own test programs link libfabric statically (-static against libfabric.la),
# so its build needs the static library; it is removed once installed.
cxi=0
if [ -e "$HPCAI_PREFIX/include/libcxi/libcxi.h" ]; then
  cxi=1
  opts+=(--enable-cxi="$HPCAI_PREFIX" --with-cassini-headers="$HPCAI_PREFIX" --with-cxi-uapi-headers="$HPCAI_PREFIX"
         --enable-static)
fi
autotools_install LIBFABRIC "${opts[@]}"
if [ "$cxi" = 1 ]; then rm -f "$HPCAI_PREFIX/lib/libfabric.a"; fi
"$HPCAI_PREFIX/bin/fi_info" --version
