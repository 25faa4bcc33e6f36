#!/bin/bash
# pmix.sh: OpenPMIx into $HPCAI_PREFIX (Open MPI uses it to wire up under Slurm's PMIx).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# Two steps: a failed download must stop the script (set -e does not see inside "$(...)" arguments).
archive=$(fetch "$PMIX_URL" "$PMIX_SHA256")
src=$(unpack "$archive")
cd "$src"
./configure --prefix="$HPCAI_PREFIX" --disable-static
make -j"$JOBS"
make install
