"""Every %post block of every flavor's def starts by sourcing the base image's ENV (issue 14 item 4).

A Dockerfile RUN inherits the base image's ENV (NGC: PATH, CUDA_HOME, PIP_CONSTRAINT, …). Apptainer
keeps that ENV in /.singularity.d/env/10-docker2singularity.sh; the def's %post sources it before
hpcai's own exports and before any install step, so the scripts see what they see under Docker and
hpcai's values win as its ENV does in the Dockerfile. tests/apptainer_env.py writes that file as
Apptainer does (its source is quoted there); tests/integration/test_apptainer_env_parity.py
compares with a real Docker base image.
"""

from __future__ import annotations

import subprocess

import pytest
from apptainer_env import (DOCKER_ENV_FILE, SOURCE_LINE, docker_env_script, parse_env, post_blocks, preamble,
                           with_env_file)

from hpcai.image.render import BOOTSTRAPS, render, stage_env
from hpcai.image.flavors import flavors
from hpcai.image.spec import make_spec

FIXED = {"sha": "0123456789ab", "build_date": "2026-01-01T00:00:00Z"}


@pytest.fixture(scope="module")
def airgapped(tmp_path_factory) -> dict[str, str]:
    """The inputs that add lines to %post before the steps (apt sources) or to %files."""
    root = tmp_path_factory.mktemp("airgapped")
    (root / "wheels").mkdir()
    (root / "ca.crt").write_text("x")
    (root / "debian.sources").write_text("Types: deb\n")
    libs = root / "ss11-libs"
    libs.mkdir()
    (libs / "libfabric.so.1").write_bytes(b"")
    return {"wheelhouse": str(root / "wheels"), "ca_bundle": str(root / "ca.crt"),
            "apt_sources": str(root / "debian.sources"), "hpc_libs": str(libs)}


@pytest.mark.parametrize("flavor", sorted(flavors()))
@pytest.mark.parametrize("bootstrap", BOOTSTRAPS)
@pytest.mark.parametrize("inputs", [False, True], ids=["default", "airgapped-ss"])
def test_every_post_block_sources_the_base_env_first(flavor, bootstrap, inputs, airgapped):
    spec = make_spec(flavor, **(airgapped if inputs else {}), **FIXED)
    text = render(spec, "apptainer", bootstrap=bootstrap)
    blocks = post_blocks(text)
    assert len(blocks) == 2, "a builder and a final %post"
    for block in blocks:
        lines = [line.strip() for line in block if line.strip()]
        # The very first command of the block, so nothing (an export, apt sources, a step) runs before it.
        assert lines[0] == SOURCE_LINE, lines[:3]
        assert lines.count(SOURCE_LINE) == 1
        # hpcai's own exports right after it (they win), then the steps.
        assert lines[1].startswith("export HPCAI_BUILD="), lines[:3]
        assert any(line.startswith("# Step:") for line in lines[2:])


def test_generator_writes_apptainers_format():
    """Apptainer's own examples: `apptainer inspect --environment` of python:3.9.2-slim shows
    export PATH="/usr/local/bin:…" and export LANG="${LANG:-"C.UTF-8"}"."""
    script = docker_env_script(["PATH=/usr/local/bin:/usr/bin", "LANG=C.UTF-8", "EMPTY", 'Q=a"b$c'])
    assert script.splitlines() == [
        "#!/bin/sh",
        'export PATH="/usr/local/bin:/usr/bin"',
        'export LANG="${LANG:-"C.UTF-8"}"',
        'export EMPTY="${EMPTY:-}"',
        # shell.Escape, then %q escapes again (Apptainer's own double escaping, kept as it is).
        'export Q="${Q:-"a\\\\\\"b\\\\$c"}"',
    ]


@pytest.mark.parametrize("flavor", sorted(flavors()))
def test_preamble_sees_the_base_env_and_hpcai_exports_win(flavor, tmp_path):
    """Run each %post preamble in an empty environment (env -i, /bin/sh as Apptainer runs %post)
    with a base ENV file: the base's variables arrive, and where the base sets one of hpcai's
    variables hpcai's value wins, as in the Dockerfile where hpcai's ENV comes after FROM."""
    spec = make_spec(flavor, **FIXED)
    ours = {"HPCAI_BUILD": "/opt/hpcai-build", "DEBIAN_FRONTEND": "noninteractive", **stage_env(spec)}
    base = ["PATH=/usr/local/cuda/bin:/usr/bin:/bin", "CUDA_HOME=/usr/local/cuda", "PIP_CONSTRAINT=/etc/pip/constraint.txt",
            "LD_LIBRARY_PATH=/usr/local/cuda/lib64", "HPCAI_FLAVOR=set-by-the-base", "DEBIAN_FRONTEND=dialog"]
    env_file = tmp_path / "10-docker2singularity.sh"
    env_file.write_text(docker_env_script(base))
    for block in post_blocks(render(spec, "apptainer")):
        lines = preamble(block)
        script = with_env_file(lines, str(env_file)) + "env\n"
        got = parse_env(subprocess.run(["env", "-i", "/bin/sh", "-e", "-c", script], capture_output=True,
                                       text=True, check=True).stdout)
        for item in base:
            name, value = item.split("=", 1)
            assert got[name] == ours.get(name, value), name
        for name, value in ours.items():
            assert got[name] == value, name
        # Without the source line (the def before this fix) none of the base's variables arrive.
        old = parse_env(subprocess.run(["env", "-i", "/bin/sh", "-e", "-c",
                                        with_env_file([x for x in lines if x != SOURCE_LINE], str(env_file)) + "env\n"],
                                       capture_output=True, text=True, check=True).stdout)
        assert not {"CUDA_HOME", "PIP_CONSTRAINT", "LD_LIBRARY_PATH"} & old.keys()
        assert old.get("PATH") != got["PATH"]


def test_missing_env_file_is_no_error(tmp_path):
    """Bases that are not Docker/OCI images (a SIF from another bootstrap) have no such file."""
    spec = make_spec("pytorch-cpu", **FIXED)
    lines = preamble(post_blocks(render(spec, "apptainer"))[0])
    assert DOCKER_ENV_FILE in lines[0]
    res = subprocess.run(["env", "-i", "/bin/sh", "-e", "-c", with_env_file(lines, str(tmp_path / "absent.sh")) + "echo ok"],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr
