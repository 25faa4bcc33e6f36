#!/usr/bin/env bash
# Charliecloud for the tests: the charliecloud group of packages.txt installed when missing
# (root + apt), then a self-check that does what the tests do, in miniature: the local Debian base
# converted to SquashFS by ch-image.sh (kept in HPCAI_CH_CACHE, as the tests' conversions are) and
# run by ch-run through squashfuse, with a bind like the launch tests'.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
base=${HPCAI_DEBIAN_BASE:-debian:bookworm-slim}  # as docker-up.sh
cache=${HPCAI_CH_CACHE:-/var/tmp/hpcai-ch}
export USER=${USER:-$(id -un)}  # ch-run refuses to run without it
log() { printf 'charliecloud-up: %s\n' "$*" >&2; }

bash "$here/install-packages.sh" charliecloud

sqfs=$(bash "$here/ch-image.sh" "$base" "$cache") || { log "self-check failed: ch-image.sh $base"; exit 1; }
out=$(ch-run -b /tmp:/host/lib "$sqfs" -- /bin/sh -c 'test -d /host/lib && echo ok' 2>&1) && [ "$out" = ok ] || {
  log "self-check failed: ch-run $sqfs: $out"; exit 1;
}
log "charliecloud $(ch-run --version 2>&1) runs $base from SquashFS"
