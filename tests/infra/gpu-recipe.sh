#!/usr/bin/env bash
# Build the GPU recipe for real, as `make build-pytorch-ngc WITH_OFI=1` would on NGC, but on the
# CUDA stand-in base (base-cuda.sh) and from sources this machine can reach, every file checked
# against its sha256 in components.toml (sources.py): libfabric (with HPE's cxi provider: libcxi,
# Cassini and CXI driver headers), PMIx + Open MPI or MPICH, aws-ofi-nccl, and nccl-tests (MPI=1)
# for one GPU architecture (90) to save time. Same install scripts as every NGC build.
# Usage: gpu-recipe.sh ompi|mpich [hpcai build options…]   (the tag is stdout's last line)
# tests/integration/test_gpu_recipe.py runs the ompi one on every CI run; `make gpu-recipe
# MPI=mpich` builds the MPICH one (MPICH 4.0.2, whose yaksa mpich.sh fixes for CUDA 13) and runs
# the same checks on it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mpi=${1:?usage: gpu-recipe.sh ompi|mpich [hpcai build options…]}
shift
hpcai=${HPCAI:-hpcai}
sources=${HPCAI_CACHE:-/var/cache/hpcai}/gpu-sources

# Debian's repacks (libfabric 2.1.0; PMIx 4.2.2 with Open MPI 4.1.4, Debian 12's pair: Open MPI
# 5.0's PRRTE needs PMIx >= 4.2.4, which no reachable source has; MPICH 4.0.2) and GitHub tag
# archives from tests/infra/mirror: the reachable alternates of the pinned defaults.
sets=(libfabric=2.1.0 aws-ofi-nccl=1.19.0-archive nccl-tests=2.17.6
      cassini-headers=14.0.0 cxi-driver=14.0.0 libcxi=14.0.0)
case $mpi in
  ompi) sets+=(pmix=4.2.2 openmpi=4.1.4) ;;
  mpich) sets+=(mpich=4.0.2) ;;
  *) echo "gpu-recipe: MPI must be ompi or mpich, not '$mpi'" >&2; exit 2 ;;
esac

bash "$here/base-cuda.sh" >&2
# megatron-gpt's CARAML code path (Megatron-LM f7727433, CARAML's patch and tokenizer, the jpwr its
# patch imports): their defaults.
"${HPCAI_PYTHON:-python3}" "$here/sources.py" "$sources" "${sets[@]}" megatron-lm caraml jpwr >&2
args=()
for s in "${sets[@]}"; do args+=(--set "$s"); done
exec "$hpcai" build pytorch-ngc --base "${HPCAI_CUDA_BASE:-hpcai/base-cuda:13.2}" --mpi "$mpi" --ofi 1 --cxi 1 \
  --gpu-arch 90 --payloads sanity,mpi-allreduce,nccl-tests,megatron-gpt --sources "$sources" "${args[@]}" "$@"
