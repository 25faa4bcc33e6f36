"""The image options' values, parsed and checked: each option's grammar (the values a spec writes
into FROM, labels, ENV and file names: make_spec refuses a value outside its grammar, naming the
option and the valid shape; render.py still quotes or checks every value it writes), and the
parser of each option that is more than a string. make_spec (spec.py) calls them; the options
themselves are declared in options.py.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from hpcai.errors import UsageError, one_line, shaped, unknown
from hpcai.image.flavors import Flavor, Mpi

ARCHES = ("amd64", "arm64")

# Image references follow the distribution/reference grammar (lowercase repository path).
_HOST = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_NAME = rf"(?:{_HOST}(?:\.{_HOST})*(?::[0-9]+)?/)?{_PATH}(?:/{_PATH})*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REF = re.compile(rf"{_NAME}(?::{_TAG})?(?:@{_DIGEST})?")
# (No square brackets in shapes: the CLI prints errors through rich, which reads them as markup.)
REF_SHAPE = ("an image reference like nvcr.io/nvidia/pytorch:25.06-py3 (registry:port/name:tag@sha256:digest, "
             "all but the lowercase name optional)")
TAG_REF_SHAPE = "an image reference like hpcai/pytorch-cpu:1 (registry:port/name:tag, all but the lowercase name optional)"
# A base may also be a SIF file or sandbox folder (Apptainer's --bootstrap localimage).
BASE = re.compile(rf"(?:{IMAGE_REF.pattern})|(?:\.{{0,2}}/[A-Za-z0-9._+/-]+)")
BASE_SHAPE = f"{REF_SHAPE}, or a SIF/sandbox path (/… or ./…: letters, digits, . _ + - /) for --bootstrap localimage"
REPOSITORY = re.compile(_NAME)
REPOSITORY_SHAPE = "a registry/namespace like registry.example.org:5000/hpcai (lowercase path)"
TAG = re.compile(_TAG)
TAG_SHAPE = "a tag like 25.06 (letters, digits, _ . -, not starting with . or -, at most 128)"
VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+~-]{0,63}")
VERSION_SHAPE = "a version like 2.5.1 (letters, digits, . _ + ~ -, starting with a letter or digit)"
FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
FILE_NAME_SHAPE = "a file name of letters, digits, . _ + - (it is written into the Dockerfile and def: rename the file)"


def parse_mpi(value: str | None) -> Mpi:
    """WITH_MPI / --mpi: 1|yes|on|true|ompi -> ompi, 0|no|off|false|none -> none, mpich. Default ompi."""
    v = (value or "").strip().lower()
    if v in ("", "1", "yes", "on", "true", "ompi", "openmpi"):
        return Mpi.OMPI
    if v in ("0", "no", "off", "false", "none"):
        return Mpi.NONE
    if v == "mpich":
        return Mpi.MPICH
    raise unknown("MPI", value or "", ["ompi", "mpich", "none", "1", "0"])


def parse_switch(what: str, value: str | None, default: bool) -> bool:
    """WITH_OFI / WITH_HVD style switches; empty means the default."""
    v = (value or "").strip().lower()
    if v == "":
        return default
    if v in ("1", "yes", "on", "true"):
        return True
    if v in ("0", "no", "off", "false"):
        return False
    raise unknown(what, value or "", ["1", "0", "yes", "no", "on", "off", "true", "false"])


def payload_manifest(name: str):
    """load_payload, memoized per payloads folder: rendering the option matrix would otherwise
    parse every manifest hundreds of times."""
    from hpcai import payloads

    return _payload_manifest(payloads.payloads_root(), name)


@functools.lru_cache(maxsize=256)
def _payload_manifest(root: Path, name: str):
    from hpcai import payloads

    return payloads.load_payload(name)  # raises for unknown names, listing the valid ones


def check_payloads(fl: Flavor, names: tuple[str, ...]) -> None:
    from hpcai import payloads

    for name in names:
        manifest = payload_manifest(name)
        if not manifest.supports(fl.name):
            ok = [p for p in payloads.available_payloads() if payload_manifest(p).supports(fl.name)]
            raise UsageError(f"payload {name!r} does not support flavor {fl.name}; "
                             f"payloads for {fl.name}: {', '.join(ok)}")


def check_hpc_libs(path: Path) -> None:
    """A site-libraries folder must exist and hold libfabric.so* (libcxi and deps optional)."""
    if not path.is_dir():
        raise UsageError(f"HPC_LIBS_DIR {str(path)!r} is not a directory")
    if not any(path.rglob("libfabric.so*")):
        raise UsageError(f"HPC_LIBS_DIR {str(path)!r} holds no libfabric.so*; "
                         "copy the site's libfabric (and libcxi, deps) there")


def parse_payloads(value: str | None, fl: Flavor) -> tuple[str, ...]:
    """`--payloads a,b` / PAYLOADS; empty means the flavor's defaults, `none` means no payloads.
    Each name must be a payload folder's name (no path: `../x` would leave the payloads folder)."""
    from hpcai import payload_schema

    v = (value or "").strip()
    if not v:
        return fl.default_payloads
    if v == "none":
        return ()
    names = dict.fromkeys(p.strip() for p in v.split(",") if p.strip())
    return tuple(shaped("--payloads (PAYLOADS)", p, payload_schema.NAME, payload_schema.NAME_SHAPE) for p in names)


