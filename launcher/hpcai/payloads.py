"""Payload manifests: `payloads/<name>/payload.toml` describes one baked-in benchmark.

Rendering reads the install steps per flavor family; launching reads the geometry, validates
`var=value` overrides and asks for the in-image command; the results side reads metrics, sanity
patterns and the parser name. Variable resolution, sanity checks and metric extraction are
implemented once, in the in-image runner `payloads/_runner/hpcai-bench` (stdlib only), which this
module loads, so that host and image judge a run by the same rules.

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
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from hpcai import paths
from hpcai.errors import UsageError, one_line, shaped, unknown
from hpcai.resources import data_path

if TYPE_CHECKING:
    from hpcai.results.metrics import ParseResult

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


@dataclass(frozen=True)
class InstallSteps:
    """Scripts (relative to the payload folder) run at image build time for one flavor family.

    build:   runs in the builder stage (compilers present), installs under $HPCAI_PREFIX
    runtime: runs in the final stage (e.g. pip install into /opt/hpcai/venv)
    compilers: the build hook needs a C toolchain (default). `compilers = false` for a hook that
             only pip-installs wheels: an image whose builder compiles nothing else then skips
             the toolchain (a cold pytorch-cpu build ~25 s faster).
    """

    build: str | None = None
    runtime: str | None = None
    compilers: bool = True


@dataclass(frozen=True)
class Variable:
    """A named run variable: `default` fixes its type (int, float, bool, str); `choices` limit it."""

    name: str
    default: Any
    help: str = ""
    choices: tuple[str, ...] = ()
    minimum: float = 0  # numbers only: counts, sizes and times are never negative; `min` raises it


@dataclass(frozen=True)
class MetricSpec:
    """How to read one number out of a run: a regex group or a JSON key, and how to judge it."""

    name: str
    unit: str = ""
    better: str = "higher"  # "higher" | "lower"
    headline: bool = False
    regex: str | None = None
    file: str | None = None
    key: str | None = None
    reduce: str = "last"


@dataclass(frozen=True)
class PayloadManifest:
    name: str
    dir: Path
    description: str
    flavors: tuple[str, ...]  # flavor names, or ("*",) for all
    geometry: str  # "per-gpu" | "per-node" | "single"
    install: dict[str, InstallSteps]
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)
    variables: tuple[Variable, ...] = ()
    metrics: tuple[MetricSpec, ...] = ()
    sanity: tuple[str, ...] = ()
    parser: str | None = None
    synthetic: bool = False

    def supports(self, flavor: str) -> bool:
        return "*" in self.flavors or flavor in self.flavors

    @property
    def downloads(self) -> tuple[str, ...]:
        """The components (image/components.toml) its install hooks fetch: their pins reach the
        build environment of an image that holds this payload (manifest `downloads`)."""
        return tuple(self.raw.get("downloads", ()))

    def downloads_for(self, family: str) -> tuple[str, ...]:
        """`downloads`, plus those of the install table the family uses (`[install.cuda]
        downloads = [...]`): a source only one family's hook fetches is pinned for that family's
        images alone, and only they carry its label."""
        table = self.raw.get("install", {})
        extra = (table.get(family) or table.get("*") or {}).get("downloads", ())
        return tuple(dict.fromkeys((*self.downloads, *extra)))

    @property
    def variants(self) -> dict[str, str]:
        """Build variants its install hook knows (manifest `[variants.NAME]`, each with its help):
        `hpcai build --variant PAYLOAD=NAME` hands NAME to the hook as <PAYLOAD>_VARIANT
        (render.variant_env: HF_CLM_VARIANT for hf-clm)."""
        return {name: spec.get("help", "") for name, spec in self.raw.get("variants", {}).items()}

    @property
    def needs_mpi(self) -> bool:
        """The ranks must be started by an MPI process manager (manifest `requires.mpi`)."""
        return bool(self.raw.get("requires", {}).get("mpi", False))

    def install_steps(self, family: str) -> InstallSteps:
        return self.install.get(family) or self.install.get("*") or InstallSteps()

    @property
    def headline(self) -> str | None:
        return _runner().headline(self.raw)

    @property
    def aliases(self) -> dict[str, str]:
        """Other names of its metrics -> the documented name: the key a metric reads from its file,
        where that differs (hf-clm's `samples_per_second` is the Trainer's `train_samples_per_second`).
        The host's log parsers say the other name, and so may records written by older hpcai."""
        return {tail: m.name for m in self.metrics if m.key and (tail := m.key.rsplit(".", 1)[-1]) != m.name}

    def document(self, result: ParseResult) -> None:
        """Give RESULT (a log parser's, or a record's) this payload's metric names and headline: the
        one rule behind `results parse`, the run record, export and the runner's HPCAI_RESULT line.
        A figure under another name (`aliases`) takes the documented one unless that is there too;
        the headline is the runner's `headline()`: the first `headline = true` metric the result
        holds. A result holding none of them keeps the parser's own headline."""
        from dataclasses import replace

        aliases, have = self.aliases, {m.name for m in result.metrics}
        result.metrics = [replace(m, name=aliases[m.name]) if aliases.get(m.name, m.name) not in have else m
                          for m in result.metrics]
        found = {m.name: m.value for m in result.metrics}
        head = _runner().headline(self.raw, found)
        if head in found:
            result.metrics = [replace(m, headline=m.name == head) for m in result.metrics]

    def validate_vars(self, overrides: dict[str, Any], family: str | None = None,
                      profiles: tuple[str, ...] = ()) -> dict[str, str]:
        """All variable values (defaults + profiles + overrides) as strings.

        Unknown variable, wrong type or a value outside `choices` -> UsageError naming the valid ones.
        """
        runner = _runner()
        try:
            values = runner.resolve(self.raw, {k: str(v) for k, v in overrides.items()},
                                    profiles, family)
        except runner.BenchError as exc:
            raise UsageError(str(exc)) from None
        for var in self.variables:  # the runner checked the type; the range is checked here
            if var.name in values and not isinstance(var.default, bool) and isinstance(var.default, (int, float)):
                check_number(f"variable {var.name}", values[var.name], type(var.default), at_least=var.minimum)
        return values

    def launch_defaults(self, profiles: tuple[str, ...], values: dict[str, str],
                        site: dict[str, str]) -> dict[str, Any]:
        """The chosen profiles' scheduler values ([launch.<profile>] nodes, time, cpus_per_node,
        cpus_per_task), a later profile's over an earlier's, each table's rows for VALUES (the
        resolved variables) and SITE (SITE_FACTS: the site's values) over its plain keys."""
        runner, out = _runner(), {}
        for name in profiles:
            plain, picked = runner.rows(self.raw.get("launch", {}).get(name, {}), {**site, **values})
            for part in (plain, *picked):
                out.update((k, v) for k, v in part.items() if k != "srun_args")
        return out

    def srun_args(self, profiles: tuple[str, ...]) -> tuple[str, ...]:
        """The scheduler options of the chosen profiles' workflows ([launch.<profile>])."""
        launch = self.raw.get("launch", {})
        return tuple(arg for name in profiles for arg in launch.get(name, {}).get("srun_args", ()))

    def command(self, vars: dict[str, Any] | None = None) -> list[str]:
        """argv that runs this payload inside the image (every rank runs it under a launcher).

        Only the overrides travel; the runner adds defaults and the family profile in the image.
        """
        overrides = vars or {}
        self.validate_vars(overrides)
        return [paths.RUNNER, self.name, *(f"{k}={v}" for k, v in overrides.items())]

    def benchmark_argv(self, vars: dict[str, Any] | None = None, family: str | None = None,
                       python: str = paths.VENV_PYTHON) -> list[str]:
        """The benchmark's own argv as the runner will build it in the image (for `show`)."""
        values = self.validate_vars(vars or {}, family)
        builtins = {"dir": f"{paths.PAYLOADS}/{self.name}", "python": python,
                    "out": "$HPCAI_PAYLOAD_OUT", "prefix": paths.PREFIX,
                    "world_size": "$WORLD_SIZE", "rank": "$RANK"}
        return _runner().argv(self.raw, values, builtins)

    def check_sanity(self, text: str) -> list[str]:
        """Sanity patterns missing from a run's output (empty list: the run looks good)."""
        return _runner().check_sanity(self.raw, text)

    def extract_metrics(self, text: str, out_dir: Path | None = None,
                        vars: dict[str, str] | None = None) -> dict[str, float]:
        """{metric name: value} from a run's output, and JSON files it wrote under out_dir."""
        return _runner().extract(self.raw, text, str(out_dir) if out_dir else None, vars or {})


