# shellcheck shell=sh disable=SC2154
# (sourced by hpcai-entrypoint, which defines the hpcai_* functions and variables)
# 50-gpu: optional one-GPU-per-rank selection when the scheduler did not bind GPUs.
#
# Opt-in (HPCAI_GPU_BIND=local-rank), because most payloads pick cuda:LOCAL_RANK among all
# visible devices and would break if only one were visible. A CUDA_VISIBLE_DEVICES or
# ROCR_VISIBLE_DEVICES already set (e.g. by srun --gpus-per-task) is left alone. On AMD GPUs
# ROCR_VISIBLE_DEVICES is the one set (AMD's and LUMI's advice: the ROCm runtime's own filter);
# a HIP_VISIBLE_DEVICES already set is left alone too, as HIP would index into ROCr's selection.
# HPCAI_GPUS_PER_NODE wraps the index; HPCAI_GPU_VENDOR=cuda|rocm|none overrides detection.
#
# Also: an MPICH built with GPU support (the GPU recipe's) stops in MPI_Init where no GPU driver
# answers (MPICH 4.0: yaksa's "CUDA driver version is insufficient", then SIGSEGV), so on a node
# with no GPU device its GPU support is turned off (MPIR_CVAR_ENABLE_GPU=0) unless already set.

if [ "${HPCAI_MPI:-}" = mpich ] && [ ! -e /dev/nvidiactl ] && [ ! -e /dev/kfd ]; then
    hpcai_set MPIR_CVAR_ENABLE_GPU 0
fi

case ${HPCAI_GPU_BIND:-none} in
    local-rank) ;;
    none) return 0 ;;
    *) hpcai_warn "unknown HPCAI_GPU_BIND=$HPCAI_GPU_BIND (valid: local-rank, none); not binding"; return 0 ;;
esac
if ! hpcai_uint LOCAL_RANK; then
    hpcai_warn "HPCAI_GPU_BIND=local-rank but no local rank is known; not binding"
    return 0
fi
_gp_dev=$hpcai_value

hpcai_gpu_vendor
_gp_vendor=$hpcai_value
[ "$_gp_vendor" = none ] && return 0

if hpcai_uint HPCAI_GPUS_PER_NODE && [ "$hpcai_value" -gt 0 ]; then
    _gp_dev=$((_gp_dev % hpcai_value))
fi
case $_gp_vendor in
    cuda) hpcai_set CUDA_VISIBLE_DEVICES "$_gp_dev" ;;
    rocm) [ -n "${HIP_VISIBLE_DEVICES:-}" ] || hpcai_set ROCR_VISIBLE_DEVICES "$_gp_dev" ;;
    *) hpcai_warn "unknown HPCAI_GPU_VENDOR=$_gp_vendor (valid: cuda, rocm, none); not binding" ;;
esac
