#!/bin/bash
# fetch.sh URL SHA256: download (or take from $HPCAI_BUILD/sources) and verify one source.
# Prints the verified file's path; fails naming the file on a checksum mismatch.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
[ $# -eq 2 ] || die "usage: fetch.sh URL SHA256"
fetch "$1" "$2"
