#!/bin/bash
# finalize.sh: make the final stage find our prefix first.
# NGC >= 24.11 ships an EFA-only libfabric and NCCL net plugin under /opt/amazon that would shadow
# ours (and can segfault off AWS): with OFI on, it goes.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
printf '%s\n' "$HPCAI_PREFIX/lib" > /etc/ld.so.conf.d/000-hpcai.conf
if [ "${HPCAI_WITH_OFI:-1}" = 1 ] && [ -d /opt/amazon ]; then
  log "removing the base image's /opt/amazon (EFA libfabric / NCCL plugin)"
  rm -rf /opt/amazon
  grep -l /opt/amazon /etc/ld.so.conf.d/* 2>/dev/null | xargs -r rm -f
fi
ldconfig
mkdir -p "$HPCAI_PREFIX/bin" "$HPCAI_PREFIX/entrypoint.d" "$HPCAI_PREFIX/payloads"
# Empty bind destinations for the host's libraries: Charliecloud (and Apptainer without overlay)
# cannot create mount points inside a read-only SquashFS image.
# /host/mpi: the host MPI swap's (a site's mpi_swap) library folder and its dependencies' folders,
# one per folder (four cover Cray MPICH's lib, GTL, PMI and libfabric).
mkdir -p /host/lib /host/usr /host/mpi/lib /host/mpi/dep0 /host/mpi/dep1 /host/mpi/dep2 /host/mpi/dep3
