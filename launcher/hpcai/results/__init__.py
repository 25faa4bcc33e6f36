"""Results: turn run records and raw logs into metrics, comparisons, plots and exports.

`parsers/` reads one payload family's output each; `runs.py` reads and finalizes run
records; `stats.py`, `baselines.py` and `compare.py` judge runs against references; `plot.py`,
`export.py`, `energy.py` and `sweep.py` cover figures, CSV/JSON, power and scaling series.
Heavy libraries (matplotlib) are imported inside the functions that need them.
"""
