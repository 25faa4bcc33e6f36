#!/usr/bin/env bash
# A real Apptainer for the tests, from Debian's package archives by name (no binary from anywhere
# else), as docs/development.md, "Apptainer on the test machine", records: Debian's stable suites
# do not carry Apptainer, its unstable suite (sid) does, built against glibc 2.38+, so it runs
# here with a private C library from trixie (libc6, libseccomp2, libsqlite3-0) that its binaries
# are patched to load (patchelf: interpreter and RPATH). Idempotent: a prefix that already runs
# is kept.
#
#   1. the apptainer group of packages.txt (patchelf, squashfs-tools, uidmap, squashfuse, …)
#   2. a private apt configuration (sid + trixie, the host's own Debian mirror; /etc/apt untouched)
#   3. apt-get download of the four packages (apt checks them against the signed indexes)
#   4. dpkg -x into the prefix, patchelf, the prefix's config/session links
#   5. /usr/local/bin/apptainer -> the prefix (Slurm's ranks and the tests find it on PATH)
#   6. root's subuid/subgid entry for `apptainer build --fakeroot` (tests/infra/apptainer-down.sh
#      removes what was added)
#   7. self-check: `apptainer --version` and a tiny `exec --userns` of a SIF made from the base
#
# Settings (environment):
#   HPCAI_APPTAINER_PREFIX  where it is installed (default /opt/hpcai-apptainer); absolute paths
#                           are compiled in relative to it: do not move it
#   HPCAI_APPTAINER_CACHE   the self-check's SIF and the tests' SIF cache (default /var/tmp/hpcai-sif)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=${HPCAI_APPTAINER_PREFIX:-/opt/hpcai-apptainer}
cache=${HPCAI_APPTAINER_CACHE:-/var/tmp/hpcai-sif}
base=${HPCAI_DEBIAN_BASE:-debian:bookworm-slim}  # as docker-up.sh
# package/suite pairs: Apptainer from sid, the C library and the two libraries it links from trixie
packages=(apptainer/sid libc6/trixie libseccomp2/trixie libsqlite3-0/trixie)
log() { printf 'apptainer-up: %s\n' "$*" >&2; }
lib=$prefix/usr/lib/x86_64-linux-gnu

bash "$here/install-packages.sh" apptainer

runs() { "$prefix/usr/bin/apptainer" --version >/dev/null 2>&1; }

install_prefix() {
  [ "$(id -u)" -eq 0 ] || { log "not installed in $prefix and not root to install it"; exit 1; }
  [ "$(dpkg --print-architecture)" = amd64 ] || { log "only amd64 is set up here"; exit 1; }
  local work mirror
  work=$(mktemp -d /var/tmp/hpcai-apptainer-apt.XXXXXX)
  trap 'rm -rf "$work"' RETURN
  # The host's Debian mirror, read from its own apt sources (never written into the repository).
  # shellcheck source=../../dockerfiles/install/lib.sh
  mirror=$(bash -c 'source "$1"; debian_url ""' _ "$here/../../dockerfiles/install/lib.sh")
  mirror=${mirror%/}
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/parts" "$work/debs"
  for suite in sid trixie; do
    printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' "$mirror" "$suite"
  done >"$work/sources.list"
  cat >"$work/apt.conf" <<EOF
Dir::Etc::sourcelist "$work/sources.list";
Dir::Etc::sourceparts "$work/parts";
Dir::State::Lists "$work/lists";
Dir::Cache "$work/cache";
APT::Sandbox::User "root";
EOF
  log "apt indexes of sid and trixie (private: $work)"
  APT_CONFIG=$work/apt.conf apt-get update -qq
  (cd "$work/debs" && APT_CONFIG=$work/apt.conf apt-get download -qq "${packages[@]}")
  rm -rf "$prefix.part"
  for deb in "$work"/debs/*.deb; do
    # shellcheck disable=SC2016  # ${Package} is dpkg-deb's format, not the shell's
    log "unpack $(dpkg-deb --showformat '${Package} ${Version}' --show "$deb")"
    dpkg -x "$deb" "$prefix.part"
  done
  # Compiled-in paths are relative to the binary's folder: move first, then patch.
  rm -rf "$prefix"
  mv "$prefix.part" "$prefix"
  for bin in "$prefix/usr/bin/apptainer" "$lib/apptainer/bin/starter"; do
    # RPATH, not RUNPATH (--force-rpath): with RUNPATH the host's libm 2.36 is loaded and startup fails.
    patchelf --force-rpath --set-rpath "$lib" --set-interpreter "$lib/ld-linux-x86-64.so.2" "$bin"
  done
  ln -sfn ../etc "$prefix/usr/etc"          # apptainer.conf
  ln -sfn ../etc "$prefix/usr/lib/etc"
  ln -sfn ../../var "$prefix/usr/lib/var"   # the session directory
  mkdir -p "$prefix/var/apptainer/mnt/session"
  ln -sfn run-singularity.apptainer "$prefix/usr/bin/run-singularity"  # ./x.sif runs it
}

runs || install_prefix
runs || { log "installed, but $prefix/usr/bin/apptainer --version fails: $("$prefix/usr/bin/apptainer" --version 2>&1 | tail -n1)"; exit 1; }
if [ "$(id -u)" -eq 0 ]; then
  ln -sfn "$prefix/usr/bin/apptainer" /usr/local/bin/apptainer
  ln -sfn "$prefix/usr/bin/run-singularity" /usr/local/bin/run-singularity
  # `apptainer build --fakeroot` maps root through /etc/subuid and /etc/subgid; the entry is
  # marked so apptainer-down.sh takes out only what this script added.
  for f in /etc/subuid /etc/subgid; do
    grep -q '^root:' "$f" 2>/dev/null && continue
    echo 'root:1000000:65536' >>"$f"
    touch "$f.hpcai-added"
  done
fi

# Self-check: a SIF of the Debian base (docker-daemon, as `hpcai sif` converts) runs under --userns.
mkdir -p "$cache"
sif=$cache/selfcheck-$(docker image inspect -f '{{.Id}}' "$base" | cut -c8-19).sif
if [ ! -s "$sif" ]; then
  apptainer build --force "$sif.part" "docker-daemon://$base" >"$cache/selfcheck.log" 2>&1 \
    || { log "self-check failed: apptainer build from docker-daemon://$base (log: $cache/selfcheck.log)"; tail -n 5 "$cache/selfcheck.log" >&2; exit 1; }
  mv "$sif.part" "$sif"
fi
out=$(apptainer --quiet exec --userns --bind /tmp:/host/tmp "$sif" /bin/sh -c 'test -d /host/tmp && echo ok' 2>&1) && [ "$out" = ok ] || {
  log "self-check failed: apptainer exec --userns $sif: $out"; exit 1;
}
log "$(apptainer --version) runs $base as a SIF (exec --userns)"
