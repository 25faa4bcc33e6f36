#!/bin/bash
# flux: --job-name=hpcai-nccl-tests
# flux: -N 2
# flux: --exclusive
# flux: --time-limit=3600s
# flux: --queue=pbatch
# flux: --bank=guests
# flux: --output=/p/lustre5/me/runs/r1/flux-{{id}}.out
#
# Written by `hpcai submit` for Flux. `flux batch` runs it on the first node of the allocation,
# where `hpcai launch` starts the ranks with `flux run` and writes the run record into
# /p/lustre5/me/runs/r1.
#
# The step as planned at submission (site llnl-elcap):
#   flux run -N 2 -n 8 -c 24 -g 1 --exclusive -o exit-on-error -o cpu-affinity=per-task --queue=pbatch --bank=guests --time-limit=3600s /bin/sh /usr/lib/python3/dist-packages/hpcai/_data/entrypoints/hpcai-shim --forward env --prefix APPTAINER --name 'hpcai-{jobid}-r1-{node}' --start apptainer --start -q --start instance --start start --start --cleanenv --start --rocm --start --bind --start /opt/cray/libfabric/1.22.0/lib64:/host/lib --start --bind --start /usr:/host/usr --start --bind --start /run/cxi --start /p/lustre5/me/IMG.sif --pass 'FLUX_*' --pass 'SLINGSHOT_*' --pass 'PMI*' --pass 'PALS_*' --pass 'OMPI_*' --pass 'HPCAI_*' --pass CUDA_VISIBLE_DEVICES --pass ROCR_VISIBLE_DEVICES --pass HIP_VISIBLE_DEVICES --master-addr nid001234 --exit-dir /p/lustre5/me/runs/r1/logs --log-dir /p/lustre5/me/runs/r1/logs -- env APPTAINERENV_NCCL_SOCKET_IFNAME=hsn APPTAINERENV_NCCL_NET_GDR_LEVEL=PHB APPTAINERENV_NCCL_CROSS_NIC=1 APPTAINERENV_FI_MR_CACHE_MONITOR=userfaultfd APPTAINERENV_FI_CXI_DISABLE_HOST_REGISTER=1 APPTAINERENV_FI_CXI_DEFAULT_CQ_SIZE=131072 APPTAINERENV_FI_CXI_DEFAULT_TX_SIZE=2048 APPTAINERENV_FI_CXI_RX_MATCH_MODE=hybrid APPTAINERENV_FI_CXI_RDZV_EAGER_SIZE=0 APPTAINERENV_FI_CXI_RDZV_THRESHOLD=0 APPTAINERENV_FI_CXI_RDZV_GET_MIN=0 APPTAINERENV_HSA_FORCE_FINE_GRAIN_PCIE=1 APPTAINERENV_MPICH_GPU_SUPPORT_ENABLED=0 APPTAINERENV_TORCH_NCCL_ASYNC_ERROR_HANDLING=1 'APPTAINERENV_NCCL_PROTO=^LL128' APPTAINERENV_A=1 apptainer exec --cleanenv 'instance://{group}' /opt/hpcai/bin/hpcai-entrypoint /opt/hpcai/bin/hpcai-bench nccl-tests min_bytes=1M
set -eu
exec /usr/bin/python3 -m hpcai launch --image /p/lustre5/me/IMG.sif --nodes 2 --time 1:00:00 --account guests --site llnl-elcap --output-dir /p/lustre5/me/runs/r1 --env HF_TOKEN --env A=1 -- nccl-tests min_bytes=1M
