#!/bin/bash
# Shared helpers for the per-component install scripts (sourced, never run).
# Both the Dockerfile and the Apptainer def run the same scripts, in the same order.
# shellcheck disable=SC2034  # variables are used by the scripts that source this file
set -euo pipefail

HPCAI_PREFIX=${HPCAI_PREFIX:-/opt/hpcai}
HPCAI_BUILD=${HPCAI_BUILD:-/opt/hpcai-build}
JOBS=${HPCAI_JOBS:-$(nproc)}

# Build inputs the CLI copied into the context (see the Dockerfile's comments): the site's CA
# bundle and a local wheelhouse. A value the user already set wins.
if [ -f "$HPCAI_BUILD/ca-bundle.crt" ]; then
  export PIP_CERT=${PIP_CERT:-$HPCAI_BUILD/ca-bundle.crt}
  export CURL_CA_BUNDLE=${CURL_CA_BUNDLE:-$HPCAI_BUILD/ca-bundle.crt}
fi
if [ -d "$HPCAI_BUILD/wheelhouse" ]; then
  export PIP_FIND_LINKS=${PIP_FIND_LINKS:-$HPCAI_BUILD/wheelhouse}
fi

log() { printf 'hpcai-install: %s\n' "$*" >&2; }
die() { printf 'hpcai-install: error: %s\n' "$*" >&2; exit 1; }

# fetch URL SHA256 -> prints the path of the verified file.
# A file of the same name under $HPCAI_BUILD/sources (air-gapped builds) is used instead of the
# network, and is verified the same way. sha256 "unverified" is accepted only with a warning:
# the CLI emits it only for versions the user explicitly allowed with --allow-unverified.
fetch() {
  local url=$1 sha=$2 file dir="$HPCAI_BUILD/downloads"
  file=${url##*/}
  mkdir -p "$dir"
  if [ -f "$HPCAI_BUILD/sources/$file" ]; then
    cp "$HPCAI_BUILD/sources/$file" "$dir/$file"
  elif command -v curl >/dev/null; then
    curl -fsSL --retry 3 -o "$dir/$file" "$url" || die "download failed: $url"
  else
    wget -q -O "$dir/$file" "$url" || die "download failed: $url"
  fi
  if [ "$sha" = unverified ]; then
    log "WARNING: $file is NOT verified (no known sha256; --allow-unverified)"
  elif ! (cd "$dir" && printf '%s  %s\n' "$sha" "$file" | sha256sum -c --status); then
    die "checksum mismatch for $file: expected $sha, got $(sha256sum "$dir/$file" | cut -d' ' -f1)"
  fi
  printf '%s\n' "$dir/$file"
}

# unpack ARCHIVE -> prints the directory it created under $HPCAI_BUILD/src
unpack() {
  local archive=$1 dest="$HPCAI_BUILD/src" top
  mkdir -p "$dest"
  # Listing to a file: `tar -tf | head` would SIGPIPE tar, which pipefail turns into a failure.
  tar -tf "$archive" > "$dest.list"
  top=$(head -n1 "$dest.list" | cut -d/ -f1)
  tar -xf "$archive" -C "$dest"
  printf '%s\n' "$dest/$top"
}

# autotools_install NAME [configure options…]: the component NAME's checksummed archive
# ($NAME_URL, $NAME_SHA256), unpacked, configured with --prefix=$HPCAI_PREFIX --disable-static and
# the options, built and installed; the working directory is then its source tree. The one
# configure/make/install sequence of libfabric, PMIx, Open MPI, MPICH and aws-ofi-nccl.
autotools_install() {
  local name=$1 url sha archive src
  shift
  url="${name}_URL" sha="${name}_SHA256"
  # Separate assignments: a failed download must stop the script (set -e does not see inside
  # "$(...)" arguments, nor through `local x=$(...)`).
  archive=$(fetch "${!url}" "${!sha}")
  src=$(unpack "$archive")
  cd "$src"
  [ -x configure ] || ./autogen.sh  # GitHub tag archives ship no configure
  ./configure --prefix="$HPCAI_PREFIX" --disable-static "$@"
  make -j"$JOBS"
  make install
}

# The Python every payload and Horovod use: the image's venv (created by python-venv.sh).
venv_python() { printf '%s\n' "$HPCAI_PREFIX/venv/bin/python"; }

with_cuda() { [ "${HPCAI_FAMILY:-}" = cuda ]; }
with_rocm() { [ "${HPCAI_FAMILY:-}" = rocm ]; }
