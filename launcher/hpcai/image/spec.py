"""ImageSpec: everything that decides what an image contains, and the tag and labels it yields.

A spec is built from a flavor (flavors.toml) plus the user's options, validated once here, and
then rendered (render.py) and built (build.py) without further checks. Build-time inputs that do
not change the image's identity (wheelhouse, CA bundle, apt sources) still live in the spec,
because the templates must know whether to copy them in.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from hpcai import __version__
from hpcai import labels as label
from hpcai import paths
from hpcai.image.components import Source
from hpcai.image.options import BUILD_INPUTS, SWITCHES, variable
from hpcai.image.values import (ARCHES, FILE_NAME, FILE_NAME_SHAPE, check_hpc_libs, check_image_options, check_payloads,
                                component_selections, parse_gpu_archs, parse_mpi, parse_payloads, parse_switch,
                                parse_variants, payload_manifest)
from hpcai.image.flavors import Flavor, Mpi, flavor, flavor_defaults, flavors
from hpcai.errors import UsageError, shaped, unknown
from hpcai.resources import git_sha

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
    ssh: bool = False  # an ssh server for launchers that start ranks over ssh (Kubeflow MPIJob workers)
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
        name as HPE keeps its `-hvd`/`-ss` images apart: -mpich|-nompi, -noofi, -cxi, -hvd, -ssh, -arm64, -ss."""
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


def make_spec(flavor_name: str, *, base: str | None = None, arch: str = "amd64",
              mpi: str | None = None, ofi: str | None = None, horovod: str | None = None,
              cxi: str | None = None, ssh: str | None = None, gpu_archs: str | None = None, hpc_libs: str | None = None, payloads: str | None = None,
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
    given = {"ofi": ofi, "horovod": horovod, "cxi": cxi, "ssh": ssh}
    on = {s.name: parse_switch(f"{variable(s.name)} value", given[s.name], default=s.default) for s in SWITCHES}
    with_ofi, with_hvd, with_cxi = on["ofi"], on["horovod"], on["cxi"]
    if with_hvd and chosen_mpi is Mpi.NONE:
        raise UsageError("Horovod needs MPI; drop WITH_HVD or choose --mpi ompi|mpich")
    if with_hvd and fl.family == "poplar":
        raise UsageError("Horovod is not supported on pytorch-poplar; valid flavors for Horovod: "
                         + ", ".join(n for n, f in flavors().items() if f.family != "poplar"))
    if on["ssh"] and chosen_mpi is Mpi.NONE:
        raise UsageError("--ssh (WITH_SSH) serves MPI launchers that start ranks over ssh; "
                         "choose --mpi ompi|mpich with it")
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
        mpi=chosen_mpi, ofi=with_ofi, horovod=with_hvd, cxi=with_cxi, ssh=on["ssh"], gpu_archs=archs, hpc_libs=libs, payloads=chosen_payloads,
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
