#!/usr/bin/env bash
# Build the ROCm recipe for real, as `make build-pytorch-rocm WITH_OFI=1` would on AMD's
# rocm/pytorch, but on the ROCm stand-in base (base-rocm.sh: Debian trixie's HIP and RCCL) and from
# sources this machine can reach, each checked against its sha256 in components.toml (sources.py):
# libfabric (ROCr support dlopen'ed), PMIx + Open MPI over OFI, aws-ofi-nccl built for ROCm (the
# RCCL net plugin), and rccl-tests (MPI=1) for one GPU architecture (gfx90a, MI250X) to save time.
# Same install scripts as every ROCm build.
# Usage: rocm-recipe.sh [hpcai build options…]   (the tag is stdout's last line)
# tests/integration/test_rocm_recipe.py builds it on every CI run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hpcai=${HPCAI:-hpcai}
sources=${HPCAI_CACHE:-/var/cache/hpcai}/rocm-sources

# Debian's repacks and GitHub archives from tests/infra/mirror, as gpu-recipe.sh takes them.
sets=(libfabric=2.1.0 aws-ofi-nccl=1.19.0-archive pmix=4.2.2 openmpi=4.1.4)
base=$(bash "$here/base-rocm.sh" | tail -n1)
"${HPCAI_PYTHON:-python3}" "$here/sources.py" "$sources" "${sets[@]}" rccl-tests >&2
args=()
for s in "${sets[@]}"; do args+=(--set "$s"); done
exec "$hpcai" build pytorch-rocm --base "$base" --mpi ompi --ofi 1 --gpu-arch gfx90a \
  --payloads sanity,mpi-allreduce,rccl-tests --sources "$sources" "${args[@]}" "$@"
