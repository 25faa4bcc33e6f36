"""Fixtures for the hook tests. The helpers live in hooklib.py so test modules can import them
by a unique name (several conftest.py files would collide as the module `conftest`)."""

from hooklib import shell, workdir, run_entrypoint, shlib  # noqa: F401  (fixtures, registered by import)
