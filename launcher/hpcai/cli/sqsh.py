"""`hpcai sqsh IMAGE`: an enroot-ready SquashFS of a local Docker/Podman image (help panel "Images"),
for `--runtime pyxis` (srun --container-image) and `--runtime enroot`."""

from __future__ import annotations

from typing import Any, Optional

import typer

from hpcai.cli.build import PANEL, image_to_convert, output_path, with_tag_options


@with_tag_options
def sqsh_cmd(
    ctx: typer.Context,
    image: str = typer.Argument(..., help="Local image reference, or a flavor name: the tag `hpcai build FLAVOR` "
                                          "makes with the same options."),
    output: Optional[str] = typer.Option(None, "-o", "--output", metavar="PATH",
                                         help="SquashFS file, *.sqsh (default: from the tag, no ':')."),
    builder: Optional[str] = typer.Option(None, "--builder", envvar="DOCKER",
                                          help="docker | podman: the engine holding the image."),
    force: bool = typer.Option(False, "--force", help="Replace an existing output file."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the enroot command, convert nothing."),
    *, spec_options: dict[str, Any],
) -> None:
    """Make an enroot SquashFS of a local image (enroot import dockerd://IMAGE or podman://IMAGE)."""
    from hpcai.image import build, sqsh

    image = image_to_convert(ctx, image, spec_options)
    sqsh.convert(image, output_path(output), build.builder_name(builder), force=force, dry_run=dry_run)


def register(app: typer.Typer) -> None:
    app.command("sqsh", rich_help_panel=PANEL)(sqsh_cmd)
