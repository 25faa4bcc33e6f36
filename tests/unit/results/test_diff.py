"""`hpcai results diff A B` (issue 30, item 3): the provenance of two real records, likeliest cause
first; the libfabric each rank mapped read from the sanity payload's own lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from run_records import make_run

from hpcai.results.diff import RANKS, diff, unrecorded
from hpcai.results.loading import load


def sanity_log(fabrics: list[str]) -> str:
    lines = []
    for rank, fabric in enumerate(fabrics):
        lines += [f"hpcai-sanity: rank={rank} local_rank=0 world_size={len(fabrics)} host=nid00{rank + 1} "
                  f"node=nid00{rank + 1} master=nid001:29500",
                  f"hpcai-sanity: rank={rank} gpu=none",
                  f"hpcai-sanity: rank={rank} libfabric={fabric} fabric_version=1.22 provider=cxi",
                  f"hpcai-sanity: rank={rank} mpi=/usr/lib/libmpi.so.40 mpi_version=4.1.6"]
    return "\n".join(lines) + "\n"


def run(root, name, fabrics, nccl="2.21.5", env=None, digest="sha256:aa"):
    path = make_run(root, name, "sanity", sanity_log(fabrics), nodes=len(fabrics))
    plan = json.loads((path / "plan.json").read_text())
    plan.update(image_digest=digest, hpcai_version="0.3.0", runtime="apptainer", backend="srun",
                image_labels={"hpcai.component.nccl": nccl, "hpcai.component.libfabric": "1.22.0",
                              "hpcai.flavor": "pytorch-ngc", "hpcai.build-date": name},
                env={"NCCL_SOCKET_IFNAME": "hsn", "TZ": "UTC", **(env or {})})
    (path / "plan.json").write_text(json.dumps(plan))
    return path


CRAY = "/opt/cray/libfabric/1.22.0/lib64/libfabric.so.1"
IMAGE = "/usr/lib/x86_64-linux-gnu/libfabric.so.1"


def test_the_likeliest_cause_comes_first(tmp_path):
    a = load(run(tmp_path, "a", [CRAY, CRAY]))
    b = load(run(tmp_path, "b", [CRAY, IMAGE], nccl="2.23.4", env={"NCCL_PROTO": "^LL128", "TZ": "CET"},
                 digest="sha256:bb"))
    found = diff(a, b)
    assert [(d.area, d.key) for d in found] == [
        ("components", "nccl"),
        ("libfabric mapped", "libfabric"),
        ("image", "digest"), ("image", "hpcai.build-date"),
        ("environment", "NCCL_PROTO"), ("environment", "TZ"),  # the collectives' variables before the rest
    ]
    assert found[0].a == "2.21.5" and found[0].b == "2.23.4" and found[0].rank == 1
    # rank 1 of B mapped the image's own libfabric: the finding, with the ranks named
    assert found[1].a == CRAY and found[1].b == f"{CRAY} (ranks 0) | {IMAGE} (ranks 1)"
    assert found[4].a == "-" and found[4].b == "^LL128"
    assert [d.rank for d in found] == sorted(d.rank for d in found)
    assert unrecorded(a, b) == ["NCCL: not recorded in either run (nccl-tests logs print it)"]


def test_a_run_against_itself_has_no_differences(tmp_path):
    a = load(run(tmp_path, "a", [CRAY]))
    assert diff(a, a) == [] and set(RANKS) >= {"components", "hpcai"}


def test_the_cli_table_and_json(tmp_path):
    a, b = run(tmp_path, "a", [CRAY]), run(tmp_path, "b", [IMAGE])
    res = subprocess.run([sys.executable, "-m", "hpcai", "results", "diff", str(a), str(b), "--json"],
                         capture_output=True, text=True, env=os.environ)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["differences"][0] == {"rank": 3, "area": "libfabric mapped", "key": "libfabric", "a": CRAY, "b": IMAGE}
    table = subprocess.run([sys.executable, "-m", "hpcai", "results", "diff", str(a), str(b)],
                           capture_output=True, text=True)
    assert table.returncode == 0 and "libfabric mapped" in table.stdout and IMAGE in table.stdout
    missing = subprocess.run([sys.executable, "-m", "hpcai", "results", "diff", str(a), str(tmp_path / "nope")],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stderr == f"error: no such run record: {tmp_path / 'nope'}\n"
