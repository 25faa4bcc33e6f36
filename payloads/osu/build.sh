#!/bin/bash
# OSU micro-benchmarks from the pinned, checksummed release (components.toml:
# osu-micro-benchmarks), compiled with the image's MPI compilers; CUDA- or ROCm-aware where the
# flavor has a GPU, so `device=gpu` measures GPU buffers. Builder stage, installs under
# $HPCAI_PREFIX/osu.
set -euo pipefail
# shellcheck source=../../dockerfiles/install/payload-lib.sh
. "$HPCAI_PAYLOAD_LIB"
prefix=${HPCAI_PREFIX:-/opt/hpcai}
: "${OSU_MICRO_BENCHMARKS_URL:?components manifest must provide osu-micro-benchmarks}" "${OSU_MICRO_BENCHMARKS_SHA256:?}"
if [ "${HPCAI_MPI:-ompi}" = none ]; then
  echo "osu: the OSU micro-benchmarks need MPI; this image has none" >&2
  exit 1
fi
export PATH="$prefix/bin:$PATH"
enter_source "$OSU_MICRO_BENCHMARKS_URL" "$OSU_MICRO_BENCHMARKS_SHA256"
conf=(--prefix="$prefix/osu" CC=mpicc CXX=mpicxx)
case ${HPCAI_FAMILY:-cpu} in
  cuda) cuda=${CUDA_HOME:-/usr/local/cuda}
        conf+=(--enable-cuda --with-cuda="$cuda" --with-cuda-include="$cuda/include" --with-cuda-libpath="$cuda/lib64") ;;
  rocm) conf+=(--enable-rocm --with-rocm="${ROCM_PATH:-/opt/rocm}") ;;
esac
./configure "${conf[@]}"
make -j"$(nproc)"
make install
test -x "$prefix/osu/libexec/osu-micro-benchmarks/mpi/collective/osu_allreduce"
