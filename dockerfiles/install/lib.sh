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
# URL#NAME saves the file as NAME: GitHub archives of tags like release/shs-14.0.0 end in the same
# name for every repository, and sources/ and downloads/ hold files by name.
fetch() {
  local url=$1 sha=$2 file dir="$HPCAI_BUILD/downloads"
  file=${url##*/}
  case $url in *'#'*) file=${url##*#}; url=${url%#*} ;; esac
  mkdir -p "$dir"
  if [ -f "$HPCAI_BUILD/sources/$file" ]; then
    cp "$HPCAI_BUILD/sources/$file" "$dir/$file"
  else
    case $url in debian:*) url=$(debian_url "${url#debian:}") ;; esac
    if command -v curl >/dev/null; then
      curl -fsSL --retry 3 -o "$dir/$file" "$url" || die "download failed: $url"
    else
      wget -q -O "$dir/$file" "$url" || die "download failed: $url"
    fi
  fi
  if [ "$sha" = unverified ]; then
    log "WARNING: $file is NOT verified (no known sha256; --allow-unverified)"
  elif ! (cd "$dir" && printf '%s  %s\n' "$sha" "$file" | sha256sum -c --status); then
    die "checksum mismatch for $file: expected $sha, got $(sha256sum "$dir/$file" | cut -d' ' -f1)"
  fi
  printf '%s\n' "$dir/$file"
}

# debian_url PATH -> PATH under the Debian archive of the build's apt sources (components.toml's
# `debian:pool/…` sources: Debian's repacked upstream tarballs). The archive's address is the
# site's, never one written in the recipe.
debian_url() {
  local uris uri
  # Missing files are normal (deb822 or one-line sources): sed's status is not the answer.
  uris=$(sed -n -e 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' \
                -e 's/^deb\(-src\)\{0,1\}[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]*\).*/\3/p' \
                /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
  uri=$(printf '%s\n' "$uris" | grep -m1 '/debian/\{0,1\}$') || die "no Debian archive in the build's apt sources for debian:$1"
  printf '%s/%s\n' "${uri%/}" "$1"
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

# drop_pins: unset every source pin (<NAME>_VERSION/_URL/_SHA256 trios, set by the Dockerfile's
# ENV or the def's exports for this step and the ones before) once the download is verified.
# They are not the build's business: Open MPI 4.1's configure stops on a PMIX_VERSION it did
# not set itself. A variable without its _SHA256 sibling (NGC's CUDA_VERSION) is left alone.
drop_pins() {
  local v
  for v in $(compgen -e); do
    case $v in *_SHA256) unset "${v%_SHA256}_VERSION" "${v%_SHA256}_URL" "$v" ;; esac
  done
}

# autotools_install NAME [configure options…]: the component NAME's checksummed archive
# ($NAME_URL, $NAME_SHA256), unpacked, configured with --prefix=$HPCAI_PREFIX --disable-static and
# the options, built and installed; the working directory is then its source tree. The one
# configure/make/install sequence of libfabric, PMIx, Open MPI, MPICH and aws-ofi-nccl.
autotools_install() {
  local name=$1 src
  shift
  src=$(component_source "$name")
  drop_pins
  cd "$src"
  # A script may define prepare_source to fix the tree before configure (pmix.sh does).
  if declare -F prepare_source >/dev/null; then prepare_source; fi
  # GitHub tag archives and some of Debian's repacked tarballs ship no configure: generate it
  # the way the project does (PMIx: autogen.pl).
  if [ ! -x configure ]; then
    if [ -x autogen.sh ]; then ./autogen.sh; elif [ -f autogen.pl ]; then perl autogen.pl; else autoreconf -fi; fi
  fi
  ./configure --prefix="$HPCAI_PREFIX" --disable-static "$@"
  make -j"$JOBS"
  make install
}

# component_source NAME -> prints the source tree of the component NAME's checksummed archive
# ($NAME_URL, $NAME_SHA256), unpacked. Call it as a plain assignment, src=$(component_source X):
# set -e does not see a failure inside "$(...)" arguments, nor through `local x=$(...)`; and
# inside "$(...)" bash clears set -e, hence the explicit `|| return`.
component_source() {
  local url="${1}_URL" sha="${1}_SHA256" archive
  archive=$(fetch "${!url}" "${!sha}") || return
  unpack "$archive"
}

# headers_install NAME DIR…: the component NAME's checksummed archive, each DIR of it (include,
# share) copied into the same folder of $HPCAI_PREFIX. For header-only components: HPE's Cassini
# and CXI driver headers.
headers_install() {
  local name=$1 src dir
  shift
  src=$(component_source "$name")
  for dir in "$@"; do
    mkdir -p "$HPCAI_PREFIX/$dir"
    cp -R "$src/$dir/." "$HPCAI_PREFIX/$dir/"
  done
}

# The Python every payload and Horovod use: the image's venv (created by python-venv.sh).
venv_python() { printf '%s\n' "$HPCAI_PREFIX/venv/bin/python"; }

with_cuda() { [ "${HPCAI_FAMILY:-}" = cuda ]; }
with_rocm() { [ "${HPCAI_FAMILY:-}" = rocm ]; }
