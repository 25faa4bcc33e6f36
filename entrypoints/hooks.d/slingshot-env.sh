# shellcheck shell=sh disable=SC2034
# The Slingshot 11 profile: the one list of NCCL and libfabric (cxi) defaults for HPE Cray EX.
#
# Data, never run as a hook (its name has no NN- number) and never sourced: 20-nccl-net.sh reads
# it line by line and sets each variable only where it is unset, once host-fabric has found the
# cxi provider; the launcher (hpcai.run.slingshot) reads the same lines for every site with
# `fabric_profile = "slingshot"` and passes them into the container. A site's [env] holds only
# where its own documentation differs (CSCS: FI_CXI_DEFAULT_TX_SIZE=16384,
# FI_CXI_RX_MATCH_MODE=software; OLCF: kdreg2, alt_read), and wins.
#
# Format: NAME=VALUE, one per line, no quotes or spaces in the value; a trailing "# nvidia" or
# "# amd" limits a line to images with the CUDA (NCCL) or ROCm (RCCL) plugin.
# Source: HPE Slingshot NCCL/RCCL application notes (HewlettPackard/shs-ccl-docs, 2026-04-30);
# each value and its reason: docs/sites.md, "Slingshot profile". NCCL_NET itself is not here:
# 20-nccl-net.sh forces it only for multi-node steps with the plugin present.
NCCL_SOCKET_IFNAME=hsn
NCCL_NET_GDR_LEVEL=PHB
NCCL_CROSS_NIC=1
FI_MR_CACHE_MONITOR=userfaultfd
FI_CXI_DISABLE_HOST_REGISTER=1
FI_CXI_DEFAULT_CQ_SIZE=131072
FI_CXI_DEFAULT_TX_SIZE=2048
FI_CXI_RX_MATCH_MODE=hybrid
FI_CXI_RDZV_EAGER_SIZE=0
FI_CXI_RDZV_THRESHOLD=0
FI_CXI_RDZV_GET_MIN=0
FI_HMEM_CUDA_USE_GDRCOPY=1  # nvidia
HSA_FORCE_FINE_GRAIN_PCIE=1  # amd
MPICH_GPU_SUPPORT_ENABLED=0
TORCH_NCCL_ASYNC_ERROR_HANDLING=1
NCCL_PROTO=^LL128
