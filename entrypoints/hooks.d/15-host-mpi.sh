# shellcheck shell=sh disable=SC2154
# (sourced by hpcai-entrypoint, which defines the hpcai_* functions and variables)
# 15-host-mpi: load the host's MPICH-ABI MPI (Cray MPICH) instead of the image's MPICH.
#
# A site's `mpi_swap` makes the launcher bind the host folder holding libmpi.so.12 to
# /host/mpi/lib and the folders of its dependencies (GTL, PMI, PALS, libfabric...) to
# /host/mpi/depN, and name those dependency files in HPCAI_HOST_MPI_DEPS. As in 10-host-fabric,
# only the libmpi*.so.12 of the lib folder and the named files are linked into a private
# per-job dir that goes FIRST in LD_LIBRARY_PATH; nothing else of the host folders is seen.
# The MPICH ABI has two names per library: upstream MPICH and Cray say libmpi.so.12 (and
# libmpifort, libmpicxx), Debian and Ubuntu build libmpich.so.12 (libmpichfort, libmpichcxx)
# and their programs ask for that name; a name the host lacks is linked to its twin.
# A dependency the host fabric swap already linked (libfabric.so.1) is left to it: one per process.
# Settings: HPCAI_HOST_MPI_LIB (/host/mpi/lib), HPCAI_HOST_MPI_DEPS (FILE:NAME=FILE:..., NAME
# when the file's own name is not the one to load it by),
# HPCAI_STRICT_MPI=1 (a mounted host MPI that cannot be used ends the launch, exit 78).
# Exports HPCAI_MPI_SOURCE=host|image (HPCAI_MPI is the image's MPI: ompi, mpich or none) and HPCAI_MPI_LIB (the host file linked as libmpi.so.12).

_hm_lib=${HPCAI_HOST_MPI_LIB:-/host/mpi/lib}

# _hm_problem REASON: the host MPI cannot be used (hpcai_problem: a warning, or exit 78 under
# HPCAI_STRICT_MPI=1; --check reports it as a FAIL line instead).
_hm_problem() { hpcai_problem MPI "$1"; }

# _hm_twin NAME: $hpcai_value = the other name of an MPICH-ABI library ('' for none).
_hm_twin() {
    case $1 in
        libmpi.so.12) hpcai_value=libmpich.so.12 ;;
        libmpich.so.12) hpcai_value=libmpi.so.12 ;;
        libmpifort.so.12) hpcai_value=libmpichfort.so.12 ;;
        libmpichfort.so.12) hpcai_value=libmpifort.so.12 ;;
        libmpicxx.so.12) hpcai_value=libmpichcxx.so.12 ;;
        libmpichcxx.so.12) hpcai_value=libmpicxx.so.12 ;;
        *) hpcai_value='' ;;
    esac
}

