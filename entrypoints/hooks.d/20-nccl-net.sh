# shellcheck shell=sh disable=SC2154
# (sourced by hpcai-entrypoint, which defines the hpcai_* functions and variables)
# 20-nccl-net: point NCCL/RCCL at the image's aws-ofi-nccl plugin, with Slingshot defaults.
#
# NCCL_NET_PLUGIN gets the plugin's absolute path (RCCL looks up the wrong name otherwise).
# NCCL_NET="AWS Libfabric" is forced only for multi-node runs with the plugin and the cxi
# provider present: forcing it makes NCCL fail instead of falling back to sockets, and
# single-node steps often get no CXI service. The Slingshot defaults (sites.md 7.1) apply only
# when the cxi provider was detected by host-fabric. When the base image ships its own plugin
# under /opt/amazon (NGC >= 24.11; HPCAI_VENDOR_OFI_DIR), ours is LD_PRELOADed so that one is
# never picked up.
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
    hpcai_set NCCL_SOCKET_IFNAME hsn
    hpcai_set NCCL_NET_GDR_LEVEL PHB
    hpcai_set NCCL_CROSS_NIC 1
    hpcai_set NCCL_PROTO '^LL128'
    hpcai_set FI_MR_CACHE_MONITOR userfaultfd
    hpcai_set FI_CXI_DISABLE_HOST_REGISTER 1
    hpcai_set FI_CXI_DEFAULT_CQ_SIZE 131072
    hpcai_set FI_CXI_DEFAULT_TX_SIZE 2048
    hpcai_set FI_CXI_RX_MATCH_MODE hybrid
    hpcai_set FI_CXI_RDZV_EAGER_SIZE 0
    hpcai_set FI_CXI_RDZV_THRESHOLD 0
    hpcai_set FI_CXI_RDZV_GET_MIN 0
    hpcai_set MPICH_GPU_SUPPORT_ENABLED 0
    hpcai_set TORCH_NCCL_ASYNC_ERROR_HANDLING 1
    case $_nn_plugin in
        */libnccl-net*.so) hpcai_set FI_HMEM_CUDA_USE_GDRCOPY 1 ;;
        */librccl-net*.so) hpcai_set HSA_FORCE_FINE_GRAIN_PCIE 1 ;;
    esac
fi
