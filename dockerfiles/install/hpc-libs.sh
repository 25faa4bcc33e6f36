#!/bin/bash
# hpc-libs.sh: finish the site libraries copied to $HPCAI_PREFIX/hpc-libs (-ss images).
# SLES-built libcxi wants libjson-c.so.3; Debian/Ubuntu ship .so.5 with a compatible ABI.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
dir="$HPCAI_PREFIX/hpc-libs"
ls "$dir"/libfabric.so* >/dev/null 2>&1 || ls "$dir"/*/libfabric.so* >/dev/null 2>&1 || die "no libfabric.so* in $dir"
if ls "$dir"/libcxi.so* >/dev/null 2>&1 && [ ! -e "$dir/libjson-c.so.3" ]; then
  for cand in /usr/lib/x86_64-linux-gnu/libjson-c.so.5 /usr/lib/aarch64-linux-gnu/libjson-c.so.5 /usr/lib64/libjson-c.so.5; do
    if [ -e "$cand" ]; then ln -s "$cand" "$dir/libjson-c.so.3"; break; fi
  done
fi
log "site libraries: $(find "$dir" -maxdepth 2 -name '*.so*' | wc -l) files in $dir"
