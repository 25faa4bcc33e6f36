# shellcheck shell=sh disable=SC2154
# (sourced by hpcai-entrypoint, which defines the hpcai_* functions and variables)
# 20-nccl-net: point NCCL/RCCL at the image's aws-ofi-nccl plugin, with Slingshot defaults.
#
# NCCL_NET_PLUGIN gets the plugin's absolute path (RCCL looks up the wrong name otherwise).
# NCCL_NET="AWS Libfabric" is forced only for multi-node runs with the plugin and the cxi
# provider present: forcing it makes NCCL fail instead of falling back to sockets, and
# single-node steps often get no CXI service. The Slingshot defaults apply only when the cxi
# provider was detected by host-fabric; their values live in one file, slingshot-env.sh beside
# the hooks (HPCAI_SLINGSHOT_PROFILE names another), which the launcher reads too, so a value
# the launcher passed is the same one, or the site's documented deviation, and is kept. When the
# base image ships its own plugin under /opt/amazon (NGC >= 24.11; HPCAI_VENDOR_OFI_DIR), ours
# is LD_PRELOADed so that one is never picked up.
# SLINGSHOT_*, SLURM_*, PMI*, PALS_* are never touched.

_nn_lib=$HPCAI_PREFIX/lib
_nn_vendor_dir=${HPCAI_VENDOR_OFI_DIR:-/opt/amazon}
_nn_plugin=''
# Each plugin by its classic name, else a suffixed one (libnccl-net-ofi.so: newer aws-ofi-nccl
# releases install that name, with or without the classic symlink).
_nn_nccl=''
for _nn_f in "$_nn_lib/libnccl-net.so" "$_nn_lib"/libnccl-net*.so; do
    [ -e "$_nn_f" ] && { _nn_nccl=$_nn_f; break; }
done
_nn_rccl=''
for _nn_f in "$_nn_lib/librccl-net.so" "$_nn_lib"/librccl-net*.so; do
    [ -e "$_nn_f" ] && { _nn_rccl=$_nn_f; break; }
done
hpcai_gpu_vendor
if [ -n "$_nn_rccl" ] && { [ "$hpcai_value" = rocm ] || [ -z "$_nn_nccl" ]; }; then
    _nn_plugin=$_nn_rccl
elif [ -n "$_nn_nccl" ]; then
    _nn_plugin=$_nn_nccl
fi

if [ -n "$_nn_plugin" ]; then
    hpcai_set NCCL_NET_PLUGIN "$_nn_plugin"
    if [ -d "$_nn_vendor_dir/aws-ofi-nccl" ] || [ -d "$_nn_vendor_dir/ofi-nccl" ]; then
        hpcai_path_add LD_PRELOAD "$_nn_plugin" front
    fi
fi

if [ "${HPCAI_FABRIC_CXI:-0}" = 1 ]; then
    if [ -n "$_nn_plugin" ] \
        && hpcai_first_uint HPCAI_NNODES SLURM_STEP_NUM_NODES SLURM_JOB_NUM_NODES SLURM_NNODES \
        && [ "$hpcai_value" -gt 1 ]; then
        hpcai_set NCCL_NET "AWS Libfabric"
    fi
    _nn_profile=${HPCAI_SLINGSHOT_PROFILE:-$HPCAI_HOOKS_DIR/slingshot-env.sh}
    case $_nn_plugin in
        */librccl-net*.so) _nn_gpu=amd ;;
        */libnccl-net*.so) _nn_gpu=nvidia ;;
        *) _nn_gpu='' ;;  # no plugin: the lines for one GPU's plugin do not apply
    esac
    if [ -r "$_nn_profile" ]; then
        # NAME=VALUE [# nvidia|amd]; read with builtins only (no fork on every rank's start)
        while IFS= read -r _nn_line || [ -n "$_nn_line" ]; do
            case $_nn_line in '' | '#'*) continue ;; esac
            _nn_tag=''
            case $_nn_line in *'#'*) _nn_tag=${_nn_line#*#} _nn_line=${_nn_line%%#*} ;; esac
            _nn_line=${_nn_line%"${_nn_line##*[! ]}"}
            [ -n "$_nn_line" ] || continue
            _nn_name=${_nn_line%%=*}
            case $_nn_name in
                "$_nn_line" | '' | [0-9]* | *[!A-Za-z0-9_]*) hpcai_warn "$_nn_profile: not NAME=VALUE: $_nn_line"; continue ;;
            esac
            case $_nn_tag in
                *nvidia*) [ "$_nn_gpu" = nvidia ] || continue ;;
                *amd*) [ "$_nn_gpu" = amd ] || continue ;;
            esac
            hpcai_set "$_nn_name" "${_nn_line#*=}"
        done <"$_nn_profile"
    else
        hpcai_warn "no Slingshot profile at $_nn_profile: the cxi defaults are not set"
    fi
fi
