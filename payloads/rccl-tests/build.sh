#!/bin/bash
# rccl-tests from the pinned, checksummed commit archive (components.toml: rccl-tests), built with
# the base image's hipcc against its HIP and RCCL and, with MPI=1, against the image's MPI, so one
# process per GPU launched by srun/mpiexec forms one RCCL communicator. Builder stage.
set -euo pipefail
# shellcheck source=../../dockerfiles/install/payload-lib.sh
. "$HPCAI_PAYLOAD_LIB"
: "${RCCL_TESTS_URL:?components manifest must provide rccl-tests}" "${RCCL_TESTS_SHA256:?}"
enter_source "$RCCL_TESTS_URL" "$RCCL_TESTS_SHA256"
# Its Makefile takes everything from ROCM_PATH ($ROCM_PATH/bin/hipcc, include, lib). No GPU at
# build time, so hipcc is told the GPUs: --gpu-arch (HPCAI_GPU_ARCHS=gfx90a,gfx942), else the
# data-centre GPUs our AMD sites run (MI250X gfx90a, MI300A/X gfx942). One builds about twice as
# fast as two (CI builds gfx90a only).
rocm=${ROCM_PATH:-/opt/rocm}
hipcc=$rocm/bin/hipcc
IFS=, read -ra archs <<< "${HPCAI_GPU_ARCHS:-gfx90a,gfx942}"
for arch in "${archs[@]}"; do hipcc+=" --offload-arch=$arch"; done
build_perf_tests ROCM_PATH="$rocm" HIPCC="$hipcc"
