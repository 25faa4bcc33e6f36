#!/usr/bin/env bash
# make lint: shellcheck every shell script, and hadolint the Dockerfile of every flavor with the
# same threshold the unit tests use (warning; info-level DL3059 accepted, see README), and the
# hand-written ones (the CUDA stand-in base).
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${VENV:-.venv}
PATH="$venv/bin:$PATH"

mapfile -t scripts < <(git ls-files '*.sh' entrypoints/hpcai-entrypoint entrypoints/hpcai-shim entrypoints/hpcai-sshd .ci/run)
echo "lint: shellcheck ${#scripts[@]} scripts" >&2
shellcheck -x -P SCRIPTDIR "${scripts[@]}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flavors=$(sed -n 's/^\[flavors\.\(.*\)\]$/\1/p' launcher/hpcai/image/flavors.toml)
for flavor in $flavors; do
  hpcai render "$flavor" --format docker > "$tmp/Dockerfile.$flavor"
done
echo "lint: hadolint $(echo "$flavors" | wc -w) Dockerfiles" >&2
hadolint --no-color --failure-threshold warning "$tmp"/Dockerfile.* tests/infra/base-cuda/Dockerfile \
  benchmarks/minimal/*.Dockerfile
echo "lint: clean" >&2
