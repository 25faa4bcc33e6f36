"""The flavors (flavors.toml): each names a base image, its framework and GPU family and the
payloads it bakes; and the traits a spec has, which a component record's `when` may test.
Below spec.py and components.py, which both read it.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from enum import Enum

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from hpcai.errors import unknown
from hpcai.resources import package_file


class Mpi(str, Enum):
    OMPI = "ompi"
    MPICH = "mpich"
    NONE = "none"


@dataclass(frozen=True)
class Flavor:
    name: str
    base: str
    tag: str  # may hold {ngc_version} / {rocm_version}
    framework: str  # pytorch | tensorflow
    family: str  # cuda | rocm | poplar | cpu
    gpu: str
    base_entrypoint: str
    default_payloads: tuple[str, ...]
    defaults: tuple[tuple[str, str], ...] = ()  # this flavor's own [defaults] (e.g. its NGC release)


@functools.cache
def _flavors_raw() -> dict:
    return tomllib.loads(package_file("image", "flavors.toml").read_text())


def flavors() -> dict[str, Flavor]:
    raw = _flavors_raw()["flavors"]
    return {
        name: Flavor(name, f["base"], f["tag"], f["framework"], f["family"], f["gpu"],
                     f.get("base_entrypoint", ""), tuple(f.get("default_payloads", ())),
                     tuple(f.get("defaults", {}).items()))
        for name, f in raw.items()
    }


def trait_names() -> list[str]:
    """The terms a component record's `when` may use: ImageSpec.traits' switches, and its valued
    traits as `mpi:<value>` / `family:<value>` (the families flavors.toml names)."""
    families = dict.fromkeys(f.family for f in flavors().values())
    return ["from_source", "ofi", "cxi", "horovod", *(f"mpi:{m.value}" for m in Mpi),
            *(f"family:{f}" for f in families)]


def flavor(name: str) -> Flavor:
    found = flavors().get(name)
    if found is None:
        raise unknown("flavor", name, flavors())
    return found


def flavor_defaults() -> dict[str, str]:
    return dict(_flavors_raw()["defaults"])
