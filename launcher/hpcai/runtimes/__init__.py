"""Container runtimes: each turns a `ContainerSpec` into the token list that starts one rank.

Runtimes are tiny and registered by name; `singularity` subclasses `apptainer` and `podman`
subclasses `docker`, changing only the binary and the flags that differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ENTRYPOINT = "/opt/hpcai/bin/hpcai-entrypoint"
BENCH = "/opt/hpcai/bin/hpcai-bench"


@dataclass(frozen=True)
class ContainerSpec:
    """What runs in the container, independent of the runtime.

    command:    argv after the entrypoint (`hpcai-bench <payload> var=value…`, or the raw --cmd)
    entrypoint: hpcai-entrypoint path, or "" when the image has none (--no-entrypoint)
    payload:    payload name and its args, for runtimes that can use the image's runscript
    name:       container name (docker/podman); "" under srun, where the rank shim names it
    secret_names: TOKEN/KEY/SECRET/PASSWORD variables; hpcai.launch puts their values in the
                environment of the runtime process (docker `-e NAME`, APPTAINERENV_NAME, ch-run
                inherits), so they never appear in argv, `ps`, logs or records
    """

    image: str
    command: tuple[str, ...]
    entrypoint: str = ENTRYPOINT
    payload: tuple[str, ...] = ()
    binds: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    secret_names: tuple[str, ...] = ()  # values travel in the process environment, never in argv
    gpu: str = "none"
    name: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    containall: bool = True
    cleanenv: bool = True
    apptainer_command: str = "exec"
    image_env: bool = True  # charliecloud: apply the image's /ch/environment (bare --set-env)
    extra: tuple[str, ...] = field(default=())


def get_runtime(name: str):
    from hpcai.errors import unknown

    from hpcai.runtimes.apptainer import ApptainerRuntime, SingularityRuntime
    from hpcai.runtimes.charliecloud import CharliecloudRuntime
    from hpcai.runtimes.docker import DockerRuntime, PodmanRuntime

    table = {r.name: r for r in (ApptainerRuntime, SingularityRuntime, CharliecloudRuntime,
                                 DockerRuntime, PodmanRuntime)}
    if name not in table:
        raise unknown("runtime", name, table)
    return table[name]()
