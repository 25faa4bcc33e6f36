"""Every image option declared once, as the launch options are (run/options.py).

One row per option: its flags, the Make variables it also reads (`make build-pytorch-ngc
WITH_OFI=1` and `hpcai build pytorch-ngc --ofi 1` are the same), its help, and whether it picks
the image (and so its tag: `sif` and `sqsh` take these to find the image `build` made) or only
feeds the build. The yes/no switches also declare their default, label and tag word. Read by the
CLI (cli/build.py makes its typer options from OPTIONS), by make_spec (the switches' defaults and
names), by ImageSpec (labels, the tag's variant words) and by a test that keeps the Makefile's
variables in step. Adding an option is a row here and its use in the spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from hpcai import labels


@dataclass(frozen=True)
class ImageOption:
    name: str                  # make_spec's keyword and the command's parameter
    flags: tuple[str, ...]
    envvars: tuple[str, ...]   # the Make variables it also reads, first the one the docs name
    help: str
    kind: Any = Optional[str]  # what typer reads the value as
    default: Any = None        # None: unset (the flavor's, or the switch's default below)
    picks_image: bool = True   # False: a build input only, never part of the tag


@dataclass(frozen=True)
class Switch:
    """A yes/no option that builds something in: its default, the label that records it, and the
    word the tag gets when it differs from the flavor's default (HPE's `-hvd`, `-noofi`)."""

    name: str
    default: bool
    label: str
    word: str  # in the tag when the switch is not at its default


SWITCHES = (  # in the order their words appear in a tag (after the MPI's, before -arm64 and -ss)
    Switch("ofi", True, labels.OFI, "noofi"),
    Switch("cxi", False, labels.CXI, "cxi"),
    Switch("horovod", False, labels.HOROVOD, "hvd"),
    Switch("ssh", False, labels.SSH, "ssh"),
)

OPTIONS = (
    ImageOption("base", ("--base",), ("BASE_IMAGE",), "Base image (default: the flavor's)."),
    ImageOption("arch", ("--arch",), ("ARCH",), "amd64 or arm64 (GH200).", kind=str, default="amd64"),
    ImageOption("mpi", ("--mpi",), ("WITH_MPI",), "ompi | mpich | none (or 1/0). Default ompi."),
    ImageOption("ofi", ("--ofi",), ("WITH_OFI",), "libfabric + OFI NCCL/RCCL plugin: 1/0. Default 1."),
    ImageOption("horovod", ("--horovod",), ("WITH_HVD",), "Build Horovod: 1/0. Default 0."),
    ImageOption("cxi", ("--cxi",), ("WITH_CXI",),
                "libfabric's cxi provider (HPE Slingshot) built in, from HPE's libcxi sources: 1/0. "
                "Default 0 (the host's libfabric is swapped in at run time)."),
    ImageOption("ssh", ("--ssh",), ("WITH_SSH",),
                "An ssh server (hpcai-sshd) for launchers that start ranks over ssh, as Kubeflow's "
                "MPIJob workers need (`hpcai export k8s`): 1/0. Default 0; the tag gets -ssh."),
    ImageOption("gpu_archs", ("--gpu-arch", "--cuda-arch"), ("GPU_ARCHS", "CUDA_ARCHS"),
                "GPU architectures GPU payloads compile for: CUDA 90 or 80,90; ROCm gfx90a or "
                "gfx90a,gfx942 (default: each payload's own list). --cuda-arch is the old name."),
    ImageOption("hpc_libs", ("--hpc-libs",), ("HPC_LIBS_DIR",),
                "Site libraries folder (must hold libfabric.so*): bakes them in, tag gets -ss."),
    ImageOption("payloads", ("--payloads",), ("PAYLOADS",),
                "Comma list of payloads, 'none', or empty for the flavor's defaults."),
    ImageOption("ngc_version", ("--ngc-version",), ("NGC_VERSION",), "NGC release, e.g. 25.06."),
    ImageOption("rocm_version", ("--rocm-version",), ("ROCM_VERSION",), "ROCm release, e.g. 6.4."),
    ImageOption("sets", ("--set",), (), "Component version, NAME=VERSION (repeatable); also <NAME>_VERSION=.",
                kind=Optional[list[str]]),
    ImageOption("variants", ("--variant",), (), "A payload's build variant, PAYLOAD=NAME (repeatable), "
                "e.g. hf-clm=seed; `hpcai payloads show` lists them.", kind=Optional[list[str]]),
    ImageOption("allow_unverified", ("--allow-unverified",), ("ALLOW_UNVERIFIED",),
                "Allow component versions without a known sha256 (download not checked).", kind=bool, default=False),
    ImageOption("repository", ("--repository",), ("HPCAI_REPOSITORY",), "Registry/namespace of the tag. Default hpcai."),
    ImageOption("tag", ("--tag",), ("TAG",), "Full image tag, overriding the computed one."),
    ImageOption("wheelhouse", ("--wheelhouse",), ("WHEELHOUSE",), "Local wheels for pip in the build.",
                picks_image=False),
    ImageOption("ca_bundle", ("--ca-bundle",), ("CA_BUNDLE",), "CA bundle for pip/curl in the builder.",
                picks_image=False),
    ImageOption("apt_sources", ("--apt-sources",), ("APT_SOURCES",), "apt sources file to use in the build.",
                picks_image=False),
    ImageOption("sources_dir", ("--sources",), ("SOURCES_DIR",),
                "Folder of pre-downloaded source tarballs (air-gapped); still sha256-checked.", picks_image=False),
)

BUILD_INPUTS = tuple(o.name for o in OPTIONS if not o.picks_image)


def option(name: str) -> ImageOption:
    return next(o for o in OPTIONS if o.name == name)


def variable(name: str) -> str:
    """The Make variable an option's messages name (WITH_OFI)."""
    return option(name).envvars[0]
