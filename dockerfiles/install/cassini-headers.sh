#!/bin/bash
# cassini-headers.sh: HPE's Cassini (Slingshot NIC) hardware headers into $HPCAI_PREFIX/include,
# and their register map (share/cassini-headers/csr_defs.json, which libcxi's build reads), for
# libcxi and libfabric's cxi provider (--cxi). Nothing to build.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
headers_install CASSINI_HEADERS include share
