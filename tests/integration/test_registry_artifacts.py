"""Every runtime pulls what `hpcai push` published, by digest, with its hpcai.* labels (issue 29,
item 2), against the real test registry (tests/infra/registry-up.sh); one `hpcai login` gives
every runtime and hpcai its credentials, in this test's own HOME.

- an OCI image pushed through Docker: enroot imports it by digest and Charliecloud's ch-image
  pulls it by digest (docker, podman and Apptainer: test_registry_push.py);
- one pushed through Podman: enroot imports it too (Podman pushes Docker's v2s2 format: enroot
  4.1.2 cannot read an OCI manifest from a distribution registry, by tag or digest);
- a SIF as Apptainer's oras:// artifact: `apptainer pull oras://…@DIGEST` gives the same bytes;
- a SquashFS as hpcai's artifact: hpcai fetches it by digest, the same bytes and labels, and
  refuses a digest the registry's content does not match.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from engines import REGISTRY
from registry_env import FOREIGN_LOGINS, hpcai, login, private_home, run

pytestmark = [pytest.mark.registry, pytest.mark.docker, pytest.mark.podman, pytest.mark.apptainer,
              pytest.mark.charliecloud]

BASE = os.environ.get("HPCAI_DEBIAN_BASE", "debian:bookworm-slim")
LABELS = {"hpcai.flavor": "pytorch-cpu", "hpcai.payloads": "sanity", "hpcai.mpi": "none"}
STANDIN = f"FROM {BASE}\nLABEL " + " ".join(f'{k}="{v}"' for k, v in LABELS.items()) + "\n"
TAG = "hpcai-test/artifact-standin:1"


@pytest.fixture(scope="module")
def standin(tmp_path_factory) -> str:
    """A small image with hpcai labels, built by Docker (and given to Podman)."""
    ctx = tmp_path_factory.mktemp("standin")
    (ctx / "Dockerfile").write_text(STANDIN)
    res = run("docker", "build", "-q", "--network", "none", "-t", TAG, str(ctx), env=dict(os.environ))
    assert res.returncode == 0, res.stderr
    return TAG


@pytest.fixture
def home(tmp_path) -> dict[str, str]:
    env = private_home(tmp_path)
    login(env)
    return env


def pushed(env: dict[str, str], *args: str) -> dict:
    res = hpcai("push", "--json", *args, env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def enroot_import(env: dict[str, str], tmp_path: Path, reference: str) -> Path:
    """`enroot import` of docker://REF (REF by digest) into a SquashFS; enroot's caches are the test's."""
    sqsh = tmp_path / f"{len(list(tmp_path.glob('*.sqsh')))}.sqsh"
    res = run("enroot", "import", "-o", str(sqsh), f"docker://{reference}",
              env={**env, "ENROOT_CACHE_PATH": str(tmp_path / "enroot-cache"), "ENROOT_DATA_PATH": str(tmp_path),
                   "ENROOT_TEMP_PATH": str(tmp_path)})
    assert res.returncode == 0 and sqsh.is_file(), res.stderr[-2000:]
    return sqsh


def sqsh_labels(path: Path) -> dict[str, str]:
    from hpcai.image import sqsh

    return {k: v for k, v in sqsh.labels(str(path)).items() if k.startswith("hpcai.")}


def test_docker_push_then_enroot_and_charliecloud_pull_by_digest(standin, home, tmp_path):
    out = pushed(home, standin, f"{REGISTRY}/hpcai-test/artifact-oci")
    assert out["kind"] == "oci" and out["pull"].endswith("@" + out["digest"])
    assert sqsh_labels(enroot_import(home, tmp_path, out["pull"])) == LABELS

    # Charliecloud: ch-image reads the password from its own variables, as a user would set them
    # (it has no credential file); the system Python, whose lark it needs
    storage = tmp_path / "ch"
    secret = Path("/var/lib/hpcai-test-registry/password").read_text().strip()
    res = run("/usr/bin/python3", "/usr/bin/ch-image", "--auth", "--no-cache", "-s", str(storage), "pull", out["pull"],
              env={**home, "USER": "root", "CH_IMAGE_USERNAME": "hpcai", "CH_IMAGE_PASSWORD": secret})
    assert res.returncode == 0, res.stderr[-2000:]
    [image] = (storage / "img").iterdir()
    assert out["digest"].replace(":", "+") in image.name
    metadata = json.loads((image / "ch" / "metadata.json").read_text())
    assert {k: v for k, v in metadata["labels"].items() if k.startswith("hpcai.")} == LABELS


