"""The base image reference (hostile corpus, round three, issue 25): `REPO:TAG@sha256:…`
gave the digest as the tag. Every reference form splits into name, tag and digest, and a build of a
pinned base is tagged with its tag."""

from __future__ import annotations

import pytest

from hpcai.image.spec import make_spec, parse_reference, split_image

pytestmark = pytest.mark.hostile

DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize("ref, parts", [
    ("repo", ("repo", "", "")),
    ("repo:tag", ("repo", "tag", "")),
    ("host:5000/repo", ("host:5000/repo", "", "")),
    ("host:5000/repo:tag", ("host:5000/repo", "tag", "")),
    (f"repo@{DIGEST}", ("repo", "", DIGEST)),
    (f"repo:tag@{DIGEST}", ("repo", "tag", DIGEST)),
    (f"host:5000/ns/repo:tag@{DIGEST}", ("host:5000/ns/repo", "tag", DIGEST)),
    (f"host:5000/repo@{DIGEST}", ("host:5000/repo", "", DIGEST)),
])
def test_every_reference_form_splits_into_name_tag_digest(ref, parts):
    assert parse_reference(ref) == parts
    name, tag = split_image(ref)
    assert name == parts[0] and "0123456789abcdef" * 2 not in tag  # never the digest as the tag
    assert tag == (parts[1] or ("sha256-0123456789ab" if parts[2] else "latest"))
    spec = make_spec("pytorch-cpu", base=ref, sha="abc")
    assert spec.base == ref and spec.tag.startswith(f"hpcai/pytorch-cpu-hpc:{tag}-abc")


def test_build_of_a_pinned_base_is_tagged_with_its_tag(hpcai, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = hpcai("build", "pytorch-cpu", "--base", f"debian:12@{DIGEST}", "--dry-run")
    assert res.exit_code == 0, res.stderr
    tag = res.stdout.split(" -t ", 1)[1].split()[0]
    assert tag.startswith("hpcai/pytorch-cpu-hpc:12-") and "0123456789abcdef" * 2 not in tag
