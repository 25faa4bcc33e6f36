"""CLI command: `hpcai edf IMAGE` writes a CSCS Container Engine EDF for users who launch by hand
(`srun --environment=FILE CMD`): the site's mounts and environment, hpcai's entrypoint off in the
EDF (name it in the command), and the hook annotations (hpcai.run.edf). Secrets stay out of the
file and stdout, as with `launch --runtime ce`: the container inherits them from srun's
environment, and a note names them."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("edf", rich_help_panel="Launch")
    def edf_command(
        image: str = typer.Argument(..., help="Registry reference ([USER@][REGISTRY#]IMAGE[:TAG]) or SquashFS file."),
        site: str = typer.Option("cscs-alps", "--site", help="Site whose mounts and environment go in."),
        binds: list[str] = typer.Option([], "--bind", help="Extra mount /SRC[:/DST[:ro]] (repeatable)."),
        env: list[str] = typer.Option([], "--env", help="KEY=VALUE, or KEY to copy this shell's value (repeatable)."),
        workdir: str = typer.Option("", "--workdir", help="Initial working directory in the container."),
        hooks: bool = typer.Option(True, "--hooks/--no-hooks",
                                   help="CE's cxi / aws_ofi_nccl hooks bring the fabric; --no-hooks: hpcai's swap."),
        nccl_variant: str = typer.Option("", "--nccl-variant", help="aws_ofi_nccl variant (default: cuda-dl, rocm6)."),
        entrypoint: bool = typer.Option(False, "--entrypoint/--no-entrypoint",
                                        help="Run the image's ENTRYPOINT (hpcai-entrypoint) before the command."),
        output: str = typer.Option("", "--output", "-o", help="Write to FILE (default: stdout)."),
    ) -> None:
        """Write a Container Engine environment definition file (EDF TOML) for IMAGE."""
        import os

        from hpcai.output import emit, plain, say
        from hpcai.run import edf
        from hpcai.run.environment import check_rank_vars, merge_binds, parse_binds, parse_env
        from hpcai.run.host import Host
        from hpcai.run.site import load_site, site_binds
        from hpcai.run.slingshot import profile_env

        profile = load_site(site)
        user_env = parse_env(tuple(env), dict(os.environ))
        site_b, _ = site_binds(profile, Host())
        check_rank_vars(profile.env, f"site {profile.name}: env")  # as launch: ranks set their own
        site_env = {**profile_env(profile.fabric_profile, profile.gpu), **profile.env}
        if hooks:
            site_b, site_env = edf.without_swap(profile, site_b, site_env)
        mounts, _ = merge_binds(site_b, parse_binds(tuple(binds)))
        spec = edf.EdfSpec(image=image, mounts=tuple(mounts), env=tuple({**site_env, **user_env}.items()),
                           workdir=workdir, entrypoint=entrypoint, gpu=profile.gpu, hooks=hooks,
                           nccl_variant=nccl_variant)
        if nccl_variant and nccl_variant not in edf.ANNOTATIONS["com.hooks.aws_ofi_nccl.variant"]:
            from hpcai.errors import UsageError

            raise UsageError(f"--nccl-variant {nccl_variant!r}: expected one of "
                             f"{', '.join(edf.ANNOTATIONS['com.hooks.aws_ofi_nccl.variant'])}")
        _, secrets = edf.split_secrets(spec.env)
        text = edf.render(edf.build(spec), inherited=secrets)
        if secrets:
            say(f"note: {', '.join(secrets)} kept out of the EDF (secret): export them where srun runs; "
                "the container inherits them")
        if not output:
            emit(text)
            return
        try:
            edf.write(output, text)
        except OSError as exc:
            from hpcai.errors import UsageError

            raise UsageError(f"-o {output}: cannot be written ({exc.strerror or exc})") from None
        say(f"wrote {plain(output, lines=False)}: srun --environment={plain(os.path.abspath(output), lines=False)} …")
