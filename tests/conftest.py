"""Shared test fixtures: engine detection and the CLI runner.

Integration tests carry a marker naming the engine they need (docker, podman, slurm, charliecloud,
apptainer, gpu). Without the engine they skip on a workstation. Under HPCAI_REQUIRE_ENGINES=1 (CI)
every skip is a failure instead, whatever its cause (a missing engine, package or file), so CI can
never pass by skipping: tests/infra installs and starts everything the tests need, Apptainer
included. GPUs cannot exist on CI: there, tests marked `gpu` are deselected (and counted as such),
not skipped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from engines import MULTI_CLUSTERS, engine_available, multi_env
from imagebuild import pip_build_inputs
from sifcache import cached_sif

REPO = Path(__file__).resolve().parents[1]
REQUIRE = os.environ.get("HPCAI_REQUIRE_ENGINES") == "1"
# Every launch indexes its record into the run history (hpcai.results.history): the tests' own file,
# not the user's. Tests of the history give their own (--db, monkeypatch).
_TEST_HISTORY = None if os.environ.get("HPCAI_RESULTS_DB") else \
    os.path.join(os.environ.get("TMPDIR", "/tmp"), f"hpcai-test-history-{os.getpid()}.sqlite")
if _TEST_HISTORY:
    os.environ["HPCAI_RESULTS_DB"] = _TEST_HISTORY


def pytest_sessionfinish(session, exitstatus):
    for suffix in ("", "-wal", "-shm"):  # the tests' own history, made above
        if _TEST_HISTORY:
            Path(_TEST_HISTORY + suffix).unlink(missing_ok=True)

# A suite started in the background of a non-interactive shell (`make test &`, a CI runner's
# `cmd &`) inherits SIGINT ignored, and every process it starts then ignores it too: the Ctrl-C
# tests would interrupt nothing. A user's terminal never ignores Ctrl-C, so the suite restores it
# here once; the children start with the default disposition again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


NEVER_ON_CI = ("gpu",)  # Apptainer is installed by tests/infra/apptainer-up.sh like every engine


@pytest.fixture(autouse=True)
def _engines(request):
    """Skip a test whose engine marker names an engine this machine lacks (a failure on CI)."""
    for name in ("docker", "podman", "slurm", "multicluster", "charliecloud", "apptainer", "registry", "browser",
                 "gpu"):
        if request.node.get_closest_marker(name) is not None and not engine_available(name):
            pytest.skip(f"{name} not available on this machine (tests/infra/up.sh starts the engines)")


def _slurm_jobs(under: Path, env: dict[str, str] | None = None) -> set[str]:
    """Ids of the pending or running jobs submitted from a folder under UNDER (this session's), on
    the cluster ENV's SLURM_CONF names (None: the main one); a job that is completing (CG, just
    after its srun returned) is on its way out."""
    res = subprocess.run(["squeue", "-h", "-t", "PD,CF,R,S", "-o", "%i %Z"], capture_output=True, text=True,
                         timeout=30, check=False, env=env)
    jobs = (line.split(" ", 1) for line in res.stdout.splitlines() if " " in line)
    return {job for job, workdir in jobs if Path(workdir).is_relative_to(under)}


@pytest.fixture(autouse=True)
def _slurm_jobs_left(request, tmp_path_factory):
    """A Slurm test that stops half-way (its timeout kills hpcai with SIGKILL, so nothing ends the
    ranks) leaves its job holding nodes, and every later test would wait behind it: cancel the
    jobs a test left, with a warning, so the next test starts on an idle cluster. Only this
    session's jobs (submitted from its temporary folders): another session may share the cluster.
    The main cluster for `slurm` tests, the two of tests/infra/slurm-multi-up.sh for `multicluster`."""
    clusters = [(name, env) for marker, name, env in
                [("slurm", "main", None), *(("multicluster", c, multi_env(c)) for c in MULTI_CLUSTERS)]
                if request.node.get_closest_marker(marker) is not None and engine_available(marker)]
    ours = tmp_path_factory.getbasetemp()
    before = {name: _slurm_jobs(ours, env) for name, env in clusters}
    yield
    for name, env in clusters:
        left = _slurm_jobs(ours, env) - before[name]
        for _ in range(20):  # a job whose srun just returned may still read as running for a moment
            if not left:
                break
            time.sleep(0.5)
            left &= _slurm_jobs(ours, env)
        if left:
            warnings.warn(f"{request.node.nodeid} left Slurm jobs {', '.join(sorted(left))} on the {name} cluster: "
                          "cancelled", stacklevel=1)
            subprocess.run(["scancel", *sorted(left)], capture_output=True, timeout=30, check=False, env=env)
            for _ in range(60):
                if not left & _slurm_jobs(ours, env):
                    break
                time.sleep(0.5)


def pytest_collection_modifyitems(config, items):
    """On CI, tests for engines CI cannot have are deselected rather than skipped, and the ROCm
    recipe's tests when it was proven on today's inputs (tests/infra/rocm_recipe_inputs.py)."""
    if not REQUIRE:
        return
    absent = [n for n in NEVER_ON_CI if not engine_available(n)]
    dropped = [i for i in items if any(i.get_closest_marker(n) for n in absent)]
    recipe = [i for i in items if i.path.name == "test_rocm_recipe.py"]
    if recipe:
        sys.path.insert(0, str(REPO / "tests" / "infra"))
        import rocm_recipe_inputs

        if rocm_recipe_inputs.proven() and os.environ.get("HPCAI_ROCM_RECIPE") != "build":
            dropped += recipe
            ROCM_RECIPE_NOTE.append(f"rocm-recipe: {len(recipe)} tests deselected: the recipe was proven on "
                                    f"these inputs ({rocm_recipe_inputs.digest()[:12]}, `make rocm-recipe`)")
        else:
            ROCM_RECIPE_NOTE.append("rocm-recipe: its inputs changed since it was last proven: building and testing it")
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i not in dropped]


ROCM_RECIPE_NOTE: list[str] = []


def pytest_terminal_summary(terminalreporter):
    for line in ROCM_RECIPE_NOTE:
        terminalreporter.write_line(line)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under HPCAI_REQUIRE_ENGINES=1 a skip, for whatever reason, is reported as a failure."""
    outcome = yield
    report = outcome.get_result()
    if REQUIRE and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = f"would skip, which CI (HPCAI_REQUIRE_ENGINES=1) does not allow: {reason}"


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def hpcai(capsys):
    """Run the real CLI entry point in-process: `hpcai("render", "pytorch-cpu")` -> CliResult."""
    from hpcai.cli.main import run

    def invoke(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            run(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return invoke


@pytest.fixture
def site_path(tmp_path):
    """site_path(NAME, TOML) -> a folder for HPCAI_SITE_PATH holding the test's own site NAME."""
    folder = tmp_path / "sites"

    def write(name: str, text: str) -> str:
        folder.mkdir(exist_ok=True)
        (folder / f"{name}.toml").write_text(text)
        return str(folder)

    return write


@pytest.fixture
def hpcai_exe() -> list[str]:
    """argv prefix to run the CLI as a real subprocess (exit codes, signals, no tracebacks)."""
    return [sys.executable, "-m", "hpcai"]


# --- Images built once per session with the real `hpcai build` (issue 2) -------------------------
# Other tests (entrypoint, Slurm launch, payloads) take these fixtures; each returns the image tag.
# The wheelhouse and CA bundle come from this machine's pip configuration at run time (never
# hard-coded): `pip config list` find-links / cert, or PIP_FIND_LINKS / PIP_CERT.
# HPCAI_PYTORCH_CPU_IMAGE / HPCAI_TENSORFLOW_CPU_IMAGE name an existing image to skip the build.


def build_image(flavor: str, workdir: Path, *extra: str, builder: str = "docker") -> str:
    """Run `hpcai build FLAVOR` as a subprocess; return the tag it prints (last stdout line)."""
    if not engine_available(builder):
        pytest.skip(f"{builder} not available on this machine (tests/infra/up.sh starts the engines)")
    env = {**os.environ, "HPCAI_WORK_DIR": str(workdir)}
    argv = [sys.executable, "-m", "hpcai", "build", flavor, "--builder", builder, *pip_build_inputs(), *extra]
    res = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=3600, check=False)
    if res.returncode != 0:
        pytest.fail(f"hpcai build {flavor} failed (exit {res.returncode}):\n{res.stderr[-6000:]}")
    return res.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def cuda_base() -> str:
    """The CUDA stand-in base image (tests/infra/base-cuda.sh, the NGC PyTorch stand-in), built
    once when missing; HPCAI_CUDA_BASE names it."""
    if not engine_available("docker"):
        pytest.skip("docker not available on this machine (tests/infra/up.sh starts the engines)")
    res = subprocess.run(["bash", str(REPO / "tests/infra/base-cuda.sh")], capture_output=True, text=True,
                         env={**os.environ, "HPCAI_PYTHON": sys.executable}, timeout=1800, check=False)
    if res.returncode != 0:
        pytest.fail(f"tests/infra/base-cuda.sh failed (exit {res.returncode}):\n{res.stderr[-3000:]}")
    return os.environ.get("HPCAI_CUDA_BASE", "hpcai/base-cuda:13.2")


@pytest.fixture(scope="session")
def pytorch_cpu_image(tmp_path_factory) -> str:
    """Tag of the real pytorch-cpu image (Debian + Open MPI + libfabric + torch CPU), built once."""
    return os.environ.get("HPCAI_PYTORCH_CPU_IMAGE") or build_image(
        "pytorch-cpu", tmp_path_factory.mktemp("build-pytorch-cpu"))


PODMAN_PAYLOADS = ("sanity", "mpi-allreduce", "ddp-bench")


@pytest.fixture(scope="session")
def podman_pytorch_image(tmp_path_factory) -> str:
    """pytorch-cpu built with `--builder podman`, with PODMAN_PAYLOADS only (tests/integration/test_podman.py)."""
    return build_image("pytorch-cpu", tmp_path_factory.mktemp("build-podman"),
                       "--payloads", ",".join(PODMAN_PAYLOADS), builder="podman")


@pytest.fixture(scope="session")
def mpich_cpu_image(tmp_path_factory) -> str:
    """pytorch-cpu with `--mpi mpich` (Debian's MPICH packages) and the sanity payload only: the
    MPICH-ABI image the host MPI swap goes into (tests/integration/test_host_mpi_swap.py), built
    once per session; HPCAI_MPICH_CPU_IMAGE names an existing one."""
    return os.environ.get("HPCAI_MPICH_CPU_IMAGE") or build_image(
        "pytorch-cpu", tmp_path_factory.mktemp("build-mpich-cpu"), "--mpi", "mpich", "--payloads", "sanity")


@pytest.fixture(scope="session")
def ssh_cpu_image(tmp_path_factory) -> str:
    """pytorch-cpu with --ssh 1 (an ssh server, for `hpcai export k8s`'s MPIJob workers) and the
    flavor's own payloads: every layer before the ssh server's is pytorch_cpu_image's."""
    return build_image("pytorch-cpu", tmp_path_factory.mktemp("build-ssh"), "--ssh", "1")


@pytest.fixture(scope="session")
def ssh_mpich_image(tmp_path_factory) -> str:
    """mpich_cpu_image (--mpi mpich, sanity only) with --ssh 1."""
    return build_image("pytorch-cpu", tmp_path_factory.mktemp("build-ssh-mpich"), "--mpi", "mpich",
                       "--payloads", "sanity", "--ssh", "1")


@pytest.fixture(scope="session")
def ch_squashfs():
    """ch_squashfs(docker_tag, mount_points="") -> the image as a Charliecloud SquashFS file for
    ch-run, made by tests/infra/ch-image.sh (ch-convert; cached by image id in HPCAI_CH_CACHE, so
    each image is converted once). mount_points: folders to make in it (HPCAI_CH_MOUNT_POINTS)."""
    cache = Path(os.environ.get("HPCAI_CH_CACHE", "/var/tmp/hpcai-ch"))
    env = {**os.environ, "USER": os.environ.get("USER") or "root"}  # ch-run refuses to run without USER

    def convert(tag: str, mount_points: str = "") -> str:
        res = subprocess.run(["bash", str(REPO / "tests/infra/ch-image.sh"), tag, str(cache)], capture_output=True,
                             text=True, timeout=1200, check=False,
                             env={**env, "HPCAI_CH_MOUNT_POINTS": mount_points} if mount_points else env)
        if res.returncode != 0:
            pytest.fail(f"ch-image.sh {tag} failed:\n{res.stderr[-4000:]}")
        return res.stdout.strip().splitlines()[-1]

    return convert


@pytest.fixture(scope="session")
def tensorflow_cpu_image(tmp_path_factory) -> str:
    """Tag of the real tensorflow-cpu image, built once per session."""
    if os.environ.get("HPCAI_TENSORFLOW_CPU_IMAGE"):
        return os.environ["HPCAI_TENSORFLOW_CPU_IMAGE"]
    sources = mirror_sources(tmp_path_factory, "tf-cnn-benchmarks", "jpwr")
    return build_image("tensorflow-cpu", tmp_path_factory.mktemp("build-tensorflow-cpu"), "--sources", str(sources))


@pytest.fixture(scope="session")
def mila_cpu_image(tmp_path_factory) -> str:
    """pytorch-cpu with the mila-training payload only (Mila's code from the mirror's archive; not
    a default payload of the CPU flavor, whose demo build reaches no mirror), built once."""
    sources = mirror_sources(tmp_path_factory, "mila-training")
    return build_image("pytorch-cpu", tmp_path_factory.mktemp("build-mila-cpu"), "--payloads", "mila-training",
                       "--sources", str(sources))


@pytest.fixture(scope="session")
def hf_seed_cpu_image(tmp_path_factory) -> str:
    """pytorch-cpu with hf-clm in its seed variant (`--variant hf-clm=seed`: the WikiText-2
    benchmark's transformers 4.37.0, datasets 2.14.5, evaluate 0.4.1), built once."""
    return build_image("pytorch-cpu", tmp_path_factory.mktemp("build-hf-seed"), "--payloads", "hf-clm",
                       "--variant", "hf-clm=seed")


def mirror_sources(tmp_path_factory, *components: str) -> Path:
    """A --sources folder with COMPONENTS at their pinned versions: payloads that bake GitHub
    archives this machine cannot reach take their byte-identical, sha256-checked copies in
    tests/infra/mirror (tests/infra/sources.py)."""
    sources = tmp_path_factory.mktemp("sources")
    res = subprocess.run([sys.executable, str(REPO / "tests/infra/sources.py"), str(sources), *components],
                         capture_output=True, text=True, timeout=300, check=False)
    if res.returncode != 0:
        pytest.fail(f"tests/infra/sources.py failed:\n{res.stderr[-3000:]}")
    return sources


# --- SIFs built once per session with the real `hpcai sif` / `hpcai build --builder apptainer` ----
# Cached across sessions in HPCAI_APPTAINER_CACHE (default /var/tmp/hpcai-sif, where
# tests/infra/apptainer-up.sh keeps its self-check SIF), under a key of everything that makes the
# SIF: a session whose inputs did not change takes the SIF a former one made. hpcai writes each as
# NAME.part and renames it when complete, so a killed session never leaves a bad entry; a lock
# file lets one session build while another waits for it. Each fixture returns the SIF's path.


def _hpcai_sif_cli(argv: list[str], what: str, workdir: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "hpcai", *argv], capture_output=True, text=True, timeout=3600,
                         check=False, env={**os.environ, "HPCAI_WORK_DIR": str(workdir)})
    if res.returncode != 0:
        pytest.fail(f"{what} failed (exit {res.returncode}):\n{res.stderr[-6000:]}")


