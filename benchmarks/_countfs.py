#!/usr/bin/env python3
"""A read-only FUSE view of a folder that counts the bytes read through it: the shared file system
of benchmarks/stage_scaling.py, where "bytes read from the shared path" is the figure.

    python benchmarks/_countfs.py ROOT MOUNTPOINT [--mmap]   # foreground; fusermount3 -u MOUNTPOINT ends it

Reading MOUNTPOINT/.hpcai-bytes-read gives {"path": bytes, …} so far (that file's own reads are
not counted, and never come from the page cache). Files are served with direct_io: no read is answered from the kernel's page cache,
so the four "nodes" of the test cluster, which share one kernel, cannot share what one of them
read, as separate nodes of a cluster cannot (a model without client caches: each node's reads
reach the file system). direct_io rules out mmap, which sbcast reads its source with ("Can't mmap
file … No such device"); --mmap serves through the page cache instead, which FUSE drops at each
open (no kernel_cache), so one reader's opens are counted whole: the view for a single reader such
as sbcast. Needs mfusepy and libfuse.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
import threading
from collections import defaultdict

import mfusepy

STATS = "/.hpcai-bytes-read"
STATS_SIZE = 1 << 16
ATTRS = ("st_mode", "st_size", "st_nlink", "st_uid", "st_gid", "st_ino")
TIMES = ("st_atime", "st_mtime", "st_ctime")  # given in ns (use_ns)


class CountingView(mfusepy.Operations):
    use_ns = True  # times as nanoseconds (mfusepy's float seconds are deprecated)

    def __init__(self, root: str, direct: bool):
        self.root = os.path.realpath(root)
        self.direct = direct
        self.read_bytes: dict[str, int] = defaultdict(int)
        self._mutex = threading.Lock()  # not `lock`: that name is FUSE's lock operation

    def _real(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def getattr(self, path, fh=None):
        if path == STATS:
            return {"st_mode": stat.S_IFREG | 0o444, "st_size": STATS_SIZE, "st_nlink": 1}
        try:
            st = os.lstat(self._real(path))
        except OSError as exc:
            raise mfusepy.FuseOSError(exc.errno or errno.ENOENT) from None
        return {**{name: getattr(st, name) for name in ATTRS}, **{name: getattr(st, name + "_ns") for name in TIMES}}

    def readdir(self, path, fh):
        return [".", "..", *os.listdir(self._real(path))]

    def open(self, path, fi):
        """fi: libfuse's file info (raw_fi): the stats file is always direct_io, so each read asks
        for the counts now, never the page cache's copy of an earlier read."""
        if fi.flags & (os.O_WRONLY | os.O_RDWR):
            raise mfusepy.FuseOSError(errno.EROFS)
        fi.direct_io = 1 if self.direct or path == STATS else 0
        fi.fh = 0 if path == STATS else os.open(self._real(path), os.O_RDONLY)
        return 0

    def read(self, path, size, offset, fi):
        if path == STATS:
            with self._mutex:
                text = json.dumps(dict(self.read_bytes)).encode()
            return text.ljust(STATS_SIZE)[offset:offset + size]
        data = os.pread(fi.fh, size, offset)
        with self._mutex:
            self.read_bytes[path] += len(data)
        return data

    def release(self, path, fi):
        if fi.fh:
            os.close(fi.fh)
        return 0


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or sys.argv[3:] not in ([], ["--mmap"]):
        sys.exit("usage: _countfs.py ROOT MOUNTPOINT [--mmap]")
    mfusepy.FUSE(CountingView(sys.argv[1], direct=not sys.argv[3:]), sys.argv[2], foreground=True, ro=True,
                 allow_other=True, raw_fi=True)
