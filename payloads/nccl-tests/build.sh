#!/bin/bash
# nccl-tests from the pinned, checksummed release archive (components.toml: nccl-tests), built
# against the base image's CUDA and NCCL and, with MPI=1, against the image's MPI, so one
# process per GPU launched by srun/mpiexec forms one NCCL communicator. Builder stage.
set -euo pipefail
prefix=${HPCAI_PREFIX:-/opt/hpcai}
: "${NCCL_TESTS_URL:?components manifest must provide nccl-tests}" "${NCCL_TESTS_SHA256:?}"
archive=$("$HPCAI_FETCH" "$NCCL_TESTS_URL" "$NCCL_TESTS_SHA256")
work=$(mktemp -d)
tar -xf "$archive" -C "$work"
cd "$work"/nccl-tests-*
cuda_home=${CUDA_HOME:-/usr/local/cuda}
# NGC images keep NCCL in the system library path; an explicit NCCL_HOME wins.
nccl_home=${NCCL_HOME:-/usr}
args=(CUDA_HOME="$cuda_home" NCCL_HOME="$nccl_home")
if [ "${HPCAI_MPI:-none}" != none ]; then
  mpicc=$(PATH="$prefix/bin:$PATH" command -v mpicc)
  args+=(MPI=1 MPI_HOME="$(dirname "$(dirname "$mpicc")")")
fi
make -j"$(nproc)" "${args[@]}"
install -d "$prefix/bin"
install -m 0755 build/*_perf "$prefix/bin/"
"$prefix/bin/all_reduce_perf" -h >/dev/null 2>&1 || true  # no GPU at build time: presence only
test -x "$prefix/bin/all_reduce_perf"
