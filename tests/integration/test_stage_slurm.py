"""`hpcai stage` and `launch --stage` on the 4-node test cluster (issue 29, item 4), from the real
test registry: the image is resolved to its digest and converted once into a site cache, then
broadcast by sbcast to each node's own local folder (slurm-up.sh gives every slurmd its own folder
behind one path, as local disks are), kept across jobs with a size cap.

Every runtime and hpcai itself log in once, with `hpcai login`, in this module's own HOME.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from engines import NODE_LOCAL, NODE_LOCAL_STATE, REGISTRY
from registry_env import hpcai, login, private_home, run

pytestmark = [pytest.mark.slurm, pytest.mark.registry, pytest.mark.docker, pytest.mark.apptainer]
BASE = os.environ.get("HPCAI_DEBIAN_BASE", "debian:bookworm-slim")
NODES = ("nid001", "nid002", "nid003", "nid004")
SLURM_LOGS = Path(os.environ.get("HPCAI_SLURM_LOGS", "/var/log/hpcai-slurm"))  # slurm-up.sh's


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """Logged in (docker, apptainer, enroot), the base image pushed, a site cache and a node cache
    of this module's own."""
    tmp = tmp_path_factory.mktemp("stage")
    env = private_home(tmp)
    login(env, "docker,apptainer,enroot")
    res = hpcai("push", BASE, f"{REGISTRY}/hpcai-test/stage-base:1", env=env)
    assert res.returncode == 0, res.stderr
    mine = f"stage-{uuid.uuid4().hex[:8]}"
    yield {**env, "HPCAI_IMAGE_CACHE": str(tmp / "site-cache"), "HPCAI_NODE_CACHE": f"{NODE_LOCAL}/{mine}"}
    for folder in NODE_LOCAL_STATE.glob(f"*/{mine}*"):  # the nodes' copies: a GiB each, on the real disk
        shutil.rmtree(folder, ignore_errors=True)


IMAGE = f"docker://{REGISTRY}/hpcai-test/stage-base:1"


def staged(env: dict[str, str], *args: str, nodes: int = 4) -> dict:
    """`hpcai stage --json ARGS` inside an allocation of NODES nodes."""
    res = run("salloc", "-N", str(nodes), "-w", f"nid[001-{nodes:03d}]", "--quiet", sys.executable, "-m", "hpcai",
              "stage", "--json", *args, env=env)
    assert res.returncode == 0, res.stderr + slurmd_logs(NODES[:nodes])
    return json.loads(res.stdout)


def slurmd_logs(nodes) -> str:
    """The last lines of each node's slurmd log: why a node refused a broadcast, in the failure."""
    tails = []
    for node in nodes:
        log = SLURM_LOGS / f"slurmd-{node}.log"
        lines = log.read_text(errors="replace").splitlines()[-15:] if log.is_file() else ["(no log)"]
        tails.append(f"--- {log}\n" + "\n".join(lines))
    return "\n" + "\n".join(tails)


def parts_left(env: dict[str, str]) -> list[Path]:
    """Broadcast parts on any node's disk under this env's node cache."""
    return [part for node in NODES for part in on_node(env, node, ".").glob(".*.part-*")]


def with_sbcast(env: dict[str, str], tmp_path: Path, body: str) -> tuple[dict[str, str], Path]:
    """ENV with an `sbcast` first on PATH running the shell BODY ($real: the real sbcast; $calls:
    a file with a line per call), and a node cache of its own, cold on every node."""
    real = shutil.which("sbcast", path=env["PATH"])
    calls = tmp_path / "sbcast-calls"
    wrapper = tmp_path / "bin" / "sbcast"
    wrapper.parent.mkdir()
    wrapper.write_text(f"#!/bin/sh\nreal={real}\ncalls={calls}\necho \"$*\" >> \"$calls\"\n{body}\n")
    wrapper.chmod(0o755)
    cache = f"{env['HPCAI_NODE_CACHE']}-{tmp_path.name[-12:]}"
    return {**env, "PATH": f"{wrapper.parent}:{env['PATH']}", "HPCAI_NODE_CACHE": cache}, calls


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def on_node(env: dict[str, str], node: str, name: str) -> Path:
    """What NODE holds at $HPCAI_NODE_CACHE/NAME, seen from this host."""
    return NODE_LOCAL_STATE / node / Path(env["HPCAI_NODE_CACHE"]).relative_to(NODE_LOCAL) / name


