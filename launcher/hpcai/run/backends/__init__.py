"""Backends: how ranks are started. srun and mpiexec return the token list put in front of each
rank's command and run it as one process; local starts every rank itself.

Each backend is one small module with a class the registry names, holding both its command and
how it is executed; what differs between them is said by its attributes and methods, so no other
module tests a backend's name.
"""

from __future__ import annotations

TYPE_CHECKING = False  # types only: the contract (Backend) is in hpcai.run.model
if TYPE_CHECKING:
    from hpcai.run.model import Backend

# name -> "module:class" (imported when used)
_REGISTRY = {"srun": "srun:SrunBackend", "mpiexec": "mpiexec:MpiexecBackend", "flux": "flux:FluxBackend",
             "local": "local:LocalBackend"}
BACKENDS = tuple(_REGISTRY)


def get_backend(name: str) -> Backend:
    from hpcai.run.registry import instance

    backend: Backend = instance("backend", __name__, _REGISTRY, name)
    return backend
