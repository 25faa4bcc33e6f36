"""energy/combined_energy.csv against CARAML's own `aux/combine_energy.py` (issue 26, part 6).

A record is fabricated as `hpcai launch --energy` leaves it: per node, the files jpwr's CLI writes
into energy/<host>/ (`power.<host>.<pid>.csv`, pandas' to_csv of its samples, and
`energy.<host>.<pid>.csv`, its energy() Series). CARAML's inputs are made from the same power CSVs
as its Megatron patch makes them (nvidia_energy_llm_fix.patch): jpwr's energy() Series plus
`nodename` and `rank` rows, to_csv'd as `<system>_power.<rank>.energy.csv`. Then CARAML's script,
unpacked from the pinned archive in tests/infra/mirror (checked against SHA256SUMS), combines them
as its JUBE step does, and its output must equal what finalize() wrote: the same header in the same
order, the same host names and ranks, each Wh within 1e-12 relative.

jpwr itself is not in the test mirror; `jpwr_energy` is its ctxmgr.get_power.energy() (jpwr
f85a1275), copied line for line, applied to the CSV read back with pandas.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import random
import subprocess
import sys
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from hpcai.results import energy
from hpcai.results.runs import finalize

REPO = Path(__file__).resolve().parents[3]
MIRROR = REPO / "tests" / "infra" / "mirror"
CARAML = "github/FZJ-JSC/CARAML/59cba3e4f2c3f12c6dee3b85133122c731909852.tar.gz"
COPIES = ("llm_training/aux/combine_energy.py", "resnet50/aux/combine_energy.py")

# (system, {host: devices}): JURECA-DC A100 nodes (NVML only) and JEDI GH200 nodes (jpwr's
# pynvml and gh methods together, as CARAML's patch picks both for a "NVIDIA GH200" device)
SYSTEMS = {
    "A100": {"jrc0437": [f"pynvml:{i}" for i in range(4)], "jrc0438": [f"pynvml:{i}" for i in range(4)]},
    "GH200": {host: [f"pynvml:{i}" for i in range(4)] + [f"gh:Module {i} Power Socket Power" for i in range(4)]
              for host in ("jpbo-001-11", "jpbo-001-12")},
}


@pytest.fixture(scope="module")
def caraml_scripts(tmp_path_factory) -> dict[str, Path]:
    """CARAML's two combine_energy.py copies from the pinned archive, after its SHA256SUMS line."""
    lines = [ln.split() for ln in (MIRROR / "SHA256SUMS").read_text().splitlines() if ln.strip()]
    want = next((digest for digest, name in lines if name == CARAML), None)
    assert want, f"{CARAML} is not listed in tests/infra/mirror/SHA256SUMS"
    assert hashlib.sha256((MIRROR / CARAML).read_bytes()).hexdigest() == want, f"{CARAML}: checksum mismatch"
    dest = tmp_path_factory.mktemp("caraml")
    with tarfile.open(MIRROR / CARAML) as tar:
        members = [m for m in tar.getmembers() if m.name.split("/", 1)[-1] in COPIES]
        tar.extractall(dest, members=members, filter="data")
    (root,) = dest.iterdir()
    return {copy: root / copy for copy in COPIES}


def jpwr_samples(devices: list[str], rng: random.Random) -> dict[str, list[float]]:
    """What jpwr's power_loop collects: about 300 samples 100 ms apart (plus the loop's own time),
    idle power, then a training load with noise."""
    t = 1718000000.0 + rng.random()
    values: dict[str, list[float]] = {"timestamps": []}
    values.update({d: [] for d in devices})
    for i in range(300 + rng.randrange(40)):
        for d in devices:
            base = 62.0 if i < 25 else (520.0 if d.startswith("gh:") else 385.0)
            values[d].append(base + rng.gauss(0, 12.0) if i else base)
        t += 0.1 + rng.uniform(0.0005, 0.004)
        values["timestamps"].append(t)
    return values


def jpwr_energy(df: pd.DataFrame) -> pd.Series:
    """jpwr's ctxmgr.get_power.energy() (f85a1275), on its samples' DataFrame."""
    energy_df = df.loc[:, df.columns != 'timestamps'].astype(float).multiply(df["timestamps"].diff(), axis="index")/3600
    energy_df = energy_df[1:].sum(axis=0)
    return energy_df


