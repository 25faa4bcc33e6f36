"""Payload manifests: `payloads/<name>/payload.toml` describes one baked-in benchmark.

Minimal shared model used by rendering (install steps per flavor family) and launching
(run command, geometry). The payloads issue extends it with variables, sanity and metrics.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from hpcai.errors import UsageError, unknown
from hpcai.resources import data_path

IMAGE_PAYLOADS = "/opt/hpcai/payloads"  # where payload folders live inside every image


@dataclass(frozen=True)
class InstallSteps:
    """Scripts (relative to the payload folder) run at image build time for one flavor family.

    build:   runs in the builder stage (compilers present), installs under $HPCAI_PREFIX
    runtime: runs in the final stage (e.g. pip install into /opt/hpcai/venv)
    """

    build: str | None = None
    runtime: str | None = None


@dataclass(frozen=True)
class PayloadManifest:
    name: str
    dir: Path
    description: str
    flavors: tuple[str, ...]  # flavor names, or ("*",) for all
    geometry: str  # "per-gpu" | "per-node" | "single"
    install: dict[str, InstallSteps]
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    def supports(self, flavor: str) -> bool:
        return "*" in self.flavors or flavor in self.flavors

    def install_steps(self, family: str) -> InstallSteps:
        return self.install.get(family) or self.install.get("*") or InstallSteps()


def payloads_root() -> Path:
    return data_path("payloads")


def available_payloads() -> list[str]:
    return sorted(p.parent.name for p in payloads_root().glob("*/payload.toml"))


def load_payload(name: str) -> PayloadManifest:
    path = payloads_root() / name / "payload.toml"
    if not path.is_file():
        raise unknown("payload", name, available_payloads())
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: malformed TOML: {exc}") from None
    install = {
        family: InstallSteps(build=steps.get("build"), runtime=steps.get("runtime"))
        for family, steps in raw.get("install", {}).items()
    }
    return PayloadManifest(
        name=name,
        dir=path.parent,
        description=raw.get("description", ""),
        flavors=tuple(raw.get("flavors", ["*"])),
        geometry=raw.get("geometry", "per-gpu"),
        install=install,
        raw=raw,
    )
