"""CLI commands for images: build, render, versions, inspect, sif (help panel "Images").

Every image option also reads the Make variable of the same meaning (WITH_MPI, WITH_OFI, …), so
`make build-pytorch-cpu WITH_MPI=mpich` and `hpcai build pytorch-cpu --mpi mpich` are the same;
an empty variable means unset. Heavy imports happen inside the commands.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

if TYPE_CHECKING:
    from hpcai.image.spec import ImageSpec

PANEL = "Images"

def _typer_option(opt: Any) -> Any:
    """A typer option from its row in hpcai.image.options (one OptionInfo per row, shared by the
    commands that take it)."""
    envvar = list(opt.envvars) if len(opt.envvars) > 1 else (opt.envvars[0] if opt.envvars else None)
    return typer.Option(opt.default, *opt.flags, envvar=envvar, help=opt.help)


def _table() -> tuple[tuple[tuple[str, Any, Any], ...], tuple[tuple[str, Any, Any], ...]]:
    from hpcai.image.options import OPTIONS

    rows = [(o.name, o.kind, _typer_option(o), o.picks_image) for o in OPTIONS]
    return (tuple((n, k, i) for n, k, i, picks in rows if picks),
            tuple((n, k, i) for n, k, i, picks in rows if not picks))


# The image options (hpcai.image.options, declared once): (parameter, type, typer option). TAG_OPTIONS
# decide which image a flavor's options make, hence its tag (allow_unverified admits versions that
# change it): they are all that `sif` and `sqsh` take, to find the image `build` made. BUILD_INPUTS
# only feed the build (never the tag), so a conversion neither needs nor reads them.
TAG_OPTIONS, BUILD_INPUTS = _table()
SPEC_OPTIONS = TAG_OPTIONS + BUILD_INPUTS


def _with_options(options: tuple[tuple[str, Any, Any], ...]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A decorator: the command typer reads as BODY's own parameters followed by OPTIONS (as typer
    reads a signature); BODY is called with its own values and the options' values as one dict,
    `spec_options`."""
    def wrap(body: Callable[..., None]) -> Callable[..., None]:
        own = [p for p in inspect.signature(body, eval_str=True).parameters.values() if p.name != "spec_options"]
        params = own + [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=kind)
                        for name, kind, info in options]

        @functools.wraps(body)
        def cmd(**values: Any) -> None:  # click passes every parameter by name
            spec_options = {name: values.pop(name) for name, _, _ in options}
            body(**values, spec_options=spec_options)

        cmd.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        cmd.__annotations__ = {p.name: p.annotation for p in params}
        return cmd
    return wrap


_with_spec_options = _with_options(SPEC_OPTIONS)  # render, build
with_tag_options = _with_options(TAG_OPTIONS)  # sif, sqsh


def image_to_convert(ctx: typer.Context, image: str, tag_options: dict[str, Any]) -> str:
    """`sif`/`sqsh` IMAGE: a flavor name becomes the tag `hpcai build` gives it with the same
    options (flags or Make variables); an image reference is taken as it is, and a tag option
    given on its command line is refused (the Make variables in the environment do not name it)."""
    from hpcai.errors import UsageError
    from hpcai.image.flavors import flavors
    from hpcai.image.spec import image_tag

    names = flavors()
    if image in names:
        return image_tag(image, **tag_options)
    given = [info.param_decls[0] for name, _, info in TAG_OPTIONS
             if getattr(ctx.get_parameter_source(name), "name", "") == "COMMANDLINE"]
    if given:
        flags = ", ".join(given)
        raise UsageError(f"{flags}: these pick a flavor's image, but {image!r} is an image reference, not a "
                         f"flavor ({', '.join(names)}); drop {flags} or give a flavor name")
    return image


def output_path(value: str | None) -> Path | None:
    """-o/--output as typed (a str: pathlib would turn `./-x.sif` into `-x.sif`): refused when it
    reads as an option (`-o --fakeroot`), whatever command it would reach; `./-x.sif` is a path."""
    from hpcai.errors import operand

    return None if value is None else Path(operand("-o/--output", value))


def _spec(flavor: str, spec_options: dict[str, Any]):
    """ImageSpec from a command's spec options."""
    from hpcai.image.spec import make_spec

    return make_spec(flavor, **spec_options)


