"""The machine hpcai runs on, as planning sees it: the one seam tests replace (a FakeHost
answers from fixed data, so a plan for a Cray EX node can be checked on any machine)."""

from __future__ import annotations

import glob as _glob
import os
import re
import subprocess
import sys
from pathlib import Path


def version_key(path: str) -> list:
    # /opt/cray/libfabric/1.22.0/lib64 sorts above 1.15.2.0 (numbers compared as numbers)
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path)]


class Host:
    """The machine hpcai runs on, as seen by planning. Tests substitute their own."""

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def glob(self, pattern: str) -> list[str]:
        return _glob.glob(pattern)

    def realpath(self, path: str) -> str:
        return os.path.realpath(path)

    def ldconfig_dir(self, soname: str) -> str | None:
        """Folder where the dynamic loader finds `soname` (`ldconfig -p`), if any."""
        exe = self.which("ldconfig") or "/sbin/ldconfig"
        try:
            res = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        for line in res.stdout.splitlines():
            if line.strip().startswith(soname + " ") and "=>" in line:
                return str(Path(line.split("=>", 1)[1].strip()).parent)
        return None

    # socket and shutil are imported where needed: every launch pays for module imports
    def hostname(self) -> str:
        return os.uname().nodename  # what socket.gethostname() returns

    def fqdn(self) -> str:
        import socket

        return socket.getfqdn() if "." not in self.hostname() else self.hostname()

    def which(self, cmd: str) -> str | None:
        import shutil

        return shutil.which(cmd)

    def resolve(self, name: str) -> str | None:
        import socket

        try:
            return socket.gethostbyname(name)
        except OSError:
            return None

    def environ(self) -> dict[str, str]:
        return dict(os.environ)

    def free_port(self) -> int:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def python(self) -> str:
        return sys.executable

    def shim(self) -> list[str]:
        """argv prefix of the rank shim, entrypoints/hpcai-shim: POSIX sh, since it starts once
        per rank (a Python start there cost more than hpcai's whole overhead budget)."""
        from hpcai.resources import data_path

        return ["/bin/sh", str(data_path("entrypoints", "hpcai-shim"))]
