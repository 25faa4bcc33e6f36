"""The in-image runner `payloads/_runner/hpcai-bench` (stdlib only), loaded on the host as a
module: variable resolution, sanity checks and metric extraction are implemented there once, so
that host and image judge a run by the same rules."""

from __future__ import annotations

import functools
from types import ModuleType

from hpcai.resources import data_path


@functools.cache
def bench_runner() -> ModuleType:
    """The in-image runner, loaded as a module (it has no .py suffix, hence the explicit loader)."""
    from importlib.machinery import SourceFileLoader
    from importlib.util import module_from_spec, spec_from_loader

    path = data_path("payloads", "_runner", "hpcai-bench")
    loader = SourceFileLoader("hpcai_bench_runner", str(path))
    spec = spec_from_loader(loader.name, loader)
    assert spec is not None
    module = module_from_spec(spec)
    loader.exec_module(module)
    return module
