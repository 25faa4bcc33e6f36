#!/bin/bash
# system-packages.sh builder|python|final [PACKAGE...]: the distribution packages each stage needs.
# builder: compilers and headers; python: a builder that compiles nothing (it makes the venv and
# pip-installs wheels: python3-venv, no toolchain); final: runtime libraries only (no toolchain).
# The PACKAGEs are the stack's own, from its records in launcher/hpcai/image/components.toml
# (render passes them: libnuma-dev … for a stack built from source, Debian's Open MPI/MPICH and
# libfabric packages on the CPU flavors); this script adds what every image needs.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
stage=${1:?builder|python|final}
shift

case $stage in
  builder) pkgs=(build-essential autoconf automake libtool pkg-config curl ca-certificates bzip2 file
                 python3 python3-dev python3-venv "$@") ;;
  python) pkgs=(ca-certificates python3 python3-venv "$@") ;;
  final) pkgs=(ca-certificates python3 "$@") ;;
  *) die "stage must be builder, python or final, not $stage" ;;
esac

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
