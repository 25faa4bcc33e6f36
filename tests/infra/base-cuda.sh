#!/usr/bin/env bash
# Make the CUDA stand-in base image (make base-cuda): Debian + NVIDIA's CUDA 13.2 compiler,
# runtime and headers + NCCL, from checksummed PyPI wheels, laid out as in NGC's PyTorch image,
# plus the framework (the CPU torch pin of components.toml, from this machine's pip settings, so
# a local wheelhouse serves it). Stands in for nvcr.io/nvidia/pytorch in tests; see
# tests/infra/base-cuda/Dockerfile and docs/building.md. Idempotent: an existing tag is kept.
# Usage: base-cuda.sh [docker|podman]; HPCAI_PYTHON names a Python with pip (default: python3;
# `make base-cuda` passes the project's venv, as a fresh Debian's python3 has no pip).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
engine=${1:-docker}
TAG=${HPCAI_CUDA_BASE:-hpcai/base-cuda:13.2}
DEBIAN=${HPCAI_DEBIAN_BASE:-debian:bookworm-slim}
CACHE=${HPCAI_CACHE:-/var/cache/hpcai}/base-cuda
py=${HPCAI_PYTHON:-python3}

log() { printf 'base-cuda: %s\n' "$*" >&2; }

[ "$engine" = docker ] && bash "$here/docker-up.sh" >/dev/null
if "$engine" image inspect "$TAG" >/dev/null 2>&1; then
  log "$TAG exists"
  exit 0
fi

# Downloads are kept between runs; pip checks each wheel against its --hash.
mkdir -p "$CACHE/wheels" "$CACHE/wheelhouse"
"$py" -m pip download -q --no-deps --require-hashes -r "$here/base-cuda/requirements.txt" -d "$CACHE/wheels"
torch=$("$py" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["python"]["pytorch"])' \
  "$here/../../launcher/hpcai/image/components.toml")
# shellcheck disable=SC2086  # the pin is several requirements separated by spaces
"$py" -m pip download -q $torch -d "$CACHE/wheelhouse"

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$here/base-cuda/Dockerfile" "$here/base-cuda/driver-stub.sh" "$here/base-cuda/nvidia_entrypoint.sh" "$ctx/"
mkdir -p "$ctx/unpacked"
for wheel in "$CACHE"/wheels/*.whl; do
  "$py" -m zipfile -e "$wheel" "$ctx/unpacked"
done
# Wheel layout -> NGC layout: nvidia/cu13/{bin,include,nvvm} as they are, lib as lib64.
mkdir -p "$ctx/cuda" "$ctx/nccl"
mv "$ctx/unpacked/nvidia/cu13/bin" "$ctx/unpacked/nvidia/cu13/include" "$ctx/unpacked/nvidia/cu13/nvvm" "$ctx/cuda/"
mv "$ctx/unpacked/nvidia/cu13/lib" "$ctx/cuda/lib64"
mv "$ctx/unpacked/nvidia/nccl/include" "$ctx/unpacked/nvidia/nccl/lib" "$ctx/nccl/"
rm -f "$ctx"/nccl/lib/*.bc "$ctx"/nccl/lib/*.ltoir  # NCCL's device-side LTO inputs: not in NGC's libnccl
chmod -R a+rX,u+w "$ctx"
find "$ctx/cuda/bin" "$ctx/cuda/nvvm/bin" -maxdepth 1 -type f -exec chmod a+x {} +
cp -r "$CACHE/wheelhouse" "$ctx/wheelhouse"
rm -rf "$ctx/unpacked"

log "building $TAG from $DEBIAN"
"$engine" build -q --build-arg "BASE=$DEBIAN" --build-arg "FRAMEWORK=$torch" -t "$TAG" "$ctx" >/dev/null
"$engine" run --rm --entrypoint nvcc "$TAG" --version | tail -n 2 >&2
log "created $TAG"
