"""Charliecloud: `ch-run -b SRC:DST --set-env=K=V IMG -- ENTRY CMD…` (SquashFS file or directory).

ch-run keeps the host environment by default, so SLURM_* and the rank variables reach the
container without a list. A bare `--set-env` first applies the image's own ENV (`/ch/environment`,
written by ch-convert: PATH to the venv, …), which ch-run otherwise ignores; hpcai's variables
follow and win. `--env-no-expand` keeps `$` in values literal. GPUs need the image
prepared with `ch-fromhost --nvidia` beforehand (not done here).

Ranks that share a node share one container (`--join-ct=N --join-tag=T`, ch-run(1) "--join"):
each ch-run otherwise makes its own user namespace, and the kernel refuses process_vm_readv
between sibling namespaces, so Open MPI's single-copy path (CMA) is off ("CMA is not available
due to different user namespaces") and large messages crawl (measured: 2 ranks, 4 MiB
bandwidth, 11.2 GB/s joined; a 50-iteration run did not finish in 60 s apart). The tag is named
per run and node: ch-run's default (SLURM_STEP_ID, "0" for most steps) is shared by every job's
first step, and a peer group that was killed leaves its tag taken on the node. The rank shim
names it (`{node}` in its --name). Only the ranks of an MPI world join (hpcai.run.plan): every
peer must start before the first one's command ends, and with a SquashFS image the first one's
ch-run serves the mount (FUSE) the others run in.
"""

from __future__ import annotations

from hpcai.errors import operand
from hpcai.run.runtimes import ContainerSpec, Runtime


class CharliecloudRuntime(Runtime):
    name = "charliecloud"
    shim_forward = "join-tag"
    doctor_hint = "apt/dnf install charliecloud for --runtime charliecloud"
    binary = "ch-run"
    env_prefix = ""  # ch-run passes the environment on: secrets are inherited
    image_is_file = True
    engine = False
    joins = True  # ranks on one node join one container (a peer group, see above)

    def clean_env(self, site) -> bool:
        return False  # ch-run inherits SLURM_* and the rest

    def prefetch(self, image: str) -> None:
        """A file's labels are read when asked: nothing to start early."""

    def labels(self, image: str) -> dict[str, str]:
        """A Charliecloud image (SquashFS or folder) carries no labels (an option-like one is
        refused here, before anything is planned)."""
        operand("--image", image)
        return {}

    def argv(self, spec: ContainerSpec) -> list[str]:
        # Format: ch-run [--join-ct=N] -b /usr:/host/usr --set-env --env-no-expand --set-env=K=V IMG
        #                -- ENTRY CMD…   (the rank shim adds --join-tag=T after ch-run)
        argv = [self.binary]
        if spec.peers > 1:
            argv.append(f"--join-ct={spec.peers}")
        for src, dst in spec.binds:
            dst = dst.split(":", 1)[0]  # ch-run -b has no :ro/:rw (a bind is as writable as SRC)
            argv += ["-b", src if src == dst else f"{src}:{dst}"]
        if spec.image_env:
            argv.append("--set-env")
        if spec.env:
            argv.append("--env-no-expand")
            argv += [f"--set-env={k}={v}" for k, v in spec.env]
        argv += list(spec.extra)
        argv += [operand("--image", spec.image), "--"]
        return argv + ([spec.entrypoint] if spec.entrypoint else []) + list(spec.command)
