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

# Options shared by build, render, sif and sqsh (reused OptionInfo objects keep one definition).
O_BASE = typer.Option(None, "--base", envvar="BASE_IMAGE", help="Base image (default: the flavor's).")
O_ARCH = typer.Option("amd64", "--arch", envvar="ARCH", help="amd64 or arm64 (GH200).")
O_MPI = typer.Option(None, "--mpi", envvar="WITH_MPI", help="ompi | mpich | none (or 1/0). Default ompi.")
O_OFI = typer.Option(None, "--ofi", envvar="WITH_OFI", help="libfabric + OFI NCCL/RCCL plugin: 1/0. Default 1.")
O_HVD = typer.Option(None, "--horovod", envvar="WITH_HVD", help="Build Horovod: 1/0. Default 0.")
O_CXI = typer.Option(None, "--cxi", envvar="WITH_CXI",
                     help="libfabric's cxi provider (HPE Slingshot) built in, from HPE's libcxi sources: 1/0. "
                          "Default 0 (the host's libfabric is swapped in at run time).")
O_GPU_ARCH = typer.Option(None, "--gpu-arch", "--cuda-arch", envvar=["GPU_ARCHS", "CUDA_ARCHS"],
                          help="GPU architectures GPU payloads compile for: CUDA 90 or 80,90; ROCm gfx90a or "
                               "gfx90a,gfx942 (default: each payload's own list). --cuda-arch is the old name.")
O_LIBS = typer.Option(None, "--hpc-libs", envvar="HPC_LIBS_DIR",
                      help="Site libraries folder (must hold libfabric.so*): bakes them in, tag gets -ss.")
O_PAYLOADS = typer.Option(None, "--payloads", envvar="PAYLOADS",
                          help="Comma list of payloads, 'none', or empty for the flavor's defaults.")
O_NGC = typer.Option(None, "--ngc-version", envvar="NGC_VERSION", help="NGC release, e.g. 25.06.")
O_ROCM = typer.Option(None, "--rocm-version", envvar="ROCM_VERSION", help="ROCm release, e.g. 6.4.")
O_SET = typer.Option(None, "--set", help="Component version, NAME=VERSION (repeatable); "
                                         "also <NAME>_VERSION=.")
O_VARIANT = typer.Option(None, "--variant", help="A payload's build variant, PAYLOAD=NAME (repeatable), "
                                                 "e.g. hf-clm=seed; `hpcai payloads show` lists them.")
O_UNVERIFIED = typer.Option(False, "--allow-unverified", envvar="ALLOW_UNVERIFIED",
                            help="Allow component versions without a known sha256 (download not checked).")
O_REPO = typer.Option(None, "--repository", envvar="HPCAI_REPOSITORY",
                      help="Registry/namespace of the tag. Default hpcai.")
O_TAG = typer.Option(None, "--tag", envvar="TAG", help="Full image tag, overriding the computed one.")
O_WHEELS = typer.Option(None, "--wheelhouse", envvar="WHEELHOUSE", help="Local wheels for pip in the build.")
O_CA = typer.Option(None, "--ca-bundle", envvar="CA_BUNDLE", help="CA bundle for pip/curl in the builder.")
O_APT = typer.Option(None, "--apt-sources", envvar="APT_SOURCES", help="apt sources file to use in the build.")
O_SOURCES = typer.Option(None, "--sources", envvar="SOURCES_DIR",
                         help="Folder of pre-downloaded source tarballs (air-gapped); still sha256-checked.")


# The image-spec options, declared once: (parameter, type, option). TAG_OPTIONS decide which image
# a flavor's options make, hence its tag (allow_unverified admits versions that change it): they
# are all that `sif` and `sqsh` take, to find the image `build` made. BUILD_INPUTS only feed the
# build (never the tag), so a conversion neither needs nor reads them.
TAG_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("base", Optional[str], O_BASE), ("arch", str, O_ARCH), ("mpi", Optional[str], O_MPI),
    ("ofi", Optional[str], O_OFI), ("horovod", Optional[str], O_HVD), ("cxi", Optional[str], O_CXI),
    ("gpu_archs", Optional[str], O_GPU_ARCH), ("hpc_libs", Optional[str], O_LIBS),
    ("payloads", Optional[str], O_PAYLOADS), ("ngc_version", Optional[str], O_NGC),
    ("rocm_version", Optional[str], O_ROCM), ("sets", Optional[list[str]], O_SET),
    ("variants", Optional[list[str]], O_VARIANT), ("allow_unverified", bool, O_UNVERIFIED), ("repository", Optional[str], O_REPO),
    ("tag", Optional[str], O_TAG))
BUILD_INPUTS: tuple[tuple[str, Any, Any], ...] = (
    ("wheelhouse", Optional[str], O_WHEELS), ("ca_bundle", Optional[str], O_CA),
    ("apt_sources", Optional[str], O_APT), ("sources_dir", Optional[str], O_SOURCES))
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
    is_path = spec.base.startswith(("/", "."))  # spec.BASE: an image reference, or a /… or ./… path
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

    from hpcai.image import build
    from hpcai.console import cell, out, plain
    from hpcai.errors import UsageError

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
        if k.startswith(("hpcai.", "org.opencontainers.")):
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
