#!/usr/bin/env bash
# Podman for the tests: the podman group of packages.txt installed when missing (root + apt), the
# local Debian base copied over from Docker (no registry is reachable), container rlimits and an
# OCI runtime the machine allows; ends with a self-check (`podman run --init` and `podman build`).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
base=${HPCAI_DEBIAN_BASE:-debian:bookworm-slim}  # as docker-up.sh
conf_dir=/etc/containers/containers.conf.d
log() { printf 'podman-up: %s\n' "$*" >&2; }

bash "$here/install-packages.sh" podman

if ! podman image exists "$base"; then
  log "copying $base from Docker"
  podman pull -q "docker-daemon:$base" >/dev/null
fi
try_run() { podman run --rm --network none "$base" true 2>&1 || true; }  # its error message

# Podman (as root) raises RLIMIT_NOFILE/NPROC in every container to 1M/4M; a machine whose root
# lacks CAP_SYS_RESOURCE (VMs, nested containers) refuses that ("setrlimit `RLIMIT_NOFILE`:
# Operation not permitted" from crun, "error setting rlimit type 7" from runc). Limits at or below
# the current ones always work, for `podman run` and `podman build` alike.
# crun 1.8 (Debian 12's default runtime) refuses hosts whose cgroup v1 controllers sit beside a
# cgroup2 hierarchy with controllers of its own ("cgroups in hybrid mode not supported"); runc
# runs there, as it does under Docker. One fix can uncover the other: look twice.
for _ in 1 2; do
  out=$(try_run)
  if [[ $out == *rlimit* && ! -e $conf_dir/hpcai-ulimits.conf ]]; then
    soft=$(ulimit -Sn)
    n=$((soft < 16384 ? soft : 16384))
    mkdir -p "$conf_dir"
    printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n' "$n" "$n" "$n" "$n" \
      > "$conf_dir/hpcai-ulimits.conf"
    log "container rlimits set to $n (this machine cannot raise them)"
  elif [[ $out == *'hybrid mode not supported'* && ! -e $conf_dir/hpcai-runtime.conf ]]; then
    mkdir -p "$conf_dir"
    printf '[engine]\nruntime = "runc"\n' > "$conf_dir/hpcai-runtime.conf"
    log "OCI runtime set to runc (crun refuses this machine's hybrid cgroups)"
  fi
done

# Self-check: what the tests do, in miniature: a run with --init (catatonit) and a build step.
out=$(podman run --rm --init --network none "$base" true 2>&1) || {
  log "self-check failed: podman run --init $base true: $out"; exit 1;
}
out=$(printf 'FROM %s\nRUN true\n' "$base" | podman build -q --network none -t hpcai-podman-check - 2>&1) || {
  log "self-check failed: podman build (FROM $base, RUN true): $out"; exit 1;
}
podman rmi -f hpcai-podman-check >/dev/null 2>&1 || true
log "podman $(podman --version | awk '{print $3}') runs and builds $base"
