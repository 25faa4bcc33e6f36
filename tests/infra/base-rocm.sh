#!/usr/bin/env bash
# Make the ROCm stand-in base image (make base-rocm): Debian trixie's own HIP 5.7.1 (hipcc on LLVM
# 17), RCCL 5.4.3, HSA runtime, rocm-smi and PyTorch 2.6 (CPU), laid out as in AMD's rocm/pytorch
# images (/opt/rocm). Stands in for rocm/pytorch in tests; see tests/infra/base-rocm/Dockerfile and
# docs/building.md. The tag carries the Dockerfile's digest, so an edit makes a new base and an
# unchanged one is kept. Prints the tag.
# Usage: base-rocm.sh [docker|podman]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
engine=${1:-docker}
TRIXIE=${HPCAI_TRIXIE_BASE:-debian:trixie-slim}
digest=$(sha256sum "$here/base-rocm/Dockerfile" | cut -c1-12)
TAG=${HPCAI_ROCM_BASE:-hpcai/base-rocm:5.7.1-$digest}

log() { printf 'base-rocm: %s\n' "$*" >&2; }

# Debian trixie, made from this machine's Debian mirror when no registry provides it (docker-up.sh).
[ "$engine" = docker ] && HPCAI_DEBIAN_BASE=$TRIXIE HPCAI_DEBIAN_SUITE=trixie bash "$here/docker-up.sh" >/dev/null
if "$engine" image inspect "$TAG" >/dev/null 2>&1; then
  log "$TAG exists"
else
  log "building $TAG from $TRIXIE"
  "$engine" build -q --build-arg "BASE=$TRIXIE" -t "$TAG" "$here/base-rocm" >/dev/null
  "$engine" run --rm "$TAG" bash -c 'hipcc --version | head -n1; ls /opt/rocm/lib/librccl.so.1' >&2
  log "created $TAG"
fi
printf '%s\n' "$TAG"
