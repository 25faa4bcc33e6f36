#!/bin/bash
# pmix.sh: OpenPMIx into $HPCAI_PREFIX (Open MPI uses it to wire up under Slurm's PMIx).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# Debian's repack of 4.2.2 (components.toml's debian: alternate) does not compile without
# Debian's mca-fix.patch, one missing include; adding it where it is missing changes nothing else.
prepare_source() {
  local f=src/mca/base/pmix_mca_base_var.c
  if [ -f "$f" ] && ! grep -q 'pmix_mca_base_vari.h' "$f"; then
    log "adding the include of Debian's mca-fix.patch to $f"
    sed -i 's|^#include "src/util/pmix_show_help.h"$|&\n#include "src/mca/base/pmix_mca_base_vari.h"|' "$f"
  fi
}
autotools_install PMIX
