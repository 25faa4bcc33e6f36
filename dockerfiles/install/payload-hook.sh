#!/bin/bash
# payload-hook.sh NAME SCRIPT: run one payload's install hook (build or runtime) from its folder.
# The hook sees HPCAI_PREFIX, HPCAI_FLAVOR, HPCAI_FAMILY, HPCAI_FRAMEWORK, HPCAI_MPI,
# HPCAI_WITH_OFI, every component's <NAME>_URL/_SHA256/_VERSION, and HPCAI_FETCH (the verifying
# download helper: "$HPCAI_FETCH" URL SHA256 prints the checked file's path) and HPCAI_PAYLOAD_LIB
# (payload-lib.sh, shared helpers: `. "$HPCAI_PAYLOAD_LIB"`).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
name=${1:?payload name}
script=${2:?script}
dir="$HPCAI_BUILD/payloads/$name"
export HPCAI_PAYLOAD=$name HPCAI_FETCH="$HPCAI_BUILD/install/fetch.sh" \
  HPCAI_PAYLOAD_LIB="$HPCAI_BUILD/install/payload-lib.sh"
export PATH="$HPCAI_PREFIX/bin:$HPCAI_PREFIX/venv/bin:$PATH"
log "payload $name: $script"
cd "$dir"
bash "./$script"
