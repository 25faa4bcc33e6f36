"""Timers with named stages, as Mila's benchmarks use them: `with chrono.time('train') as t:`."""

from __future__ import annotations

import contextlib
import json
import time
from typing import Callable

from benchutils.statstream import StatStream


class ChronoContext:
    """Times one block into `stream`. `sync` runs before the start and before the end, so that
    work queued on a GPU before the block is not counted and work queued in it is."""

    def __init__(self, name: str, stream: StatStream, sync: Callable[[], None], parent: "MultiStageChrono"):
        self.name, self.stream, self.sync, self.parent = name, stream, sync, parent
        self.start = 0.0

    def __enter__(self) -> StatStream:
        self.parent.depth += 1
        self.sync()
        self.start = time.time()
        return self.stream

    def __exit__(self, exc_type, exc, tb) -> None:
        self.sync()
        end = time.time()
        self.parent.depth -= 1
        if exc_type is None:  # a block that raised is not an observation
            self.stream.update(end - self.start)

    @property
    def count(self) -> int:
        return self.stream.current_count


class MultiStageChrono:
    def __init__(self, skip_obs: int = 10, sync: Callable[[], None] | None = None, disabled: bool = False,
                 name: str | None = None):
        self.chronos: dict[str, StatStream] = {}
        self.skip_obs, self.name, self.disabled = skip_obs, name, disabled
        self.sync = sync or (lambda: None)
        self.depth = 0

    def time(self, name: str, skip_obs: int | None = None, **_ignored):
        if self.disabled:
            return contextlib.nullcontext()
        if name not in self.chronos:
            self.chronos[name] = StatStream(self.skip_obs if skip_obs is None else skip_obs)
        return ChronoContext(name, self.chronos[name], self.sync, self)

    def to_dict(self, base: dict | None = None) -> dict:
        items = base if base is not None else {}
        if self.name is not None:
            items["name"] = self.name
        for key, stream in self.chronos.items():
            items[key] = stream.to_dict()
        return items

    def to_json(self, base: dict | None = None, **kwargs) -> str:
        kwargs.setdefault("indent", "  ")
        return json.dumps(self.to_dict(base), **kwargs)
