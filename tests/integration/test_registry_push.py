"""`hpcai push` against a real registry (issue 29): Debian's docker-registry on loopback with TLS
from its own CA and htpasswd auth (tests/infra/registry-up.sh). The CPU image goes in through
Docker, a stand-in through Podman; each comes back by the digest `hpcai push` printed, with
docker, podman and Apptainer, and its hpcai.* labels are the ones it left with. Each engine logs in
with the password on stdin into a configuration of this test's own (DOCKER_CONFIG,
REGISTRY_AUTH_FILE), so the machine's logins are neither used nor changed; without a login the
push is one line and exit 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from engines import REGISTRY, REGISTRY_STATE, REGISTRY_USER

pytestmark = [pytest.mark.registry, pytest.mark.docker]

STANDIN = f"""\
FROM {os.environ.get("HPCAI_DEBIAN_BASE", "debian:bookworm-slim")}
LABEL hpcai.flavor="pytorch-cpu" hpcai.payloads="sanity" org.opencontainers.image.title="push stand-in"
"""


def run(*argv: str, env: dict[str, str], stdin: str | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), input=stdin, capture_output=True, text=True, env=env, timeout=timeout,
                          check=False)


def hpcai_labels(labels: dict | None) -> dict[str, str]:
    return {k: v for k, v in (labels or {}).items() if k.startswith("hpcai.")}


@pytest.fixture
def engines_env(tmp_path) -> dict[str, str]:
    """This test's own engine logins: docker's config folder and podman's auth file, empty."""
    (tmp_path / "docker-config").mkdir()
    return {**os.environ, "DOCKER_CONFIG": str(tmp_path / "docker-config"),
            "REGISTRY_AUTH_FILE": str(tmp_path / "podman-auth.json")}


@pytest.fixture
def password() -> str:
    return (REGISTRY_STATE / "password").read_text().strip()


def login(engine: str, env: dict[str, str], password: str) -> None:
    res = run(engine, "login", "-u", REGISTRY_USER, "--password-stdin", REGISTRY, env=env, stdin=password)
    assert res.returncode == 0, res.stderr


def push(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return run(sys.executable, "-m", "hpcai", "push", "--json", *args, env=env)


@pytest.mark.podman
@pytest.mark.apptainer
def test_pushed_image_comes_back_by_digest_with_its_labels(pytorch_cpu_image, engines_env, password, tmp_path):
    login("docker", engines_env, password)
    res = push(engines_env, pytorch_cpu_image, f"{REGISTRY}/hpcai-test/pytorch-cpu")
    assert res.returncode == 0, res.stderr
    pushed = json.loads(res.stdout)
    # the labels of the image pushed, read now: another test of the session may have built the
    # tag again since (a new hpcai.build-date), and hpcai.image.engine remembers what it read
    want = hpcai_labels(json.loads(run("docker", "image", "inspect", pushed["reference"], env=engines_env).stdout)[0]
                        ["Config"]["Labels"])
    assert want["hpcai.flavor"] == "pytorch-cpu"
    assert pushed["pull"] == f"{REGISTRY}/hpcai-test/pytorch-cpu@{pushed['digest']}"
    assert pushed["reference"] == f"{REGISTRY}/hpcai-test/pytorch-cpu:{pytorch_cpu_image.rsplit(':', 1)[1]}"

    # docker: pulled by digest from the registry (the tag is removed first), the same labels
    assert run("docker", "rmi", pushed["reference"], env=engines_env).returncode == 0
    res = run("docker", "pull", pushed["pull"], env=engines_env)
    assert res.returncode == 0 and pushed["digest"] in res.stdout, res.stderr
    got = json.loads(run("docker", "image", "inspect", pushed["pull"], env=engines_env).stdout)[0]
    assert hpcai_labels(got["Config"]["Labels"]) == want
    assert pushed["pull"] in got["RepoDigests"]

    # podman: the same digest, the same labels
    login("podman", engines_env, password)
    res = run("podman", "pull", "-q", pushed["pull"], env=engines_env)
    assert res.returncode == 0, res.stderr
    got = json.loads(run("podman", "image", "inspect", pushed["pull"], env=engines_env).stdout)[0]
    assert got["Digest"] == pushed["digest"] and hpcai_labels(got["Labels"]) == want
    run("podman", "rmi", pushed["pull"], env=engines_env)


@pytest.mark.podman
@pytest.mark.apptainer
def test_podman_push_and_apptainer_pull_by_digest(engines_env, password, tmp_path):
    """A stand-in built and pushed by Podman; Apptainer pulls it by digest (credentials in its
    environment variables, as `hpcai login` will write them to its own file) into a SIF whose
    labels are the image's."""
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Containerfile").write_text(STANDIN)
    tag = "localhost/hpcai-test/push-standin:1"
    res = run("podman", "build", "-q", "--network", "none", "-t", tag, str(ctx), env=engines_env)
    assert res.returncode == 0, res.stderr
    login("podman", engines_env, password)
    res = push(engines_env, "--builder", "podman", tag, f"{REGISTRY}/hpcai-test/standin:1")
    assert res.returncode == 0, res.stderr
    pushed = json.loads(res.stdout)

    sif = tmp_path / "standin.sif"
    env = {**engines_env, "APPTAINER_DOCKER_USERNAME": REGISTRY_USER, "APPTAINER_DOCKER_PASSWORD": password,
           "APPTAINER_CACHEDIR": str(tmp_path / "apptainer-cache")}
    res = run("apptainer", "pull", str(sif), f"docker://{pushed['pull']}", env=env)
    assert res.returncode == 0, res.stderr
    labels = json.loads(run("apptainer", "inspect", "--json", "--labels", str(sif), env=env).stdout)
    found = labels["data"]["attributes"]["labels"]
    assert found["hpcai.flavor"] == "pytorch-cpu" and found["hpcai.payloads"] == "sanity"
    run("podman", "rmi", tag, env=engines_env)


def test_without_a_login_the_push_is_one_line(engines_env):
    """Refused by the registry (no credentials): exit 1 and the engine's reason on one line."""
    res = push(engines_env, os.environ.get("HPCAI_DEBIAN_BASE", "debian:bookworm-slim"),
               f"{REGISTRY}/hpcai-test/denied:1")
    assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith(f"error: push to {REGISTRY} failed (docker exit 1): ") and "auth" in res.stderr


def test_a_registry_that_does_not_answer_is_one_line(engines_env):
    res = push(engines_env, os.environ.get("HPCAI_DEBIAN_BASE", "debian:bookworm-slim"), "localhost:1/hpcai-test/x:1")
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "connection refused" in res.stderr, res.stderr
    assert Path(engines_env["DOCKER_CONFIG"]).is_dir()