@pytest.fixture(scope="session")
def pytorch_cpu_sif(pytorch_cpu_image, tmp_path_factory) -> str:
    """The pytorch-cpu Docker image converted by `hpcai sif TAG -o PATH` (Bootstrap: docker-daemon),
    keyed by the image's Id and the conversion def (a change to its run sections makes a new one)."""
    import hashlib

    from hpcai.image.engine import image_id, image_labels
    from hpcai.image.render import render_conversion

    for name in ("docker", "apptainer"):
        if not engine_available(name):
            pytest.skip(f"{name} not available on this machine (tests/infra/up.sh starts the engines)")
    definition = render_conversion(pytorch_cpu_image, image_labels("docker", pytorch_cpu_image))
    key = hashlib.sha256(f"{image_id('docker', pytorch_cpu_image)}\n{definition}".encode()).hexdigest()[:16]
    work = tmp_path_factory.mktemp("sif-pytorch-cpu")
    return str(cached_sif(f"pytorch-cpu-converted-{key}.sif", lambda sif: _hpcai_sif_cli(
        ["sif", pytorch_cpu_image, "-o", str(sif)], f"hpcai sif {pytorch_cpu_image}", work)))


# The def build takes its base from the local Docker engine (--bootstrap docker-daemon): no
# registry is reachable here. localimage from the self-check SIF of that base (what a login node
# without Docker would use) fails here under --fakeroot: that SIF, converted as root, keeps the
# base's /dev/console, /dev/null… as device nodes (the base is made by mmdebstrap + docker import),
# and Apptainer's unsquashfs in the fakeroot user namespace cannot create them ("set_attributes:
# failed to set time on …/dev/console", exit 2). A base SIF converted with --fakeroot holds plain
# files there instead, and localimage builds on it (docs/building.md).
DEF_SIF_OPTIONS = ("--bootstrap", "docker-daemon")


