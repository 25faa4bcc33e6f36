"""hpcai.image.artifacts and the credentials hpcai's own registry calls use (issue 29). The round
trips through the real registry are tests/integration/test_registry_artifacts.py."""

from __future__ import annotations

import base64
import json

import pytest

from hpcai import registry_login
from hpcai.errors import HpcaiError
from hpcai.image import artifacts


def test_file_kind(tmp_path):
    for name, kind in (("a.sif", "sif"), ("b.sqsh", "sqsh"), ("c.squashfs", "sqsh"), ("d.sqfs", "sqsh"),
                       ("e.tar", None)):
        (tmp_path / name).write_bytes(b"x")
        assert artifacts.file_kind(str(tmp_path / name)) == kind
    assert artifacts.file_kind("hpcai/pytorch-cpu-hpc:1") is None  # an engine's image: no such file
    assert artifacts.file_kind(str(tmp_path / "missing.sif")) is None


@pytest.fixture
def home(tmp_path, monkeypatch):
    for name in ("DOCKER_CONFIG", "REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR", "ENROOT_CONFIG_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(tmp_path / "podman.json"))
    return tmp_path


def auth_file(path, registry: str, user: str, secret: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    token = base64.b64encode(f"{user}:{secret}".encode()).decode()
    path.write_text(json.dumps({"auths": {registry: {"auth": token}}}))


@pytest.mark.parametrize("where", [".docker/config.json", "podman.json", ".apptainer/docker-config.json"])
def test_credentials_from_each_runtimes_auth_file(home, where):
    auth_file(home / where, "reg.example.org:5000", "alice", "s3:cret")
    assert registry_login.credentials("reg.example.org:5000") == ("alice", "s3:cret")
    assert registry_login.credentials("other.example.org") is None


def test_credentials_from_enroots_netrc_by_host(home):
    netrc = home / ".config" / "enroot" / ".credentials"
    netrc.parent.mkdir(parents=True)
    netrc.write_text("machine other.org login x password y\nmachine reg.example.org login bob password pw\n")
    assert registry_login.credentials("reg.example.org:5000") == ("bob", "pw")


def test_damaged_auth_files_are_passed_by(home):
    (home / ".docker").mkdir()
    (home / ".docker" / "config.json").write_text("{not json")
    (home / "podman.json").write_text(json.dumps({"auths": {"r.org": {"auth": "!!not base64"}}}))
    assert registry_login.credentials("r.org") is None


def test_a_registry_that_does_not_answer_is_one_line():
    with pytest.raises(HpcaiError, match=r"^localhost:1: the registry does not answer \(.*refused"):
        registry_login.challenge("localhost:1")


def test_the_ca_bundle_is_the_systems_unless_the_user_names_one(monkeypatch, tmp_path):
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    assert artifacts.ca_bundle() is True or "certifi" not in str(artifacts.ca_bundle())
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "site-ca.pem"))
    assert artifacts.ca_bundle() == str(tmp_path / "site-ca.pem")
