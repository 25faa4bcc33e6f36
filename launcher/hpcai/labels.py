"""The image labels hpcai writes and reads: one name per key, and the facts a launch takes from them.

The build writes them (`ImageSpec.labels`: the OCI image's labels, which a SIF keeps and a
SquashFS carries in its etc/rc); planning reads which payloads the image holds, its GPU family
and its MPI (`ImageFacts`), GPU selection the family, results the provenance. A label an image
lacks (one not built by hpcai, or an older build) is a fact not known, never an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

PREFIX = "hpcai."
FLAVOR = "hpcai.flavor"
FAMILY = "hpcai.family"            # cuda | rocm | poplar | cpu: the GPU vendor the image is built for
FRAMEWORK = "hpcai.framework"
BASE = "hpcai.base"
ARCH = "hpcai.arch"
MPI = "hpcai.mpi"                  # ompi | mpich | none: which PMI a Slurm step needs, whether the host MPI fits
OFI = "hpcai.ofi"                  # 1 | 0: libfabric and the OFI NCCL/RCCL plugin built in
HOROVOD = "hpcai.horovod"          # 1 | 0
CXI = "hpcai.cxi"                  # 1 | 0: libfabric's cxi provider (Slingshot) built in
SSH = "hpcai.ssh"                  # 1 | 0: an ssh server for launchers that start ranks over ssh (MPIJob)
HPC_LIBS = "hpcai.hpc-libs"        # where baked site libraries are, "" when none
PAYLOADS = "hpcai.payloads"        # the baked payloads, comma-separated
PAYLOAD_VARIANTS = "hpcai.payload-variants"
GPU_ARCHS = "hpcai.gpu-archs"
STACK = "hpcai.stack"              # source | debian-packages
VERSION = "hpcai.version"
GIT_SHA = "hpcai.git-sha"
BUILD_DATE = "hpcai.build-date"
COMPONENT = "hpcai.component."     # + a component name: its version (framework: the pip requirement)
RUN = "hpcai.run"                  # not an image label: each engine container's run record, for cleanup


def component(name: str) -> str:
    return COMPONENT + name


def switch(on: bool) -> str:
    """How a built-in yes/no is written (OFI, HOROVOD, CXI, SSH)."""
    return "1" if on else "0"


@dataclass(frozen=True)
class ImageFacts:
    """What a launch takes from an image's labels."""

    payloads: list[str] | None  # the baked payloads; None: not said, every packaged payload is valid
    family: str | None          # the GPU family; None or "": not said (the site's GPU kind is used)
    mpi: str                    # the image's MPI; "": not said


def facts(labels: Mapping[str, str]) -> ImageFacts:
    return ImageFacts(payloads=[p for p in labels.get(PAYLOADS, "").split(",") if p] or None,
                      family=labels.get(FAMILY), mpi=labels.get(MPI, ""))
