# shellcheck shell=sh disable=SC2154
# (sourced by hpcai-entrypoint, which defines the hpcai_* functions and variables)
# 10-host-fabric: load the host's libfabric (Cray, with the cxi provider) instead of the image's.
#
# Sites bind the host libfabric dir to /host/lib and /usr to /host/usr (HPE convention). Only
# libfabric* and *cxi* are linked into a private per-job dir that goes FIRST in
# LD_LIBRARY_PATH; /host/lib, /host/usr/lib64 and /host/usr/local/lib64 go LAST, so their other
# libraries (libstdc++, libssl, ...) never shadow the image's. Only fixed paths are examined:
# no find over /host/usr. Without a usable host copy, an -ss image's baked libs
# ($HPCAI_PREFIX/hpc-libs) are used; otherwise the image's own libfabric stays.
# Settings: HPCAI_HOST_LIB (/host/lib), HPCAI_HOST_USR (/host/usr), HPCAI_STRICT_FABRIC=1.
# Exports HPCAI_FABRIC=host|baked|image, HPCAI_FABRIC_LIB (file chosen), HPCAI_FABRIC_CXI=0|1.

_hf_lib=${HPCAI_HOST_LIB:-/host/lib}
_hf_usr=${HPCAI_HOST_USR:-/host/usr}
_hf_baked=$HPCAI_PREFIX/hpc-libs
_hf_chosen=''

# _hf_newer A B: true when dotted version A is newer than B (numeric per field).
_hf_newer() {
    _hf_a=$1.
    _hf_b=$2.
    while [ -n "$_hf_a$_hf_b" ]; do
        hpcai_decimal "${_hf_a%%.*}"; _hf_x=$hpcai_value
        hpcai_decimal "${_hf_b%%.*}"; _hf_y=$hpcai_value
        _hf_a=${_hf_a#*.}
        _hf_b=${_hf_b#*.}
        hpcai_is_uint "$_hf_x" || _hf_x=0
        hpcai_is_uint "$_hf_y" || _hf_y=0
        [ "$_hf_x" -gt "$_hf_y" ] && return 0
        [ "$_hf_x" -lt "$_hf_y" ] && return 1
    done
    return 1
}

# _hf_pick DIR: $_hf_chosen = newest libfabric.so.1.* in DIR (else libfabric.so.1), skipping
# broken symlinks with a warning.
_hf_pick() {
    _hf_best=''
    _hf_versions=''
    for _hf_f in "$1"/libfabric.so.1.*; do
        [ -e "$_hf_f" ] || { [ -L "$_hf_f" ] && hpcai_warn "broken symlink $_hf_f ignored"; continue; }
        _hf_v=${_hf_f##*/libfabric.so.}
        _hf_versions="$_hf_versions $_hf_v"
        if [ -z "$_hf_best" ] || _hf_newer "$_hf_v" "${_hf_best##*/libfabric.so.}"; then
            _hf_best=$_hf_f
        fi
    done
    if [ -z "$_hf_best" ] && [ -e "$1/libfabric.so.1" ]; then
        _hf_best=$1/libfabric.so.1
    fi
    case $_hf_versions in
        ' '*' '*) hpcai_warn "several libfabric versions in $1 (${_hf_versions# }); using the newest, ${_hf_best##*/}" ;;
    esac
    _hf_chosen=$_hf_best
}

_hf_link_host() {
    # a private folder for this job step and rank (hpcai_rank_dir)
    hpcai_rank_dir hpcai || { hpcai_fabric_problem "$hpcai_value; using the image's libfabric"; return 1; }
    _hf_dir=$hpcai_value
    # Links already right (another run of this step) are left as they are: no fork at all.
    # A name in both /host/lib and /host/usr/lib64: /host/lib's copy (the site's fabric
    # folder) wins; `ln -sf` of both would leave the later one.
    set --
    HPCAI_FABRIC_CXI=0
    _hf_names=' '
    for _hf_f in "$_hf_lib"/*cxi* "$_hf_usr"/lib64/libcxi*; do
        [ -e "$_hf_f" ] || continue
        HPCAI_FABRIC_CXI=1
        case $_hf_names in *" ${_hf_f##*/} "*) continue ;; esac
        _hf_names="$_hf_names${_hf_f##*/} "
        [ "$_hf_dir/${_hf_f##*/}" -ef "$_hf_f" ] || set -- "$@" "$_hf_f"
    done
    if ! [ "$_hf_dir/libfabric.so.1" -ef "$_hf_chosen" ]; then
        ln -sfn "$_hf_chosen" "$_hf_dir/libfabric.so.1" \
            || { hpcai_fabric_problem "cannot link $_hf_chosen into $_hf_dir"; return 1; }
    fi
    [ $# -gt 0 ] && ln -sf "$@" "$_hf_dir/"
    hpcai_path_add LD_LIBRARY_PATH "$_hf_dir" front
    for _hf_d in "$_hf_lib" "$_hf_usr/lib64" "$_hf_usr/local/lib64"; do
        [ -d "$_hf_d" ] && hpcai_path_add LD_LIBRARY_PATH "$_hf_d" back
    done
    export HPCAI_FABRIC=host HPCAI_FABRIC_LIB="$_hf_chosen" HPCAI_FABRIC_CXI
    hpcai_debug "host-fabric: using $_hf_chosen via $_hf_dir"
}

_hf_use_host() {
    [ -d "$_hf_lib" ] || return 1
    if [ ! -r "$_hf_lib" ] || [ ! -x "$_hf_lib" ]; then
        hpcai_fabric_problem "host library dir $_hf_lib is not readable; using the image's libfabric"
        return 1
    fi
    _hf_pick "$_hf_lib"
    if [ -z "$_hf_chosen" ]; then
        for _hf_f in "$_hf_lib"/* "$_hf_lib"/libfabric.so.1; do
            if [ -e "$_hf_f" ] || [ -L "$_hf_f" ]; then
                hpcai_fabric_problem "no usable libfabric.so.1 in $_hf_lib; using the image's libfabric"
                return 1
            fi
        done
        hpcai_debug "host-fabric: $_hf_lib is empty"
        return 1
    fi
    _hf_link_host
}

if ! _hf_use_host; then
    _hf_chosen=''
    [ -d "$_hf_baked" ] && _hf_pick "$_hf_baked"
    if [ -n "$_hf_chosen" ]; then
        HPCAI_FABRIC_CXI=0
        for _hf_f in "$_hf_baked"/*cxi*; do [ -e "$_hf_f" ] && HPCAI_FABRIC_CXI=1; done
        hpcai_path_add LD_LIBRARY_PATH "$_hf_baked" front
        export HPCAI_FABRIC=baked HPCAI_FABRIC_LIB="$_hf_chosen" HPCAI_FABRIC_CXI
    else
        export HPCAI_FABRIC=image
    fi
fi
