#!/bin/bash
# system-packages.sh builder|final: the distribution packages each stage needs.
# builder: compilers and headers; final: runtime libraries only (no toolchain).
# The CPU flavors take MPI and libfabric from Debian; GPU bases get them built from source.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
stage=${1:?builder|final}

pkgs=()
if [ "$stage" = builder ]; then
  pkgs+=(build-essential autoconf automake libtool pkg-config curl ca-certificates bzip2 file
         python3 python3-dev python3-venv)
  [ "${HPCAI_WITH_HVD:-0}" = 1 ] && pkgs+=(cmake git)
  if [ "${HPCAI_FROM_SOURCE:-1}" = 1 ]; then
    pkgs+=(libnuma-dev libhwloc-dev libevent-dev zlib1g-dev)
  else
    case ${HPCAI_MPI:-ompi} in
      ompi) pkgs+=(libopenmpi-dev openmpi-bin) ;;
      mpich) pkgs+=(libmpich-dev mpich) ;;
    esac
    [ "${HPCAI_WITH_OFI:-1}" = 1 ] && pkgs+=(libfabric-dev)
  fi
else
  pkgs+=(ca-certificates python3)
  if [ "${HPCAI_FROM_SOURCE:-1}" = 1 ]; then
    pkgs+=(libnuma1 libevent-core-2.1-7 libevent-pthreads-2.1-7 libhwloc15)
  else
    case ${HPCAI_MPI:-ompi} in
      ompi) pkgs+=(openmpi-bin libopenmpi3) ;;
      mpich) pkgs+=(mpich libmpich12) ;;
    esac
    [ "${HPCAI_WITH_OFI:-1}" = 1 ] && pkgs+=(libfabric1 libfabric-bin)
  fi
fi

if command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  # Ubuntu bases name some runtime libraries differently: install what exists, name what doesn't.
  avail=()
  for p in "${pkgs[@]}"; do
    if apt-cache show "$p" >/dev/null 2>&1; then avail+=("$p"); else log "package $p not available, skipped"; fi
  done
  apt-get install -y -q --no-install-recommends "${avail[@]}"
  apt-get clean
  rm -rf /var/lib/apt/lists/*
elif command -v dnf >/dev/null; then
  dnf install -y gcc gcc-c++ make autoconf automake libtool python3-devel bzip2 numactl-devel
  dnf clean all
else
  die "no apt-get or dnf in the base image"
fi
