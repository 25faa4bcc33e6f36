"""The payload manifest's checks beyond its keys' types (those are hpcai.payload_schema's): the
paths a manifest may name, the variables a command may use, the profiles and launch rows that
must resolve, and the numbers a run variable may take, so that hpcai.payloads, the image side and
the launch side read one set of rules.

Every path a manifest names — install scripts, the `{dir}/…` files of run.command, metric files —
is a plain relative path (REL_PATH) that stays in its folder once symlinks are followed, and no
symlink in a payload folder leads out of it (the folder is copied into the image whole): a
manifest can name files, never commands or the host's. [launch.<profile>] rows
`"NAME=VALUE" = { nodes = 44 }` select on a variable or a site fact (SITE_FACTS), as profile rows
select on a variable.
"""


from __future__ import annotations

import math
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from hpcai.bench_runner import bench_runner
from hpcai.errors import UsageError, one_line, shaped, unknown
from hpcai.payload_schema import manifest_schema

BUILTIN_VARS = ("dir", "python", "out", "prefix", "world_size", "rank")
# What a [launch.<profile>] row may select on besides the payload's variables: the site's keys
# that name a benchmark suite's system ("caraml_system=JEDI" = { cpus_per_node = 72 }).
SITE_FACTS = ("caraml_system",)
# The keys of a [launch.<profile>] table and of its rows (srun_args excepted there).
LAUNCH_KEYS = ("srun_args", "nodes", "time", "cpus_per_node", "cpus_per_task")
# Paths a manifest names (install scripts, run scripts, metric files): relative, every part a
# plain name, so no absolute path, no `..`, no option-like `-x`, no shell syntax (install scripts
# are arguments of a RUN line and of %post).
REL_PATH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(?:/[A-Za-z0-9_][A-Za-z0-9._-]*)*")
REL_PATH_SHAPE = ("a relative path of names made of letters, digits, . _ - joined by /, none starting "
                  "with . or - (no absolute path, no ..)")
# A number a variable (or a run fact) holds is finite and, for an integer, fits in 64 bits: the
# runner's type check takes "1e400", "inf" and "nan" for floats (Python reads them so) and any
# digits for integers, but no benchmark can use them, and a derived figure (TFLOP/s = 6·N·D) would
# come out infinite or raise OverflowError.
INT_LIMIT = 2**63


def check_number(what: str, text: str, kind: type = float, above: float | None = None,
                 at_least: float | None = None) -> float:
    """TEXT as a number of KIND (int or float) that a benchmark can take, else a UsageError naming
    WHAT: finite, an integer within ±2**63 (see INT_LIMIT), and more than ABOVE when given (a
    quantity that must be positive, a length, a count, a size: above=0, so an integer from 1)."""
    what = f"{what}={text if len(text) <= 40 else text[:30] + '...'!r}"  # a 5,000-digit value, shortened
    # Many digits are out of range before int() reads them (int() refuses 4,300 or more).
    if kind is int and re.fullmatch(r"\s*[-+]?0*[1-9][0-9]{19,}\s*", text):  # 20 significant digits
        raise UsageError(f"{what}: out of range; an integer must lie within ±2**63")
    try:
        value = int(text) if kind is int else float(text)
    except ValueError:
        raise UsageError(f"{what}: expected {'an integer' if kind is int else 'a number'}") from None
    if kind is int and abs(value) >= INT_LIMIT:
        raise UsageError(f"{what}: out of range; an integer must lie within ±2**63")
    if not math.isfinite(value):
        why = "past the largest float, about 1.8e308" if any(c.isdigit() for c in text) else "NaN or infinity"
        raise UsageError(f"{what}: expected a finite number ({why})")
    if above is not None and not value > above:
        bound = f"a whole number from {math.floor(above) + 1}" if kind is int else f"a number above {above:g}"
        raise UsageError(f"{what}: expected {bound}")
    if at_least is not None and value < at_least:
        raise UsageError(f"{what}: expected at least {at_least:g}")
    return value



def check_manifest(name: str, raw: dict[str, Any], folder: Path) -> None:
    """The checks a manifest must pass, in this order (a manifest with several faults reports the
    first): its keys and their types (hpcai.payload_schema), then the rules here. Errors name the
    file and the key."""
    runner = bench_runner()
    where = f"payloads/{name}/payload.toml"
    manifest_schema().read(where, raw)
    _check_var_floors(where, raw)
    _check_downloads(where, raw)
    _check_install(where, raw, folder)
    _check_command(where, raw, folder, runner)
    _check_metrics(where, raw)
    _check_profiles(name, where, raw, runner)


def _check_var_floors(where: str, raw: dict[str, Any]) -> None:
    for var, spec in raw.get("vars", {}).items():
        floor, default = spec.get("min", 0), spec.get("default")
        numeric = isinstance(default, (int, float)) and not isinstance(default, bool)
        if "min" in spec and not (numeric and math.isfinite(floor) and floor <= default):
            raise UsageError(f"{where}: vars.{var}.min must be a number no larger than its default, "
                             "on a variable whose default is a number")


def _check_downloads(where: str, raw: dict[str, Any]) -> None:
    """`downloads` and `install.<family>.downloads` name components.toml records."""
    for label, downloads in [("downloads", raw.get("downloads", []))] + [
            (f"install.{f}.downloads", t.get("downloads", [])) for f, t in raw.get("install", {}).items()]:
        if downloads:  # the component names are read only when there is something to check
            from hpcai.image.components import names

            for component in downloads:
                if component not in names():
                    raise unknown(f"component in {where} {label}:", component, names())


def _check_install(where: str, raw: dict[str, Any], folder: Path) -> None:
    """[install.<family>]: the build/runtime scripts are files inside the payload folder."""
    for family, steps in raw.get("install", {}).items():
        for stage in ("build", "runtime"):
            if stage in steps:
                inside(folder, steps[stage], f"{where}: install.{family}.{stage}")


