#!/usr/bin/env bash
# Start every engine the test suite uses, installing what is missing (root + apt only):
# Docker + a local Debian base, Podman (the same base copied over), charliecloud, and the Slurm
# test cluster nid[001-004].
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

pkgs=()
command -v ch-run >/dev/null || pkgs+=(charliecloud squashfuse squashfs-tools fuse3)
command -v slurmd >/dev/null || pkgs+=(slurm-wlm munge)
if ((${#pkgs[@]})) && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  echo "up: installing ${pkgs[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
fi

bash "$here/docker-up.sh"
# Podman is optional on a workstation (its tests then skip), required on CI.
if ! bash "$here/podman-up.sh"; then
  [ "${HPCAI_REQUIRE_ENGINES:-0}" = 1 ] && exit 1
  echo "up: no usable Podman here; the podman tests will skip" >&2
fi
if [ -x "$here/slurm-up.sh" ]; then bash "$here/slurm-up.sh"; fi
