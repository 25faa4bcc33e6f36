"""Render an ImageSpec into a Dockerfile or an Apptainer definition (pure: spec in, text out).

Both formats are fed by the same ordered list of `Step`s — each one an install script under
dockerfiles/install/ with its arguments and the pins of what it downloads — so a Docker image
and a SIF built from the def run the same scripts in the same order. The stack's steps, their
scripts and system packages come from the component records (components.toml, via
ImageSpec.stack). The Dockerfile sets each step's pins and copies its script just before its RUN,
so that bumping one component or editing one script only rebuilds from that step on; payload
folders are copied last so that touching a payload's run script only rebuilds the final layers.

Every value the templates write passes the `Writer` (hpcai.image.writer), the one rule for
both formats: control characters are refused (errors.one_line, naming where the value came from),
and each value is quoted for where it lands (a shell word in RUN and %post, a double-quoted
ENV/LABEL value) or, where no quoting exists (FROM, COPY, %files), must be one plain word.
make_spec and the payload manifests have already checked the values against their grammars;
the writer is what keeps a value from ever becoming an instruction or a command.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hpcai.errors import UsageError, shaped, unknown
from hpcai.image import components
from hpcai.image.flavors import Mpi
from hpcai import paths
from hpcai.image.spec import ImageSpec
from hpcai.image.writer import Writer

FORMATS = ("docker", "apptainer")
BOOTSTRAPS = ("docker", "docker-daemon", "localimage")


@dataclass(frozen=True)
class Step:
    """One RUN (Docker) / one block of %post (Apptainer)."""

    title: str
    script: str  # file name under dockerfiles/install/
    args: tuple[str, ...] = ()
    payload: str = ""  # payload name for payload hooks ("" for stack components)
    files: tuple[str, ...] = field(default=())  # context paths to copy in first (payload hooks)
    pins: tuple[tuple[str, str], ...] = ()  # <NAME>_VERSION/_URL/_SHA256 of what it downloads

    @property
    def pin_env(self) -> dict[str, str]:
        """The pins, set just before the step: a bumped pin rebuilds from this step on, not the stack."""
        return dict(self.pins)

    @property
    def argv(self) -> tuple[str, ...]:
        return (f"{paths.BUILD_DIR}/install/{self.script}", *self.args)

    @property
    def origin(self) -> str:
        """Where the step's arguments come from, for the writer's errors."""
        return f"payloads/{self.payload}/payload.toml install script" if self.payload else f"install step {self.title}"

    @property
    def command(self) -> str:
        """The RUN / %post line, as the templates write it (build.py finds steps in the log by it)."""
        return Writer("docker").sh(self.argv, self.origin)


@dataclass(frozen=True)
class PayloadHooks:
    name: str
    build: str | None
    runtime: str | None
    files: tuple[str, ...]  # files of the payload folder the hooks may read (copied to the context)
    downloads: tuple[str, ...] = ()  # components its build hook fetches (the manifest's `downloads`)
    compilers: bool = True  # its build hook needs a C toolchain (the manifest's install.*.compilers)
    variant: str = ""  # its build variant (--variant PAYLOAD=NAME), as <PAYLOAD>_VARIANT


def variant_env(payload: str) -> str:
    """The build variable naming a payload's build variant: hf-clm -> HF_CLM_VARIANT."""
    return re.sub(r"[^A-Z0-9]", "_", payload.upper()) + "_VARIANT"


def payload_hooks(spec: ImageSpec) -> list[PayloadHooks]:
    """Install hooks of the selected payloads, for this flavor's family. The manifest's scripts were
    checked when it was loaded (plain relative paths inside the folder); the folder itself, copied
    into the context whole, must not link out."""
    from hpcai.payload_rules import check_folder
    from hpcai.image.values import payload_manifest

    hooks = []
    for name in spec.payloads:
        manifest = payload_manifest(name)
        if not manifest.supports(spec.flavor.name):
            raise UsageError(f"payload {name!r} does not support flavor {spec.flavor.name}")
        check_folder(name, manifest.dir)
        steps = manifest.install_steps(spec.family)
        files = {"payload.toml"}
        for script in (steps.build, steps.runtime):
            if script:
                files.add(script)
        # Hooks may also read requirements files and anything under the payload's install/ folder.
        for extra in (*manifest.dir.glob("requirements*.txt"), *manifest.dir.glob("install/**/*")):
            if extra.is_file():
                files.add(str(extra.relative_to(manifest.dir)))
        hooks.append(PayloadHooks(name, steps.build, steps.runtime, tuple(sorted(files)),
                                  manifest.downloads_for(spec.family), steps.compilers,
                                  dict(spec.payload_variants).get(name, "")))
    return hooks