def _check_command(where: str, raw: dict[str, Any], folder: Path, runner: ModuleType) -> None:
    """run.command: paths inside the folder, flags of true/false variables, known variables only."""
    known = set(raw.get("vars", {})) | set(BUILTIN_VARS)
    for token in raw.get("run", {}).get("command", []):
        _check_dir_path(folder, token, f"{where}: run.command")
        flag = runner.FLAG_RE.match(token)
        if flag and not isinstance(raw.get("vars", {}).get(flag.group(1), {}).get("default"), bool):
            raise UsageError(f"{where}: command flag {token} needs a true/false variable {flag.group(1)}")
        for var in runner.VAR_RE.findall(token):
            if var not in known:
                raise UsageError(f"{where}: command uses undefined variable {{{var}}}")


def _check_metrics(where: str, raw: dict[str, Any]) -> None:
    for mname, spec in raw.get("metrics", {}).items():
        if ("regex" in spec) == ("file" in spec):
            raise UsageError(f"{where}: metrics.{mname} needs exactly one of regex or file")
        if "file" in spec:  # read from the run's output folder, on the host too
            shaped(f"{where}: metrics.{mname}.file", spec["file"], REL_PATH,
                   f"a file in the run's output folder: {REL_PATH_SHAPE}")


def _check_profiles(name: str, where: str, raw: dict[str, Any], runner: ModuleType) -> None:
    """[launch.<profile>] and [sources.<profile>] name profiles; each profile resolves."""
    profiles = raw.get("profiles", {})
    for table in ("launch", "sources"):
        for prof, entry in raw.get(table, {}).items():
            if prof not in profiles:
                raise unknown(f"profile in {where} [{table}]:", prof, sorted(profiles))
            if table == "launch":
                _check_launch(where, prof, entry, raw, runner)
            elif not all(isinstance(v, str) for v in entry.values()):
                raise UsageError(f"{where}: every value in [sources.{prof}] is text (the source's value)")
    for prof, layer in profiles.items():
        try:
            runner.resolve(dict(raw, _name=name), layer)
        except runner.BenchError as exc:
            raise UsageError(f"{where}: profile {prof}: {exc}") from None


def _check_launch(where: str, prof: str, entry: dict[str, Any], raw: dict[str, Any], runner: ModuleType) -> None:
    """[launch.<profile>]: srun_args a list of strings; nodes and the CPU counts whole numbers from
    1; time a string (its form is checked as --time's when a launch uses it); rows select on a
    variable or a site fact and hold the same keys, srun_args excepted."""
    selectors = [*raw.get("vars", {}), *SITE_FACTS]
    try:
        plain, _ = runner.rows(entry, {}, known=selectors)
    except runner.BenchError as exc:
        raise UsageError(f"{where}: launch.{prof}: {exc}") from None
    parts = [("", plain)] + [(f'."{k}"', v) for k, v in entry.items() if runner.is_row(k, v)]
    for label, part in parts:
        for key, value in part.items():
            if key not in LAUNCH_KEYS or (label and key == "srun_args"):
                raise unknown(f"key in {where} [launch.{prof}{label}]:", key, LAUNCH_KEYS[label != "":])
            if key == "srun_args":
                if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
                    raise UsageError(f"{where}: launch.{prof}.srun_args must be a list of strings")
            elif key == "time":
                _text(value, f"{where}: launch.{prof}{label}.time")
            elif not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 100_000:
                raise UsageError(f"{where}: launch.{prof}{label}.{key} {value!r}: expected a whole number from 1")


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise UsageError(f"{what} {value!r}: expected a string")
    return value


def inside(folder: Path, rel: object, what: str) -> Path:
    """The file `rel` names in a payload folder, refused (naming `what`: the manifest and key) unless
    it is a plain relative path (REL_PATH) to a file that stays inside the folder once symlinks
    are followed."""
    text = shaped(what, _text(rel, what), REL_PATH, f"a file in the payload folder: {REL_PATH_SHAPE}")
    root = folder.resolve()
    target = (folder / text).resolve()
    if not target.is_relative_to(root):
        raise UsageError(f"{what} {text!r} leads outside the payload folder (to {target}); "
                         "expected a file in the payload folder")
    if not target.is_file():
        raise UsageError(f"{what} {text!r} not found in the payload folder")
    return target


def _check_dir_path(folder: Path, token: object, what: str) -> None:
    """A run.command token with `{dir}/x.py` (the payload folder in the image) names a file of the
    payload folder: it must be one (`{dir}/../x` or a symlink out would run what the folder does
    not hold). A path built from variables (`{dir}/ds_zero{zero}.json`) keeps plain names."""
    text = one_line(what, _text(token, what))
    _, sep, rel = text.partition("{dir}/")
    if not sep:
        return
    if "{" not in rel:
        inside(folder, rel, what)
    elif not REL_PATH.fullmatch(re.sub(r"\{[^{}]*\}", "X", rel)):
        raise UsageError(f"{what} {text!r}: expected {{dir}}/ followed by {REL_PATH_SHAPE}")


def check_folder(name: str, folder: Path) -> None:
    """A payload folder is copied into the image whole, links followed: a symlink that leads out of
    it would bake a file of the build host into the image."""
    root = folder.resolve()
    for path in sorted(folder.rglob("*")):  # rglob does not descend into linked folders
        if path.is_symlink() and not path.resolve().is_relative_to(root):
            raise UsageError(f"payloads/{name}/{path.relative_to(folder)}: a symlink to {path.resolve()}, outside "
                             "the payload folder (which is copied into the image); copy the file in instead")


