"""Payload manifests: `payloads/<name>/payload.toml` describes one baked-in benchmark.

Rendering reads the install steps per flavor family; launching reads the geometry, validates
`var=value` overrides and asks for the in-image command; the results side reads metrics, sanity
patterns and the parser name. Variable resolution, sanity checks and metric extraction are
implemented once, in the in-image runner `payloads/_runner/hpcai-bench` (stdlib only), which this
module loads, so that host and image judge a run by the same rules.

The manifest's keys and checks are in hpcai.payload_rules.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from hpcai import paths
from hpcai.errors import UsageError, unknown
from hpcai.bench_runner import bench_runner
from hpcai.payload_rules import check_manifest, check_number
from hpcai.payload_schema import NAME
from hpcai.resources import data_path

if TYPE_CHECKING:
    from hpcai.results.metrics import ParseResult


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
        return bench_runner().headline(self.raw)

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
        head = bench_runner().headline(self.raw, found)
        if head in found:
            result.metrics = [replace(m, headline=m.name == head) for m in result.metrics]

    def validate_vars(self, overrides: dict[str, Any], family: str | None = None,
                      profiles: tuple[str, ...] = ()) -> dict[str, str]:
        """All variable values (defaults + profiles + overrides) as strings.

        Unknown variable, wrong type or a value outside `choices` -> UsageError naming the valid ones.
        """
        runner = bench_runner()
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
        runner, out = bench_runner(), {}
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
        return bench_runner().argv(self.raw, values, builtins)

    def check_sanity(self, text: str) -> list[str]:
        """Sanity patterns missing from a run's output (empty list: the run looks good)."""
        return bench_runner().check_sanity(self.raw, text)

    def extract_metrics(self, text: str, out_dir: Path | None = None,
                        vars: dict[str, str] | None = None) -> dict[str, float]:
        """{metric name: value} from a run's output, and JSON files it wrote under out_dir."""
        return bench_runner().extract(self.raw, text, str(out_dir) if out_dir else None, vars or {})


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
