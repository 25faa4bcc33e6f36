"""The components manifest: every source an image build downloads, pinned and checksummed, and
for the stack components how and when each is built.

`components.toml` holds one record per component: a default version with its URL template and
sha256, the other vetted versions (alternates), and for the stack its install script, the
`Condition` under which a spec builds it and the system packages it needs (or, where the image
takes it from Debian, that condition and those packages). `resolve()` turns the user's selections
(`--set libfabric=2.2.0`, `LIBFABRIC_VERSION=2.2.0`) into concrete `Source`s; a version the
manifest does not know is refused unless the user passes `--allow-unverified`, in which case its
download is not checked (and the build log says so).
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from hpcai.errors import UsageError, unknown
from hpcai.resources import data_path, package_file
from hpcai.schema import Key, Shape, Table

UNVERIFIED = "unverified"  # the sha256 placeholder fetch.sh accepts only with a warning


@dataclass(frozen=True)
class Source:
    """One downloadable source at one version."""

    name: str
    version: str
    url: str
    sha256: str  # hex digest, or UNVERIFIED

    @property
    def filename(self) -> str:
        """The file's name in a --sources folder: the URL's last part, or NAME in `URL#NAME`
        (install/lib.sh's fetch reads the URL the same way)."""
        url, _, name = self.url.partition("#")
        return name or url.rsplit("/", 1)[-1]

    @property
    def verified(self) -> bool:
        return self.sha256 != UNVERIFIED

    @property
    def env_prefix(self) -> str:
        """`osu-micro-benchmarks` -> `OSU_MICRO_BENCHMARKS` (install scripts read <PREFIX>_URL …)."""
        return self.name.upper().replace("-", "_")

    def env(self) -> dict[str, str]:
        p = self.env_prefix
        return {f"{p}_VERSION": self.version, f"{p}_URL": self.url, f"{p}_SHA256": self.sha256}


PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+")  # a Debian package name
SCRIPT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.sh")  # a file directly under dockerfiles/install/
_SHA256 = Shape(re.compile(r"[0-9a-f]{64}").fullmatch, "a sha256 digest (64 hex digits, lower case)", "^[0-9a-f]{64}$")
_PACKAGE = Shape(PACKAGE.fullmatch, 'a Debian package name like "libnuma-dev"', f"^{PACKAGE.pattern}$")
_SCRIPT = Shape(lambda v: v == "" or bool(SCRIPT.fullmatch(v)),  # "": none, as when the key is left out
                "a script name like libfabric.sh (a file under dockerfiles/install/)", f"^(|{SCRIPT.pattern})$")
_WHAT = "components.toml"
_ALTERNATE = Table([Key("version", "", required=True), Key("url", "", required=True), Key("sha256", "", shape=_SHA256),
                    Key("source", ""), Key("note", "")], _WHAT)  # note: why this version is listed
# One [components.<name>] record (the file's header comment says what each key means).
RECORD = Table([
    Key("version", "", required=True), Key("url", "", required=True), Key("url_template", ""),
    Key("sha256", "", shape=_SHA256), Key("source", ""), Key("alternates", None, table=_ALTERNATE, many=True),
    Key("install", "", shape=_SCRIPT), Key("when", ()), Key("debian_when", ()), Key("gpu_kernels", False),
    *(Key(f"{prefix}{stage}_packages", (), shape=_PACKAGE) for prefix in ("", "debian_") for stage in ("builder", "final")),
], _WHAT)


@dataclass(frozen=True)
class Condition:
    """A record's `when`: every term must hold; a term holds when one of its `|` alternatives does;
    an alternative is a trait (`ofi`, `mpi:ompi`), `!` before it negates it. No terms: never."""

    terms: tuple[tuple[str, ...], ...] = ()

    def holds(self, traits: Mapping[str, object]) -> bool:
        return bool(self.terms) and all(any(_alternative_holds(a, traits) for a in term) for term in self.terms)


def _alternative_holds(alternative: str, traits: Mapping[str, object]) -> bool:
    negated = alternative.startswith("!")
    name, _, value = alternative.lstrip("!").partition(":")
    found = traits[name] == value if value else bool(traits[name])
    return found != negated


@dataclass(frozen=True)
class Packages:
    """The Debian packages a component needs in each stage: to build it, and to run it."""

    builder: tuple[str, ...] = ()
    final: tuple[str, ...] = ()

    def stage(self, name: str) -> tuple[str, ...]:
        return self.builder if name == "builder" else self.final


@dataclass(frozen=True)
class Component:
    name: str
    url_template: str
    default: Source
    alternates: tuple[Source, ...]
    origin: str  # where the default's checksum was read
    install: str = ""  # its script under dockerfiles/install/ ("" for sources payload hooks fetch)
    when: Condition = field(default_factory=Condition)  # when a spec builds it with `install`
    packages: Packages = field(default_factory=Packages)  # what building it needs
    debian_when: Condition = field(default_factory=Condition)  # when a spec takes it from Debian instead
    debian_packages: Packages = field(default_factory=Packages)  # those Debian packages
    gpu_kernels: bool = False  # compiles GPU kernels: its step gets --gpu-arch (HPCAI_GPU_ARCHS)

    @property
    def known(self) -> dict[str, Source]:
        return {s.version: s for s in (self.default, *self.alternates)}

    def built(self, traits: Mapping[str, object]) -> bool:
        """Whether a spec with these traits builds this component with its install script."""
        return self.when.holds(traits)

    def system_packages(self, stage: str, traits: Mapping[str, object]) -> tuple[str, ...]:
        """The packages stage ("builder" or "final") installs for this component: those its build
        needs, or those that bring it from Debian, or none."""
        if self.built(traits):
            return self.packages.stage(stage)
        if self.debian_when.holds(traits):
            return self.debian_packages.stage(stage)
        return ()


@functools.cache
def _raw() -> dict:
    return tomllib.loads(package_file("image", "components.toml").read_text())


def names() -> list[str]:
    """The component names, in the file's order, without checking their records (manifest() does)."""
    return list(_raw()["components"])


@functools.cache
def manifest() -> dict[str, Component]:
    """Every record of components.toml, in the file's order (the stack's build order), checked."""
    return {name: parse_record(name, c) for name, c in _raw()["components"].items()}


def parse_record(name: str, c: dict) -> Component:
    """One components.toml record, checked: its keys and their types (RECORD), then the condition
    terms, the script, and the packages and `gpu_kernels` only beside the condition they need."""
    path = f"components.{name}"
    RECORD.read(_WHAT, c, f"{path}.")
    # A missing sha256 means no trusted checksum exists (rccl-tests): the source is
    # UNVERIFIED, and make_spec refuses images that use it unless --allow-unverified.
    default = Source(name, c["version"], c["url"].format(version=c["version"]),
                     c.get("sha256", UNVERIFIED))
    alts = tuple(Source(name, a["version"], a["url"], a.get("sha256", UNVERIFIED))
                 for a in c.get("alternates", []))
    install = c.get("install", "")
    if install and not data_path("dockerfiles", "install", install).is_file():
        raise UsageError(f"{_WHAT}: {path}.install {install!r}: no such script in dockerfiles/install/")
    when = _condition(f"{path}.when", c.get("when", []))
    if bool(install) != bool(when.terms):
        raise UsageError(f"{_WHAT}: {path}: `install` and `when` go together (a script needs its condition, "
                         "and a condition without a script builds nothing)")
    debian_when = _condition(f"{path}.debian_when", c.get("debian_when", []))
    packages = _packages(path, c, "", when)
    debian_packages = _packages(path, c, "debian_", debian_when)
    gpu_kernels = c.get("gpu_kernels", False)
    if gpu_kernels and not install:
        raise UsageError(f"{_WHAT}: {path}.gpu_kernels: true only beside `install`")
    # url_template: for versions not listed (when `url` is one concrete file, as for horovod).
    return Component(name, c.get("url_template", c["url"]), default, alts, c.get("source", ""),
                     install, when, packages, debian_when, debian_packages, gpu_kernels)


def _condition(key: str, terms: list[str]) -> Condition:
    """A `when`/`debian_when` list, each alternative checked against the traits a spec has."""
    from hpcai.image.flavors import trait_names

    parsed = tuple(tuple(a.strip() for a in term.split("|")) for term in terms)
    valid = trait_names()
    for term in parsed:
        for alternative in term:
            if alternative.lstrip("!") not in valid:
                raise UsageError(f"{_WHAT}: {key}: unknown term {alternative!r}; valid: {', '.join(valid)} "
                                 "(each may be negated with !)")
    return Condition(parsed)


def _packages(path: str, c: dict, prefix: str, condition: Condition) -> Packages:
    """`<prefix>builder_packages` and `<prefix>final_packages`, only beside the condition that
    installs them."""
    found = {}
    for stage in ("builder", "final"):
        key = f"{prefix}{stage}_packages"
        names = c.get(key, [])
        if names and not condition.terms:
            raise UsageError(f"{_WHAT}: {path}.{key}: no `{prefix}when` says when to install them")
        found[stage] = tuple(names)
    return Packages(**found)


def stack(traits: Mapping[str, object]) -> list[str]:
    """The components a spec with these traits builds with their own install scripts, in build
    order (the records' order): the one rule, ImageSpec.stack reads it."""
    return [name for name, comp in manifest().items() if comp.built(traits)]


def system_packages(stage: str, traits: Mapping[str, object]) -> list[str]:
    """The stack's packages for stage ("builder" or "final"), in record order, each once."""
    found = (p for comp in manifest().values() for p in comp.system_packages(stage, traits))
    return list(dict.fromkeys(found))


def python_requirement(framework: str) -> str:
    """pip requirements of a CPU flavor's framework, space-separated (`torch==2.13.0 numpy==2.4.6`)."""
    return _raw()["python"][framework]


def env_selections(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Versions chosen through <NAME>_VERSION environment variables (empty means unset)."""
    environ = os.environ if environ is None else environ
    found = {}
    for name in manifest():
        value = environ.get(name.upper().replace("-", "_") + "_VERSION", "").strip()
        if value:
            found[name] = value
    return found


def parse_sets(items: list[str]) -> dict[str, str]:
    """`--set libfabric=2.2.0` items -> {"libfabric": "2.2.0"}; unknown names are refused."""
    chosen = {}
    for item in items:
        name, sep, version = item.partition("=")
        name, version = name.strip(), version.strip()
        if not sep or not version:
            raise UsageError(f"--set expects NAME=VERSION, got {item!r}")
        if name not in manifest():
            raise unknown("component", name, manifest())
        chosen[name] = version
    return chosen


def resolve(selections: Mapping[str, str], allow_unverified: bool = False) -> dict[str, Source]:
    """Every component at its selected (else default) version, checksum attached.

    selections: component -> version (from --set and <NAME>_VERSION; --set wins, merged by caller).
    allow_unverified: accept versions absent from the manifest (default False).
    """
    resolved = {}
    for name, comp in manifest().items():
        version = selections.get(name, comp.default.version)
        src = comp.known.get(version)
        if src is None:
            if not allow_unverified:
                raise UsageError(
                    f"{name} {version} has no known sha256; known versions: "
                    f"{', '.join(comp.known)} (or pass --allow-unverified)"
                )
            src = Source(name, version, comp.url_template.format(version=version), UNVERIFIED)
        resolved[name] = src
    return resolved


def check_verified(used: list[str], sources: Mapping[str, Source], allow_unverified: bool) -> None:
    """Refuse an image whose used sources include one without a known sha256, unless the user
    passed --allow-unverified (then fetch.sh downloads it unchecked and logs a warning)."""
    if allow_unverified:
        return
    for name in used:
        src = sources[name]
        if not src.verified:
            raise UsageError(
                f"{name} {src.version} has no known sha256 (no trusted checksum exists); pass "
                f"--allow-unverified to download it unchecked, or add a vetted version with its "
                f"sha256 to components.toml and select it with --set {name}=VERSION"
            )
