"""The components manifest: every source an image build downloads, pinned and checksummed.

`components.toml` lists, per component, a default version with its URL template and sha256 and
the other vetted versions (alternates). `resolve()` turns the user's selections (`--set
libfabric=2.2.0`, `LIBFABRIC_VERSION=2.2.0`) into concrete `Source`s; a version the manifest does
not know is refused unless the user passes `--allow-unverified`, in which case its download is
not checked (and the build log says so).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from hpcai.errors import UsageError, unknown
from hpcai.resources import package_file

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
        return self.url.rsplit("/", 1)[-1]

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


@dataclass(frozen=True)
class Component:
    name: str
    url_template: str
    default: Source
    alternates: tuple[Source, ...]
    origin: str  # where the default's checksum was read

    @property
    def known(self) -> dict[str, Source]:
        return {s.version: s for s in (self.default, *self.alternates)}


@functools.cache
def _raw() -> dict:
    return tomllib.loads(package_file("image", "components.toml").read_text())


@functools.cache
def manifest() -> dict[str, Component]:
    comps = {}
    for name, c in _raw()["components"].items():
        # A missing sha256 means no trusted checksum exists (rccl-tests): the source is
        # UNVERIFIED, and make_spec refuses images that use it unless --allow-unverified.
        default = Source(name, c["version"], c["url"].format(version=c["version"]),
                         c.get("sha256", UNVERIFIED))
        alts = tuple(Source(name, a["version"], a["url"], a.get("sha256", UNVERIFIED))
                     for a in c.get("alternates", []))
        # url_template: for versions not listed (when `url` is one concrete file, as for horovod).
        comps[name] = Component(name, c.get("url_template", c["url"]), default, alts, c.get("source", ""))
    return comps


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
