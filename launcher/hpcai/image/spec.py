"""ImageSpec: everything that decides what an image contains, and the tag and labels it yields.

A spec is built from a flavor (flavors.toml) plus the user's options, validated once here, and
then rendered (render.py) and built (build.py) without further checks. Build-time inputs that do
not change the image's identity (wheelhouse, CA bundle, apt sources) still live in the spec,
because the templates must know whether to copy them in.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from hpcai import __version__
from hpcai import labels as label
from hpcai import paths
from hpcai.image.components import Source
from hpcai.image.options import BUILD_INPUTS, SWITCHES, variable
from hpcai.image.flavors import Flavor, Mpi, flavor, flavor_defaults, flavors
from hpcai.errors import UsageError, one_line, shaped, unknown
from hpcai.resources import git_sha

ARCHES = ("amd64", "arm64")

# The grammars of the options a spec writes into the Dockerfile and the def (FROM, labels, ENV,
# file names in COPY/%files/RUN). make_spec refuses a value outside its grammar, naming the option
# and the valid shape; render.py still quotes or checks every value it writes.
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


def parse_reference(ref: str) -> tuple[str, str, str]:
    """(name, tag, digest) of an image reference, "" for a part it lacks:
    `host:5000/repo:tag@sha256:…` -> (`host:5000/repo`, `tag`, `sha256:…`). The docker SDK's
    parse_repository_tag decides (a registry port is no tag); it returns one part after the name,
    the digest when there is an '@', so it is asked again for the tag before the digest."""
    from docker.utils import parse_repository_tag

    name, digest = parse_repository_tag(ref) if "@" in ref else (ref, None)
    name, tag = parse_repository_tag(name)
    return name, tag or "", digest or ""


def split_image(ref: str) -> tuple[str, str]:
    """`nvcr.io/nvidia/pytorch:25.06-py3` -> (`nvcr.io/nvidia/pytorch`, `25.06-py3`): the name and
    the word hpcai's own tag starts with. A digest is never that word (64 hex digits once became
    the tag): `repo:tag@sha256:…` gives its tag, `repo@sha256:…` `sha256-` and 12 digits of it
    (the digest names the image, shortened for a tag), a reference with neither `latest`."""
    name, tag, digest = parse_reference(ref)
    if tag:
        return name, tag
    if digest:
        algorithm, _, hexdigits = digest.partition(":")
        return name, f"{algorithm}-{hexdigits[:12]}"
    return name, "latest"


@dataclass(frozen=True)
class ImageSpec:
    """One image to build. Every field has a default except flavor/base; see `make_spec`."""

    flavor: Flavor
    base: str  # full image reference, repo:tag
    arch: str = "amd64"
    mpi: Mpi = Mpi.OMPI
    ofi: bool = True
    horovod: bool = False
    cxi: bool = False  # libfabric's cxi provider built in (libcxi from HPE's sources)
    gpu_archs: tuple[str, ...] = ()  # GPU architectures payloads compile for (empty: their defaults)
    hpc_libs: Path | None = None
    payloads: tuple[str, ...] = ()
    payload_variants: tuple[tuple[str, str], ...] = ()  # (payload, variant): --variant PAYLOAD=NAME
    components: tuple[tuple[str, Source], ...] = ()
    framework_requirement: str = ""  # pip requirement for CPU flavors ("" elsewhere)
    repository: str = "hpcai"  # registry/namespace part of the tag
    tag_override: str = ""
    wheelhouse: Path | None = None
    ca_bundle: Path | None = None
    apt_sources: Path | None = None
    sources_dir: Path | None = None  # pre-downloaded tarballs (air-gapped); still sha256-checked
    build_date: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc)
                            .strftime("%Y-%m-%dT%H:%M:%SZ"))
    git_sha: str = field(default_factory=git_sha)

    @property
    def family(self) -> str:
        return self.flavor.family

    @property
    def sources(self) -> dict[str, Source]:
        return dict(self.components)

    @property
    def from_source(self) -> bool:
        """GPU bases get the stack compiled from checksummed sources; the CPU flavors use Debian's
        packages (the upstream download hosts are not reachable everywhere CI runs)."""
        return self.family != "cpu"

    def traits(self) -> dict[str, object]:
        """What a component record's `when` reads (components.toml; `trait_names` lists the terms)."""
        return {"from_source": self.from_source, "ofi": self.ofi, "cxi": self.cxi, "horovod": self.horovod,
                "mpi": self.mpi.value, "family": self.family}

    def stack(self) -> list[str]:
        """The components built into the image by their own install script, in build order: the
        components.toml records whose `when` holds for this spec's traits. The one rule for which
        of them a spec uses (render's build steps and packages, the labels and the tag read it)."""
        from hpcai.image import components

        return components.stack(self.traits())

    def used_components(self) -> list[str]:
        """Components this image downloads: the stack, and what its payloads' install hooks fetch
        (each manifest's `downloads`)."""
        used = [*self.stack(), *(c for p in self.payloads for c in payload_manifest(p).downloads_for(self.family))]
        return [n for n in dict.fromkeys(used) if n in self.sources]

    @property
    def bakes_site_libs(self) -> bool:
        """--hpc-libs: the site's libraries are baked in (an `-ss` image, in HPE's naming)."""
        return self.hpc_libs is not None

    @property
    def variant(self) -> str:
        """Readable words for each way the build differs from the flavor's default, in the image
        name as HPE keeps its `-hvd`/`-ss` images apart: -mpich|-nompi, -noofi, -cxi, -hvd, -arm64, -ss."""
        words = {Mpi.OMPI: [], Mpi.MPICH: ["mpich"], Mpi.NONE: ["nompi"]}[self.mpi]
        words += [s.word for s in SWITCHES if getattr(self, s.name) != s.default]
        words += [w for w, on in (("arm64", self.arch != "amd64"), ("ss", self.bakes_site_libs)) if on]
        return "".join(f"-{w}" for w in words)

    @property
    def content_digest(self) -> str:
        """"" for the flavor's own payloads and the default component versions; otherwise 6 hex
        digits of what differs (the payload list, the versions used), so such builds get a tag of
        their own, and so do builds for chosen GPU architectures. `hpcai inspect` shows the values
        (hpcai.payloads, hpcai.component.*, hpcai.gpu-archs)."""
        from hpcai.image import components

        defaults = components.resolve({})
        changed = sorted((n, self.sources[n].version, self.sources[n].sha256) for n in self.used_components()
                         if self.sources[n] != defaults.get(n))
        if self.payloads == self.flavor.default_payloads and not changed and not self.gpu_archs \
                and not self.payload_variants:
            return ""
        # GPU architectures and variants count only when chosen, so other builds keep their tags.
        text = repr((self.payloads, changed, *((self.gpu_archs,) if self.gpu_archs else ()),
                     *((self.payload_variants,) if self.payload_variants else ())))
        return hashlib.sha256(text.encode()).hexdigest()[:6]

    @property
    def tag(self) -> str:
        if self.tag_override:
            return self.tag_override
        base_tag = split_image(self.base)[1]
        digest = f"-{self.content_digest}" if self.content_digest else ""
        return f"{self.repository}/{self.flavor.name}-hpc{self.variant}:{base_tag}-{self.git_sha}{digest}"

    def labels(self) -> dict[str, str]:
        """OCI and hpcai.* labels; the launcher reads hpcai.payloads and hpcai.mpi."""
        labels = {
            "org.opencontainers.image.title": f"hpcai {self.flavor.name}",
            "org.opencontainers.image.description":
                f"{self.flavor.framework} on {self.base} with the hpcai HPC stack",
            "org.opencontainers.image.version": __version__,
            "org.opencontainers.image.revision": self.git_sha,
            "org.opencontainers.image.created": self.build_date,
            "org.opencontainers.image.base.name": self.base,
            "org.opencontainers.image.licenses": "Apache-2.0",
            label.FLAVOR: self.flavor.name,
            label.FAMILY: self.family,
            label.FRAMEWORK: self.flavor.framework,
            label.BASE: self.base,
            label.ARCH: self.arch,
            label.MPI: self.mpi.value,
            **{s.label: label.switch(getattr(self, s.name)) for s in SWITCHES},
            label.HPC_LIBS: paths.HPC_LIBS if self.bakes_site_libs else "",
            label.PAYLOADS: ",".join(self.payloads),
            label.STACK: "source" if self.from_source else "debian-packages",
            label.VERSION: __version__,
            label.GIT_SHA: self.git_sha,
            label.BUILD_DATE: self.build_date,
        }
        for name in self.used_components():
            labels[label.component(name)] = self.sources[name].version
        if self.gpu_archs:
            labels[label.GPU_ARCHS] = ",".join(self.gpu_archs)
        if self.payload_variants:
            labels[label.PAYLOAD_VARIANTS] = ",".join(f"{p}={v}" for p, v in self.payload_variants)
        if self.framework_requirement:
            labels[label.component("framework")] = self.framework_requirement
        return labels


