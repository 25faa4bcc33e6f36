#!/bin/bash
# pmix.sh: OpenPMIx into $HPCAI_PREFIX (Open MPI uses it to wire up under Slurm's PMIx).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
src=$(unpack "$(fetch "$PMIX_URL" "$PMIX_SHA256")")
cd "$src"
./configure --prefix="$HPCAI_PREFIX" --disable-static
make -j"$JOBS"
make install
