"""The payload manifest's grammar and its checks: the keys each table may hold, the names and
paths a manifest may use, the numbers a run variable may take, and the in-image runner that
judges a run (`bench_runner()`), so that hpcai.payloads, the image side and the launch side read one
set of rules.

Manifest keys (see README "Payloads" for an example):
    description, flavors (names or "*"), geometry (per-gpu | per-node | single), parser,
    synthetic (bool), requires.modules / requires.executables,
    requires.mpi (bool: the ranks must form one MPI world, so an MPI process manager — srun
    --mpi=…, mpirun — must start them; the local backend's independent containers cannot),
    [install.<family>] build / runtime  (family: cuda, rocm, poplar, cpu, "*"),
    [run] command = [tokens with {var}],  [vars.<name>] default / help / choices,
    [profiles.<name>] var overrides (a family name applies automatically; "quick" for CI),
    [launch.<profile>] srun_args = [...]: scheduler options the profile's workflow runs with;
        nodes, time, cpus_per_node (split over the node's ranks) or cpus_per_task: its -N, --time
        and CPUs where the command line gives none; rows `"NAME=VALUE" = { nodes = 44 }` select on
        a variable or a site fact (SITE_FACTS), as profile rows select on a variable,
    [sources.<profile>] cite = "where the values come from", <setting> = "the source's value":
        shown next to the profile's values by `hpcai payloads show`,
    sanity = [regex, ...],  [metrics.<name>] regex+group | file+key, reduce, unit, better, headline.

A payload's name is its folder's name (NAME). Every path a manifest names — install scripts, the
`{dir}/…` files of run.command, metric files — is a plain relative path (REL_PATH) that stays in
its folder once symlinks are followed, and no symlink in a payload folder leads out of it (the
folder is copied into the image whole): a manifest can name files, never commands or the host's.
"""


from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from hpcai.errors import UsageError, one_line, shaped, unknown
from hpcai.resources import data_path

GEOMETRIES = ("per-gpu", "per-node", "single")
FAMILIES = ("cuda", "rocm", "poplar", "cpu", "*")
BUILTIN_VARS = ("dir", "python", "out", "prefix", "world_size", "rank")
# Keys a manifest may use, per table: a misplaced key (TOML puts a key written after a table
# header into that table) is an error rather than silently ignored.
KEYS = {
    "": ("description", "flavors", "geometry", "parser", "synthetic", "synthetic_marker",
         "requires", "sanity", "install", "run", "vars", "profiles", "metrics", "launch", "sources",
         "downloads", "variants"),
    "run": ("command",),
    "requires": ("modules", "executables", "mpi"),
    "metric": ("unit", "better", "headline", "regex", "group", "file", "key", "reduce", "scale"),
    "var": ("default", "help", "choices", "min"),
    "launch": ("srun_args", "nodes", "time", "cpus_per_node", "cpus_per_task"),
    "variant": ("help",),
}
# What a [launch.<profile>] row may select on besides the payload's variables: the site's keys
# that name a benchmark suite's system ("caraml_system=JEDI" = { cpus_per_node = 72 }).
SITE_FACTS = ("caraml_system",)
# A payload's name is its folder's name; it is written into the Dockerfile and def (COPY, RUN,
# %files, labels) and joined to the payloads folder, so it holds no path and no shell syntax.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
NAME_SHAPE = "a payload folder name (letters, digits, . _ -, starting with a letter or digit)"
VARIANT_SHAPE = "a variant name (letters, digits, . _ -, starting with a letter or digit)"
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
    """Structural checks a manifest must pass, table by table, in this order (a manifest with
    several faults reports the first); errors name the file and the bad key."""
    runner = bench_runner()
    where = f"payloads/{name}/payload.toml"
    _check_keys(where, raw)
    _check_var_floors(where, raw)
    _check_downloads(where, raw)
    if raw.get("geometry", "per-gpu") not in GEOMETRIES:
        raise UsageError(f"{where}: geometry {raw.get('geometry')!r}; valid: {', '.join(GEOMETRIES)}")
    _check_install(where, raw, folder)
    _check_command(where, raw, folder, runner)
    _check_metrics(where, raw, runner)
    _check_profiles(name, where, raw, runner)


