#!/usr/bin/env bash
# Make a Docker engine and a local Debian base image available for builds and tests.
# Idempotent: installs the docker group of packages.txt when missing (root + apt only), starts
# dockerd when no daemon answers, and creates the base with mmdebstrap + docker import when no registry can
# provide it. The Debian mirror is read from this machine's own apt sources, never hard-coded.
set -euo pipefail

BASE_TAG=${HPCAI_DEBIAN_BASE:-debian:bookworm-slim}
# Another suite than the host's (base-rocm.sh: trixie) is read from the host's Debian mirror.
SUITE=${HPCAI_DEBIAN_SUITE:-}

log() { printf 'docker-up: %s\n' "$*" >&2; }

bash "$(dirname "$0")/install-packages.sh" docker

if ! docker info >/dev/null 2>&1; then
  [ "$(id -u)" -eq 0 ] || { log "no Docker daemon answers and we are not root to start one"; exit 1; }
  log "starting dockerd"
  nohup dockerd >/var/log/hpcai-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { log "dockerd did not start; see /var/log/hpcai-dockerd.log"; exit 1; }
fi

# self_check: a container of the base runs, or this script fails here with Docker's reason.
self_check() {
  local out
  out=$(docker run --rm --network none "$BASE_TAG" true 2>&1) || {
    log "self-check failed: docker run $BASE_TAG true: $out"; exit 1;
  }
  log "docker $(docker version -f '{{.Server.Version}}') runs $BASE_TAG"
}

if docker image inspect "$BASE_TAG" >/dev/null 2>&1; then
  self_check
  exit 0
fi
# The host's own apt sources (deb822 or one-line format) become the image's sources.
sources=""
for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; do
  [ -s "$f" ] && { sources=$f; break; }
done
[ -n "$sources" ] || { log "no apt sources found on this machine"; exit 1; }
if [ -n "$SUITE" ]; then
  # shellcheck source=../../dockerfiles/install/lib.sh
  mirror=$(bash -c 'source "$1"; debian_url ""' _ "$(dirname "$0")/../../dockerfiles/install/lib.sh")
  sources="deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${mirror%/} $SUITE main"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log "mmdebstrap ${SUITE:-bookworm} from ${sources%% *} -> $BASE_TAG"
mmdebstrap --quiet --variant=minbase --include=ca-certificates \
  --aptopt='Acquire::Retries "3"' "${SUITE:-bookworm}" "$tmp/rootfs.tar" "$sources"
docker import --change 'CMD ["bash"]' "$tmp/rootfs.tar" "$BASE_TAG" >/dev/null
log "created $BASE_TAG ($(docker image inspect -f '{{.Size}}' "$BASE_TAG") bytes)"
self_check
