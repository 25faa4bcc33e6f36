"""SIF digests are cached between launches (hpcai.run.digests), by path, size and mtime: a
rewritten image keeping its size and mtime is hashed again, and a damaged or unwritable cache only
costs the hash."""

from __future__ import annotations

import pytest


def test_image_digest_is_cached_by_path_size_mtime(tmp_path, monkeypatch):
    import hashlib
    import json

    from hpcai.run import digests

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    image = tmp_path / "img.sif"
    image.write_bytes(b"squashfs" * 1000)
    want = "sha256:" + hashlib.sha256(image.read_bytes()).hexdigest()
    link = tmp_path / "link.sif"
    link.symlink_to(image)
    assert digests.image_sha256(link) == want
    stored = json.loads((tmp_path / "cache" / "hpcai" / "digests.json").read_text())
    assert stored[str(image)]["digest"] == want and stored[str(image)]["size"] == 8000

    def no_rehash(path):
        raise AssertionError("rehashed an unchanged image")

    monkeypatch.setattr(digests, "sha256_file", no_rehash)
    assert digests.image_sha256(image) == want  # cache hit through the real path
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    image.write_bytes(b"rebuilt" * 1000)  # size (and mtime) change: hashed again
    assert digests.image_sha256(image) == "sha256:" + hashlib.sha256(image.read_bytes()).hexdigest()


@pytest.mark.hostile
@pytest.mark.parametrize("how", ["same size and mtime", "replaced by another file, mtime copied"])
def test_a_rewritten_image_keeping_size_and_mtime_is_hashed_again(tmp_path, monkeypatch, how):
    """issue 12: the cache returned a stale digest when size and mtime matched (touch -r, cp -p)."""
    import hashlib
    import os

    from hpcai.run import digests

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    image = tmp_path / "img.sif"
    image.write_bytes(b"A" * 4096)
    st = image.stat()
    digests.image_sha256(image)
    if how == "same size and mtime":
        image.write_bytes(b"B" * 4096)
    else:
        other = tmp_path / "other.sif"
        other.write_bytes(b"C" * 4096)
        os.replace(other, image)
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns))  # what `touch -r` or `cp -p` do
    assert (image.stat().st_size, image.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert digests.image_sha256(image) == "sha256:" + hashlib.sha256(image.read_bytes()).hexdigest()


@pytest.mark.hostile
@pytest.mark.parametrize("cache", ['{"x": 1', "[]", '{"%s": {"size": "8"}}', '{"%s": 7}', "\udcff"])
def test_a_damaged_digest_cache_only_costs_the_hash(tmp_path, monkeypatch, cache):
    import hashlib

    from hpcai.run import digests

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    image = tmp_path / "img.sif"
    image.write_bytes(b"squash")
    (tmp_path / "cache" / "hpcai").mkdir(parents=True)
    text = cache % image if "%s" in cache else cache
    (tmp_path / "cache" / "hpcai" / "digests.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    assert digests.image_sha256(image) == "sha256:" + hashlib.sha256(b"squash").hexdigest()


def test_unwritable_cache_still_gives_the_digest(tmp_path, monkeypatch):
    from hpcai.run import digests

    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    image = tmp_path / "i.sqfs"
    image.write_bytes(b"x")
    assert digests.image_sha256(image).startswith("sha256:")
