"""Golden files for three representative images, in both formats.

Regenerate after an intended template change with `make golden` (HPCAI_REGEN_GOLDEN=1 pytest
tests/unit -k golden) and review the diff. Git sha and build date are fixed so the files are stable.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpcai.image.render import render
from hpcai.image.spec import make_spec

GOLDEN = Path(__file__).parents[1] / "golden"
FIXED = {"sha": "0123456789ab", "build_date": "2026-01-01T00:00:00Z"}

CASES = {
    # The HPE-style flagship: NGC + Open MPI over OFI + aws-ofi-nccl + Horovod + site libraries.
    "pytorch-ngc-ompi-ofi-hvd-ss": dict(flavor="pytorch-ngc", mpi="ompi", ofi="1", horovod="1", ss=True,
                                        payloads="sanity,nccl-tests,osu"),
    # ROCm with MPICH (Cray MPICH ABI), no Horovod.
    "tensorflow-rocm-mpich-ofi": dict(flavor="tensorflow-rocm", mpi="mpich", ofi="1", horovod="0", ss=False,
                                      payloads="sanity,osu"),
    # The CPU image CI builds, with the air-gapped inputs.
    "pytorch-cpu-default-airgapped": dict(flavor="pytorch-cpu", mpi="ompi", ofi="1", horovod="0", ss=False,
                                          payloads="sanity,mpi-allreduce", airgapped=True),
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("golden-inputs")
    (root / "ss11-libs").mkdir()
    (root / "ss11-libs" / "libfabric.so.1").write_bytes(b"")
    (root / "wheels").mkdir()
    (root / "ca.crt").write_text("x")
    (root / "debian.sources").write_text("Types: deb\n")
    return root


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("fmt,suffix", [("docker", "Dockerfile"), ("apptainer", "def")])
def test_golden(name, fmt, suffix, inputs):
    case = dict(CASES[name])
    extra = {}
    if case.pop("ss"):
        extra["hpc_libs"] = str(inputs / "ss11-libs")
    if case.pop("airgapped", False):
        extra.update(wheelhouse=str(inputs / "wheels"), ca_bundle=str(inputs / "ca.crt"),
                     apt_sources=str(inputs / "debian.sources"))
    spec = make_spec(case.pop("flavor"), **case, **extra, **FIXED)
    text = render(spec, fmt)
    path = GOLDEN / f"{name}.{suffix}"
    if os.environ.get("HPCAI_REGEN_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} missing: run `make golden`"
    assert text == path.read_text(), f"{path.name} differs: review, then `make golden`"
