"""`hpcai push`'s destination: the distribution reference grammar, checked before any engine is
asked (the push itself runs against the test registry: tests/integration/test_registry_push.py)."""

from __future__ import annotations

import pytest

from hpcai.errors import UsageError
from hpcai.image.push import destination


@pytest.mark.parametrize("text, image, want", [
    ("localhost:5443/team/pytorch:25.11", "x:1", ("localhost:5443", "team/pytorch", "25.11")),
    ("registry.example.org/pytorch", "hpcai/pytorch-cpu-hpc:bookworm-slim-abc", ("registry.example.org", "pytorch",
                                                                                "bookworm-slim-abc")),
    ("reg:5000/a/b/c", "img", ("reg:5000", "a/b/c", "latest")),
    ("localhost/x__y.z-w", "localhost:5000/img:2", ("localhost", "x__y.z-w", "2")),
    ("localhost/x", "img@sha256:" + "0" * 64, ("localhost", "x", "latest")),
])
def test_destination_and_its_default_tag(text, image, want):
    d = destination(text, image)
    assert (d.registry, d.repo, d.tag) == want
    assert d.at("sha256:" + "a" * 64) == f"{want[0]}/{want[1]}@sha256:{'a' * 64}"


@pytest.mark.parametrize("text", [
    "pytorch",                       # no registry
    "team/pytorch",                  # `team` is no host: Docker Hub's user, which hpcai never assumes
    "localhost:5443/Team/pytorch",   # upper case in the repository
    "localhost:5443/-x",             # a component starting with a separator
    "localhost:5443/x:",             # an empty tag
    "localhost:5443/x:-bad",         # a tag starting with '-'
    "localhost:5443/x@sha256:" + "0" * 64,  # a digest is what the registry gives, not a destination
    "localhost:5443/x\n:1",          # a line break
    "--output=/etc/passwd",          # an option
])
def test_a_bad_destination_is_one_line_naming_the_shape(text):
    with pytest.raises(UsageError) as exc:
        destination(text, "img:1")
    assert "\n" not in str(exc.value) and ("expected REGISTRY/REPO[:TAG]" in str(exc.value)
                                           or "control character" in str(exc.value))


def test_the_cli_refuses_a_bad_destination_before_any_engine(hpcai):
    res = hpcai("push", "img:1", "Team/x", "--builder", "nope")
    assert res.exit_code == 2 and "unknown builder 'nope'" in res.stderr
    res = hpcai("push", "img:1", "team/x")
    assert res.exit_code == 2 and res.stderr.startswith("error: destination 'team/x': expected REGISTRY/REPO[:TAG]")
