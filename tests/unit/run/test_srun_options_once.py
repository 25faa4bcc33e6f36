"""Each srun option once (hostile corpus, round three, issue 25): every shipped site ×
payload profile plans an srun line with each option once, a user's --srun-arg of the same option
the last source and the winner (backends.srun.once keeps the first place and the last value)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcai.payloads import available_payloads, load_payload
from hpcai.run import site as sites
from hpcai.run.backends.srun import once
from hpcai.run.slurm_options import option_name

pytestmark = pytest.mark.hostile

SITES = sorted(p.stem for p in Path(sites.__file__).parent.joinpath("sites").glob("*.toml"))
PROFILES = [(name, prof) for name in available_payloads() for prof in load_payload(name).raw.get("launch", {})]


def srun_options(argv: list[str]) -> list[str]:
    """srun's own tokens: from `srun` up to the first word that is no option (the command)."""
    end = next(i for i, token in enumerate(argv[1:], 1) if not token.startswith("-"))
    return argv[1:end]


def test_the_shipped_data_holds_profiles_with_srun_options():
    assert SITES and ("hf-clm", "hpe") in PROFILES


@pytest.mark.parametrize("site", SITES)
@pytest.mark.parametrize("payload, profile", PROFILES)
def test_no_srun_option_twice_for_any_site_and_profile(site, payload, profile, tmp_path, hpcai):
    """`--profile hpe` on a site with distribution = "*:block" wrote --distribution=*:block and
    --cpu-bind=socket twice; a user's --srun-arg of the same option makes a third source."""
    res = hpcai("launch", "--json", "--site", site, "--backend", "srun", "--image", "x.sif", "-o",
                str(tmp_path / "r"), "--profile", profile, "--srun-arg=-m*:cyclic", payload)
    assert res.exit_code == 0, res.stderr
    options = srun_options(json.loads(res.stdout)["argv"])
    names = [option_name(o) for o in options]
    assert len(names) == len(set(names)), options
    assert "-m*:cyclic" in options  # the user's, the last source, wins


@pytest.mark.parametrize("argv, expected", [
    (["srun", "--distribution=*:block", "--cpu-bind=socket", "--distribution=*:block"],
     ["srun", "--distribution=*:block", "--cpu-bind=socket"]),
    (["srun", "--distribution=block", "-m", "cyclic", "--distrib=plane"], ["srun", "--distrib=plane"]),
    (["srun", "--constraint", "gpu", "--exclusive", "--constraint=cpu"], ["srun", "--constraint=cpu", "--exclusive"]),
    (["srun", "-lN5", "-lN5", "--exclusive"], ["srun", "-lN5", "--exclusive"]),  # grouped letters: only exact repeats
])
def test_once_keeps_the_first_place_and_the_last_value(argv, expected):
    assert once(argv) == expected
