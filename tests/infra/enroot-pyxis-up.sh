#!/usr/bin/env bash
# enroot and pyxis on the Slurm test cluster: the `pyxis` and `enroot` runtimes' tests run them
# for real. Both are built from their GitHub tag archives in tests/infra/mirror/ (sha256-checked
# against its SHA256SUMS; GitHub is not reachable here) and installed under one test prefix:
#
#   PREFIX/bin/enroot*            enroot 4.1.2 (also linked into /usr/local/bin: pyxis runs
#                                 `enroot` from slurmstepd's PATH, enroot its helpers from PATH)
#   PREFIX/etc/enroot/enroot.conf.d/hpcai-test.conf   per-fake-node data, cache and runtime paths
#   PREFIX/lib/slurm/spank_pyxis.so  pyxis 0.24.0, built against this Slurm's spank.h (22.05)
#   <slurm.conf dir>/plugstack.conf.d/pyxis.conf   `optional PREFIX/lib/slurm/spank_pyxis.so use_squashfuse=1`
#
# enroot's git submodules are not in a tag archive; Debian has each of them: musl-tools (its
# deps/musl: the helpers are static-pie musl binaries, as upstream ships them, with the same
# static-pie fix of the specs that enroot's deps/musl.patch makes), linux-libc-dev (deps/
# linux-headers) and makeself (deps/makeself). deps/libbsd is in the archive.
#
# The four fake nodes share this machine, so each gets its own enroot data, cache and runtime
# folder (from the node name pyxis passes on to enroot): two nodes of one step creating the same
# container pyxis_JOB.STEP in one folder would collide.
#
# Idempotent: nothing is rebuilt while the stamp (archive checksums + this recipe's version)
# matches; the plugstack entry is additive (Debian's plugstack.conf includes plugstack.conf.d/*.conf)
# and is picked up by srun and slurmstepd at the next step; `scontrol reconfigure` tells slurmd,
# whose own pyxis hook only makes pyxis's runtime folder, made here too. Needs root, the Slurm
# cluster of slurm-up.sh and Docker (the self-check imports the local Debian base with
# `enroot import dockerd://`, then runs it under pyxis on two nodes).
#
# Settings (environment):
#   HPCAI_ENROOT_PREFIX   install prefix (default /opt/hpcai-enroot)
#   HPCAI_ENROOT_STATE    per-node enroot data/cache (default /var/lib/hpcai-enroot)
#   HPCAI_ENROOT_BUILD    build folder, outside any git tree (default /var/tmp/hpcai-enroot-build)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
ENROOT_VERSION=4.1.2
PYXIS_VERSION=0.24.0
RECIPE=1  # bump when the build steps below change: the stamp then no longer matches
PREFIX=${HPCAI_ENROOT_PREFIX:-/opt/hpcai-enroot}
STATE=${HPCAI_ENROOT_STATE:-/var/lib/hpcai-enroot}
BUILD=${HPCAI_ENROOT_BUILD:-/var/tmp/hpcai-enroot-build}
BASE=${HPCAI_DEBIAN_BASE:-debian:bookworm-slim}  # as docker-up.sh
CONF_DIR=$(dirname "${SLURM_CONF:-/etc/slurm/slurm.conf}")
MIRROR=$here/mirror