@functools.cache
def _runner() -> ModuleType:
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


def payloads_root() -> Path:
    return data_path("payloads")


def document(payload: str, result: ParseResult) -> None:
    """PayloadManifest.document for the payload named PAYLOAD; nothing for a name that is no
    payload (a bare parser name such as hf-trainer, `cmd`, a payload since removed)."""
    manifest = _known(str(payloads_root()), payload)
    if manifest is not None:
        manifest.document(result)


@functools.lru_cache(maxsize=64)
def _known(root: str, name: str) -> PayloadManifest | None:
    """load_payload(NAME) once per process (records read together name the same few payloads;
    ROOT, the payloads folder, is part of the key only so that a test's other folder is read)."""
    try:
        return load_payload(name)
    except UsageError:
        return None


def available_payloads() -> list[str]:
    return sorted(p.parent.name for p in payloads_root().glob("*/payload.toml") if NAME.fullmatch(p.parent.name))


def _variables(raw: dict[str, Any]) -> tuple[Variable, ...]:
    return tuple(
        Variable(name, spec.get("default", ""), spec.get("help", ""),
                 tuple(str(c) for c in spec.get("choices", ())), spec.get("min", 0))
        for name, spec in raw.get("vars", {}).items()
    )


def _metrics(raw: dict[str, Any]) -> tuple[MetricSpec, ...]:
    keys = ("unit", "better", "headline", "regex", "file", "key", "reduce")
    return tuple(MetricSpec(name, **{k: spec[k] for k in keys if k in spec})
                 for name, spec in raw.get("metrics", {}).items())


