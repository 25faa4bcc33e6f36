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
# under Charliecloud without a home directory.
#
# Triton and CUDA load compiled code from these caches, so their folder must be this user's
# alone: ${TMPDIR:-/tmp}/hpcai-$USER-<job> comes from hpcai_private_dir (made 0700; one that is
# already there is used only when it is ours and writable by no one else, else a warning and a
# `mktemp -d`). The ranks of a job on a node race to make it; the losers check it and share it.
# It is made on first need only; the tools make their own folders inside it.

hpcai_safe_name "${USER:-${LOGNAME:-nouser}}"
_ca_name=hpcai-$hpcai_value
hpcai_job_id || hpcai_value=local
_ca_name=$_ca_name-$hpcai_value
_ca_base=${TMPDIR:-/tmp}/$_ca_name  # until made: only named in the kept-value records
_ca_made=0

# _ca_set VAR SUBPATH: VAR = SUBPATH in the job's private cache folder, unless the user set VAR.
_ca_set() {
    if ! hpcai_isset "$1" && [ "$_ca_made" = 0 ]; then
        _ca_made=1
        if hpcai_private_dir "$_ca_name"; then
            _ca_base=$hpcai_value
        else
            hpcai_warn "$hpcai_value; caches stay in their default places"
            _ca_base=''
        fi
    fi
    if [ -n "$_ca_base" ]; then
        hpcai_set "$1" "$_ca_base/$2"
    fi
}

hpcai_gpu_vendor
case $hpcai_value in
    cuda)
        _ca_set CUDA_CACHE_PATH cuda-cache
        _ca_set TRITON_CACHE_DIR triton
        ;;
    rocm)
        hpcai_first_uint SLURM_LOCALID LOCAL_RANK || hpcai_value=0
        _ca_local=$hpcai_value
        _ca_set MIOPEN_USER_DB_PATH "miopen-$_ca_local"
        _ca_set MIOPEN_CUSTOM_CACHE_DIR "miopen-$_ca_local"
        _ca_set TRITON_CACHE_DIR triton
        ;;
esac

if ! hpcai_isset HF_HOME; then
    _ca_hf=${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/huggingface
    # the nearest existing ancestor decides whether the default can be created
    while [ ! -e "$_ca_hf" ] && [ "${_ca_hf%/*}" != "$_ca_hf" ]; do _ca_hf=${_ca_hf%/*}; done
    [ -n "$_ca_hf" ] || _ca_hf=/
    if [ ! -w "$_ca_hf" ] || [ ! -d "$_ca_hf" ]; then
        _ca_set HF_HOME huggingface
    fi
fi
