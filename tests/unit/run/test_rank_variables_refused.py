"""Rank variables are hpcai's to set (hostile corpus, round three, part J): `-e RANK=5 -e
WORLD_SIZE=7` with two ranks gave both ranks RANK=5 (docker takes the last `-e`), exit 0. Every
rank and size variable of the entrypoint's HPCAI__RANKS and HPCAI__SIZES is refused from --env and
from a site's env: exit 2, one line naming it. MASTER_ADDR and MASTER_PORT stay settable."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hpcai.run.environment import RANK_VARS

pytestmark = pytest.mark.hostile

REPO = Path(__file__).resolve().parents[3]
LIB = REPO / "entrypoints" / "hpcai-lib.sh"  # the entrypoint's library: its lists of rank variables


def _words(name: str) -> list[str]:
    match = re.search(rf"^{name}='([^']*)'", LIB.read_text(), re.M)
    assert match, name
    return match.group(1).split()


def test_the_refused_list_is_the_entrypoints():
    assert RANK_VARS == set(_words("HPCAI__RANKS") + _words("HPCAI__SIZES"))
    assert {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "SLURM_PROCID", "SLURM_NTASKS",
            "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
            "PMIX_RANK"} <= RANK_VARS
    assert not {"MASTER_ADDR", "MASTER_PORT"} & RANK_VARS


@pytest.mark.parametrize("source", ["--env", "--env NAME", "site env"])
@pytest.mark.parametrize("var", sorted(RANK_VARS))
def test_a_rank_variable_is_refused(hpcai, tmp_path, monkeypatch, site_path, var, source):
    args = ["launch", "--dry-run", "-o", str(tmp_path / "r"), "--image", "img:1"]
    if source == "site env":
        monkeypatch.setenv("HPCAI_SITE_PATH", site_path("ranked", f'backend = "local"\nruntime = "docker"\n'
                                                                  f'[env]\n{var} = "5"\n'))
        args += ["--site", "ranked"]
        where = "site ranked: env"
    else:
        monkeypatch.setenv(var, "5")
        args += ["--site", "local", "--env", var if source == "--env NAME" else f"{var}=5"]
        where = "--env"
    res = hpcai(*args, "--ntasks-per-node", "2", "--cmd", "--", "true")
    assert res.exit_code == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {where} {var}: hpcai sets {var} for each rank"), lines


def test_master_addr_and_port_stay_settable(hpcai, tmp_path):
    res = hpcai("launch", "--json", "--site", "local", "--image", "img:1", "-o", str(tmp_path / "r"),
                "-e", "MASTER_ADDR=10.0.0.1", "-e", "MASTER_PORT=29500", "-e", "RANKING=5", "-e", "MY_RANK=1",
                "--cmd", "--", "true")
    assert res.exit_code == 0, res.stderr
    plan = json.loads(res.stdout)
    assert plan["env"]["MASTER_PORT"] == "29500" and plan["env"]["RANKING"] == "5"