def test_cold_then_warm_on_four_nodes(env):
    cold = staged(env, "--runtime", "apptainer", IMAGE)
    site_copy = Path(cold["site_copy"])
    name = f"sha256-{cold['digest'][7:]}.sif"
    assert site_copy.name == name and cold["format"] == "sif"
    assert cold["path"] == f"{env['HPCAI_NODE_CACHE']}/{name}"
    assert sorted(cold["nodes"]) == sorted(cold["cold"]) == list(NODES)
    assert cold["broadcast_bytes"] == site_copy.stat().st_size
    want = sha256(site_copy)
    for node in NODES:  # each node's own copy, whole, under the digest's name
        assert sha256(on_node(env, node, name)) == want, node
    warm = staged(env, "--runtime", "apptainer", IMAGE)  # a later job: nothing read, nothing sent
    assert warm["cold"] == [] and warm["broadcast_bytes"] == 0 and warm["path"] == cold["path"]
    pinned = staged(env, "--runtime", "apptainer", f"docker://{REGISTRY}/hpcai-test/stage-base@{cold['digest']}",
                    nodes=2)  # by digest: the same file, warm
    assert pinned["path"] == cold["path"] and pinned["cold"] == []


def test_launch_stage_runs_every_rank_from_the_node_copy(env, tmp_path):
    res = run("salloc", "-N", "2", "--quiet", sys.executable, "-m", "hpcai", "launch", "--stage", "--runtime",
              "apptainer", "--userns", "-N", "2", "--no-entrypoint", "--image", IMAGE, "-o", str(tmp_path / "run"),
              "--cmd", "--", "cat", "/etc/debian_version", env=env)
    assert res.returncode == 0, res.stderr
    assert "staged sha256:" in res.stderr
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    assert plan["image"].startswith(env["HPCAI_NODE_CACHE"] + "/sha256-") and plan["image"].endswith(".sif")
    # the record names the site copy and the digest of the bytes that ran (the node copy's, not on this host)
    assert plan["image_digest"] == "sha256:" + sha256(Path(plan["staged_from"]))
    for rank in (0, 1):
        assert (tmp_path / "run" / "logs" / f"rank-{rank}.out").read_text().strip()[:2].isdigit()


def test_pyxis_starts_every_rank_from_the_node_squashfs(env, tmp_path):
    """The same stage for pyxis: a SquashFS by digest, `srun --container-image=NODE_COPY`."""
    res = run("salloc", "-N", "2", "--quiet", sys.executable, "-m", "hpcai", "launch", "--stage", "--runtime", "pyxis",
              "-N", "2", "--no-entrypoint", "--image", IMAGE, "-o", str(tmp_path / "run"),
              "--cmd", "--", "cat", "/etc/debian_version", env=env)
    assert res.returncode == 0, res.stderr
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    image = plan["image"]
    assert image.startswith(env["HPCAI_NODE_CACHE"] + "/sha256-") and image.endswith(".sqsh")
    assert f"--container-image={image}" in plan["argv"]
    for rank in (0, 1):
        assert (tmp_path / "run" / "logs" / f"rank-{rank}.out").read_text().strip()[:2].isdigit()


def test_the_least_recently_used_image_leaves_a_full_node_cache(env):
    """SquashFS for enroot beside the SIF, with a cap that holds only one of them: every node
    evicts the SIF, the older. A node cache of its own: what the other tests staged is not in it."""
    env = {**env, "HPCAI_NODE_CACHE": f"{env['HPCAI_NODE_CACHE']}-lru"}
    sif = staged(env, "--runtime", "apptainer", IMAGE)
    sqsh_site = Path(staged(env, "--runtime", "enroot", IMAGE, nodes=1)["site_copy"])  # node 1 only
    cap = str(sqsh_site.stat().st_size + 1)
    out = staged(env, "--runtime", "enroot", "--cap", cap, IMAGE)
    sif_name = Path(sif["path"]).name
    assert sorted(out["cold"]) == ["nid002", "nid003", "nid004"]
    assert out["evicted"] == {node: [sif_name] for node in NODES}
    for node in NODES:
        assert not on_node(env, node, sif_name).exists() and on_node(env, node, Path(out["path"]).name).is_file()


def test_concurrent_stagers_of_one_digest_convert_once(env, tmp_path):
    """Two stagers of a new digest while a third holds the lock: both wait, one converts, the
    other finds its file. `enroot` here is a wrapper that counts its calls and runs the real one."""
    wrapper = tmp_path / "bin" / "enroot"
    wrapper.parent.mkdir()
    calls = tmp_path / "calls"
    real = subprocess.run(["sh", "-c", "command -v enroot"], capture_output=True, text=True).stdout.strip()
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    cache = tmp_path / "site-cache"
    cache.mkdir()
    each = {**env, "HPCAI_IMAGE_CACHE": str(cache), "PATH": f"{wrapper.parent}:{env['PATH']}"}
    digest = json.loads(hpcai("stage", "--json", "--runtime", "apptainer", IMAGE, env=env).stdout)["digest"]
    lock = cache / f".sha256-{digest[7:]}.sqsh.lock"
    errs = [tmp_path / f"stager-{i}.err" for i in range(2)]
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        stagers = [subprocess.Popen([sys.executable, "-m", "hpcai", "stage", "--runtime", "enroot", IMAGE],
                                    env=each, stdout=subprocess.PIPE, stderr=err.open("w"), text=True)
                   for err in errs]
        deadline = time.monotonic() + 300
        while not all("waiting for another stager of sha256-" in e.read_text() for e in errs):
            assert time.monotonic() < deadline and all(p.poll() is None for p in stagers), [e.read_text() for e in errs]
            time.sleep(0.2)
    outs = [p.communicate(timeout=600)[0] for p in stagers]
    assert [p.returncode for p in stagers] == [0, 0], [e.read_text() for e in errs]
    assert outs[0] == outs[1] == f"{cache}/sha256-{digest[7:]}.sqsh\n"
    assert len(calls.read_text().splitlines()) == 1  # one `enroot import`


