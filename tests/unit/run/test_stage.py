"""hpcai stage's parts that run without a cluster (issue 29, item 4): the node cache's check,
publish and LRU eviction on real files, the image grammar, the site cache's one conversion per
digest, the --cap sizes, and launch's warning when every node would pull. The broadcast itself runs
on the 4-node test cluster: tests/integration/test_stage_slurm.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from plan_helpers import CRAY

from hpcai.cli.stage import size_bytes
from hpcai.errors import UsageError
from hpcai.run import node_cache, stage
from hpcai.run.model import LaunchOptions
from hpcai.run.plan import plan_launch

A, B, C = (f"sha256-{c * 64}.sif" for c in "abc")


def put(folder, name, size, age):
    (folder / name).write_bytes(b"x" * size)
    os.utime(folder / name, (1_000_000 + age, 1_000_000 + age))


def test_check_touches_what_it_has_and_makes_the_folder(tmp_path):
    folder = tmp_path / "new" / "cache"
    assert node_cache.check(folder, A, 3) == "miss" and folder.is_dir()
    put(folder, A, 3, 0)
    assert node_cache.check(folder, A, 4) == "miss"  # the wrong size is not the image
    assert node_cache.check(folder, A, 3) == "have"
    assert (folder / A).stat().st_mtime > 1_000_000 + 10  # used now: the newest for the LRU


def test_publish_renames_a_whole_part_and_refuses_a_short_one(tmp_path):
    (tmp_path / ".part-1").write_bytes(b"xy")
    assert node_cache.publish(tmp_path, A, 3, 0, ".part-1") == ("incomplete", [])
    assert not (tmp_path / A).exists() and not (tmp_path / ".part-1").exists()
    (tmp_path / ".part-2").write_bytes(b"xyz")
    assert node_cache.publish(tmp_path, A, 3, 0, ".part-2") == ("staged", [])
    assert (tmp_path / A).read_bytes() == b"xyz"
    (tmp_path / ".part-3").write_bytes(b"abc")  # another job's copy, arrived second
    assert node_cache.publish(tmp_path, A, 3, 0, ".part-3") == ("have", [])
    assert (tmp_path / A).read_bytes() == b"xyz" and not (tmp_path / ".part-3").exists()


def test_eviction_takes_the_least_recently_used_first_never_the_new_one(tmp_path):
    put(tmp_path, A, 40, 1)
    put(tmp_path, B, 40, 2)
    put(tmp_path, C, 40, 0)  # the oldest, but the one just staged
    (tmp_path / "notes.txt").write_bytes(b"y" * 500)  # not the cache's: never counted or removed
    assert node_cache.evict(tmp_path, 90, keep=C) == [A]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([B, C, "notes.txt"])
    assert node_cache.evict(tmp_path, 10, keep=C) == [B]
    assert node_cache.evict(tmp_path, 0, keep=C) == []  # 0: no cap


def test_the_node_program_says_one_line_per_node(tmp_path):
    run = subprocess.run([sys.executable, "-m", "hpcai.run.node_cache", "check", str(tmp_path), A, "5"],
                         capture_output=True, text=True, env={**os.environ, "SLURMD_NODENAME": "nid042"})
    assert run.returncode == 0 and run.stdout == "nid042 miss\n"
    bad = subprocess.run([sys.executable, "-m", "hpcai.run.node_cache", "check", str(tmp_path), "../x", "5"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("usage:")


def test_discard_removes_a_failed_broadcasts_part_and_nothing_else(tmp_path):
    part = node_cache.part_name(A, "17", 4242)
    assert part == f".{A}.part-17-4242" and node_cache.is_part(A, part)
    (tmp_path / part).write_bytes(b"x")  # half of an image: sbcast failed after it
    put(tmp_path, A, 3, 0)
    assert node_cache.discard(tmp_path, part) == "discarded"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([A, ".lock"])
    assert node_cache.discard(tmp_path, part) == "discarded"  # gone already, or never arrived
    assert node_cache.discard(tmp_path / "never-made", part) == "discarded"  # and makes no folder
    assert not (tmp_path / "never-made").exists()


@pytest.mark.parametrize("argv", [["discard", "/x", A, "notes.txt"], ["discard", "/x", A, f".{B}.part-1-2"],
                                  ["publish", "/x", A, "3", "0", "../../etc/passwd"], ["discard", "/x", A],
                                  ["check", "/x", A, "3", "4"], ["evict", "/x", A, "3"], []])
def test_the_node_program_touches_only_a_part_of_the_image_it_names(argv, tmp_path):
    bad = subprocess.run([sys.executable, "-m", "hpcai.run.node_cache", *argv], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr == node_cache.USAGE + "\n" and bad.stdout == ""


@pytest.mark.parametrize("image", ["nope.sif", "docker://ubuntu:22.04", "http://reg.org/x", "docker://reg.org/UPPER",
                                   "oras://reg.org/x@sha256:123"])
def test_an_image_stage_cannot_take_is_one_line(image, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as err:
        stage.resolve(image)
    assert "\n" not in str(err.value)


def test_a_file_is_its_own_site_copy_named_by_its_sha256(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    sif = tmp_path / "x.sif"
    sif.write_bytes(b"sif bytes")
    source = stage.resolve(str(sif))
    assert source.scheme == "file" and source.digest.startswith("sha256:")
    assert source.cache_name("sif") == "sha256-" + source.digest[7:] + ".sif"
    assert stage.stage_site(source, "sif", tmp_path / "cache") == sif
    with pytest.raises(UsageError, match="not a sqsh file"):
        stage.stage_site(source, "sqsh", tmp_path / "cache")


def test_the_site_cache_publishes_once_per_digest(tmp_path, monkeypatch):
    """A second stager finds the file the first published and converts nothing (the conversion
    here stands in for `apptainer pull`: it counts its calls)."""
    calls = []

    def convert(source, fmt, part):
        calls.append(part)
        part.write_bytes(b"converted")

    monkeypatch.setattr(stage, "_convert", convert)
    source = stage.Source("docker", "reg.org/x", "sha256:" + "d" * 64, "reg.org", "x")
    first = stage.stage_site(source, "sif", tmp_path)
    assert stage.stage_site(source, "sif", tmp_path) == first and len(calls) == 1
    assert first.read_bytes() == b"converted" and first.name == "sha256-" + "d" * 64 + ".sif"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.name, f".{first.name}.lock"])


def test_formats_follow_the_runtime():
    assert stage.format_for("docker://reg.org/x", "apptainer") == "sif"
    assert stage.format_for("docker://reg.org/x", "pyxis") == "sqsh"
    assert stage.format_for("/p/x.sqsh", "apptainer") == "sqsh"  # a file keeps its own


@pytest.mark.parametrize("text, expected", [("100G", 100 << 30), ("512MiB", 512 << 20), ("0", 0), ("1.5K", 1536),
                                            ("7", 7)])
def test_cap_sizes(text, expected):
    assert size_bytes(text) == expected


def test_a_bad_cap_is_one_line():
    with pytest.raises(UsageError, match=r"^--cap '10 apples': a size such as 100G"):
        size_bytes("10 apples")


def test_many_nodes_pulling_from_a_registry_are_warned_and_offered_the_stage(tmp_path):
    def plan(**kw):
        return plan_launch(LaunchOptions(image="docker://reg.org/team/pytorch:1", cmd=("true",), site="cray-ex-nvidia",
                                         runtime="apptainer", output_dir=str(tmp_path / "run"), **kw),
                           host=CRAY, check=False)

    [said] = [w for w in plan(nodes=4).warnings if "--stage" in w]
    assert said.startswith("each of the 4 nodes pulls and converts docker://reg.org/team/pytorch:1 itself")
    assert not [w for w in plan(nodes=1).warnings if "--stage" in w]
    assert not [w for w in plan(nodes=4, stage=True).warnings if "--stage" in w]


@pytest.mark.parametrize("args, said", [
    (["stage", "nope.sif"], "error: image 'nope.sif': stage takes a SIF or SquashFS file"),
    (["stage", "--format", "tar", "x.sif"], "error: unknown format 'tar'"),
    (["stage", "--runtime", "lxc", "x.sif"], "error: unknown runtime 'lxc'"),
    (["stage", "--cap", "lots", "x.sif"], "error: --cap 'lots': a size such as 100G"),
    (["stage", "--fanout", "9", "x.sif"], "error: --fanout 9: from 1 to 8 (sbcast's limit)"),
    (["stage", "--node-cache", "relative/dir", "x.sif"], "error: node cache 'relative/dir': an absolute path"),
    (["stage", "--runtime", "docker", "docker://reg.org/x:1"], "error: --runtime docker: staging converts"),
])
def test_a_stage_it_cannot_do_is_one_line_and_converts_nothing(args, said, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HPCAI_IMAGE_CACHE", str(tmp_path / "cache"))
    for name in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
        monkeypatch.delenv(name, raising=False)
    res = subprocess.run([sys.executable, "-m", "hpcai", *args, "--site", "local"] if "--site" not in args
                         else [sys.executable, "-m", "hpcai", *args], capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.startswith(said) and res.stderr.count("\n") == 1, res.stderr
    assert res.stdout == "" and not (tmp_path / "cache").exists()


def test_a_staged_plan_names_its_site_copy_and_reads_labels_there(tmp_path):
    """The node-local path need not exist on the host that plans: labels come from the site copy,
    and plan.json names it (the launch hashes it for image_digest)."""
    site_copy = tmp_path / "sha256-x.sif"
    site_copy.write_bytes(b"sif")
    plan = plan_launch(LaunchOptions(image="/nodes/only/sha256-x.sif", staged_from=str(site_copy), stage=True,
                                     cmd=("true",), site="cray-ex-nvidia", runtime="apptainer", nodes=2, userns=True,
                                     output_dir=str(tmp_path / "run")), host=CRAY, check=True)
    data = plan.to_json()
    assert data["image"] == "/nodes/only/sha256-x.sif" and data["staged_from"] == str(site_copy)
    assert any(a == "/nodes/only/sha256-x.sif" or a.endswith("/nodes/only/sha256-x.sif") for a in plan.argv)