def fabricate(run: Path, nodes: dict[str, list[str]], seed: int) -> list[Path]:
    """A finished --energy record, and CARAML's per-rank energy files made from its power CSVs."""
    rng = random.Random(seed)
    (run / "logs").mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps({"payload": "hvd-synthetic", "nodes": len(nodes),
                                               "ntasks_per_node": 4, "gpus_per_node": 4}))
    (run / "logs" / "rank-0.out").write_text("Total img/sec on 8 GPU(s): 2480.0 +-3.0\n")
    caraml_inputs = []
    for rank, (host, devices) in enumerate(sorted(nodes.items())):
        node_dir, pid = run / "energy" / host, 40000 + rank
        node_dir.mkdir(parents=True)
        power_csv = node_dir / f"power.{host}.{pid}.csv"
        pd.DataFrame(jpwr_samples(devices, rng)).to_csv(power_csv)  # jpwr's CLI: save_df_csv
        series = jpwr_energy(pd.read_csv(power_csv, index_col=0))
        series.to_csv(node_dir / f"energy.{host}.{pid}.csv")  # jpwr's CLI writes this one too
        # CARAML's patch: energy_df["nodename"] = nodename; energy_df["rank"] = rankid; to_csv
        # (astype(object): pandas 3 no longer puts text into a float Series by itself)
        series = series.astype(object)
        series["nodename"], series["rank"] = host, rank
        caraml_inputs.append(run / f"SYS_power.{rank}.energy.csv")
        series.to_csv(caraml_inputs[-1])
    return caraml_inputs


def read_csv_rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as fh:
        return list(csv.reader(fh))


def same_cell(ours: str, theirs: str) -> bool:
    try:
        return math.isclose(float(ours), float(theirs), rel_tol=1e-12, abs_tol=1e-15)
    except ValueError:
        return ours == theirs


def test_caramls_two_copies_are_the_same_script(caraml_scripts):
    llm, resnet = (caraml_scripts[c].read_bytes() for c in COPIES)
    assert llm == resnet


@pytest.mark.parametrize("copy", COPIES)
@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_combined_energy_csv_is_caramls(tmp_path, caraml_scripts, system, copy):
    run = tmp_path / "run"
    inputs = fabricate(run, SYSTEMS[system], seed=26)
    assert finalize(run) is not None
    caraml_out = tmp_path / "caraml_combined_energy.csv"
    # CARAML's JUBE step: combine_energy.py --output …/combined_energy.csv <rank 0 … n-1 files>
    res = subprocess.run([sys.executable, str(caraml_scripts[copy]), "--output", str(caraml_out),
                          *map(str, inputs)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert f"Writing combined energy DataFrame to {caraml_out}" in res.stdout  # what its JUBE pattern reads
    theirs, ours = read_csv_rows(caraml_out), read_csv_rows(run / "energy" / energy.COMBINED)
    assert ours[0] == theirs[0]  # column names and order, exactly
    assert ours[0][:3] == ["", "nodename", "rank"] and len(ours[0]) == 3 + len(next(iter(SYSTEMS[system].values())))
    assert len(ours) == len(theirs) == 1 + len(SYSTEMS[system])
    for mine, caramls in zip(ours[1:], theirs[1:]):
        assert mine[:3] == caramls[:3]  # index, host name, rank as text
        assert all(same_cell(a, b) for a, b in zip(mine, caramls, strict=True)), (mine, caramls)


def test_metrics_keep_their_trapezoids_while_the_csv_has_jpwrs_sums(tmp_path):
    """energy_wh stays hpcai's trapezoid figure; the two differ only by the sampling rule."""
    run = tmp_path / "run"
    fabricate(run, SYSTEMS["A100"], seed=7)
    result = finalize(run)
    rows = read_csv_rows(run / "energy" / energy.COMBINED)
    caraml_total = sum(float(c) for row in rows[1:] for c in row[3:])
    assert result.get("energy_wh").value == pytest.approx(caraml_total, rel=0.01)
    assert result.get("energy_wh").value != caraml_total
