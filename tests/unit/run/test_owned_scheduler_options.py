"""The scheduler options hpcai sets itself (hardening round three, issue 25): every spelling
of an owned srun or sbatch option (exact, with a value, every abbreviation, short letters alone or
grouped) is refused from every source (--srun-arg, a payload profile, a site file), and the options
hpcai leaves alone pass. Properties over the registries: every owned option, every shipped site and
payload profile."""

from __future__ import annotations

import pytest
from refusal_helpers import SITE, one_line_refusal

from hpcai import payloads
from hpcai.errors import UsageError
from hpcai.run import scheduler
from hpcai.run import site as sitemod
from hpcai.run import slurm_options
from hpcai.run.site import parse_site
from hpcai.run.slurm_options import SBATCH_OWN, SLURM_OTHER, SRUN_OWN, owned_option

pytestmark = pytest.mark.hostile


def spellings(name: str) -> list[str]:
    """Every way Slurm reads the long option NAME: exact, with a value, and every abbreviation
    (each prefix that is not itself the exact name of another option)."""
    out = [f"--{name}", f"--{name}=1", f"--{name} 1"]
    out += [f"--{name[:i]}=1" for i in range(1, len(name)) if name[:i] not in SLURM_OTHER]
    letters = [k for k, v in slurm_options._SHORT.items() if v == name] + \
              [k for k, v in slurm_options._SHORT_FLAGS.items() if v == name]
    for k in letters:  # attached, separate, after a flag in a group, with '='
        out += [f"-{k}", f"-{k}5", f"-{k}/x", f"-l{k}5", f"-vu{k}", f"-{k}=5"]
    return out


@pytest.mark.parametrize("name", sorted(SRUN_OWN))
def test_every_spelling_of_an_owned_srun_option_is_refused_from_every_source(name):
    for word in spellings(name):
        assert owned_option(word, SRUN_OWN), word
        with pytest.raises(UsageError, match="hpcai sets .* itself.*--srun-arg is for options"):
            scheduler.check_srun_args((word.replace(" ", "="),))
        with pytest.raises(UsageError, match="payload profile srun_args"):
            scheduler.check_srun_args((word.replace(" ", "="),), "payload profile srun_args")
        with pytest.raises(UsageError, match=r"t\.toml: srun_options .*hpcai sets"):
            parse_site("t", f"srun_options = [{word!r}]\n".replace("'", '"'), "t.toml")


@pytest.mark.parametrize("name", sorted(SBATCH_OWN))
def test_every_spelling_of_an_owned_sbatch_option_is_refused_in_a_site(name):
    for word in spellings(name):
        with pytest.raises(UsageError, match=r"t\.toml: sbatch_options .*hpcai sets"):
            parse_site("t", f"sbatch_options = [{word!r}]\n".replace("'", '"'), "t.toml")


@pytest.mark.parametrize("word", ["--exclusive", "--gpus=4", "--ntasks-per-socket=1", "--sockets-per-node=4",
                                  "--time-min=10", "--distribution=*:block", "--cpu-bind=socket", "-Cgpu",
                                  "-x", "nid001", "--network=disable_rdzv_get", "--mem=0", "--qos=high",
                                  "--constraint", "gpu", "-l", "--exact"])
def test_options_hpcai_leaves_alone_pass_every_source(word):
    assert owned_option(word, SRUN_OWN) is None and owned_option(word, SBATCH_OWN) is None
    site = parse_site("t", f'srun_options = ["{word}"]\nsbatch_options = ["{word}"]\n', "t.toml")
    assert site.srun_options == (word,)


def test_every_shipped_site_and_payload_profile_passes_the_check():
    for name in sitemod.available_sites():
        sitemod.load_site(name)  # raises on an owned option
    for payload in payloads.available_payloads():
        manifest = payloads.load_payload(payload)
        for profile in manifest.raw.get("launch", {}):
            scheduler.check_srun_args(manifest.srun_args((profile,)), "payload profile srun_args")


@pytest.mark.parametrize("arg, fragment", [
    ("--srun-arg=-o/x", "hpcai sets -o itself (the record's logs/; -o stands for --output)"),
    ("--srun-arg=--outp=/x", "hpcai sets --outp itself (the record's logs/; --outp stands for --output)"),
    ("--srun-arg=-N5", "hpcai sets -N itself (--nodes; -N stands for --nodes)"),
    ("--srun-arg=-lN5", "hpcai sets -N itself"),
    ("--srun-arg=--kill-on=0", "--kill-on stands for --kill-on-bad-exit"),
    ("--srun-arg=-K0", "-K stands for --kill-on-bad-exit"),
    ("--srun-arg=--", "expected one srun option"),
])
def test_owned_options_through_the_cli(hpcai, tmp_path, monkeypatch, arg, fragment):
    monkeypatch.chdir(tmp_path)
    for command in (["launch", "--dry-run"], ["submit", "--no-submit"]):
        one_line_refusal(hpcai(*command, *SITE, arg, "sanity"), fragment)
    assert not list(tmp_path.iterdir())


def test_a_site_file_setting_an_owned_option_is_refused_by_name(hpcai, tmp_path, site_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HPCAI_SITE_PATH", site_path("shared", 'backend = "srun"\nsbatch_options = ["--outp=/tmp/x"]\n'))
    res = hpcai("submit", "--no-submit", "--site", "shared", "--image", "x.sif", "sanity")
    one_line_refusal(res, "shared.toml: sbatch_options '--outp=/tmp/x': hpcai sets --outp itself")
    assert not (tmp_path / "runs").exists()
