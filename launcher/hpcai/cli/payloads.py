"""CLI commands: `payloads list [--image IMG]` and `payloads show NAME`.

`list` reads the manifests shipped with hpcai, or, with --image, asks the image's own runner
(`hpcai-bench --list --json`) which payloads were baked into it. Tables go to stdout; --json
prints the same data as JSON for scripts.
"""

from __future__ import annotations

import typer

PANEL = "Payloads"


def _manifests(flavor: str | None):
    from hpcai.payloads import available_payloads, load_payload

    manifests = [load_payload(n) for n in available_payloads()]
    if flavor:
        _check_flavor(flavor)
        manifests = [m for m in manifests if m.supports(flavor)]
    return manifests


def _check_flavor(flavor: str) -> None:
    from hpcai.errors import unknown
    from hpcai.payloads import tomllib
    from hpcai.resources import package_file

    flavors = tomllib.loads(package_file("image", "flavors.toml").read_text())["flavors"]
    if flavor not in flavors:
        raise unknown("flavor", flavor, flavors)


def _headline(m) -> str:
    name = m.headline
    metric = next((x for x in m.metrics if x.name == name), None)
    return f"{name} ({metric.unit}, {metric.better} is better)" if metric else "-"


def _image_listing(image: str) -> list[dict]:
    """Ask the image's runner what it holds: docker for image names, apptainer for .sif files."""
    import shutil
    import subprocess

    from hpcai.errors import HpcaiError, operand
    from hpcai.files import BadFile, parse_json
    from hpcai.paths import RUNNER

    image = operand("--image", image)  # `docker run`/`apptainer exec` read options up to the image
    if image.endswith(".sif"):
        engine = shutil.which("apptainer") or shutil.which("singularity")
        argv = [engine or "apptainer", "exec", image, RUNNER, "--list", "--json"]
    else:
        engine = shutil.which("docker")
        argv = ["docker", "run", "--rm", "--entrypoint", RUNNER, image, "--list", "--json"]
    if not engine:
        raise HpcaiError(f"cannot inspect {image}: {argv[0]} not found")
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        raise HpcaiError(f"{argv[0]} timed out listing payloads of {image}") from None
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise HpcaiError(f"cannot list payloads of {image}: {last}")
    try:  # the depth bound and NaN refusal of every JSON hpcai reads; a list of objects is expected
        entries = parse_json(res.stdout, f"{image}: hpcai-bench --list --json")
    except BadFile as exc:
        raise HpcaiError(str(exc)) from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("name"), str)
                                                   and isinstance(e.get("vars", {}), dict) for e in entries):
        raise HpcaiError(f"{image}: hpcai-bench --list --json printed no list of payloads")
    return entries


