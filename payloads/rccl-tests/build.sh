#!/bin/bash
# rccl-tests built against the base image's ROCm/RCCL and, with MPI=1, the image's MPI. Builder stage.
# No package recipe records a checksum for rccl-tests (Spack tracks git branches only), so
# components.toml pins a release tag archive without a sha256: RCCL_TESTS_SHA256 is "unverified",
# which hpcai only renders with --allow-unverified and fetch.sh downloads with a warning. Without
# the entry the build stops here rather than produce an image silently missing rccl-tests.
set -euo pipefail
# shellcheck source=../../dockerfiles/install/payload-lib.sh
. "$HPCAI_PAYLOAD_LIB"
if [ -z "${RCCL_TESTS_URL:-}" ] || [ -z "${RCCL_TESTS_SHA256:-}" ]; then
  echo "rccl-tests: no pinned source; add [components.\"rccl-tests\"] (url of a commit archive," \
       "sha256) to components.toml, or drop rccl-tests from the payload list" >&2
  exit 1
fi
enter_source "$RCCL_TESTS_URL" "$RCCL_TESTS_SHA256"
rocm=${ROCM_PATH:-/opt/rocm}
build_perf_tests HIP_HOME="$rocm" RCCL_HOME="${RCCL_HOME:-$rocm}"
