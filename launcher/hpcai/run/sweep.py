"""Scaling sweeps: run a payload over node counts × variable values, one run record per point.

`run_sweep` launches every point through a launch function (default `hpcai.run.launch.run_launch`),
each leaving its own run record under the sweep folder, and writes `sweep.json` (the points and
their record folders). `submit_sweep` instead plans every point the same way and hands each to
`hpcai.run.submit.submit_plan`: one sbatch job per point whose `hpcai launch` writes its record into
the folder already named in `sweep.json`, so `hpcai results` reads a submitted sweep exactly like
a run one once the jobs end (`hpcai.results.sweep.aggregate` makes the scaling table).
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcai import files
from hpcai.errors import UsageError

SWEEP_FILE = "sweep.json"


# Points in one sweep, repetitions included: each is a run record (and, submitted, a batch job);
# more is a grid typed by mistake (1000 values × 1000), refused before any folder is made.
MAX_POINTS = 10_000


def parse_nodes(text: str) -> list[int]:
    """`1,2,4,8` -> [1, 2, 4, 8]: each count once, within the bound launch takes for --nodes."""
    from hpcai.run.scheduler import check_size  # launch's own bound and message for one --nodes value

    items = [x.strip() for x in text.split(",")]
    if not all(x.isascii() and x.lstrip("-").isdigit() for x in items):
        why = " (an empty item)" if "" in items else ""
        raise UsageError(f"--nodes must be a comma-separated list of integers like 1,2,4,8, got {text!r}{why}")
    nodes = [int(x) for x in items]
    if any(n < 1 for n in nodes):
        raise UsageError(f"--nodes must list node counts >= 1, got {text!r}")
    for n in nodes:
        check_size("--nodes", n)
    _once("--nodes", text, [str(n) for n in nodes])
    return nodes


def _once(what: str, text: str, values: list[str]) -> None:
    """A value listed twice would be a second, identical point (use --repeat for that)."""
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise UsageError(f"{what} {text!r} lists {', '.join(twice)} more than once; give each value once "
                         "(--repeat runs every point again)")


def parse_vars(items: list[str]) -> dict[str, list[str]]:
    """`batch_size=32,64` -> {"batch_size": ["32", "64"]}: each name once, each value once, none empty."""
    out: dict[str, list[str]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key or not values:
            raise UsageError(f"--var must look like NAME=V1,V2, got {item!r}")
        if key in out:
            raise UsageError(f"--var {key} is given twice; list every value in one --var {key}=V1,V2")
        listed = values.split(",")
        if "" in listed:
            raise UsageError(f"--var must look like NAME=V1,V2 with no empty value, got {item!r}")
        _once("--var", item, listed)
        out[key] = listed
    return out


def check_vars(payload: str, variables: dict[str, list[str]]) -> None:
    """Every --var value as the payload takes it, refused before any point is listed or run, also
    with --dry-run: an unknown name (the payload's variables listed) or a value of the wrong type.
    A payload hpcai does not ship (one an image names) is checked by each point's plan."""
    from hpcai import payloads

    if payload not in payloads.available_payloads():
        return
    manifest = payloads.load_payload(payload)
    for name, values in variables.items():
        for value in values:
            try:
                manifest.validate_vars({name: value})
            except UsageError as exc:
                raise UsageError(f"--var {name}: {exc}") from None


def count_points(nodes: list[int], variables: dict[str, list[str]], repeat: int = 1) -> int:
    """How many points (records) a sweep makes, refused above MAX_POINTS before any is built."""
    count = len(nodes) * repeat
    for values in variables.values():
        count *= len(values)
    if count > MAX_POINTS:
        sizes = " × ".join(str(n) for n in (len(nodes), *(len(v) for v in variables.values()), repeat) if n != 1)
        raise UsageError(f"the sweep would make {count} points ({sizes}), more than the bound of {MAX_POINTS}: "
                         "split it into smaller sweeps")
    return count


def points(nodes: list[int], variables: dict[str, list[str]], repeat: int = 1) -> list[dict[str, Any]]:
    """Every (nodes, variables) combination, nodes varying fastest within each variable setting;
    with repeat > 1 each point `repeat` times in a row (`repetition` 1…N), one record each."""
    from hpcai.run.scheduler import check_repeat

    check_repeat(repeat)
    count_points(nodes, variables, repeat)
    keys = sorted(variables)
    combos = itertools.product(*(variables[k] for k in keys)) if keys else [()]
    pts = [{"nodes": n, "payload_vars": dict(zip(keys, combo))} for combo in combos for n in nodes]
    if repeat == 1:
        return pts
    return [{**p, "repetition": i} for p in pts for i in range(1, repeat + 1)]


def claim(sweep_dir: Path, payload: str, unique: bool = False) -> Path:
    """Take a folder for one sweep: its sweep.json is created exclusively, so a sweep never
    overwrites another's (nor one being written). unique: the folder is a default name, and the
    next free `NAME.2`, `NAME.3`, … is taken instead of refusing."""
    from hpcai.record import PRIVATE_FILE

    base, n = sweep_dir.absolute(), 1
    while True:
        folder = base if n == 1 else base.with_name(f"{base.name}.{n}")
        _MADE[folder] = [p for p in (folder, *folder.parents) if not p.exists()]
        folder.mkdir(parents=True, exist_ok=True)
        try:  # O_EXCL | O_NOFOLLOW: a file, or a link planted at the name, is never written through
            fd = files.create_new(folder / SWEEP_FILE, PRIVATE_FILE)
        except FileExistsError:
            if not unique:
                raise UsageError(f"{folder} already holds a sweep ({SWEEP_FILE}); a sweep never overwrites "
                                 "another: choose a new --output-dir") from None
            n += 1
            continue
        with os.fdopen(fd, "w") as fh:
            fh.write(files.dumps({"payload": payload, "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "runs": []}))
        return folder


_MADE: dict[Path, list[Path]] = {}  # claimed folder -> the folders claim() created for it


def unclaim(sweep_dir: Path) -> None:
    """Give a claimed folder back when the sweep stops before any point: its sweep.json goes, and
    the folders claim() made for it (never one that was there before: it may be the user's own)."""
    (sweep_dir / SWEEP_FILE).unlink(missing_ok=True)
    for made in _MADE.pop(sweep_dir, []):
        try:
            made.rmdir()
        except OSError:  # something else was put there meanwhile: keep it
            break


def point_options(wanted: dict[str, Any]) -> Any:
    """The LaunchOptions of one point: its `var=value` overrides as on the launch command line
    (also the base of a JUBE export: hpcai.run.jube)."""
    from hpcai.run.model import LaunchOptions

    wanted = dict(wanted)
    pvars = wanted.pop("payload_vars", {})
    if not wanted.get("image"):
        raise UsageError("a sweep needs --image (the image every point runs)")
    return LaunchOptions(payload_args=tuple(f"{k}={v}" for k, v in pvars.items()), **wanted)


def run_sweep(payload: str, nodes: list[int], variables: dict[str, list[str]], sweep_dir: Path,
              base: dict[str, Any] | None = None, repeat: int = 1,
              launch: Callable[[Any], Path] | None = None) -> list[Path]:
    """Launch every point (each its own run record under sweep_dir); returns the record folders.

    base: further LaunchOptions fields for every point (image, site, partition, …).
    launch: runs one point's LaunchOptions and returns its record folder, also when the point
    failed (a failed point leaves its record and the sweep goes on); default hpcai.run.launch's
    run_launch. Tests pass their own.
    """
    from hpcai.run import launch as launcher
    from hpcai.run.launch import LaunchFailed
    from hpcai.record import read_status

    if launch is None:
        launch = functools.partial(launcher.run_launch, check=False)

    sweep_dir = sweep_dir.absolute()  # claimed by the caller (claim)
    base = dict(base or {})
    if base.get("stage") and base.get("image"):  # --stage: once, and every point starts from the copy
        from hpcai.run.stage import for_launch

        try:
            staged = for_launch(point_options({**base, "payload": payload}))
        except BaseException:
            unclaim(sweep_dir)
            raise
        base.update(image=staged.image, staged_from=staged.staged_from)
    runs: list[dict[str, Any]] = []
    for point in points(nodes, variables, repeat):
        wanted = {**base, "payload": payload, "nodes": point["nodes"],
                  "payload_vars": point["payload_vars"], "runs_root": str(sweep_dir)}
        interrupted = False
        try:
            run_dir = Path(launch(point_options(wanted)))
        except LaunchFailed as exc:
            if exc.exit_code != 130:
                if not runs:
                    unclaim(sweep_dir)
                raise
            run_dir, interrupted = exc.run_dir, True  # Ctrl-C after the point ran: it is listed
        except BaseException:
            if not runs:
                unclaim(sweep_dir)
            raise
        runs.append({**point, "run_dir": str(run_dir)})
        _write(sweep_dir, payload, runs)
        status = read_status(run_dir)
        if interrupted or (status is not None and status.state == "cancelled"):  # Ctrl-C stops the sweep
            raise LaunchFailed(f"the sweep was cancelled at point {len(runs)}; {sweep_dir} holds what ran",
                               run_dir, 130)
    return [Path(r["run_dir"]) for r in runs]


def submit_sweep(payload: str, nodes: list[int], variables: dict[str, list[str]], sweep_dir: Path,
                 base: dict[str, Any] | None = None, submit: bool = True, repeat: int = 1) -> list[dict[str, Any]]:
    """One batch job per point, for the site's scheduler (sbatch, qsub or flux batch; submit=False:
    write the scripts only); returns sweep.json's runs.

    Every point is planned before anything is submitted, so a bad option fails the whole sweep
    up front instead of leaving half a series queued.
    """
    from hpcai.run.plan import claimed_plan
    from hpcai.run.submit import batch_script, check_batch, submit_plan

    sweep_dir = sweep_dir.absolute()  # claimed by the caller (claim)
    todo: list[tuple[dict[str, Any], Any, Any]] = []
    try:
        for point in points(nodes, variables, repeat):
            wanted = {**(base or {}), "payload": payload, "nodes": point["nodes"],
                      "payload_vars": point["payload_vars"], "runs_root": str(sweep_dir)}
            opts = point_options(wanted)
            plan = claimed_plan(opts, check=submit)
            todo.append((point, opts, plan))  # its folder is claimed: given back if the sweep fails
            check_batch(plan, opts, "sweep --submit")
            batch_script(plan, opts, sys.executable)  # a value no batch script can hold fails here
    except BaseException:
        for _, _, plan in todo:
            Path(plan.run_dir).rmdir()
        unclaim(sweep_dir)
        raise
    runs: list[dict[str, Any]] = []
    for point, opts, plan in todo:
        script, job_id = submit_plan(plan, opts, submit=submit)
        runs.append({**point, "run_dir": plan.run_dir, "script": str(script), "job_id": job_id})
        _write(sweep_dir, payload, runs)
    return runs


def _write(sweep_dir: Path, payload: str, runs: list[dict[str, Any]]) -> None:
    from hpcai.record import write_json

    write_json(sweep_dir / SWEEP_FILE, {"payload": payload, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                        "runs": runs})
