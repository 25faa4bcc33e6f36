"""Registries of implementations by name (backends, runtimes): a name maps to "module:Class",
imported only when that one is used, so listing the names costs no import."""

from __future__ import annotations

import importlib
from typing import Any


def instance(kind: str, package: str, registry: dict[str, str], name: str) -> Any:
    """An instance of the class REGISTRY names for NAME in PACKAGE; an unknown name is the usual
    one-line error listing the valid ones."""
    from hpcai.errors import unknown

    if name not in registry:
        raise unknown(kind, name, registry)
    module, cls = registry[name].split(":")
    return getattr(importlib.import_module(f"{package}.{module}"), cls)()
