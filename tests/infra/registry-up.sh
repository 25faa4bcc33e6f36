#!/usr/bin/env bash
# A real OCI registry for the tests (issue 29): Debian's docker-registry (CNCF distribution 2.8)
# on loopback, with TLS from a certificate authority made here and htpasswd (bcrypt) auth, so that
# push, pull by digest and login run against the same kind of server a site's registry is. No
# traffic leaves the machine. Idempotent: a registry that already answers is kept.
#
#   1. the registry group of packages.txt (docker-registry, skopeo, apache2-utils for htpasswd)
#   2. in $state: a CA and a server certificate for localhost and 127.0.0.1, the htpasswd file of
#      one user with a random password (kept 0600 in $state/password: the tests read it from there,
#      never from argv), the registry's config and its storage
#   3. the CA trusted where each client looks: Docker and Podman/skopeo per registry
#      (certs.d/HOST:PORT/ca.crt), everything else (curl, enroot, Apptainer's oras) through the
#      system store (update-ca-certificates)
#   4. `docker-registry serve` in the background (its log and pid in $state)
#   5. self-check: an anonymous request is refused (401), skopeo logs in (password on stdin),
#      copies the local Debian base in and reads it back by its digest
#
# Settings (environment):
#   HPCAI_TEST_REGISTRY        host:port it serves (default localhost:5443; loopback only)
#   HPCAI_TEST_REGISTRY_STATE  its files (default /var/lib/hpcai-test-registry)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
registry=${HPCAI_TEST_REGISTRY:-localhost:5443}
state=${HPCAI_TEST_REGISTRY_STATE:-/var/lib/hpcai-test-registry}
base=${HPCAI_DEBIAN_BASE:-debian:bookworm-slim}  # as docker-up.sh
user=hpcai
port=${registry##*:}
log() { printf 'registry-up: %s\n' "$*" >&2; }

bash "$here/install-packages.sh" registry
install -d -m 0700 "$state" "$state/data"

if [ ! -s "$state/ca.crt" ] || [ ! -s "$state/server.crt" ]; then
  log "making a CA and a server certificate for localhost in $state"
  openssl req -x509 -newkey rsa:3072 -nodes -days 3650 -subj "/CN=hpcai test registry CA" \
    -keyout "$state/ca.key" -out "$state/ca.crt" 2>/dev/null
  openssl req -newkey rsa:3072 -nodes -subj "/CN=localhost" \
    -keyout "$state/server.key" -out "$state/server.csr" 2>/dev/null
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > "$state/server.ext"
  openssl x509 -req -in "$state/server.csr" -CA "$state/ca.crt" -CAkey "$state/ca.key" -CAcreateserial \
    -days 3650 -extfile "$state/server.ext" -out "$state/server.crt" 2>/dev/null
fi
if [ ! -s "$state/password" ]; then
  (umask 077; openssl rand -hex 16 > "$state/password")
  # htpasswd -i reads the password on stdin: it never shows in `ps`
  htpasswd -B -i -c "$state/htpasswd" "$user" < "$state/password" 2>/dev/null
fi

old_config=$(cat "$state/config.yml" 2>/dev/null || true)
cat > "$state/config.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $state/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
  tls:
    certificate: $state/server.crt
    key: $state/server.key
  # HTTP/1.1: enroot 4.1.2 finds the Basic credentials curl sent by grepping curl's verbose output
  # for "Authorization: Basic", which HTTP/2 writes in lower case, so it never authenticates to
  # a Basic-auth registry over HTTP/2 (docs/building.md, "Publishing an image"); registries with
  # bearer tokens (Harbor, GitLab, Docker Hub) are not affected.
  http2:
    disabled: true
auth:
  htpasswd:
    realm: hpcai-test-registry
    path: $state/htpasswd
EOF

for dir in "/etc/docker/certs.d/$registry" "/etc/containers/certs.d/$registry"; do
  install -d "$dir"
  install -m 0644 "$state/ca.crt" "$dir/ca.crt"
done
if ! cmp -s "$state/ca.crt" /usr/local/share/ca-certificates/hpcai-test-registry.crt; then
  install -m 0644 "$state/ca.crt" /usr/local/share/ca-certificates/hpcai-test-registry.crt
  update-ca-certificates >/dev/null 2>&1
fi

if [ "$old_config" != "$(cat "$state/config.yml")" ] && [ -s "$state/registry.pid" ]; then
  log "configuration changed: restarting the registry"
  kill "$(cat "$state/registry.pid")" 2>/dev/null || true
  sleep 1
fi

answer() {  # the HTTP status of an anonymous GET /v2/ (000: nothing answers)
  curl -s -o /dev/null -w '%{http_code}' --cacert "$state/ca.crt" "https://$registry/v2/" || true
}
if [ "$(answer)" != 401 ]; then
  log "starting docker-registry on $registry"
  setsid docker-registry serve "$state/config.yml" >> "$state/registry.log" 2>&1 < /dev/null &
  echo $! > "$state/registry.pid"
  for _ in $(seq 50); do
    [ "$(answer)" = 401 ] && break
    sleep 0.2
  done
fi

# Self-check: auth is required, and an image goes in and comes back by its digest.
status=$(answer)
[ "$status" = 401 ] || { log "self-check failed: GET https://$registry/v2/ without credentials gave $status, not 401 (log: $state/registry.log)"; exit 1; }
authfile=$state/auth.json
skopeo login -u "$user" --password-stdin --authfile "$authfile" "$registry" < "$state/password" >/dev/null
if ! out=$(skopeo copy -q --authfile "$authfile" "docker-daemon:$base" "docker://$registry/hpcai-check/base:1" 2>&1); then
  log "self-check failed: skopeo copy docker-daemon:$base docker://$registry/hpcai-check/base:1: $out"; exit 1
fi
digest=$(skopeo inspect --authfile "$authfile" --format '{{.Digest}}' "docker://$registry/hpcai-check/base:1")
if ! skopeo inspect --authfile "$authfile" --format '{{.Digest}}' "docker://$registry/hpcai-check/base@$digest" >/dev/null; then
  log "self-check failed: $registry/hpcai-check/base@$digest cannot be read back"; exit 1
fi
log "docker-registry $(docker-registry --version | awk '{print $3}') serves $registry (TLS, htpasswd user $user; password in $state/password)"
