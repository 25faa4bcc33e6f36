#!/bin/bash
# cxi-driver.sh: the user-space API headers of HPE's CXI kernel driver (include/uapi/misc/cxi.h,
# include/linux/hpe/…) into $HPCAI_PREFIX/include, for libcxi and libfabric's cxi provider
# (--cxi). The driver itself is the host's; the image needs only its interface.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
headers_install CXI_DRIVER include