def component_selections(sets: list[str]) -> dict[str, str]:
    """Versions chosen with <NAME>_VERSION, then `--set NAME=VERSION` (which wins), each checked
    against the version grammar and named by where it came from."""
    from hpcai.image import components

    from_env = components.env_selections()
    from_sets = components.parse_sets(sets)
    for name, version in {**from_env, **from_sets}.items():
        what = f"--set {name}" if name in from_sets else name.upper().replace("-", "_") + "_VERSION"
        shaped(what, version, VERSION, VERSION_SHAPE)
    return {**from_env, **from_sets}


# The GPU architectures a family's compilers name: CUDA compute capabilities without the dot (80,
# 90, 90a, 100f), ROCm's LLVM processor names (gfx90a MI200, gfx942 MI300, gfx1100 …).
GPU_ARCH = {
    "cuda": (re.compile(r"[1-9][0-9]{1,2}[af]?"), "a compute capability without the dot, e.g. 80, 90 or 90a"),
    "rocm": (re.compile(r"gfx[0-9]{2,4}[0-9a-f]?"), "an AMD GPU processor name, e.g. gfx90a or gfx942"),
}


def parse_gpu_archs(value: str | None, fl: Flavor) -> tuple[str, ...]:
    """--gpu-arch 80,90 (CUDA) or gfx90a,gfx942 (ROCm) -> ("80", "90"): the GPU architectures GPU
    payloads (nccl-tests, rccl-tests) and MPICH's yaksa are compiled for; fewer builds faster.
    Empty: each payload's own default list."""
    if not value or not value.strip():
        return ()
    if fl.family not in GPU_ARCH:
        raise UsageError(f"--gpu-arch (GPU_ARCHS) applies to CUDA and ROCm flavors only, not {fl.name}")
    shape, example = GPU_ARCH[fl.family]
    archs = tuple(a.strip() for a in value.split(","))
    for arch in archs:
        shaped("--gpu-arch (GPU_ARCHS) value", arch, shape, f"{example}, comma-separated")
    return tuple(dict.fromkeys(archs))


def check_image_options(base: str | None, ngc_version: str | None, rocm_version: str | None,
                        repository: str | None, tag: str | None) -> None:
    """The options that become part of FROM, the labels or the image's tag, each in its grammar."""
    for what, value in (("--ngc-version (NGC_VERSION)", ngc_version), ("--rocm-version (ROCM_VERSION)", rocm_version)):
        if value:
            shaped(what, value, TAG, TAG_SHAPE)
    if base:
        shaped("--base (BASE_IMAGE)", base, BASE, BASE_SHAPE)
    if repository:
        shaped("--repository (HPCAI_REPOSITORY)", repository.rstrip("/"), REPOSITORY, REPOSITORY_SHAPE)
    if tag:
        shaped("--tag (TAG)", tag, IMAGE_REF, TAG_REF_SHAPE)


def parse_variants(values: list[str], chosen: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """`--variant PAYLOAD=NAME`: a build variant the payload's manifest declares ([variants.NAME]),
    of a payload the image holds; at most one per payload."""
    picked: dict[str, str] = {}
    for value in values:
        payload, sep, variant = one_line("--variant", value).partition("=")
        if not sep or not payload or not variant:
            raise UsageError(f"--variant {value!r}: expected PAYLOAD=VARIANT, e.g. hf-clm=seed")
        if payload not in chosen:
            raise unknown("--variant payload", payload, chosen)
        known = payload_manifest(payload).variants
        if variant not in known:
            if not known:
                raise UsageError(f"--variant {payload}={variant}: payload {payload} has no build variants")
            raise unknown(f"--variant for {payload}", variant, known)
        if picked.get(payload, variant) != variant:
            raise UsageError(f"--variant {payload}: given twice ({picked[payload]}, {variant}); choose one")
        picked[payload] = variant
    return tuple(sorted(picked.items()))