def base_image(fl: Flavor, base: str | None, ngc_version: str | None, rocm_version: str | None) -> str:
    if base:
        return base
    values = {**flavor_defaults(), **dict(fl.defaults)}
    if ngc_version:
        values["ngc_version"] = ngc_version
    if rocm_version:
        values["rocm_version"] = rocm_version
    return f"{fl.base}:{fl.tag.format(**values)}"


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
    from hpcai import payloads

    v = (value or "").strip()
    if not v:
        return fl.default_payloads
    if v == "none":
        return ()
    names = dict.fromkeys(p.strip() for p in v.split(",") if p.strip())
    return tuple(shaped("--payloads (PAYLOADS)", p, payloads.NAME, payloads.NAME_SHAPE) for p in names)


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


def make_spec(flavor_name: str, *, base: str | None = None, arch: str = "amd64",
              mpi: str | None = None, ofi: str | None = None, horovod: str | None = None,
              cxi: str | None = None, gpu_archs: str | None = None, hpc_libs: str | None = None, payloads: str | None = None,
              ngc_version: str | None = None, rocm_version: str | None = None,
              sets: list[str] | None = None, allow_unverified: bool = False, variants: list[str] | None = None,
              repository: str | None = None, tag: str | None = None,
              wheelhouse: str | None = None, ca_bundle: str | None = None,
              apt_sources: str | None = None, sources_dir: str | None = None, build_date: str | None = None,
              sha: str | None = None) -> ImageSpec:
    """Validate the user's options into an ImageSpec. Empty strings mean "unset" throughout."""
    from hpcai.image import components

    fl = flavor(flavor_name)
    if arch not in ARCHES:
        raise unknown("architecture", arch, ARCHES)
    check_image_options(base, ngc_version, rocm_version, repository, tag)
    chosen_mpi = parse_mpi(mpi)
    given = {"ofi": ofi, "horovod": horovod, "cxi": cxi}
    on = {s.name: parse_switch(f"{variable(s.name)} value", given[s.name], default=s.default) for s in SWITCHES}
    with_ofi, with_hvd, with_cxi = on["ofi"], on["horovod"], on["cxi"]
    if with_hvd and chosen_mpi is Mpi.NONE:
        raise UsageError("Horovod needs MPI; drop WITH_HVD or choose --mpi ompi|mpich")
    if with_hvd and fl.family == "poplar":
        raise UsageError("Horovod is not supported on pytorch-poplar; valid flavors for Horovod: "
                         + ", ".join(n for n, f in flavors().items() if f.family != "poplar"))
    if with_cxi and (fl.family == "cpu" or not with_ofi):
        raise UsageError("--cxi (WITH_CXI) builds libfabric's cxi provider, which needs libfabric built from "
                         "source: a GPU flavor (" + ", ".join(n for n, f in flavors().items() if f.family != "cpu")
                         + ") with --ofi 1")
    archs = parse_gpu_archs(gpu_archs, fl)
    libs = Path(hpc_libs).expanduser() if hpc_libs else None
    if libs is not None:
        check_hpc_libs(libs)
    chosen_payloads = parse_payloads(payloads, fl)
    check_payloads(fl, chosen_payloads)
    chosen_variants = parse_variants(variants or [], chosen_payloads)
    sources = components.resolve(component_selections(sets or []), allow_unverified)
    files = {}
    for what, value in (("wheelhouse", wheelhouse), ("CA bundle", ca_bundle),
                        ("apt sources file", apt_sources), ("sources folder", sources_dir)):
        p = Path(value).expanduser() if value else None
        if p is not None and not p.exists():
            raise UsageError(f"{what} {str(p)!r} does not exist")
        files[what] = p
    if files["wheelhouse"] is not None and not files["wheelhouse"].is_dir():
        raise UsageError(f"wheelhouse {str(files['wheelhouse'])!r} is not a directory")
    if files["apt sources file"] is not None:  # its name is written into COPY, RUN and %files
        shaped("--apt-sources (APT_SOURCES) file name", files["apt sources file"].name, FILE_NAME, FILE_NAME_SHAPE)
    extra = {}
    if build_date:
        extra["build_date"] = build_date
    if sha:
        extra["git_sha"] = sha
    spec = ImageSpec(
        flavor=fl, base=base_image(fl, base, ngc_version, rocm_version), arch=arch,
        mpi=chosen_mpi, ofi=with_ofi, horovod=with_hvd, cxi=with_cxi, gpu_archs=archs, hpc_libs=libs, payloads=chosen_payloads,
        payload_variants=chosen_variants, components=tuple(sorted(sources.items())),
        framework_requirement=components.python_requirement(fl.framework) if fl.family == "cpu" else "",
        repository=(repository or "hpcai").rstrip("/"), tag_override=tag or "",
        wheelhouse=files["wheelhouse"], ca_bundle=files["CA bundle"],
        apt_sources=files["apt sources file"], sources_dir=files["sources folder"], **extra,
    )
    components.check_verified(spec.used_components(), spec.sources, allow_unverified)
    return spec




def image_tag(flavor_name: str, **options) -> str:
    """The tag `hpcai build FLAVOR` gives the image made with OPTIONS (make_spec's keywords), so
    that `hpcai sif`/`hpcai sqsh FLAVOR` and `make sif-FLAVOR` convert exactly that image: the one
    rule is ImageSpec.tag, reached through the same make_spec. The build-only inputs (BUILD_INPUTS)
    never change a tag, and are refused here so a conversion never depends on them."""
    build_only = sorted(BUILD_INPUTS & options.keys())
    if build_only:
        raise TypeError(f"image_tag: {', '.join(build_only)} feed the build only, not the tag")
    return make_spec(flavor_name, **options).tag
