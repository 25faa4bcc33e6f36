#!/bin/bash
# pmix.sh: OpenPMIx into $HPCAI_PREFIX (Open MPI uses it to wire up under Slurm's PMIx).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
autotools_install PMIX
