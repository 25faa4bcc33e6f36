"""Apptainer and SingularityCE: `apptainer exec|run [--containall] [--cleanenv] --nv|--rocm --bind … IMG …`.

The container environment is passed as `APPTAINERENV_<NAME>=<value>` through `env`, not with
`--env`: Apptainer parses `--env` as a comma-separated list, which would split values such as
`NCCL_SOCKET_IFNAME=hsn0,hsn1`; `APPTAINERENV_*` survives `--cleanenv` and any character.
"""

from __future__ import annotations

from hpcai.run.runtimes import ContainerSpec


class ApptainerRuntime:
    name = "apptainer"
    binary = "apptainer"
    env_prefix = "APPTAINERENV_"
    image_is_file = True
    engine = False

    def clean_env(self, site) -> bool:
        return site.cleanenv  # --cleanenv per site (pass_env is forwarded explicitly)

    def prefetch(self, image: str) -> None:
        """A file's labels are read when asked: nothing to start early."""

    def labels(self, image: str) -> dict[str, str]:
        """The SIF's labels (kept from the Docker image by `hpcai sif`), by `apptainer inspect --json
        --labels`: {"data": {"attributes": {"labels": {…}}}}. {} where the binary is not installed
        (a dry-run elsewhere) or cannot read the image: the launch then goes on without them."""
        import json
        import shutil
        import subprocess

        if not shutil.which(self.binary):
            return {}
        res = subprocess.run([self.binary, "inspect", "--json", "--labels", image], capture_output=True,
                             text=True, check=False, stdin=subprocess.DEVNULL)
        try:
            labels = json.loads(res.stdout)["data"]["attributes"].get("labels") or {}
        except (ValueError, KeyError, TypeError):
            return {}
        return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}

    def argv(self, spec: ContainerSpec) -> list[str]:
        # Format: env APPTAINERENV_K=V … apptainer exec --cleanenv --nv --bind S:D IMG ENTRY CMD…
        prefix = ["env", *(f"{self.env_prefix}{k}={v}" for k, v in spec.env)] if spec.env else []
        run = spec.apptainer_command == "run" and bool(spec.payload) and bool(spec.entrypoint)
        argv = [self.binary, "run" if run else "exec"]
        if spec.containall:
            argv.append("--containall")
        if spec.cleanenv:
            argv.append("--cleanenv")
        argv += {"nvidia": ["--nv"], "amd": ["--rocm"]}.get(spec.gpu, [])
        for src, dst in spec.binds:
            argv += ["--bind", src if src == dst else f"{src}:{dst}"]
        argv += list(spec.extra)
        argv.append(spec.image)
        if run:  # the image's %runscript is hpcai-entrypoint hpcai-bench "$@"
            return prefix + argv + list(spec.payload)
        return prefix + argv + ([spec.entrypoint] if spec.entrypoint else []) + list(spec.command)


class SingularityRuntime(ApptainerRuntime):
    name = "singularity"
    binary = "singularity"
    env_prefix = "SINGULARITYENV_"
