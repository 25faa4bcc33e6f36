"""Figures the results tests draw are closed after each test: pyplot keeps every figure until it is
closed, and the tests that only inspect one (plot.auto, history_figure) never save it, so a run
of this folder would hold dozens open (matplotlib warns past 20). The CLI draws one per process,
and the report closes each after drawing it."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import sys

    if "matplotlib.pyplot" in sys.modules:  # only where a test drew: importing pyplot costs ~0.3 s
        sys.modules["matplotlib.pyplot"].close("all")
