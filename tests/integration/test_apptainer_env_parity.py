"""The def's %post sees the base image's ENV as a Dockerfile RUN does (issue 14 item 4).

The CUDA stand-in base `hpcai/base-cuda:13.2` (tests/infra/base-cuda.sh; built here if missing)
plays NGC: its ENV sets PATH, CUDA_HOME, CUDA_VERSION, NCCL_VERSION, NVIDIA_* and
PIP_BREAK_SYSTEM_PACKAGES. A def is rendered for pytorch-ngc on that base and the preamble of each
%post block (everything before its first install step) is run in a container of the base, with
/.singularity.d/env/10-docker2singularity.sh mounted and nothing else in the environment
(`env -i /bin/sh -e`, as Apptainer's %post starts from a cleaned environment); its `env` is
compared with what a Docker RUN sees (`docker run --entrypoint env BASE`: the image's ENV).

Apptainer itself cannot be installed here (nor on CI), so what is emulated is the env file:
tests/apptainer_env.py writes it from `docker image inspect` exactly as Apptainer's insertEnv does
(apptainer/apptainer internal/pkg/build/sources/conveyorPacker_oci.go, quoted there).

How Apptainer runs %post (internal/pkg/build/stage.go, runPostScript): `apptainer exec --cleanenv
… ROOTFS /bin/sh -e -x /.post.script`; its exec action script (internal/pkg/util/fs/files/
action_script.sh) clears the environment and sources /.singularity.d/env/*.sh, so Apptainer 1.x
already gives %post the base's ENV. The `env -i` run is the case where nothing is sourced (an older
Singularity, or another runner of the def); a second run sources the file first, as the action
script does, and checks that the def's own sourcing changes nothing there.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from apptainer_env import SOURCE_LINE, docker_env_script, parse_env, post_blocks, preamble

from hpcai.image.render import render, stage_env
from hpcai.image.spec import make_spec

pytestmark = [pytest.mark.docker]

REPO = Path(__file__).resolve().parents[2]
BASE = os.environ.get("HPCAI_CUDA_BASE", "hpcai/base-cuda:13.2")
MOUNT = "/.singularity.d/env/10-docker2singularity.sh"
# What the stand-in sets, as NGC does (tests/infra/base-cuda/Dockerfile).
NAMED = {"PATH", "CUDA_HOME", "CUDA_VERSION", "NCCL_VERSION", "PIP_BREAK_SYSTEM_PACKAGES",
         "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}
FIXED = {"sha": "0123456789ab", "build_date": "2026-01-01T00:00:00Z"}


@pytest.fixture(scope="module")
def base_env(cuda_base) -> list[str]:
    """The stand-in base's ENV (its image config); the cuda_base fixture builds it when missing."""
    inspect = ["docker", "image", "inspect", "--format", "{{json .Config.Env}}", cuda_base]
    return json.loads(subprocess.run(inspect, capture_output=True, text=True, check=True).stdout)


def docker_run_env() -> dict[str, str]:
    """The environment of a process in a container of the base: its ENV, as a RUN step gets it."""
    out = subprocess.run(["docker", "run", "--rm", "--entrypoint", "env", BASE], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    return parse_env(out)


def post_env(env_file: Path, script: str, *, action_script: bool = False) -> dict[str, str]:
    """`env` after `script` in a container of the base, from an empty environment, with env_file
    at Apptainer's path. action_script: first source the file as Apptainer's exec action does."""
    inner = script + "env\n"
    if action_script:
        inner = f". {MOUNT}\n" + inner
    out = subprocess.run(["docker", "run", "--rm", "-v", f"{env_file}:{MOUNT}:ro", "--entrypoint", "/usr/bin/env",
                          BASE, "-i", "/bin/sh", "-e", "-c", inner],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    return parse_env(out.stdout)


@pytest.fixture(scope="module")
def preambles() -> list[list[str]]:
    spec = make_spec("pytorch-ngc", base=BASE, **FIXED)
    blocks = post_blocks(render(spec, "apptainer", bootstrap="docker-daemon"))
    assert len(blocks) == 2, "a builder and a final %post"
    return [preamble(block) for block in blocks]


def test_post_sees_the_base_env_as_docker_run_does(base_env, preambles, tmp_path):
    names = {item.partition("=")[0] for item in base_env}
    assert NAMED <= names, f"the stand-in base no longer sets {NAMED - names}"
    env_file = tmp_path / "10-docker2singularity.sh"
    env_file.write_text(docker_env_script(base_env))
    docker = docker_run_env()
    ours = {"HPCAI_BUILD": "/opt/hpcai-build", "DEBIAN_FRONTEND": "noninteractive",
            **stage_env(make_spec("pytorch-ngc", base=BASE, **FIXED))}
    for lines in preambles:
        script = "\n".join(lines) + "\n"
        fixed = post_env(env_file, script)
        assert {n: fixed.get(n) for n in names} == {n: docker[n] for n in names}
        assert {n: fixed.get(n) for n in ours} == ours
        # Where Apptainer's action script has sourced the file already, the result is the same.
        sourced = post_env(env_file, script, action_script=True)
        assert {n: sourced.get(n) for n in names} == {n: docker[n] for n in names}
        # The preamble before this fix (no source line): none of the base's variables, PATH not the base's.
        old = post_env(env_file, "\n".join(x for x in lines if x != SOURCE_LINE) + "\n")
        assert not (names - {"PATH"}) & old.keys(), sorted((names - {"PATH"}) & old.keys())
        assert old.get("PATH") != docker["PATH"]


def test_hpcai_exports_win_over_the_base(base_env, preambles, tmp_path):
    """A base that sets one of hpcai's variables: hpcai's value wins in %post, as in the Dockerfile,
    where hpcai's ENV comes after FROM."""
    env_file = tmp_path / "10-docker2singularity.sh"
    env_file.write_text(docker_env_script([*base_env, "HPCAI_FLAVOR=set-by-the-base", "DEBIAN_FRONTEND=dialog"]))
    for lines in preambles:
        got = post_env(env_file, "\n".join(lines) + "\n")
        assert got["HPCAI_FLAVOR"] == "pytorch-ngc"
        assert got["DEBIAN_FRONTEND"] == "noninteractive"
        assert got["CUDA_HOME"] == "/usr/local/cuda"
