"""Render an ImageSpec into a Dockerfile or an Apptainer definition (pure: spec in, text out).

Both formats are fed by the same ordered list of `Step`s — each one an install script under
dockerfiles/install/ with its arguments — so a Docker image and a SIF built from the def run
the same scripts in the same order. The Dockerfile copies each step's script just before its
RUN so that editing one script only rebuilds from that step on; payload folders are copied
last so that touching a payload's run script only rebuilds the final layers.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from hpcai.errors import UsageError, unknown
from hpcai.spec import HPC_LIBS_IN_IMAGE, PREFIX, ImageSpec, Mpi

FORMATS = ("docker", "apptainer")
BOOTSTRAPS = ("docker", "docker-daemon", "localimage")
BUILD_DIR = "/opt/hpcai-build"  # scripts, downloads and sources; never in the final image


@dataclass(frozen=True)
class Step:
    """One RUN (Docker) / one block of %post (Apptainer)."""

    title: str
    script: str  # file name under dockerfiles/install/
    args: tuple[str, ...] = ()
    payload: str = ""  # payload name for payload hooks ("" for stack components)
    files: tuple[str, ...] = field(default=())  # context paths to copy in first (payload hooks)

    @property
    def command(self) -> str:
        return " ".join([f"{BUILD_DIR}/install/{self.script}", *self.args])


@dataclass(frozen=True)
class PayloadHooks:
    name: str
    build: str | None
    runtime: str | None
    files: tuple[str, ...]  # files of the payload folder the hooks may read (copied to the context)


def payload_hooks(spec: ImageSpec) -> list[PayloadHooks]:
    """Install hooks of the selected payloads, for this flavor's family."""
    from hpcai.spec import payload_manifest

    hooks = []
    for name in spec.payloads:
        manifest = payload_manifest(name)
        if not manifest.supports(spec.flavor.name):
            raise UsageError(f"payload {name!r} does not support flavor {spec.flavor.name}")
        steps = manifest.install_steps(spec.family)
        files = {"payload.toml"}
        for script in (steps.build, steps.runtime):
            if script:
                if not (manifest.dir / script).is_file():
                    raise UsageError(f"payload {name}: install script {script!r} not found in {manifest.dir}")
                files.add(script)
        # Hooks may also read requirements files and anything under the payload's install/ folder.
        for extra in (*manifest.dir.glob("requirements*.txt"), *manifest.dir.glob("install/**/*")):
            if extra.is_file():
                files.add(str(extra.relative_to(manifest.dir)))
        hooks.append(PayloadHooks(name, steps.build, steps.runtime, tuple(sorted(files))))
    return hooks


def builder_steps(spec: ImageSpec, hooks: list[PayloadHooks]) -> list[Step]:
    """Compile everything into PREFIX, stack first (rarely changes), payload hooks last."""
    steps = [Step("system packages (builder)", "system-packages.sh", ("builder",)),
             Step("python venv and framework", "python-venv.sh")]
    if spec.from_source:
        if spec.ofi or spec.mpi is not Mpi.NONE:
            steps.append(Step("libfabric", "libfabric.sh"))
        if spec.mpi is Mpi.OMPI:
            steps += [Step("pmix", "pmix.sh"), Step("openmpi", "openmpi.sh")]
        elif spec.mpi is Mpi.MPICH:
            steps.append(Step("mpich", "mpich.sh"))
        if spec.ofi and spec.family in ("cuda", "rocm"):
            steps.append(Step("aws-ofi-nccl", "aws-ofi-nccl.sh"))
    if spec.horovod:
        steps.append(Step("horovod", "horovod.sh"))
    for h in hooks:
        if h.build:
            steps.append(Step(f"payload {h.name} (build)", "payload-hook.sh", (h.name, h.build),
                              payload=h.name, files=h.files))
    return steps


def final_steps(spec: ImageSpec, hooks: list[PayloadHooks]) -> list[Step]:
    steps = [Step("system packages (runtime)", "system-packages.sh", ("final",)),
             Step("finalize prefix", "finalize.sh")]
    for h in hooks:
        if h.runtime:
            steps.append(Step(f"payload {h.name} (runtime)", "payload-hook.sh", (h.name, h.runtime),
                              payload=h.name, files=h.files))
    if spec.ss:
        steps.append(Step("site libraries", "hpc-libs.sh"))
    return steps


def stage_env(spec: ImageSpec) -> dict[str, str]:
    """Variables every install script and the entrypoint read (stack_env, then flavor_env)."""
    return {**stack_env(spec), **flavor_env(spec)}


