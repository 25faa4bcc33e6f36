#!/bin/bash
# nccl-tests from the pinned, checksummed release archive (components.toml: nccl-tests), built
# against the base image's CUDA and NCCL and, with MPI=1, against the image's MPI, so one
# process per GPU launched by srun/mpiexec forms one NCCL communicator. Builder stage.
set -euo pipefail
# shellcheck source=../../dockerfiles/install/payload-lib.sh
. "$HPCAI_PAYLOAD_LIB"
: "${NCCL_TESTS_URL:?components manifest must provide nccl-tests}" "${NCCL_TESTS_SHA256:?}"
enter_source "$NCCL_TESTS_URL" "$NCCL_TESTS_SHA256"
# NGC images keep NCCL in the system library path; an explicit NCCL_HOME wins. No GPU at build
# time: the binaries are checked for presence only.
# --gpu-arch (HPCAI_GPU_ARCHS=80,90) narrows nccl-tests' own list of GPU architectures: one
# architecture compiles several times faster (CI builds 90 only).
args=(CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}" NCCL_HOME="${NCCL_HOME:-/usr}")
if [ -n "${HPCAI_GPU_ARCHS:-}" ]; then
  gencode=""
  IFS=, read -ra archs <<< "$HPCAI_GPU_ARCHS"
  for a in "${archs[@]}"; do gencode+=" -gencode=arch=compute_$a,code=sm_$a"; done
  args+=(NVCC_GENCODE="${gencode# }")
fi
build_perf_tests "${args[@]}"
