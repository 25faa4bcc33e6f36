"""Shared helpers for the launch unit tests: a Host that answers from fixed data, and goldens.

FakeHost stands in for the machine (paths, ldconfig, DNS, environment, PATH), so plans for a
Cray EX or JSC node can be checked exactly on any machine. Goldens live in golden_launch/ and are
rewritten by `make golden` (HPCAI_REGEN_GOLDEN=1).
"""

from __future__ import annotations

import os
from pathlib import Path

from hpcai.run.host import Host
from hpcai.run.plan import LaunchOptions

GOLDEN = Path(__file__).parent / "golden_launch"
PY = "/usr/bin/python3"
SHIM_PATH = "/usr/lib/python3/dist-packages/hpcai/_data/entrypoints/hpcai-shim"


class FakeHost(Host):
    def __init__(self, paths=(), env=None, hostname="node001", dns=None, ldconfig=None,
                 commands=("srun",)):
        self.paths = set(paths)
        self.env = dict(env or {})
        self.name = hostname
        self.dns = dict(dns or {})
        self.ld = ldconfig
        self.commands = set(commands)

    def exists(self, path):
        return path in self.paths

    def glob(self, pattern):
        import fnmatch

        return [p for p in self.paths if fnmatch.fnmatchcase(p, pattern)]

    def ldconfig_dir(self, soname):
        return self.ld

    def hostname(self):
        return self.name

    def fqdn(self):
        return self.name

    def which(self, cmd):
        return f"/usr/bin/{cmd}" if cmd in self.commands else None

    def resolve(self, name):
        return self.dns.get(name)

    def environ(self):
        return dict(self.env)

    def free_port(self):
        return 29555

    def python(self):
        return PY

    def shim(self):
        return ["/bin/sh", SHIM_PATH]


CRAY = FakeHost(paths={"/opt/cray/libfabric/1.15.2.0/lib64", "/opt/cray/libfabric/1.22.0/lib64",
                       "/opt/cray/libfabric/1.9.0/lib64", "/run/cxi"},
                env={"SLURM_JOB_ID": "4242", "SLURM_JOB_NUM_NODES": "2",
                     "SLURM_JOB_NODELIST": "nid[001234-001235]"})


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("HPCAI_REGEN_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"golden {name} missing; create it with `make golden`"
    assert text == path.read_text(), f"{name} changed; regenerate with `make golden` if intended"


def _opts(tmp_path, **kw):
    kw.setdefault("image", "IMG.sif")
    kw.setdefault("output_dir", str(tmp_path / "run"))
    kw.setdefault("payload", "sanity")
    return LaunchOptions(**kw)


def submit_secret_and_wait(hpcai, site: str, tmp_path: Path):
    """`hpcai submit --wait` on SITE of a --cmd whose `--password` is secret, to a stand-in
    scheduler whose job never writes a final status: (the CLI result, the run folder)."""
    sif, run = tmp_path / "x.sif", tmp_path / "r"
    sif.write_bytes(b"")
    res = hpcai("submit", "--site", site, "--userns", "--image", str(sif), "-N", "2", "-o", str(run), "--wait",
                "--cmd", "--", "tool", "--password", "s3cret")
    assert res.exit_code == 1, res.stderr  # the stand-in job never wrote a final status
    return res, run
