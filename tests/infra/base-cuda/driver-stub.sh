#!/bin/bash
# driver-stub.sh CUDA_HOME: write CUDA_HOME/lib64/stubs/libcuda.so, a link-time stand-in for the
# GPU driver's libcuda.so.1, as the CUDA toolkit ships one (PyPI's CUDA wheels do not). Every
# driver API function named in cuda.h (and each name its #defines map to, e.g. cuMemAlloc_v2)
# exists and returns CUDA_ERROR_STUB_LIBRARY (34). Like NVIDIA's stub it is only for linking:
# it lives under stubs/, never on the runtime library path; the host's driver serves at run time.
set -euo pipefail
cuda=${1:?usage: driver-stub.sh CUDA_HOME}
header=$cuda/include/cuda.h
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
  grep -oE '\bcu[A-Z][A-Za-z0-9_]*[[:space:]]*\(' "$header" | tr -d '( \t'
  grep -E '^#[[:space:]]*define[[:space:]]+cu[A-Z][A-Za-z0-9_]*[[:space:]]+cu[A-Z][A-Za-z0-9_]*[[:space:]]*$' "$header" |
    awk '{print $(NF-1); print $NF}'
} | sort -u > "$work/names"
[ -s "$work/names" ] || { echo "driver-stub: no driver API names found in $header" >&2; exit 1; }
while read -r name; do
  printf 'int %s(void) { return 34; }\n' "$name"
done < "$work/names" > "$work/stub.c"
mkdir -p "$cuda/lib64/stubs"
gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$cuda/lib64/stubs/libcuda.so" "$work/stub.c"
echo "driver-stub: $(wc -l < "$work/names") functions in $cuda/lib64/stubs/libcuda.so" >&2