def _check_keys(where: str, raw: dict[str, Any]) -> None:
    """Every table's keys are known (KEYS): a key written after a table header lands in that table."""
    tables = [("", raw), ("run", raw.get("run", {})), ("requires", raw.get("requires", {}))]
    tables += [("metric", spec) for spec in raw.get("metrics", {}).values()]
    tables += [("var", spec) for spec in raw.get("vars", {}).values()]
    variants = raw.get("variants", {})
    if not isinstance(variants, dict) or not all(isinstance(v, dict) for v in variants.values()):
        raise UsageError(f"{where}: variants must hold tables variants.<name> with a help text")
    for variant in variants:
        shaped(f"variant in {where}", variant, NAME, VARIANT_SHAPE)
    tables += [("variant", spec) for spec in variants.values()]
    for kind, table in tables:
        for key in table:
            if key not in KEYS[kind]:
                raise unknown(f"key in {where} ({kind or 'top level'}):", key, KEYS[kind])


def _check_var_floors(where: str, raw: dict[str, Any]) -> None:
    for var, spec in raw.get("vars", {}).items():
        floor, default = spec.get("min", 0), spec.get("default")
        numeric = isinstance(default, (int, float)) and not isinstance(default, bool)
        if "min" in spec and not (numeric and isinstance(floor, (int, float)) and not isinstance(floor, bool)
                                  and math.isfinite(floor) and floor <= default):
            raise UsageError(f"{where}: vars.{var}.min must be a number no larger than its default, "
                             "on a variable whose default is a number")


def _check_downloads(where: str, raw: dict[str, Any]) -> None:
    """`downloads` and `install.<family>.downloads`: lists of components.toml names."""
    for table, label in [(raw, "downloads")] + [(t, f"install.{f}.downloads")
                                                 for f, t in raw.get("install", {}).items() if isinstance(t, dict)]:
        downloads = table.get("downloads", [])
        if not isinstance(downloads, list) or not all(isinstance(d, str) for d in downloads):
            raise UsageError(f"{where}: {label} must be a list of component names")
        if downloads:  # the component names are read only when there is something to check
            from hpcai.image.components import names

            for component in downloads:
                if component not in names():
                    raise unknown(f"component in {where} {label}:", component, names())


def _check_install(where: str, raw: dict[str, Any], folder: Path) -> None:
    """[install.<family>]: build/runtime scripts inside the payload folder, compilers a switch."""
    install = raw.get("install", {})
    if not isinstance(install, dict) or not all(isinstance(t, dict) for t in install.values()):
        raise UsageError(f"{where}: install must hold tables install.<family> of build/runtime scripts")
    for family, steps in install.items():
        if family not in FAMILIES:
            raise unknown(f"install family in {where}:", family, FAMILIES)
        for stage, script in steps.items():
            if stage == "compilers":
                if not isinstance(script, bool):
                    raise UsageError(f"{where}: install.{family}.compilers must be true or false")
                continue
            if stage == "downloads":
                continue  # checked with the top-level list (_check_downloads)
            if stage not in ("build", "runtime"):
                raise unknown(f"install stage in {where}:", stage, ("build", "runtime", "compilers", "downloads"))
            inside(folder, script, f"{where}: install.{family}.{stage}")


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


def _check_metrics(where: str, raw: dict[str, Any], runner: ModuleType) -> None:
    for mname, spec in raw.get("metrics", {}).items():
        if spec.get("better", "higher") not in ("higher", "lower"):
            raise UsageError(f"{where}: metrics.{mname}.better must be higher or lower")
        if spec.get("reduce", "last") not in runner.REDUCERS:
            raise unknown(f"reduce in {where} metrics.{mname}:", spec["reduce"], runner.REDUCERS)
        if ("regex" in spec) == ("file" in spec):
            raise UsageError(f"{where}: metrics.{mname} needs exactly one of regex or file")
        if "file" in spec:  # read from the run's output folder, on the host too
            shaped(f"{where}: metrics.{mname}.file", _text(spec["file"], f"{where}: metrics.{mname}.file"),
                   REL_PATH, f"a file in the run's output folder: {REL_PATH_SHAPE}")


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
            if key not in KEYS["launch"] or (label and key == "srun_args"):
                raise unknown(f"key in {where} [launch.{prof}{label}]:", key, KEYS["launch"][label != "":])
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