@_with_spec_options
def render_cmd(
    flavor: str = typer.Argument(..., help="Image flavor, e.g. pytorch-cpu."),
    fmt: str = typer.Option("docker", "--format", "-f", help="docker | apptainer"),
    context_dir: Optional[Path] = typer.Option(None, "--context", help="Also write the full build context here."),
    bootstrap: str = typer.Option("docker", "--bootstrap",
                                  help="Apptainer base source: docker | docker-daemon | localimage."),
    *, spec_options: dict[str, Any],
) -> None:
    """Print the Dockerfile or Apptainer definition for FLAVOR to stdout."""
    from hpcai.image.render import render

    spec = _spec(flavor, spec_options)
    text = render(spec, fmt, bootstrap)
    if context_dir is not None:
        from hpcai.image.context import prepare_context

        prepare_context(spec, context_dir, bootstrap)  # its def as printed
    from hpcai.output import plain

    typer.echo(plain(text), nl=False)  # a rendered file on stdout: shown, never run by a terminal


@_with_spec_options
def build_cmd(
    flavor: str = typer.Argument(..., help="Image flavor, e.g. pytorch-cpu."),
    builder: Optional[str] = typer.Option(None, "--builder", envvar="DOCKER",
                                          help="docker | podman | apptainer (a SIF from the def, no engine needed)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the commands, build nothing."),
    keep_context: bool = typer.Option(False, "--keep-context", help="Keep the build context folder."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Ignore the builder's layer cache."),
    bootstrap: Optional[str] = typer.Option(None, "--bootstrap",
                                            help="--builder apptainer: where the base comes from: docker (a "
                                                 "registry, default) | docker-daemon (the local Docker engine) | "
                                                 "localimage (a SIF or sandbox path given as --base)."),
    output: Optional[str] = typer.Option(None, "-o", "--output", metavar="PATH",
                                         help="--builder apptainer: the SIF file (default: from the tag, no ':')."),
    *, spec_options: dict[str, Any],
) -> None:
    """Build the image for FLAVOR with Docker (default) or Podman and print its tag, or a SIF with
    Apptainer (--builder apptainer) and print its path."""
    import shlex
    import shutil

    from hpcai.console import err, out
    from hpcai.image import build

    engine = build.builder_name(builder, build.BUILDERS)
    target = output_path(output)
    spec = _spec(flavor, spec_options)
    ctx = build.work_dir() / "context" / spec.flavor.name
    if engine == "apptainer":
        _build_sif(spec, ctx, bootstrap or "docker", target, dry_run, keep_context, no_cache)
        return
    if bootstrap is not None or output is not None:
        raise _apptainer_only("--bootstrap" if bootstrap is not None else "-o/--output", engine)
    argv = build.build_argv(spec, engine, ctx, no_cache)
    if dry_run:
        prefix = "DOCKER_BUILDKIT=0 " if engine == "docker" else ""
        out.print(f"# context: {ctx}", markup=False)
        out.print(prefix + shlex.join(argv), markup=False)
        return
    build.check_engine(engine)
    from hpcai.image.context import prepare_context

    shutil.rmtree(ctx, ignore_errors=True)  # hpcai's own work folder (a killed build may have left it)
    prepare_context(spec, ctx)
    try:
        result = build.run_build(spec, engine, ctx, no_cache)
    finally:
        if not keep_context:
            shutil.rmtree(ctx, ignore_errors=True)
    err.print(f"built {result.tag} in {result.seconds:.0f}s "
              f"({result.cached_steps}/{result.steps} steps cached); log: {result.log}")
    out.print(result.tag, markup=False)


def _apptainer_only(option: str, engine: str):
    from hpcai.errors import UsageError

    return UsageError(f"{option} is for --builder apptainer (a SIF from the def); {engine} builds an image from "
                      "the Dockerfile: drop it, or convert the image afterwards with `hpcai sif`")


def _build_sif(spec: ImageSpec, ctx: Path, bootstrap: str, output: Optional[Path], dry_run: bool, keep_context: bool,
               no_cache: bool) -> None:
    """`build --builder apptainer`: the same context as a docker build, its def rendered for
    BOOTSTRAP, built into a SIF by `apptainer build --fakeroot` run in the context folder."""
    import shlex
    import shutil

    from hpcai.console import err, out
    from hpcai.errors import UsageError
    from hpcai.image import build, sif
    from hpcai.image.render import render

    render(spec, "apptainer", bootstrap)  # an unknown bootstrap or a value the def refuses: exit 2 now
    is_path = spec.base.startswith(("/", "."))  # values.BASE: an image reference, or a /… or ./… path
    if bootstrap == "localimage" and not (is_path and Path(spec.base).exists()):
        raise UsageError(f"--bootstrap localimage builds on the SIF or sandbox folder given as --base, and "
                         f"{spec.base!r} is no such path; make one with `apptainer build --fakeroot base.sif "
                         "docker://IMAGE`")
    if bootstrap != "localimage" and is_path:
        raise UsageError(f"--base {spec.base!r} is a path: build on it with --bootstrap localimage")
    target = (output or Path(sif.sif_name(spec.tag))).absolute()  # the build runs in the context folder
    if ":" in target.name:
        raise UsageError(f"SIF name {target.name!r} contains ':'; choose another with -o")
    tool = next((name for name in sif.CONVERTERS if shutil.which(name)), "apptainer") if dry_run else sif.converter()
    argv = build.apptainer_argv(tool, target, no_cache)
    if bootstrap == "docker-daemon" and not dry_run:
        build.check_engine("docker")
    if dry_run:
        out.print(f"# context: {ctx} (the command runs there; then {build.part_path(target).name} is renamed "
                  f"to {target.name})", markup=False)
        out.print(shlex.join(argv), markup=False)
        return
    from hpcai.image.context import prepare_context

    shutil.rmtree(ctx, ignore_errors=True)  # hpcai's own work folder (a killed build may have left it)
    prepare_context(spec, ctx, bootstrap)
    try:
        result = build.run_apptainer_build(spec, tool, ctx, target, no_cache)
    finally:
        if not keep_context:
            shutil.rmtree(ctx, ignore_errors=True)
    err.print(f"built {target} ({spec.tag}) in {result.seconds:.0f}s; log: {result.log}")
    out.print(str(target), markup=False)


def versions_cmd(
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Print the components manifest: versions, checksums, URLs."""
    import json

    from rich.table import Table

    from hpcai.image.components import manifest
    from hpcai.console import out

    comps = manifest()
    if as_json:
        data = {n: {"version": c.default.version, "url": c.default.url, "sha256": c.default.sha256,
                    "alternates": [a.version for a in c.alternates]} for n, c in comps.items()}
        out.print(json.dumps(data, indent=2), markup=False)
        return
    table = Table("component", "version", "alternates", "sha256", "url")
    for name, c in comps.items():
        table.add_row(name, c.default.version, ", ".join(a.version for a in c.alternates),
                      c.default.sha256[:16] + "…", c.default.url)
    out.print(table)


def inspect_cmd(
    image: str = typer.Argument(..., help="Image reference (tag or id)."),
    as_json: bool = typer.Option(False, "--json", help="Print the labels as JSON."),
) -> None:
    """Show an image's OCI and hpcai.* labels (via the Docker engine)."""
    import json

    from rich.table import Table

    from hpcai import labels as label
    from hpcai.console import cell, out, plain
    from hpcai.errors import UsageError
    from hpcai.image import build

    if not image.strip():
        raise UsageError("inspect needs an image reference (a tag such as hpcai/pytorch-cpu:… or an id)")
    build.check_engine("docker")
    import docker

    try:
        labels = docker.from_env().images.get(image).labels or {}
    except docker.errors.ImageNotFound:
        raise UsageError(f"no image {image!r} in the local Docker engine; build it with `hpcai build`") from None
    except docker.errors.DockerException as exc:  # a malformed reference, an engine error
        raise UsageError(f"inspect {image!r}: {plain(exc)}") from None
    if as_json:
        out.print(json.dumps(labels, indent=2, sort_keys=True), markup=False)
        return
    table = Table("label", "value", title=plain(image))  # labels are the image author's text
    for k in sorted(labels):
        if k.startswith((label.PREFIX, "org.opencontainers.")):
            table.add_row(cell(k), cell(labels[k]))
    out.print(table)


@with_tag_options
def sif_cmd(
    ctx: typer.Context,
    image: str = typer.Argument(..., help="Image reference, or a flavor name: the tag `hpcai build FLAVOR` "
                                          "makes with the same options."),
    output: Optional[str] = typer.Option(None, "-o", "--output", metavar="PATH",
                                         help="SIF file (default: from the tag, no ':')."),
    builder: Optional[str] = typer.Option(None, "--builder", envvar="DOCKER", help="docker | podman"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the commands, convert nothing."),
    *, spec_options: dict[str, Any],
) -> None:
    """Convert a built image to a SIF with apptainer (or singularity)."""
    from hpcai.image import build, sif

    sif.convert(image_to_convert(ctx, image, spec_options), output_path(output), build.builder_name(builder),
                dry_run)


def register(app: typer.Typer) -> None:
    """Add the image commands to the top-level app."""
    app.command("build", rich_help_panel=PANEL)(build_cmd)
    app.command("render", rich_help_panel=PANEL)(render_cmd)
    app.command("versions", rich_help_panel=PANEL)(versions_cmd)
    app.command("inspect", rich_help_panel=PANEL)(inspect_cmd)
    app.command("sif", rich_help_panel=PANEL)(sif_cmd)
