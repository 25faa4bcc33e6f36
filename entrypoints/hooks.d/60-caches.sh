# shellcheck shell=sh disable=SC2154
# (sourced by hpcai-entrypoint, which defines the hpcai_* functions and variables)
# 60-caches: per-job compiler/kernel caches instead of one shared cache in $HOME.
#
# Thousands of ranks sharing ~/.nv, ~/.config/miopen or ~/.triton on a parallel file system
# contend on locks (MIOpen's sqlite DB is the known offender), so GPU images get per-job
# caches in ${TMPDIR:-/tmp}: CUDA_CACHE_PATH (CUDA), MIOPEN_USER_DB_PATH and
# MIOPEN_CUSTOM_CACHE_DIR per local rank (ROCm), TRITON_CACHE_DIR (either; see
# hpcai_gpu_vendor, HPCAI_GPU_VENDOR=cuda|rocm|none overrides). HF_HOME moves there
# only when the default (${XDG_CACHE_HOME:-$HOME/.cache}/huggingface) is not writable, e.g.
# under Charliecloud without a home directory. The tools create these directories themselves.

hpcai_first_of SLURM_JOB_ID PBS_JOBID || hpcai_value=local
_ca_base=${TMPDIR:-/tmp}/hpcai-${USER:-${LOGNAME:-nouser}}-${hpcai_value%%.*}

hpcai_gpu_vendor
case $hpcai_value in
    cuda)
        hpcai_set CUDA_CACHE_PATH "$_ca_base/cuda-cache"
        hpcai_set TRITON_CACHE_DIR "$_ca_base/triton"
        ;;
    rocm)
        hpcai_first_of SLURM_LOCALID LOCAL_RANK || hpcai_value=0
        hpcai_set MIOPEN_USER_DB_PATH "$_ca_base/miopen-$hpcai_value"
        hpcai_set MIOPEN_CUSTOM_CACHE_DIR "$_ca_base/miopen-$hpcai_value"
        hpcai_set TRITON_CACHE_DIR "$_ca_base/triton"
        ;;
esac

if ! hpcai_isset HF_HOME; then
    _ca_hf=${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/huggingface
    # the nearest existing ancestor decides whether the default can be created
    while [ ! -e "$_ca_hf" ] && [ "${_ca_hf%/*}" != "$_ca_hf" ]; do _ca_hf=${_ca_hf%/*}; done
    [ -n "$_ca_hf" ] || _ca_hf=/
    if [ ! -w "$_ca_hf" ] || [ ! -d "$_ca_hf" ]; then
        hpcai_set HF_HOME "$_ca_base/huggingface"
    fi
fi