# _hm_use_host: link the host MPI and its dependencies first. False (the image's MPI stays)
# when there is none, or it cannot be used (after _hm_problem).
_hm_use_host() {
    [ -d "$_hm_lib" ] || {
        [ -n "${HPCAI_HOST_MPI_DEPS:-}" ] && _hm_problem "HPCAI_HOST_MPI_DEPS is set but $_hm_lib is not mounted; using the image's MPI"
        return 1
    }
    if [ ! -r "$_hm_lib" ] || [ ! -x "$_hm_lib" ]; then
        _hm_problem "host MPI dir $_hm_lib is not readable; using the image's MPI"
        return 1
    fi
    # The ABI's own names (libmpi*.so.12) present in the lib folder: " name name ".
    _hm_found=' '
    _hm_any=0
    for _hm_f in "$_hm_lib"/*; do
        [ -e "$_hm_f" ] || [ -L "$_hm_f" ] || continue
        _hm_any=1
        case ${_hm_f##*/} in libmpi*.so.12) ;; *) continue ;; esac
        if [ -e "$_hm_f" ]; then
            _hm_found="$_hm_found${_hm_f##*/} "
        else
            hpcai_warn "broken symlink $_hm_f ignored"
        fi
    done
    if [ "$_hm_any" = 0 ]; then
        hpcai_debug "host-mpi: $_hm_lib is empty"
        return 1
    fi
    case $_hm_found in
        *' libmpi.so.12 '*) HPCAI_MPI_LIB=$_hm_lib/libmpi.so.12 ;;
        *' libmpich.so.12 '*) HPCAI_MPI_LIB=$_hm_lib/libmpich.so.12 ;;
        *) _hm_problem "no usable libmpi.so.12 in $_hm_lib; using the image's MPI"; return 1 ;;
    esac
    # a private folder for this job step and rank, named apart from 10-host-fabric's (hpcai_rank_dir)
    hpcai_rank_dir hpcai-mpi || { _hm_problem "$hpcai_value; using the image's MPI"; return 1; }
    _hm_dir=$hpcai_value

    # Links already right (another run of this step) are left as they are: no fork at all.
    set --
    for _hm_f in "$_hm_lib"/libmpi*.so.12; do
        case $_hm_found in *" ${_hm_f##*/} "*) ;; *) continue ;; esac
        [ "$_hm_dir/${_hm_f##*/}" -ef "$_hm_f" ] || set -- "$@" "$_hm_f"
    done
    _hm_rest=${HPCAI_HOST_MPI_DEPS:-}
    while [ -n "$_hm_rest" ]; do
        _hm_f=${_hm_rest%%:*}
        case $_hm_rest in *:*) _hm_rest=${_hm_rest#*:} ;; *) _hm_rest='' ;; esac
        [ -n "$_hm_f" ] || continue
        case $_hm_f in
            *=*) _hm_name=${_hm_f%%=*}; _hm_f=${_hm_f#*=} ;;
            *) _hm_name=${_hm_f##*/} ;;
        esac
        if [ ! -e "$_hm_f" ] || [ ! -r "$_hm_f" ]; then
            _hm_problem "host MPI dependency $_hm_f is missing or unreadable; the host MPI may not load"
            continue
        fi
        case $_hm_name in
            libfabric.so*) if [ "${HPCAI_FABRIC:-}" = host ]; then
                    hpcai_debug "host-mpi: $_hm_f left to the host fabric swap (${HPCAI_FABRIC_LIB:-})"
                    continue
                fi ;;
        esac
        if [ "$_hm_dir/$_hm_name" -ef "$_hm_f" ]; then
            continue
        elif [ "$_hm_name" = "${_hm_f##*/}" ]; then
            set -- "$@" "$_hm_f"
        else  # the host's NAME was a link to a file of another name (the launcher resolved it)
            ln -sfn "$_hm_f" "$_hm_dir/$_hm_name" || _hm_problem "cannot link $_hm_f into $_hm_dir"
        fi
    done
    if [ $# -gt 0 ] && ! ln -sf "$@" "$_hm_dir/"; then
        _hm_problem "cannot link the host MPI into $_hm_dir; using the image's MPI"
        return 1
    fi
    # Twins the host lacks point at the name it has.
    for _hm_f in "$_hm_lib"/libmpi*.so.12; do
        case $_hm_found in *" ${_hm_f##*/} "*) ;; *) continue ;; esac
        _hm_twin "${_hm_f##*/}"
        case $_hm_found in *" $hpcai_value "*) continue ;; esac
        [ -z "$hpcai_value" ] || [ "$_hm_dir/$hpcai_value" -ef "$_hm_f" ] \
            || ln -sfn "$_hm_f" "$_hm_dir/$hpcai_value" || :
    done
    hpcai_path_add LD_LIBRARY_PATH "$_hm_dir" front
    export HPCAI_MPI_SOURCE=host HPCAI_MPI_LIB
    hpcai_debug "host-mpi: using $HPCAI_MPI_LIB via $_hm_dir"
}

if ! _hm_use_host; then
    export HPCAI_MPI_SOURCE=image
fi
