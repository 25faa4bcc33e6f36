"""Hardening round three (issue 25), part b: concurrent submits, sweep bounds, the scheduler options
hpcai sets itself (every spelling, every source) and MASTER_PORT. Each refusal is one line, exit 2,
no traceback, nothing written; properties run over the registries (every owned option, every
payload, every shipped site and payload profile)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hpcai import payloads
from hpcai.errors import UsageError
from hpcai.run import scheduler
from hpcai.run import site as sitemod
from hpcai.run import slurm_options
from hpcai.run.site import parse_site
from hpcai.run.slurm_options import SBATCH_OWN, SLURM_OTHER, SRUN_OWN, owned_option

pytestmark = pytest.mark.hostile

SITE = ["--site", "generic-slurm", "--image", "x.sif"]


def one_line_refusal(res, fragment: str) -> None:
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2, res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], res.stderr


# --- Concurrency: submits started together each claim their own record ------------------------

def test_ten_concurrent_submits_give_ten_records_each_with_its_own_script(tmp_path):
    argv = [sys.executable, "-m", "hpcai", "submit", "--no-submit", *SITE, "sanity"]
    procs = [subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(10)]
    results = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
    assert all(code == 0 for code, _, _ in results), [err for _, _, err in results]
    scripts = sorted(out.strip() for _, out, _ in results)
    folders = sorted(p for p in (tmp_path / "runs").iterdir())
    assert len(set(scripts)) == 10 and len(folders) == 10
    assert scripts == sorted(str(f / "submit.sbatch") for f in folders)
    for folder in folders:
        text = (folder / "submit.sbatch").read_text()
        assert text.endswith("sanity\n") and f"#SBATCH --output={folder}/slurm-%j.out" in text
        assert f"--output-dir {folder} " in text  # the job writes its record into its own folder
        assert not [p for p in folder.iterdir() if p.name != "submit.sbatch"]  # no temporary left


def test_a_second_submit_into_the_same_output_dir_is_refused(hpcai, tmp_path):
    out = tmp_path / "r"
    first = hpcai("submit", "--no-submit", *SITE, "-o", str(out), "sanity")
    assert first.exit_code == 0, first.stderr
    before = (out / "submit.sbatch").read_text()
    second = hpcai("submit", "--no-submit", *SITE, "-o", str(out), "-N", "3", "sanity")
    one_line_refusal(second, "already holds a batch script (submit.sbatch) of another submit")
    assert (out / "submit.sbatch").read_text() == before and sorted(p.name for p in out.iterdir()) == ["submit.sbatch"]


def test_a_refused_submit_leaves_no_runs_folder(hpcai, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one_line_refusal(hpcai("submit", "--no-submit", "--site", "local", "--image", "x", "sanity"),
                     "submit needs a Slurm site")
    assert not list(tmp_path.iterdir())


@pytest.mark.docker
def test_a_refused_real_submit_gives_its_claimed_folder_back(hpcai, tmp_path, monkeypatch):
    """A real submit (no --no-submit) claims its record folder while planning; a refusal after
    that (a site without Slurm) must leave neither the folder nor the runs folder behind."""
    monkeypatch.chdir(tmp_path)
    one_line_refusal(hpcai("submit", "--site", "local", "--image", "debian:bookworm-slim", "sanity"),
                     "submit needs a Slurm site")
    assert not list(tmp_path.iterdir())


# --- Sweeps: node lists, variables and grid size ---------------------------------------------

SWEEP_CASES = [
    (["--nodes", "1,1,1"], "lists 1 more than once"),
    (["--nodes", "1,2,2,4"], "lists 2 more than once"),
    (["--nodes", "1,,2"], "(an empty item)"),
    (["--nodes", ","], "(an empty item)"),
    (["--nodes", "0"], "--nodes must list node counts >= 1"),
    (["--nodes", "1,-2"], "--nodes must list node counts >= 1"),
    (["--nodes", "100001"], "--nodes must be between 1 and 100000, got 100001"),
    (["--nodes", "1,99999999999999999999"], "--nodes must be between 1 and 100000"),
    (["--nodes", "1", "--var", "steps=1,,2"], "no empty value"),
    (["--nodes", "1", "--var", "steps=5,5"], "lists 5 more than once"),
    (["--nodes", "1", "--var", "steps=1", "--var", "steps=2"], "--var steps is given twice"),
    (["--nodes", "1", "--var", "nope=1,2"], "unknown variable 'nope' for payload hf-clm; valid: "),
    (["--nodes", "1", "--var", "steps=1,many"], "variable steps='many': expected an integer"),
    (["--nodes", "1", "--var", "steps=" + ",".join(map(str, range(1, 1001))),
      "--var", "seq_len=" + ",".join(map(str, range(1, 1001)))],
     "the sweep would make 1000000 points (1000 × 1000), more than the bound of 10000"),
    (["--nodes", ",".join(map(str, range(1, 101))), "--repeat", "101"], "would make 10100 points (100 × 101)"),
]


@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "no-submit"])
@pytest.mark.parametrize("args, fragment", SWEEP_CASES, ids=[" ".join(c[0])[:40] for c in SWEEP_CASES])
def test_bad_sweeps_are_refused_before_anything_is_written(hpcai, tmp_path, monkeypatch, dry, args, fragment):
    monkeypatch.chdir(tmp_path)
    mode = ["--dry-run"] if dry else ["--no-submit", *SITE]
    res = hpcai("sweep", *mode, *args, "hf-clm")
    one_line_refusal(res, fragment)
    assert not res.stdout and not list(tmp_path.iterdir())


@pytest.mark.parametrize("payload", payloads.available_payloads())
def test_every_payload_refuses_an_unknown_sweep_variable_in_a_dry_run(hpcai, payload):
    known = [v.name for v in payloads.load_payload(payload).variables]
    res = hpcai("sweep", "--dry-run", "--nodes", "1", "--var", "hpcai_no_such_var=1", payload)
    one_line_refusal(res, f"--var hpcai_no_such_var: unknown variable 'hpcai_no_such_var' for payload {payload}")
    assert all(name in res.stderr for name in known)  # the valid names are listed


def test_a_grid_at_the_bound_is_still_planned(hpcai):
    from hpcai.run import sweep

    assert sweep.count_points(list(range(1, 101)), {"a": [str(i) for i in range(100)]}) == sweep.MAX_POINTS
    res = hpcai("sweep", "--dry-run", "--nodes", "1,2", "--var", "steps=1,2", "hf-clm")
    assert res.exit_code == 0 and len(res.stdout.splitlines()) == 4


# --- Options hpcai sets itself: every spelling, every source ----------------------------------

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


# --- MASTER_PORT -------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["abc", "99999999999", "-5", "0", "65536", "", " 80", "8o8o", "1" * 5000])
@pytest.mark.parametrize("site", ["local", "generic-slurm"])
def test_a_master_port_that_is_no_port_is_refused(hpcai, tmp_path, monkeypatch, value, site):
    monkeypatch.chdir(tmp_path)
    res = hpcai("launch", "--dry-run", "--site", site, "--image", "x", "-e", f"MASTER_PORT={value}", "sanity")
    one_line_refusal(res, f"--env MASTER_PORT={value!r}: expected a port between 1 and 65535")
    assert not list(tmp_path.iterdir())


def test_a_site_master_port_is_checked_and_env_wins(hpcai, tmp_path, site_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HPCAI_SITE_PATH", site_path("bad", 'backend = "local"\nruntime = "docker"\n'
                                                          '[env]\nMASTER_PORT = "x1"\n'))
    one_line_refusal(hpcai("launch", "--dry-run", "--site", "bad", "--image", "x", "sanity"),
                     "site bad: env MASTER_PORT='x1': expected a port between 1 and 65535")
    ok = hpcai("launch", "--dry-run", "--site", "bad", "--image", "x", "-e", "MASTER_PORT=29400", "sanity")
    assert ok.exit_code == 0 and "MASTER_PORT=29400" in ok.stdout, ok.stderr
