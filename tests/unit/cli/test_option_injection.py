"""Option injection (hostile corpus, round three, issue 25) through the values hpcai puts
where a command reads options: the image of every runtime, the image and output of every converter
and builder, the flavor after `--`, a work folder starting with a dash; values that are no options
(a file given as ./-x, image names) still work. Each test is a property over the registry it
guards: every runtime in RUNTIMES, every conversion command and builder in build.BUILDERS; a new
one is covered without a new test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from plan_helpers import FakeHost

from hpcai.errors import UsageError, operand
from hpcai.image import build
from hpcai.run.plan import LaunchOptions, plan_launch
from hpcai.run.runtimes import RUNTIMES

pytestmark = pytest.mark.hostile


# The shapes of issue 25: a root bind for Sarus/podman-hpc, docker's own bind and privilege flags,
# and a bare '-' (stdin to many tools).
OPTION_LIKE = ["--mount=type=bind,source=/,destination=/host", "-v/:/host", "--privileged", "-"]
BACKENDS = ("srun", "local", "mpiexec")
# `sif`/`sqsh` take IMAGE and -o; `build` takes -o (its SIF) with every builder.
CONVERTERS = [("sif",), ("sqsh",)]
BUILDS = [("build", "pytorch-cpu", "--builder", name) for name in build.BUILDERS]
# (runtime, image, the word its plan holds; {here} is the folder it is planned in): a file starting
# with '-' named as ./-x, and image names. ce names the image in its EDF, not in argv.
LEGITIMATE = [
    ("apptainer", "./-x.sif", "./-x.sif"), ("singularity", "/i/-x.sif", "/i/-x.sif"), ("charliecloud", "./-x", "./-x"),
    ("enroot", "./-x.sqsh", "{here}/-x.sqsh"), ("pyxis", "./-x.sqsh", "--container-image={here}/-x.sqsh"),
    ("pyxis", "docker://repo/x:tag", "--container-image=docker://repo/x:tag"), ("docker", "localhost/x", "localhost/x"),
    ("podman", "localhost/x:1", "localhost/x:1"), ("sarus", "repo/x:tag", "repo/x:tag"),
    ("podman-hpc", "localhost/x", "localhost/x"), ("ce", "repo/x:tag", 'image = "repo/x:tag"'),
]


def _refusal(exc_or_result, value: str, what: str) -> str:
    """The one line of a refusal, checked: exit 2, naming WHAT and the value."""
    if isinstance(exc_or_result, UsageError):
        code, line = exc_or_result.exit_code, str(exc_or_result)
    else:
        assert exc_or_result.stdout == "", exc_or_result.stdout  # nothing planned, printed or run
        code, lines = exc_or_result.exit_code, exc_or_result.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in exc_or_result.stderr, exc_or_result.stderr
        line = lines[0]
    assert code == 2 and "\n" not in line, line
    assert what in line and repr(value) in line, line
    return line


def _options(runtime: str, backend: str, image: str, tmp_path: Path) -> LaunchOptions:
    site = "local" if backend == "local" else "generic-slurm"
    return LaunchOptions(image=image, runtime=runtime, backend=backend, site=site, cmd=("true",),
                         output_dir=str(tmp_path / "run"))


def _backends(runtime: str, tmp_path: Path) -> list[str]:
    """The backends this runtime plans under with a good image (pyxis and ce: srun only)."""
    good = []
    for backend in BACKENDS:
        try:
            plan_launch(_options(runtime, backend, "img.sif", tmp_path), host=FakeHost(), check=False)
        except UsageError:
            continue
        good.append(backend)
    assert "srun" in good, runtime  # every runtime runs under srun
    return good


def _a_file_named(name: str) -> None:
    """A file of that name here, so a runtime that takes a file finds it and goes on to read it."""
    Path(name).parent.mkdir(parents=True, exist_ok=True)
    Path(name).write_text("not an image")


class _Spawned:
    """subprocess.Popen, recorded: a command that holds VALUE where options are read (not after
    a `--`) is refused here instead of run, and kept in `hostile` for the test to fail on."""

    def __init__(self, value: str, real=subprocess.Popen):
        self.value, self.real, self.argvs, self.hostile = value, real, [], []

    def __call__(self, argv, *args, **kw):
        argv = list(argv) if not isinstance(argv, (str, bytes)) else [argv]
        self.argvs.append(argv)
        options = argv[:argv.index("--")] if "--" in argv else argv
        if any(str(word) == self.value for word in options[1:]):
            self.hostile.append(argv)
            raise OSError("refused by the test: an option-like value in an option position")
        return self.real(argv, *args, **kw)


# --- 1. every runtime refuses an option-like image, in one line, before any token list --------

@pytest.mark.parametrize("image", OPTION_LIKE)
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_every_runtime_refuses_an_option_like_image_in_a_plan(runtime, image, tmp_path):
    for backend in _backends(runtime, tmp_path):
        with pytest.raises(UsageError) as err:
            plan_launch(_options(runtime, backend, image, tmp_path), host=FakeHost(), check=False)
        _refusal(err.value, image, "--image")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("image", OPTION_LIKE)
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_every_runtime_refuses_it_before_running_anything_even_when_such_a_file_exists(runtime, image, tmp_path,
                                                                                      monkeypatch):
    """A real plan (check=True) reads labels with the runtime's own tool: a file of that name
    here must not turn that read (apptainer inspect, unsquashfs) into an option."""
    monkeypatch.chdir(tmp_path)
    _a_file_named(image)
    spawned = _Spawned(image)
    monkeypatch.setattr(subprocess, "Popen", spawned)
    with pytest.raises(UsageError) as err:
        plan_launch(_options(runtime, "srun", image, tmp_path), host=FakeHost(), check=True)
    _refusal(err.value, image, "--image")
    assert spawned.hostile == [] and not (tmp_path / "run").exists()


@pytest.mark.parametrize("dry_run", [("--dry-run",), ("--json",), ()])
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_launch_cli_refuses_it_for_every_runtime(hpcai, runtime, dry_run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for image in OPTION_LIKE:
        _a_file_named(image)
        spawned = _Spawned(image)
        monkeypatch.setattr(subprocess, "Popen", spawned)
        res = hpcai("launch", *dry_run, "--site", "generic-slurm", "--backend", "srun", "--runtime", runtime,
                    f"--image={image}", "--output-dir", str(tmp_path / "run"), "--cmd", "--", "true")
        _refusal(res, image, "--image")
        assert spawned.hostile == [] and not (tmp_path / "run").exists() and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("image", OPTION_LIKE + ["-x.sif"])
def test_payloads_list_refuses_an_option_like_image(hpcai, image, tmp_path, monkeypatch):
    """`payloads list --image` runs the image (docker run / apptainer exec IMAGE hpcai-bench --list)."""
    monkeypatch.chdir(tmp_path)
    spawned = _Spawned(image)
    monkeypatch.setattr(subprocess, "Popen", spawned)
    _refusal(hpcai("payloads", "list", f"--image={image}"), image, "--image")
    assert spawned.argvs == []


# --- 2. every converter and builder: IMAGE and -o -----------------------------------------------

@pytest.mark.parametrize("dry_run", [("--dry-run",), ()])
@pytest.mark.parametrize("command", CONVERTERS + BUILDS, ids=" ".join)
def test_every_converter_and_builder_refuses_an_option_like_output(hpcai, command, dry_run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HPCAI_WORK_DIR", str(tmp_path / "w"))
    image = ("img:1",) if command in CONVERTERS else ()
    for value in ["--fakeroot", "-x.sif", "-x.sqsh", "-"]:
        spawned = _Spawned(value)
        monkeypatch.setattr(subprocess, "Popen", spawned)
        _refusal(hpcai(*command, *image, *dry_run, "-o", value), value, "-o/--output")
        assert spawned.argvs == [] and list(tmp_path.iterdir()) == []  # nothing run, nothing written


@pytest.mark.parametrize("dry_run", [("--dry-run",), ()])
@pytest.mark.parametrize("command", CONVERTERS, ids=" ".join)
def test_every_converter_refuses_an_option_like_image(hpcai, command, dry_run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for value in OPTION_LIKE:
        spawned = _Spawned(value)
        monkeypatch.setattr(subprocess, "Popen", spawned)
        _refusal(hpcai(*command, *dry_run, "--", value), value, "IMAGE")
        assert spawned.argvs == [] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("builder", build.BUILDERS)
def test_every_builder_refuses_an_option_like_flavor(hpcai, builder, tmp_path, monkeypatch):
    """`build --builder podman -- --quiet`: the word after `--` is the flavor, never a builder option."""
    monkeypatch.chdir(tmp_path)
    for value in ["--quiet", *OPTION_LIKE]:
        spawned = _Spawned(value)
        monkeypatch.setattr(subprocess, "Popen", spawned)
        _refusal(hpcai("build", "--builder", builder, "--", value), value, "flavor")
        assert spawned.argvs == [] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [(*c, "img:1", "--builder", b) for c in CONVERTERS for b in build.ENGINES]
                         + BUILDS, ids=" ".join)
def test_a_work_folder_starting_with_a_dash_is_a_path_in_every_command(hpcai, command, tmp_path, monkeypatch):
    """HPCAI_WORK_DIR=-w: the context, def and archive paths reach each command as ./-w/…"""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HPCAI_WORK_DIR", "-w")
    res = hpcai(*command, "--dry-run")
    assert res.exit_code == 0, res.stderr
    argvs = [line.split() for line in res.stdout.splitlines() if not line.startswith("#")]
    assert argvs and not [word for argv in argvs for word in argv if word.startswith("-w")], res.stdout


# --- 3. legitimate values still work ---------------------------------------------------------------

@pytest.mark.parametrize("command, output, expected", [
    (("sif", "img:1"), "./-x.sif", "./-x.sif.part"),
    (("sqsh", "img:1"), "./-x.sqsh", "./-x.sqsh.part"),
    (("build", "pytorch-cpu", "--builder", "apptainer", "--tag", "t:1"), "./-x.sif", "/-x.sif.part"),
])
def test_a_dash_file_given_as_a_relative_path_is_converted(hpcai, command, output, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = hpcai(*command, "--dry-run", "-o", output)
    assert res.exit_code == 0, res.stderr
    assert any(word.endswith(expected) and not word.startswith("-") for word in res.stdout.split()), res.stdout


@pytest.mark.parametrize("runtime, image, word", LEGITIMATE)
def test_images_that_are_no_options_still_plan(runtime, image, word, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = plan_launch(_options(runtime, "srun", image, tmp_path), host=FakeHost(), check=False)
    word = word.format(here=tmp_path)
    assert word in plan.argv or any(word in text for text in plan.files.values()), plan.argv


def test_every_runtime_has_a_legitimate_case():
    assert {runtime for runtime, _, _ in LEGITIMATE} == set(RUNTIMES)


def test_operand_refuses_text_and_keeps_paths():
    for value in OPTION_LIKE:
        with pytest.raises(UsageError, match="^--image "):
            operand("--image", value)
        assert operand("-o", Path(value)) == f"./{Path(value)}"  # the same file, never an option
    assert operand("--image", "docker://repo/x:tag") == "docker://repo/x:tag"
    assert operand("-o", Path("./x.sif")) == "x.sif" and operand("-o", Path("/a/-x")) == "/a/-x"