def test_an_oras_artifact_and_a_file_stage_by_their_own_digests(env, tmp_path):
    sqsh = Path(json.loads(hpcai("stage", "--json", "--runtime", "enroot", IMAGE, env=env).stdout)["site_copy"])
    res = hpcai("push", "--json", str(sqsh), f"{REGISTRY}/hpcai-test/stage-sqsh:1", env=env)
    assert res.returncode == 0, res.stderr
    pushed = json.loads(res.stdout)
    out = staged(env, "--runtime", "enroot", f"oras://{REGISTRY}/hpcai-test/stage-sqsh:1", nodes=2)
    assert out["digest"] == pushed["digest"] and sha256(Path(out["site_copy"])) == sha256(sqsh)
    assert Path(out["path"]).name == f"sha256-{pushed['digest'][7:]}.sqsh"

    mine = tmp_path / "mine.sqsh"  # a file of the user's own: its sha256 is its name on the nodes
    mine.write_bytes(sqsh.read_bytes())
    out = staged(env, str(mine), nodes=2)
    assert out["site_copy"] == str(mine) and Path(out["path"]).name == f"sha256-{sha256(mine)}.sqsh"
    assert sha256(on_node(env, "nid002", Path(out["path"]).name)) == sha256(mine)


# A node that refuses a transfer: the real sbcast sends the part, then this one fails as sbcast did
# once in CI ("REQUEST_FILE_BCAST(nid001): Unspecified error"), so a part is on every node's disk.
REFUSE = '"$real" "$@"; echo "sbcast: error: REQUEST_FILE_BCAST(nid001): Unspecified error" >&2; exit 255'


def test_a_refused_broadcast_is_tried_again_and_leaves_no_part(env, tmp_path):
    once, calls = with_sbcast(env, tmp_path, f'[ "$(wc -l < "$calls")" -gt 1 ] && exec "$real" "$@"\n{REFUSE}')
    res = run("salloc", "-N", "2", "-w", "nid[001-002]", "--quiet", sys.executable, "-m", "hpcai", "stage",
              "--json", "--runtime", "apptainer", IMAGE, env=once)
    assert res.returncode == 0, res.stderr
    assert "warning: sbcast failed (sbcast exit 255): sbcast: error: REQUEST_FILE_BCAST(nid001): Unspecified " \
           "error; the part sent was removed from every node, trying once more" in res.stderr
    out = json.loads(res.stdout)
    assert len(calls.read_text().splitlines()) == 2 and sorted(out["cold"]) == ["nid001", "nid002"]
    for node in ("nid001", "nid002"):
        assert sha256(on_node(once, node, Path(out["path"]).name)) == sha256(Path(out["site_copy"]))
    assert parts_left(once) == []


def test_a_broadcast_refused_twice_fails_in_one_line_and_leaves_no_part(env, tmp_path):
    always, calls = with_sbcast(env, tmp_path, REFUSE)
    res = run("salloc", "-N", "2", "-w", "nid[001-002]", "--quiet", sys.executable, "-m", "hpcai", "stage",
              "--runtime", "apptainer", IMAGE, env=always)
    assert res.returncode == 1 and res.stdout == ""
    said = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert said == ["error: sbcast failed (sbcast exit 255): sbcast: error: REQUEST_FILE_BCAST(nid001): Unspecified "
                    "error (tried 2 times; the parts sent were removed from every node; that node's slurmd log says "
                    "why)"], res.stderr
    assert len(calls.read_text().splitlines()) == 2 and "Traceback" not in res.stderr
    assert parts_left(always) == [] and not list(on_node(always, "nid001", ".").glob("sha256-*"))


def test_an_interrupted_broadcast_leaves_no_part(env, tmp_path):
    """Ctrl-C while sbcast runs (here: once the part is on every node): hpcai removes it and ends 130."""
    stopped, _ = with_sbcast(env, tmp_path, '"$real" "$@"; kill -INT "$PPID"; sleep 60')
    res = run("salloc", "-N", "2", "-w", "nid[001-002]", "--quiet", sys.executable, "-m", "hpcai", "stage",
              "--runtime", "apptainer", IMAGE, env=stopped)
    assert res.returncode == 130 and "Traceback" not in res.stderr, res.stderr
    assert parts_left(stopped) == [] and not list(on_node(stopped, "nid001", ".").glob("sha256-*"))
