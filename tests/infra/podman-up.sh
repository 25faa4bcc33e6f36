#!/usr/bin/env bash
# Podman for the tests: installed from Debian when missing (root + apt), the local Debian base
# copied over from Docker (no registry is reachable), and container rlimits the machine allows.
set -euo pipefail
base=${HPCAI_DEBIAN_BASE:-debian:bookworm-slim}  # as docker-up.sh

# catatonit: the init behind `podman run --init` (hpcai's podman runtime), only a Recommends of
# Debian's podman.
if ! command -v podman >/dev/null || [ ! -x /usr/libexec/podman/catatonit ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "podman-up: podman or catatonit missing and not installable here (needs root + apt)" >&2
    exit 1
  fi
  echo "podman-up: installing podman catatonit" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman catatonit >/dev/null
fi

if ! podman image exists "$base"; then
  echo "podman-up: copying $base from Docker" >&2
  podman pull -q "docker-daemon:$base" >/dev/null
fi
# Podman (as root) raises RLIMIT_NOFILE/NPROC in every container to 1M/4M; a machine whose root
# lacks CAP_SYS_RESOURCE (VMs, nested containers) refuses that with "error setting rlimit type 7".
# Limits at or below the current ones always work, for `podman run` and `podman build` alike.
if ! podman run --rm --network none "$base" true >/dev/null 2>&1; then
  soft=$(ulimit -Sn)
  n=$((soft < 16384 ? soft : 16384))
  mkdir -p /etc/containers/containers.conf.d
  printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n' "$n" "$n" "$n" "$n" \
    > /etc/containers/containers.conf.d/hpcai-ulimits.conf
  echo "podman-up: container rlimits set to $n (this machine cannot raise them)" >&2
fi
podman run --rm --network none "$base" true
echo "podman-up: podman $(podman --version | awk '{print $3}') runs $base" >&2
