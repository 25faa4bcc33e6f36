#!/bin/bash
# libcxi.sh: libcxi, the user-space library of HPE's Cassini NIC, into $HPCAI_PREFIX, built as
# HPE's recipes do against the Cassini and CXI driver headers (the two steps before). libfabric's
# cxi provider links it (--cxi); at run time it talks to the host's CXI driver.
# No systemd units or udev rules: those belong to the host's Slingshot install, not an image.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# libcxi's build looks for the Cassini headers' files beside its source tree, as HPE's build
# lays them out (../cassini-headers/install/share/…): point that at the prefix they went to.
prepare_source() { mkdir -p ../cassini-headers && ln -sfn "$HPCAI_PREFIX" ../cassini-headers/install; }
autotools_install LIBCXI CPPFLAGS="-I$HPCAI_PREFIX/include" --with-systemd=no \
  --with-systemdsystemunitdir=no --with-udevrulesdir=no
ls "$HPCAI_PREFIX"/lib/libcxi.so*
