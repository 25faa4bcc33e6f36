"""Charliecloud: `ch-run -b SRC:DST --set-env=K=V IMG -- ENTRY CMD…` (SquashFS file or directory).

ch-run keeps the host environment by default, so SLURM_* and the rank variables reach the
container without a list. A bare `--set-env` first applies the image's own ENV (`/ch/environment`,
written by ch-convert: PATH to the venv, …), which ch-run otherwise ignores; hpcai's variables
follow and win. `--env-no-expand` keeps `$` in values literal. GPUs need the image
prepared with `ch-fromhost --nvidia` beforehand (not done here).
"""

from __future__ import annotations

from hpcai.run.runtimes import ContainerSpec


class CharliecloudRuntime:
    name = "charliecloud"
    binary = "ch-run"
    env_prefix = ""  # ch-run passes the environment on: secrets are inherited
    image_is_file = True
    engine = False

    def clean_env(self, site) -> bool:
        return False  # ch-run inherits SLURM_* and the rest

    def prefetch(self, image: str) -> None:
        """A file's labels are read when asked: nothing to start early."""

    def labels(self, image: str) -> dict[str, str]:
        """A Charliecloud image (SquashFS or folder) carries no labels."""
        return {}

    def argv(self, spec: ContainerSpec) -> list[str]:
        # Format: ch-run -b /usr:/host/usr --set-env --env-no-expand --set-env=K=V IMG -- ENTRY CMD…
        argv = [self.binary]
        for src, dst in spec.binds:
            dst = dst.split(":", 1)[0]  # ch-run -b has no :ro/:rw (a bind is as writable as SRC)
            argv += ["-b", src if src == dst else f"{src}:{dst}"]
        if spec.image_env:
            argv.append("--set-env")
        if spec.env:
            argv.append("--env-no-expand")
            argv += [f"--set-env={k}={v}" for k, v in spec.env]
        argv += list(spec.extra)
        argv += [spec.image, "--"]
        return argv + ([spec.entrypoint] if spec.entrypoint else []) + list(spec.command)
