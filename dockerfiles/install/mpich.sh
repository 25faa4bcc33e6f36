#!/bin/bash
# mpich.sh: MPICH with the ch4:ofi device. MPICH's ABI lets Cray MPICH replace it at run time.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

# MPICH 4.0.x's yaksa (its GPU pack engine) reads cudaDeviceProp.computeMode, which CUDA 13
# removed; ask for the same attribute with cudaDeviceGetAttribute (CUDA >= 5), as later yaksa does.
prepare_source() {
  local hook=modules/yaksa/src/backend/cuda/hooks/yaksuri_cuda_init_hooks.c
  [ -f "$hook" ] && grep -q 'prop\.computeMode' "$hook" || return 0
  sed -i -e 's/cerr = cudaGetDeviceProperties(&prop, i);/int mode;\n            cerr = cudaDeviceGetAttribute(\&mode, cudaDevAttrComputeMode, i);/' \
    -e 's/prop\.computeMode != cudaComputeModeDefault/mode != cudaComputeModeDefault/' "$hook"
  grep -q cudaDevAttrComputeMode "$hook"
}

# yaksa's own default (`all`) lists sm_52…86, which CUDA 13 no longer compiles (it starts at
# sm_75) and which no longer names current GPUs: compile for --gpu-arch, else for the data-centre
# GPUs our sites run (A100 80, H100/GH200 90, B200 100) that this nvcc knows.
cuda_sms() {
  local known sm out=()
  if [ -n "${HPCAI_GPU_ARCHS:-}" ]; then echo "$HPCAI_GPU_ARCHS"; return; fi
  known=$(/usr/local/cuda/bin/nvcc --list-gpu-arch)
  for sm in 80 90 100; do
    if grep -qx "compute_$sm" <<< "$known"; then out+=("$sm"); fi
  done
  (IFS=,; echo "${out[*]}")
}

opts=(--enable-fortran=no --with-pm=hydra)
if [ "${HPCAI_WITH_OFI:-1}" = 1 ]; then
  opts+=(--with-device=ch4:ofi --with-libfabric="$HPCAI_PREFIX")
else
  opts+=(--with-device=ch4:ucx)
fi
if with_cuda; then opts+=(--with-cuda=/usr/local/cuda --with-cuda-sm="$(cuda_sms)"); fi
autotools_install MPICH "${opts[@]}"
"$HPCAI_PREFIX/bin/mpichversion"
