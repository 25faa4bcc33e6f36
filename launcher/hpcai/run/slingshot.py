"""The Slingshot profile as the launcher reads it: entrypoints/hooks.d/slingshot-env.sh.

That file is the one list of NCCL/libfabric (cxi) defaults for HPE Cray EX. The image's
20-nccl-net.sh hook reads it too (setting only what is unset), so a site with
`fabric_profile = "slingshot"` and the entrypoint can never disagree; a site's [env] holds only
where its own documentation differs from the profile, and wins over it.
"""

from __future__ import annotations

import functools
import re

PROFILES = ("", "slingshot")  # fabric_profile choices; "" passes none
# NAME=VALUE [# nvidia|amd]: the same grammar 20-nccl-net.sh reads with sh builtins
_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=([^#\s]*)\s*(?:#\s*(nvidia|amd)\s*)?")


def profile_path():
    from hpcai.resources import data_path

    return data_path("entrypoints", "hooks.d", "slingshot-env.sh")


@functools.cache
def _lines() -> tuple[tuple[str, str, str], ...]:
    """(name, value, gpu) of every setting, in file order; gpu is "" for every image."""
    out = []
    for raw in profile_path().read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.fullmatch(line)
        if not m:
            raise ValueError(f"{profile_path()}: not NAME=VALUE [# nvidia|amd]: {raw!r}")
        out.append((m.group(1), m.group(2), m.group(3) or ""))
    return tuple(out)


def profile_env(profile: str, gpu: str) -> dict[str, str]:
    """The variables of `profile` ("" = none) for a site whose GPUs are `gpu` (nvidia|amd|none)."""
    if not profile:
        return {}
    return {name: value for name, value, only in _lines() if not only or only == gpu}
