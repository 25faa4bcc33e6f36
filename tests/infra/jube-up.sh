#!/usr/bin/env bash
# JUBE 2.7.1 (FZJ-JSC's benchmarking environment, CARAML's and MMoCLIP's workflow tool) in the
# project venv: the tests run `jube run/continue/result` on what `hpcai sweep --jube` exports
# (tests/unit/run/test_jube_export.py, tests/integration/test_jube.py). JUBE is pure Python but not on
# PyPI: it is installed from its GitHub tag archive in tests/infra/mirror/ (sha256-checked against
# its SHA256SUMS; GitHub is not reachable here) with the venv's pip, which also brings its one
# dependency, PyYAML, from PyPI (also in pyproject.toml's test extra).
#
#   VENV/bin/jube                  the CLI (its `#!` names the venv's python)
#   VENV/lib/python3.*/site-packages/jube   the package (jube.jubeio: its XML/YAML reader)
#
# Idempotent: nothing is installed while the venv's JUBE is this version and its CLI answers. No
# root needed; the venv must exist (`make venv`, which `make test` runs before tests/infra/up.sh).
#
# Settings (environment):
#   VENV   the project venv (default .venv in the repository, as the Makefile's VENV)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
JUBE_VERSION=2.7.1
VENV=${VENV:-.venv}
case $VENV in /*) venv=$VENV ;; *) venv=$repo/$VENV ;; esac  # relative: to the repository, as make reads it
MIRROR=$here/mirror

log() { printf 'jube-up: %s\n' "$*" >&2; }
fail() { log "$*"; exit 1; }

[ -x "$venv/bin/python" ] || fail "no virtualenv at $venv (make venv creates it)"

# archive OWNER/REPO TAG: the mirror copy's path, after checking it against SHA256SUMS
archive() {
  local rel="github/$1/$2.tar.gz"
  grep -q "  $rel\$" "$MIRROR/SHA256SUMS" || fail "$rel is not listed in $MIRROR/SHA256SUMS"
  (cd "$MIRROR" && grep "  $rel\$" SHA256SUMS | sha256sum -c --quiet -) >&2 || fail "$rel: checksum mismatch"
  printf '%s\n' "$MIRROR/$rel"
}

installed() {
  "$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("JUBE"))' 2>/dev/null
}

jube_tgz=$(archive FZJ-JSC/JUBE "REL-$JUBE_VERSION")  # checked on every run, installed or not
if [ "$(installed)" != "$JUBE_VERSION" ] || ! "$venv/bin/jube" --version >/dev/null 2>&1; then
  build=$(mktemp -d "${TMPDIR:-/tmp}/hpcai-jube.XXXXXX")
  trap 'rm -rf "$build"' EXIT
  tar -xzf "$jube_tgz" -C "$build"
  src=$build/JUBE-REL-$JUBE_VERSION
  [ -f "$src/setup.py" ] || fail "$jube_tgz: no JUBE-REL-$JUBE_VERSION/setup.py inside"
  log "installing JUBE $JUBE_VERSION into $venv"
  if ! out=$("$venv/bin/python" -m pip install -q --disable-pip-version-check "$src" 2>&1); then
    fail "pip install of JUBE $JUBE_VERSION failed: ${out: -3000}"
  fi
fi

# self-check: the CLI runs and names the version; its reader and PyYAML import
got=$("$venv/bin/jube" --version 2>&1) || fail "self-check: $venv/bin/jube --version failed: $got"
[ "$got" = "JUBE, version $JUBE_VERSION" ] || fail "self-check: jube --version says '$got', not $JUBE_VERSION"
"$venv/bin/python" -c 'import jube.jubeio, yaml' || fail "self-check: jube.jubeio or yaml does not import"
log "$got in $venv"