def stack_env(spec: ImageSpec) -> dict[str, str]:
    """What the system packages depend on. Set before them, so flavors that share a family and
    stack (pytorch-cpu, tensorflow-cpu) share those layers too."""
    return {
        "HPCAI_PREFIX": PREFIX,
        "HPCAI_FAMILY": spec.family,
        "HPCAI_MPI": spec.mpi.value,
        "HPCAI_WITH_OFI": "1" if spec.ofi else "0",
        "HPCAI_WITH_HVD": "1" if spec.horovod else "0",
        "HPCAI_FROM_SOURCE": "1" if spec.from_source else "0",
    }


def flavor_env(spec: ImageSpec) -> dict[str, str]:
    return {
        "HPCAI_FLAVOR": spec.flavor.name,
        "HPCAI_FRAMEWORK": spec.flavor.framework,
        "HPCAI_BASE_ENTRYPOINT": spec.flavor.base_entrypoint,
    }


def runtime_env(spec: ImageSpec) -> dict[str, str]:
    """Variables of the final image (Docker ENV / Apptainer %environment)."""
    env = {
        "PATH": f"{PREFIX}/bin:{PREFIX}/venv/bin:$PATH",
        "LD_LIBRARY_PATH": f"{PREFIX}/lib${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}",
    }
    # NCCL_NET_PLUGIN is not set here: the entrypoint's nccl-net hook picks libnccl-net.so or
    # librccl-net.so at run time, and a value baked into the image would look like the user's.
    suite = default_suite(spec)
    if suite:
        # hpcai-bench with no arguments runs these, in this order.
        env["HPCAI_DEFAULT_SUITE"] = ",".join(suite)
    if spec.family == "cpu" and spec.mpi is Mpi.OMPI:
        # Containers often run as root (docker run, CI); Open MPI refuses that without these.
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return env


def default_suite(spec: ImageSpec) -> list[str]:
    """The selected payloads, the flavor's defaults first in the flavor's order, then the rest
    in the order the user gave them."""
    order = {name: i for i, name in enumerate(spec.flavor.default_payloads)}
    return sorted(spec.payloads, key=lambda n: order.get(n, len(order)))


def ss_env(spec: ImageSpec) -> dict[str, str]:
    """Added by -ss images, after runtime_env: the site's libraries come first. Kept apart so
    the -hpc and -ss images share every layer up to the site libraries."""
    if not spec.ss:
        return {}
    return {"LD_LIBRARY_PATH": f"{HPC_LIBS_IN_IMAGE}:$LD_LIBRARY_PATH", "HPCAI_HPC_LIBS": HPC_LIBS_IN_IMAGE}


def build_env(spec: ImageSpec) -> dict[str, str]:
    """Builder-only variables: component pins and the framework requirement."""
    env: dict[str, str] = {}
    for _, src in spec.components:
        env.update(src.env())
    return env


@functools.cache
def _jinja(kind: str):
    import jinja2

    from hpcai.resources import data_path

    import shlex

    folder = "dockerfiles" if kind == "docker" else "apptainer"
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_path(folder))),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True, autoescape=False,
    )
    env.filters["dq"] = dq
    env.filters["kv"] = kv_block
    env.filters["sq"] = shlex.quote
    return env


def context(spec: ImageSpec) -> dict:
    hooks = payload_hooks(spec)
    return {
        "spec": spec, "prefix": PREFIX, "build_dir": BUILD_DIR, "hpc_libs_dir": HPC_LIBS_IN_IMAGE,
        "builder_steps": builder_steps(spec, hooks), "final_steps": final_steps(spec, hooks),
        "stage_env": stage_env(spec), "stack_env": stack_env(spec), "flavor_env": flavor_env(spec), "build_env": build_env(spec), "runtime_env": runtime_env(spec),
        "ss_env": ss_env(spec),
        "labels": spec.labels(), "hooks": hooks,
        "apt_sources_name": spec.apt_sources.name if spec.apt_sources else "",
    }


def render(spec: ImageSpec, fmt: str = "docker", bootstrap: str = "docker") -> str:
    """The Dockerfile (fmt="docker") or Apptainer def (fmt="apptainer") text for spec.

    bootstrap: Apptainer's source of the base (default "docker", a registry); "docker-daemon"
    takes it from the local Docker engine (bases made with docker import), "localimage" from a
    SIF or sandbox path given as the base. Ignored for Docker.
    """
    if fmt not in FORMATS:
        raise unknown("format", fmt, FORMATS)
    if bootstrap not in BOOTSTRAPS:
        raise unknown("bootstrap", bootstrap, BOOTSTRAPS)
    template = "Dockerfile.j2" if fmt == "docker" else "hpcai.def.j2"
    return _jinja(fmt).get_template(template).render(**context(spec), bootstrap=bootstrap)


def dq(value: str) -> str:
    """Double-quote for Dockerfile ENV/LABEL values (keeps $VAR references live)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def kv_block(items: dict[str, str], indent: int = 4) -> str:
    """`K="v" \\` continuation lines for one ENV or LABEL instruction."""
    return (" \\\n" + " " * indent).join(f"{k}={dq(v)}" for k, v in items.items())
