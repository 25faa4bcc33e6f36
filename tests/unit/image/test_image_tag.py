"""One tag for one image: `hpcai build FLAVOR`, `hpcai sif FLAVOR`, `hpcai sqsh FLAVOR` and the
Makefile's build-/sif- targets name the same tag for the same options, flags or Make variables
(issue 24: `hpcai sif pytorch-cpu` converted `…-068ba5`, a tag the build never made). And a wheel
or sdist built from the checkout stamps its commit, so an installed hpcai does not say `unknown`.

Dry runs only (no engine): the tag is read from what each command would run. sif.py's conversion
commands change elsewhere, so only the tag's presence in its output is checked.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.timeout(300)

HVD_MPICH_SANITY = ("--mpi", "mpich", "--horovod", "1", "--payloads", "sanity")
HVD_MPICH_SANITY_ENV = {"WITH_MPI": "mpich", "WITH_HVD": "1", "PAYLOADS": "sanity"}
# Make variables a shell may carry; cleared so each case sees only its own options.
MAKE_VARS = ("WITH_MPI", "WITH_OFI", "WITH_HVD", "WITH_CXI", "GPU_ARCHS", "CUDA_ARCHS", "HPC_LIBS_DIR", "PAYLOADS",
             "NGC_VERSION", "ROCM_VERSION", "TAG", "HPCAI_REPOSITORY", "BASE_IMAGE", "ARCH", "DOCKER",
             "ALLOW_UNVERIFIED", "WHEELHOUSE", "CA_BUNDLE", "APT_SOURCES", "SOURCES_DIR")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    for var in MAKE_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)  # sif/sqsh name their output here (a dry run writes nothing)


def build_tag(hpcai, *options: str) -> str:
    res = hpcai("build", "pytorch-cpu", "--dry-run", *options)
    assert res.exit_code == 0, res.stderr
    return re.search(r" -t (\S+) ", res.stdout).group(1)


def converted(hpcai, command: str, *args: str) -> str:
    res = hpcai(command, *args, "--dry-run")
    assert res.exit_code == 0, res.stderr
    return res.stdout


@pytest.mark.parametrize("options", [(), HVD_MPICH_SANITY], ids=["defaults", "mpich-hvd-sanity"])
def test_build_sif_and_sqsh_name_the_same_tag(hpcai, options):
    from hpcai.image.spec import image_tag
    from hpcai.resources import git_sha

    tag = build_tag(hpcai, *options)
    assert f"docker-daemon://{tag}" in converted(hpcai, "sif", "pytorch-cpu", *options)
    assert f"dockerd://{tag}\n" in converted(hpcai, "sqsh", "pytorch-cpu", *options)
    as_kwargs = dict(zip(("mpi", "horovod", "payloads"), options[1::2]))
    assert image_tag("pytorch-cpu", **as_kwargs) == tag
    if not options:  # the flavor's own payloads: no digest suffix (the issue's `-068ba5`)
        assert tag == f"hpcai/pytorch-cpu-hpc:bookworm-slim-{git_sha()}"
    else:
        assert tag.startswith("hpcai/pytorch-cpu-hpc-mpich-hvd:bookworm-slim-")


def test_make_variables_give_the_flag_tag(hpcai, monkeypatch):
    flags_tag = build_tag(hpcai, *HVD_MPICH_SANITY)
    for var, value in HVD_MPICH_SANITY_ENV.items():
        monkeypatch.setenv(var, value)
    assert build_tag(hpcai) == flags_tag
    assert flags_tag in converted(hpcai, "sif", "pytorch-cpu")
    assert flags_tag in converted(hpcai, "sqsh", "pytorch-cpu")


def test_build_inputs_neither_change_nor_gate_the_tag(hpcai, monkeypatch, tmp_path):
    from hpcai.cli import build
    from hpcai.image import spec

    assert {name for name, _, _ in build.BUILD_INPUTS} == set(spec.BUILD_INPUTS)  # the CLI's split is spec's
    plain = build_tag(hpcai)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    assert build_tag(hpcai, "--wheelhouse", str(wheels)) == plain
    # A build-only input that would fail the build is not read by a conversion.
    monkeypatch.setenv("WHEELHOUSE", str(tmp_path / "missing"))
    monkeypatch.setenv("CA_BUNDLE", str(tmp_path / "missing.pem"))
    assert plain in converted(hpcai, "sif", "pytorch-cpu")
    assert plain in converted(hpcai, "sqsh", "pytorch-cpu")
    assert hpcai("sif", "pytorch-cpu", "--dry-run", "--wheelhouse", str(wheels)).exit_code == 2  # not an option


@pytest.mark.parametrize("command", ["sif", "sqsh"])
def test_tag_options_with_an_image_reference_are_refused(hpcai, monkeypatch, command):
    res = hpcai(command, "hpcai/x:1", "--dry-run", "--horovod", "1", "--tag", "y:2")
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --horovod, --tag: these pick a flavor's image")
    assert "pytorch-cpu" in lines[0]  # the valid flavors are named
    # Make variables in the environment are about flavors; an image reference ignores them.
    monkeypatch.setenv("WITH_HVD", "1")
    assert "hpcai/x:1" in converted(hpcai, command, "hpcai/x:1")


@pytest.mark.skipif(not shutil.which("make"), reason="make not installed")
def test_makefile_sif_target_resolves_the_build_target_tag(tmp_path):
    """`make sif-pytorch-cpu WITH_HVD=1` converts what `make build-pytorch-cpu WITH_HVD=1` built.
    HPCAI points the targets at a dry-running hpcai; -o keeps make from reinstalling the venv."""
    dry = tmp_path / "hpcai-dry"
    dry.write_text(f'#!/bin/sh\nexec {sys.executable} -m hpcai "$@" --dry-run\n')
    dry.chmod(0o755)

    def make(target: str) -> str:
        res = subprocess.run(["make", "-s", "-C", str(REPO), "-o", ".venv/.installed", target,
                              "WITH_HVD=1", f"HPCAI={dry}"], capture_output=True, text=True, timeout=120,
                             check=False)
        assert res.returncode == 0, res.stderr
        return res.stdout

    tag = re.search(r" -t (\S+) ", make("build-pytorch-cpu")).group(1)
    assert "-hvd:" in tag and tag in make("sif-pytorch-cpu")


def _run(argv: list, **kw) -> subprocess.CompletedProcess:
    res = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=240, check=False, **kw)
    assert res.returncode == 0, f"{argv}:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


def test_wheel_and_sdist_stamp_the_checkout_commit(tmp_path):
    """pip wheel from the checkout, and pip wheel from an sdist made from it (no .git there), each
    installed into a fresh venv without hpcai's dependencies: git_sha() is the checkout's HEAD."""
    if not (REPO / ".git").exists() or not shutil.which("git"):
        pytest.skip("not a git checkout")
    head = _run(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"]).stdout.strip()
    builder = tmp_path / "build-venv"  # hatchling, for --no-build-isolation and its sdist command
    _run([sys.executable, "-m", "venv", builder])
    bpy = builder / "bin" / "python"
    if subprocess.run([bpy, "-m", "pip", "install", "-q", "hatchling>=1.21"], capture_output=True,
                      timeout=240, check=False).returncode != 0:
        pytest.skip("hatchling cannot be installed here (no package index reachable)")
    _run([bpy, "-m", "hatchling", "build", "-t", "sdist", "-d", tmp_path / "dist"], cwd=REPO)
    sdist = next((tmp_path / "dist").glob("hpcai-*.tar.gz"))
    fresh = tmp_path / "fresh"
    _run([sys.executable, "-m", "venv", "--without-pip", fresh])
    for source, wheels in ((REPO, tmp_path / "from-checkout"), (sdist, tmp_path / "from-sdist")):
        _run([bpy, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", wheels, source])
        wheel = next(wheels.glob("hpcai-*.whl"))
        _run([bpy, "-m", "pip", "--python", fresh / "bin" / "python", "install", "-q", "--no-deps",
              "--force-reinstall", wheel])
        res = _run([fresh / "bin" / "python", "-c", "from hpcai.resources import git_sha; print(git_sha())"],
                   cwd=tmp_path)
        assert res.stdout.strip() == head, source
