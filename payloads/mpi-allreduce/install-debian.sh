#!/bin/bash
# CPU flavors: Debian's python3-mpi4py, compiled by Debian against the very Open MPI (or MPICH)
# package the image runs, so no compile (building mpi4py from source costs minutes on CI).
# /opt/hpcai/venv sees it through --system-site-packages. Final stage.
set -euo pipefail
prefix=${HPCAI_PREFIX:-/opt/hpcai}
py="$prefix/venv/bin/python"
if ! "$py" -c 'import mpi4py' 2>/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends python3-mpi4py
  apt-get clean
  rm -rf /var/lib/apt/lists/*
fi
"$py" -c 'import mpi4py; print("mpi4py", mpi4py.__version__)'