def builder_steps(spec: ImageSpec, hooks: list[PayloadHooks]) -> list[Step]:
    """Compile everything into paths.PREFIX, stack first (rarely changes), payload hooks last. Each
    stack component is its record's install script with its own pins; a payload's build hook gets
    the pins of the downloads no earlier step was given."""
    records, stack = components.manifest(), spec.stack()
    # A builder that compiles nothing (Debian's MPI, payload hooks that only pip-install wheels)
    # gets python3-venv, not the toolchain and headers: ~150 fewer packages on a cold build.
    compiles = bool(stack) or any(h.build and h.compilers for h in hooks)
    steps = [system_packages_step(spec, "builder" if compiles else "python"),
             Step("python venv and framework", "python-venv.sh")]
    # The GPU architectures (--gpu-arch): set before the first step that compiles GPU kernels (a
    # component marked gpu_kernels, e.g. MPICH's yaksa, or a payload hook), so that changing them
    # rebuilds from there on and the steps before stay cached.
    archs = (("HPCAI_GPU_ARCHS", ",".join(spec.gpu_archs)),) if spec.gpu_archs else ()
    for name in stack:
        own = archs if records[name].gpu_kernels else ()
        archs = () if own else archs
        steps.append(Step(name, records[name].install, pins=own + pins(spec, [name])))
    pinned = set(stack)  # an ENV (a %post export) stays set for the later steps
    for h in hooks:
        if h.build:
            fetched = [n for n in h.downloads if n not in pinned]
            pinned.update(fetched)
            # <PAYLOAD>_VARIANT (hf-clm: HF_CLM_VARIANT): a pin stays set for the later steps,
            # so each payload's hook reads a name of its own.
            variant = ((variant_env(h.name), h.variant),) if h.variant else ()
            steps.append(Step(f"payload {h.name} (build)", "payload-hook.sh", (h.name, h.build),
                              payload=h.name, files=h.files, pins=archs + pins(spec, fetched) + variant))
            archs = ()
    return steps


def system_packages_step(spec: ImageSpec, stage: str) -> Step:
    """system-packages.sh STAGE PKG…: the stack's packages for the stage, read from the component
    records (the script adds the toolchain, or the runtime's few, every image needs). Stage
    "python" is a builder that compiles nothing: python3-venv only, no stack headers."""
    titles = {"builder": "system packages (builder)", "python": "system packages (builder, no compilers)",
              "final": "system packages (runtime)"}
    stack = components.system_packages(stage, spec.traits()) if stage != "python" else ()
    return Step(titles[stage], "system-packages.sh", (stage, *stack))