def list_cmd(
    image: str = typer.Option(None, "--image", help="List the payloads baked into this image "
                              "(docker image name, or a .sif file) instead of hpcai's own."),
    flavor: str = typer.Option(None, "--flavor", help="Only payloads that support this flavor."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON on stdout."),
) -> None:
    """List payloads: what each measures, its headline metric and the flavors it supports."""
    from rich.table import Table

    from hpcai.console import cell, out
    from hpcai.output import emit_json

    if image:
        entries = _image_listing(image)
        if as_json:
            emit_json(entries)
            return
        table = Table(title=cell(f"payloads in {image}"))  # the image's own text: shown, never markup or control
        for col in ("payload", "headline", "variables", "description"):
            table.add_column(col)
        for e in entries:
            table.add_row(*map(cell, (e["name"], e.get("headline") or "-",
                                      " ".join(f"{k}={v}" for k, v in sorted(e.get("vars", {}).items())),
                                      e.get("description", ""))))
        out.print(table)
        return
    manifests = _manifests(flavor)
    if as_json:
        emit_json([{"name": m.name, "description": m.description, "flavors": list(m.flavors),
                    "geometry": m.geometry, "headline": m.headline, "parser": m.parser} for m in manifests])
        return
    table = Table(title="payloads")
    for col in ("payload", "measures", "headline metric", "flavors", "geometry"):
        table.add_column(col, overflow="fold")
    for m in manifests:
        table.add_row(*map(cell, (m.name, m.description, _headline(m), ", ".join(m.flavors), m.geometry)))
    out.print(table)


def show_cmd(
    name: str = typer.Argument(..., help="Payload name (see `hpcai payloads list`)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON on stdout."),
) -> None:
    """Show one payload: variables and defaults, profiles, metrics, sanity patterns, flavors."""
    import shlex

    from rich.markup import escape
    from rich.table import Table

    from hpcai.console import cell, out
    from hpcai.output import emit_json
    from hpcai.payloads import load_payload

    m = load_payload(name)
    if as_json:
        raw = {k: v for k, v in m.raw.items() if not k.startswith("_")}
        emit_json(dict(raw, name=m.name, command=m.benchmark_argv()))  # valid JSON: a nan default is null
        return
    out.print(f"[bold]{escape(m.name)}[/]: {escape(m.description)}")  # a manifest's text: never markup
    out.print(f"flavors: {', '.join(m.flavors)}    geometry: {m.geometry}    "
              f"parser: {m.parser or '-'}{'    synthetic data' if m.synthetic else ''}", markup=False)
    for family, steps in sorted(m.install.items()):
        out.print(f"install [{family}]: build={steps.build or '-'} runtime={steps.runtime or '-'}",
                  markup=False)
    for variant, text in m.variants.items():
        out.print(f"build variant (hpcai build --variant {m.name}={variant}): {text}", markup=False)
    out.print("runs: " + shlex.join(m.benchmark_argv()), markup=False)
    if m.variables:
        vt = Table(title="variables (var=value)")
        for col in ("variable", "default", "choices", "help"):
            vt.add_column(col, overflow="fold")
        for v in m.variables:
            vt.add_row(*map(cell, (v.name, str(v.default), ", ".join(v.choices), v.help)))
        out.print(vt)
    for prof, layer in m.raw.get("profiles", {}).items():
        _print_profile(m, prof, layer)
    mt = Table(title="metrics")
    for col in ("metric", "unit", "better", "headline", "source"):
        mt.add_column(col, overflow="fold")
    for x in m.metrics:
        source = f"{x.file}: {x.key}" if x.file else f"regex, {x.reduce}"
        mt.add_row(*map(cell, (x.name, x.unit, x.better, "yes" if x.headline else "", source)))
    out.print(mt)
    for pattern in m.sanity:
        out.print(f"sanity: {pattern}", markup=False)


def _print_profile(m, prof: str, layer: dict) -> None:
    """One profile: its values, and where it reproduces a source workflow ([sources.<profile>]),
    the source's value beside each, with the scheduler options it adds ([launch.<profile>])."""
    from rich.table import Table

    from hpcai.console import cell, out

    source = dict(m.raw.get("sources", {}).get(prof, {}))
    srun = m.srun_args((prof,))
    if not source and not srun:
        out.print(f"profile {prof}: " + " ".join(f"{k}={v}" for k, v in layer.items()), markup=False)
        return
    cite = source.pop("cite", "")
    table = Table(title=cell(f"profile {prof}" + (f" — as {cite}" if cite else "")), title_justify="left")
    for col in ("setting", f"--profile {prof}", "source"):
        table.add_column(col, overflow="fold")
    launcher = source.pop("launcher", "") if srun else ""
    for key in [*layer, *(k for k in source if k not in layer)]:
        table.add_row(*map(cell, (key, str(layer[key]).lower() if isinstance(layer.get(key), bool)
                                  else str(layer.get(key, "")), source.get(key, ""))))
    if srun:
        table.add_row(*map(cell, ("srun options", " ".join(srun), launcher)))
    out.print(table)


def schema_cmd() -> None:
    """The payload manifest's keys as JSON Schema (draft 2020-12), for an editor to check a
    payload.toml as it is written: every table and key, its type, choices and shape, and no other
    key. hpcai checks the same keys when it reads a manifest (hpcai.payload_schema), then the
    rules a schema cannot say: paths inside the folder, variables the command uses, profiles."""
    from hpcai.output import emit_json
    from hpcai.payload_schema import manifest_schema

    emit_json(manifest_schema().json_schema("hpcai payload manifest (payloads/NAME/payload.toml)"), sort_keys=True)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    group = typer.Typer(help="Benchmark payloads baked into the images.", no_args_is_help=True)
    group.command("list")(list_cmd)
    group.command("show")(show_cmd)
    group.command("schema")(schema_cmd)
    app.add_typer(group, name="payloads", rich_help_panel=PANEL)