def _def_sif_key(build_inputs: list[str], workdir: Path) -> str:
    """sha256 of what `hpcai build pytorch-cpu --builder apptainer` would build from: its def with
    the lines that change on every run or commit (build date, git sha) removed, and every other
    file of its context (install scripts, entrypoint, payloads, wheelhouse, CA bundle)."""
    import hashlib

    from hpcai.image.context import prepare_context
    from hpcai.image.spec import make_spec

    inputs = dict(zip(build_inputs[::2], build_inputs[1::2]))
    spec = make_spec("pytorch-cpu", wheelhouse=inputs.get("--wheelhouse"), ca_bundle=inputs.get("--ca-bundle"))
    ctx = prepare_context(spec, workdir / "context", DEF_SIF_OPTIONS[1])
    digest = hashlib.sha256()
    for line in (ctx / "hpcai.def").read_text().splitlines():
        if spec.build_date not in line and spec.git_sha not in line:
            digest.update(line.encode() + b"\n")
    for path in sorted(p for p in ctx.rglob("*") if p.is_file() and p.name not in ("hpcai.def", "Dockerfile")):
        digest.update(f"{path.relative_to(ctx)}\0".encode() + path.read_bytes())
    return digest.hexdigest()[:16]


@pytest.fixture(scope="session")
def pytorch_cpu_def_sif(tmp_path_factory) -> str:
    """pytorch-cpu built from its def by `hpcai build pytorch-cpu --builder apptainer` (apptainer
    build --fakeroot, %test at its end), with the host's pip inputs as build_image uses them."""
    for name in ("docker", "apptainer"):
        if not engine_available(name):
            pytest.skip(f"{name} not available on this machine (tests/infra/up.sh starts the engines)")
    work = tmp_path_factory.mktemp("sif-pytorch-cpu-def")
    inputs = pip_build_inputs()
    key = _def_sif_key(inputs, work)
    return str(cached_sif(f"pytorch-cpu-def-{key}.sif", lambda sif: _hpcai_sif_cli(
        ["build", "pytorch-cpu", "--builder", "apptainer", *DEF_SIF_OPTIONS, *inputs, "-o", str(sif)],
        "hpcai build pytorch-cpu --builder apptainer", work)))