def pins(spec: ImageSpec, names: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The <NAME>_VERSION/_URL/_SHA256 variables of these components at the spec's versions."""
    return tuple((k, v) for name in names for k, v in spec.sources[name].env().items())


def final_steps(spec: ImageSpec, hooks: list[PayloadHooks]) -> list[Step]:
    steps = [system_packages_step(spec, "final"), Step("finalize prefix", "finalize.sh")]
    for h in hooks:
        if h.runtime:
            steps.append(Step(f"payload {h.name} (runtime)", "payload-hook.sh", (h.name, h.runtime),
                              payload=h.name, files=h.files))
    if spec.ssh:
        # After the payloads' hooks, so an -ssh image shares every layer before this with its plain twin.
        steps.append(Step("ssh server", "ssh-server.sh"))
    if spec.bakes_site_libs:
        steps.append(Step("site libraries", "hpc-libs.sh"))
    return steps


def stage_env(spec: ImageSpec) -> dict[str, str]:
    """Variables every install script and the entrypoint read (stack_env, then flavor_env)."""
    return {**stack_env(spec), **flavor_env(spec)}


def stack_env(spec: ImageSpec) -> dict[str, str]:
    """The stack's options, which install scripts and payload hooks read. Set before the system
    packages, so flavors that share a family and stack (pytorch-cpu, tensorflow-cpu) share those
    layers too."""
    return {
        "HPCAI_PREFIX": paths.PREFIX,
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
        "PATH": f"{paths.PREFIX}/bin:{paths.PREFIX}/venv/bin:$PATH",
        "LD_LIBRARY_PATH": f"{paths.PREFIX}/lib${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}",
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


def site_libs_env(spec: ImageSpec) -> dict[str, str]:
    """Added by -ss images, after runtime_env: the site's libraries come first. Kept apart so
    the -hpc and -ss images share every layer up to the site libraries."""
    if not spec.bakes_site_libs:
        return {}
    return {"LD_LIBRARY_PATH": f"{paths.HPC_LIBS}:$LD_LIBRARY_PATH", "HPCAI_HPC_LIBS": paths.HPC_LIBS}


def source_pins(spec: ImageSpec) -> dict[str, str]:
    """Every pin that reaches the build: those of the steps that download (builder only; no other
    pin reaches it, so changing one never invalidates an image that does not use it)."""
    return {k: v for step in builder_steps(spec, payload_hooks(spec)) for k, v in step.pins}


@functools.cache
def _jinja(kind: str):
    import jinja2

    from hpcai.resources import data_path

    folder = "dockerfiles" if kind == "docker" else "apptainer"
    writer = Writer(kind)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_path(folder))),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True, autoescape=False, finalize=writer.finalize,
    )
    env.filters.update(writer.filters())
    return env


def template_values(spec: ImageSpec) -> dict:
    hooks = payload_hooks(spec)
    apt_name = spec.apt_sources.name if spec.apt_sources else ""
    return {
        "spec": spec, "prefix": paths.PREFIX, "build_dir": paths.BUILD_DIR, "hpc_libs_dir": paths.HPC_LIBS,
        "builder_steps": builder_steps(spec, hooks), "final_steps": final_steps(spec, hooks),
        "stage_env": stage_env(spec), "stack_env": stack_env(spec), "flavor_env": flavor_env(spec), "runtime_env": runtime_env(spec),
        "site_libs_env": site_libs_env(spec),
        "labels": spec.labels(), "hooks": hooks,
        "apt_sources_name": apt_name,
        "apt_sources_argv": (f"{paths.BUILD_DIR}/install/apt-sources.sh", f"{paths.BUILD_DIR}/apt/{apt_name}"),
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
    return _jinja(fmt).get_template(template).render(**template_values(spec), bootstrap=bootstrap)


def render_conversion(image: str, labels: Mapping[str, str], archive: str | None = None) -> str:
    """The def `hpcai sif` builds IMAGE's SIF from (apptainer/convert.def.j2): `Bootstrap:
    docker-daemon` with `From: IMAGE` (the Docker engine's image), or, given ARCHIVE (the file
    `podman save --format docker-archive` wrote), `Bootstrap: docker-archive` with `From: ARCHIVE`;
    then the run sections a def build gets, their %help read from LABELS (the image's own). IMAGE
    must be an image reference (values.IMAGE_REF): it is written into the def."""
    from hpcai import __version__
    from hpcai.image.values import IMAGE_REF, REF_SHAPE

    shaped("IMAGE", image, IMAGE_REF, REF_SHAPE)
    bootstrap, source = ("docker-archive", archive) if archive else ("docker-daemon", image)
    source_what = "the image archive's path (under HPCAI_WORK_DIR)" if archive else "IMAGE"
    return _jinja("apptainer").get_template("convert.def.j2").render(
        image=image, bootstrap=bootstrap, source=source, source_what=source_what, prefix=paths.PREFIX, version=__version__,
        help_labels=dict(labels), labels_what=f"label of image {image}:")