def check_manifest(name: str, raw: dict[str, Any], folder: Path) -> None:
    """Structural checks a manifest must pass, table by table, in this order (a manifest with
    several faults reports the first); errors name the file and the bad key."""
    runner = _runner()
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


def load_payload(name: str) -> PayloadManifest:
    if not NAME.fullmatch(name):  # before touching the file system: `../x` is no payload name
        raise unknown("payload", name, available_payloads())
    path = payloads_root() / name / "payload.toml"
    if not path.is_file():
        raise unknown("payload", name, available_payloads())
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: malformed TOML: {exc}") from None
    check_manifest(name, raw, path.parent)
    raw["_name"], raw["_dir"] = name, str(path.parent)
    install = {
        family: InstallSteps(build=steps.get("build"), runtime=steps.get("runtime"),
                             compilers=steps.get("compilers", True))
        for family, steps in raw.get("install", {}).items()
    }
    return PayloadManifest(
        name=name,
        dir=path.parent,
        description=raw.get("description", ""),
        flavors=tuple(raw.get("flavors", ["*"])),
        geometry=raw.get("geometry", "per-gpu"),
        install=install,
        raw=raw,
        variables=_variables(raw),
        metrics=_metrics(raw),
        sanity=tuple(raw.get("sanity", ())),
        parser=raw.get("parser"),
        synthetic=bool(raw.get("synthetic", False)),
    )