def test_podman_push_is_readable_by_enroot(standin, home, tmp_path):
    archive = tmp_path / "standin.tar"
    assert run("docker", "save", "-o", str(archive), standin, env=home).returncode == 0
    assert run("podman", "load", "-q", "-i", str(archive), env=home).returncode == 0
    out = pushed(home, "--builder", "podman", standin, f"{REGISTRY}/hpcai-test/artifact-podman:1")
    manifest = run("skopeo", "inspect", "--raw", f"docker://{out['pull']}",
                   env={**home, "REGISTRY_AUTH_FILE": home["REGISTRY_AUTH_FILE"]})
    assert json.loads(manifest.stdout)["mediaType"] == "application/vnd.docker.distribution.manifest.v2+json"
    assert sqsh_labels(enroot_import(home, tmp_path, out["pull"])) == LABELS
    run("podman", "rmi", standin, env=home)


def test_sif_goes_as_an_oras_artifact_apptainer_pulls_by_digest(standin, home, tmp_path):
    sif = tmp_path / "standin.sif"
    res = hpcai("sif", standin, "-o", str(sif), env=home)
    assert res.returncode == 0, res.stderr
    out = pushed(home, str(sif), f"{REGISTRY}/hpcai-test/artifact-sif:1")
    assert out["kind"] == "sif" and out["pull"] == f"oras://{REGISTRY}/hpcai-test/artifact-sif@{out['digest']}"
    back = tmp_path / "back.sif"
    res = run("apptainer", "pull", str(back), out["pull"], env={**home, "APPTAINER_CACHEDIR": str(tmp_path / "c")})
    assert res.returncode == 0, res.stderr
    assert sha256(back) == sha256(sif)
    labels = json.loads(run("apptainer", "inspect", "--json", "--labels", str(back), env=home).stdout)
    assert {k: v for k, v in labels["data"]["attributes"]["labels"].items() if k in LABELS} == LABELS


def test_sqsh_goes_as_an_artifact_and_comes_back_checked(standin, home, tmp_path, monkeypatch):
    from hpcai.errors import HpcaiError
    from hpcai.image import artifacts

    sqsh = tmp_path / "standin.sqsh"
    res = hpcai("sqsh", standin, "-o", str(sqsh), env=home)
    assert res.returncode == 0, res.stderr
    out = pushed(home, str(sqsh), f"{REGISTRY}/hpcai-test/artifact-sqsh:1")
    assert out["kind"] == "sqsh"
    back = tmp_path / "back.sqsh"
    for name in FOREIGN_LOGINS:  # hpcai's own pull finds the credentials `hpcai login` wrote in HOME
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", home["HOME"])
    annotations = artifacts.pull_file(REGISTRY, "hpcai-test/artifact-sqsh", out["digest"], back)
    assert sha256(back) == sha256(sqsh) and sqsh_labels(back) == LABELS
    assert {k: v for k, v in annotations.items() if k.startswith("hpcai.")} == LABELS

    # a digest the registry holds no such manifest for: one line, nothing written
    wrong = tmp_path / "wrong.sqsh"
    with pytest.raises(HpcaiError, match="answered 404"):
        artifacts.pull_file(REGISTRY, "hpcai-test/artifact-sqsh", "sha256:" + "0" * 64, wrong)
    assert not wrong.exists() and not list(tmp_path.glob(".wrong.sqsh.*"))



def test_a_file_push_without_a_login_is_one_line(tmp_path):
    env = private_home(tmp_path)
    image = tmp_path / "x.sqsh"
    image.write_bytes(b"not pushed")
    res = hpcai("push", str(image), f"{REGISTRY}/hpcai-test/x:1", env=env)
    assert res.returncode == 1 and res.stderr == (f"error: {REGISTRY} asks for a login and none is stored for it: "
                                                  f"run `hpcai login {REGISTRY} -u USER`\n"), res.stderr
