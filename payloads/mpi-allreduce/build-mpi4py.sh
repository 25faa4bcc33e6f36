#!/bin/bash
# Build mpi4py from source against the image's MPI, into the image's venv (builder stage).
# A binary wheel would bring its own MPI ABI assumptions; compiling with the image's mpicc ties
# mpi4py to exactly the MPI that `hpcai launch` and the host fabric swap will use.
set -euo pipefail
prefix=${HPCAI_PREFIX:-/opt/hpcai}
version=${MPI4PY_VERSION:-4.1.2}
if [ "${HPCAI_MPI:-ompi}" = none ]; then
  echo "mpi-allreduce: image built without MPI; mpi4py not installed" >&2
  exit 0
fi
export PATH="$prefix/bin:$PATH"
mpicc=$(command -v mpicc) || { echo "mpi-allreduce: no mpicc on PATH" >&2; exit 1; }
py="$prefix/venv/bin/python"
MPICC="$mpicc" "$py" -m pip install --no-cache-dir --no-binary mpi4py "mpi4py==$version"
# The check initializes MPI in the builder, which has no GPU: an MPICH built with CUDA would stop
# in MPI_Init there (the entrypoint's 50-gpu hook does the same at run time).
MPIR_CVAR_ENABLE_GPU=0 "$py" -c 'import mpi4py; from mpi4py import MPI; print("mpi4py", mpi4py.__version__, MPI.Get_library_version().splitlines()[0])'