log() { printf 'enroot-pyxis-up: %s\n' "$*" >&2; }
fail() { log "$*"; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "must run as root (it installs into $PREFIX and the Slurm plugin stack)"
bash "$here/install-packages.sh" enroot

# archive OWNER/REPO TAG: the mirror copy's path, after checking it against SHA256SUMS
archive() {
  local rel="github/$1/$2.tar.gz"
  grep -q "  $rel\$" "$MIRROR/SHA256SUMS" || fail "$rel is not listed in $MIRROR/SHA256SUMS"
  (cd "$MIRROR" && grep "  $rel\$" SHA256SUMS | sha256sum -c --quiet -) >&2 || fail "$rel: checksum mismatch"
  printf '%s\n' "$MIRROR/$rel"
}
enroot_tgz=$(archive NVIDIA/enroot "v$ENROOT_VERSION")
pyxis_tgz=$(archive NVIDIA/pyxis "v$PYXIS_VERSION")
stamp="recipe=$RECIPE $(sha256sum "$enroot_tgz" "$pyxis_tgz" | awk '{printf "%s ", $1}')"

# --- enroot ---------------------------------------------------------------------------------------
build_enroot() {
  local src=$BUILD/enroot-$ENROOT_VERSION triplet musl_lib specs
  rm -rf "$src" && mkdir -p "$BUILD" && tar -xzf "$enroot_tgz" -C "$BUILD"
  triplet=$(gcc -dumpmachine)                 # x86_64-linux-gnu
  musl_lib=/usr/lib/${triplet%-gnu}-musl      # Debian's musl-tools
  [ -f "$musl_lib/musl-gcc.specs" ] || fail "no $musl_lib/musl-gcc.specs (musl-tools)"
  # deps/musl: Debian's musl with enroot's musl.patch applied to its specs (static-pie gets
  # rcrt1.o and no dynamic linker), through a musl-gcc of its own at the path the Makefile uses.
  mkdir -p "$src/deps/dist/musl/bin" "$src/deps/dist/musl/lib" "$src/deps/dist/linux/include" "$src/deps/makeself"
  specs=$src/deps/dist/musl/lib/musl-gcc.specs
  sed -e "s|%{!shared: \($musl_lib\)/Scrt1.o}|%{static-pie: \1/rcrt1.o} %{!static-pie: %{!shared: \1/Scrt1.o}}|" \
      -e 's|^-dynamic-linker \([^ ]*\)|%{static-pie:-no-dynamic-linker -static -pie} %{!static-pie:-dynamic-linker \1}|' \
      "$musl_lib/musl-gcc.specs" >"$specs"
  if ! grep -q 'static-pie: .*rcrt1.o' "$specs" || ! grep -q -- '-no-dynamic-linker' "$specs"; then
    fail "Debian's musl-gcc.specs changed shape: enroot's static-pie fix did not apply"
  fi
  # shellcheck disable=SC2016  # the wrapper's own "$@" and REALGCC, expanded when it runs
  printf '#!/bin/sh\nexec "${REALGCC:-gcc}" "$@" -specs "%s"\n' "$specs" >"$src/deps/dist/musl/bin/musl-gcc"
  chmod 755 "$src/deps/dist/musl/bin/musl-gcc"
  # deps/linux-headers: the kernel's user-space headers (linux-libc-dev), where musl looks
  ln -s /usr/include/linux /usr/include/asm-generic "$src/deps/dist/linux/include/"
  ln -s "/usr/include/$triplet/asm" "$src/deps/dist/linux/include/asm"
  # deps/makeself: Debian's makeself (its header path is built in)
  cp /usr/bin/makeself "$src/deps/makeself/makeself.sh"
  touch "$src/deps/musl/.stamp" "$src/deps/linux-headers/.stamp"
  # The Makefile's `git submodule update` must not find an enclosing repository: it fails (and is
  # ignored) outside one.
  log "building enroot $ENROOT_VERSION (static musl helpers) into $PREFIX"
  if ! { GIT_CEILING_DIRECTORIES=$BUILD make -C "$src" -j"$(nproc)" prefix="$PREFIX" >"$BUILD/enroot.log" 2>&1 &&
         GIT_CEILING_DIRECTORIES=$BUILD make -C "$src" install prefix="$PREFIX" >>"$BUILD/enroot.log" 2>&1; }; then
    tail -n 30 "$BUILD/enroot.log" >&2
    fail "enroot build failed (log: $BUILD/enroot.log)"
  fi
  [ -x "$PREFIX/bin/enroot-switchroot" ] || fail "enroot-switchroot was not built (log: $BUILD/enroot.log)"
}

build_pyxis() {
  local src=$BUILD/pyxis-$PYXIS_VERSION
  rm -rf "$src" && tar -xzf "$pyxis_tgz" -C "$BUILD"
  log "building pyxis $PYXIS_VERSION against $(dpkg-query -W -f='libslurm-dev ${Version}' libslurm-dev)"
  if ! { make -C "$src" -j"$(nproc)" >"$BUILD/pyxis.log" 2>&1 &&
         make -C "$src" install prefix="$PREFIX" >>"$BUILD/pyxis.log" 2>&1; }; then
    tail -n 30 "$BUILD/pyxis.log" >&2
    fail "pyxis build failed (log: $BUILD/pyxis.log)"
  fi
}

if [ "$(cat "$PREFIX/.hpcai-stamp" 2>/dev/null)" != "$stamp" ] || [ ! -x "$PREFIX/bin/enroot" ] ||
   [ ! -f "$PREFIX/lib/slurm/spank_pyxis.so" ]; then
  build_enroot
  build_pyxis
  printf '%s\n' "$stamp" >"$PREFIX/.hpcai-stamp"
fi

# enroot and its helpers on the default PATH (slurmd's, hence pyxis's, and the tests')
for f in "$PREFIX"/bin/enroot*; do
  ln -sfn "$f" "/usr/local/bin/${f##*/}"
done

# One folder per fake node and user ("host" outside a Slurm step); enroot's config loader
# evaluates the value. The node is SLURM_TOPOLOGY_ADDR (its name without a topology plugin), not
# SLURMD_NODENAME: pyxis removes the step's container with the job's environment, which lacks the
# latter, and would look for it in another node's folder.
mkdir -p "$STATE"
conf=$PREFIX/etc/enroot/enroot.conf.d/hpcai-test.conf
want_conf="# written by tests/infra/enroot-pyxis-up.sh: one enroot state per fake Slurm node
ENROOT_RUNTIME_PATH $STATE/\${SLURM_TOPOLOGY_ADDR:-host}/\${UID}/run
ENROOT_CACHE_PATH $STATE/\${SLURM_TOPOLOGY_ADDR:-host}/\${UID}/cache
ENROOT_DATA_PATH $STATE/\${SLURM_TOPOLOGY_ADDR:-host}/\${UID}/data"
[ "$(cat "$conf" 2>/dev/null)" = "$want_conf" ] || printf '%s\n' "$want_conf" >"$conf"

got=$(enroot version 2>&1) && [ "$got" = "$ENROOT_VERSION" ] || fail "enroot version says '$got'"

# --- pyxis in the Slurm plugin stack ------------------------------------------------------------
plugstack=$CONF_DIR/plugstack.conf
mkdir -p "$CONF_DIR/plugstack.conf.d"
grep -qs "^include $CONF_DIR/plugstack.conf.d/\*" "$plugstack" ||
  printf 'include %s/plugstack.conf.d/*.conf\n' "$CONF_DIR" >>"$plugstack"
# `optional`, where pyxis's own pyxis.conf says `required`: this cluster is shared by every
# Slurm test, and a required plugin that cannot load (its prefix removed) stops every srun.
# use_squashfuse=1: a SquashFS image is started in place (enroot mounts it), as sites keeping
# images on a shared file system configure it, instead of being unpacked per node and step: that
# took 12-23 s per step here, and its removal, still running when a cancelled step's KillWait
# (5 s) ends, was killed and left the unpacked container behind.
entry=$CONF_DIR/plugstack.conf.d/pyxis.conf
want_entry="optional $PREFIX/lib/slurm/spank_pyxis.so use_squashfuse=1"
if [ "$(cat "$entry" 2>/dev/null)" != "$want_entry" ]; then
  rm -f "$entry"  # a link to pyxis's own pyxis.conf, as its README installs it
  printf '%s\n' "$want_entry" >"$entry"
  mkdir -p /run/pyxis  # pyxis's runtime_path, made by its slurmd hook at slurmd's next start
  log "pyxis added to $CONF_DIR/plugstack.conf.d; scontrol reconfigure"
  scontrol reconfigure || fail "scontrol reconfigure failed (is the Slurm test cluster up? tests/infra/slurm-up.sh)"
fi
mkdir -p /run/pyxis
srun --help 2>&1 | grep -q -- '--container-image' || fail "srun does not offer --container-image: pyxis did not load"

# --- self-check: the local Debian base, imported by enroot, on two nodes under pyxis -----------------
id=$(docker image inspect -f '{{.Id}}' "$BASE" 2>/dev/null) || fail "no $BASE image (tests/infra/docker-up.sh makes it)"
sqsh=$STATE/selfcheck-${id#sha256:}.sqsh
if [ ! -s "$sqsh" ]; then
  rm -f "$STATE"/selfcheck-*.sqsh
  rm -f "$sqsh.part"
  if ! out=$(enroot import -o "$sqsh.part" "dockerd://$BASE" 2>&1); then
    rm -f "$sqsh.part"
    fail "self-check failed: enroot import dockerd://$BASE: ${out: -2000}"
  fi
  mv "$sqsh.part" "$sqsh"
fi
# shellcheck disable=SC2016  # expanded inside the container
out=$(timeout 120 srun -N 2 -n 2 --ntasks-per-node=1 --container-image="$sqsh" --container-mounts="$STATE:/host/state:ro" \
  --no-container-entrypoint sh -c 'test -d /host/state && . /etc/os-release && echo "$SLURMD_NODENAME $ID"' 2>&1) ||
  fail "self-check failed: srun --container-image=$sqsh: $out"
seen=$(printf '%s\n' "$out" | grep -E '^nid[0-9]+ debian$' | sort -u | wc -l)
[ "$seen" = 2 ] || fail "self-check: expected 'nidXXX debian' from 2 nodes, got: $out"
log "enroot $ENROOT_VERSION + pyxis $PYXIS_VERSION: srun --container-image runs $BASE on 2 nodes"
