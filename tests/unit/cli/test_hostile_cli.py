"""Hostile and careless input to the CLI, each as a real subprocess: one clear line on stderr,
the documented exit code, no traceback, nothing written or started. Grows with every case found
(issue 12 lists where they came from)."""

from __future__ import annotations

import subprocess

import pytest

pytestmark = pytest.mark.hostile

SITE = ["--site", "generic-slurm", "--image", "x.sif"]
SWEEP = ["sweep", "--no-submit", "--nodes", "1", *SITE]

# (argv after `hpcai`, exit code, a fragment of the one error line)
CASES = [
    (["launch", "--dry-run", *SITE, "-N", "0", "sanity"], 2, "--nodes must be between 1 and 100000, got 0"),
    (["launch", "--dry-run", *SITE, "-N", "-2", "sanity"], 2, "--nodes must be between 1 and 100000"),
    (["launch", "--dry-run", *SITE, "-N", "100000000000", "sanity"], 2, "--nodes must be between 1 and 100000"),
    (["launch", "--dry-run", *SITE, "--ntasks-per-node", "0", "sanity"], 2, "--ntasks-per-node must be between 1"),
    (["launch", "--dry-run", *SITE, "--ntasks-per-node", "99999", "sanity"], 2, "--ntasks-per-node must be between"),
    (["launch", "--dry-run", *SITE, "--gpus-per-node", "-1", "sanity"], 2, "--gpus-per-node must be between 0 and 64"),
    (["launch", "--dry-run", *SITE, "-c", "-4", "sanity"], 2, "--cpus-per-task must be between 0 and 4096"),
    (["launch", "--dry-run", *SITE, "--srun-arg=--output=/tmp/elsewhere", "sanity"], 2,
     "hpcai sets --output itself (the record's logs/)"),
    (["launch", "--dry-run", *SITE, "--srun-arg=--mpi=none", "sanity"], 2, "hpcai sets --mpi itself (--mpi)"),
    (["launch", "--dry-run", *SITE, "--srun-arg=-n", "sanity"], 2, "hpcai sets -n itself"),
    (["launch", "--dry-run", *SITE, "--srun-arg=exclusive", "sanity"], 2, "expected one srun option"),
    (["launch", "--dry-run", *SITE, "--srun-arg=--comment=a\tb", "sanity"], 2, "on one line"),
    (["launch", "--dry-run", *SITE, "--profile", "nope", "sanity"], 2, "payload sanity has no profile 'nope'"),
    (["launch", "--dry-run", *SITE, "--bind", "relative:/x", "sanity"], 2, "with absolute paths"),
    (["launch", "--dry-run", *SITE, "--env", "1BAD=x", "sanity"], 2, "KEY a variable name"),
    (["launch", "--dry-run", *SITE, "sanity", "nope"], 2, "payload argument 'nope': expected var=value"),
    (["launch", "--dry-run", *SITE, "nccl"], 2, "unknown payload 'nccl'"),
    (["launch", "--dry-run", *SITE, "hf-clm", "steps=many"], 2, "variable steps='many': expected an integer"),
    (["launch", "--dry-run", *SITE, "hf-clm", "precision=fp8"], 2, "variable precision='fp8': valid:"),
    (["launch", "--dry-run", *SITE, "openclip", "grad_checkpointing=maybe"], 2, "expected true or false"),
    (["launch", "--dry-run", *SITE, "--profile", "quick", "--cmd", "--", "true"], 2, "a --cmd command has none"),
    (["launch", "--dry-run", "--site", "nowhere", "--image", "x.sif", "sanity"], 2, "unknown site 'nowhere'"),
    (["launch", "--dry-run", *SITE, "--runtime", "lxc", "sanity"], 2, "unknown runtime 'lxc'"),
    (["launch", "--dry-run", *SITE, "--backend", "pbs", "sanity"], 2, "unknown backend 'pbs'"),
    (["launch", "--dry-run", *SITE, "--mpi", "pmi9", "sanity"], 2, "unknown mpi type 'pmi9'"),
    (["submit", "--no-submit", *SITE, "--partition", "gpu\ntouch X #", "sanity"], 2, "control characters"),
    (["launch", "--dry-run", *SITE, "sanity", "--cmd", "--", "true"], 2,
     "--cmd runs only the command after `--`; 'sanity' before it is not part of it"),
    (["launch", "--dry-run", *SITE, "--json", "a", "b", "--cmd", "--", "true"], 2, "'a b' before it is not part"),
    (["submit", "--no-submit", *SITE, "sanity", "--cmd", "--", "true"], 2,
     "--cmd runs only the command after `--`; 'sanity' before it"),
    (["launch", "--dry-run", *SITE, "--cmd", "--"], 2, "--cmd needs a command after `--`"),
    # one-word scheduler values, checked once for launch, submit and sweep (plan._scheduler_values)
    (["launch", "--dry-run", *SITE, "--partition", "a\nb", "sanity"], 2, "--partition 'a\\nb': control characters"),
    (["launch", "--dry-run", *SITE, "--account", "p\x1b[31m", "sanity"], 2, "--account 'p\\x1b[31m': control"),
    (["launch", "--dry-run", *SITE, "--time", "forever", "sanity"], 2, "--time 'forever': expected minutes, MM:SS"),
    (["launch", "--dry-run", *SITE, "--time", "1:2:3:4", "sanity"], 2, "--time '1:2:3:4': expected minutes"),
    (["launch", "--dry-run", *SITE, "--time", "-5", "sanity"], 2, "--time '-5': expected minutes"),
    (["launch", "--dry-run", *SITE, "--nodelist", "nid[1-", "sanity"], 2, "--nodelist 'nid[1-': not a host list"),
    (["launch", "--dry-run", *SITE, "--nodelist", "nid001\nx", "sanity"], 2, "--nodelist 'nid001\\nx': control"),
    (["launch", "--dry-run", *SITE, "--nodelist", "nid;id", "sanity"], 2, "host names are letters, digits"),
    (["launch", "--dry-run", *SITE, "--nodelist", "hosts.txt/", "sanity"], 2, "a host file must be an absolute"),
    (["launch", "--dry-run", *SITE, "--image", "", "sanity"], 2, "--image is empty"),
    (["launch", "--dry-run", *SITE, "--image", "x.sif\n", "sanity"], 2, "--image 'x.sif\\n': control characters"),
    (["launch", "--dry-run", *SITE, "--repeat", "0", "sanity"], 2, "--repeat must be at least 1, got 0"),
    (["launch", "--dry-run", *SITE, "--repeat", "-3", "sanity"], 2, "--repeat must be at least 1, got -3"),
    (["launch", "--dry-run", *SITE, "-N", "abc", "sanity"], 2, "Invalid value for '--nodes'"),
    (["launch", "--dry-run", *SITE, "--ntasks-per-node", "1e3", "sanity"], 2, "Invalid value for '--ntasks-per-node'"),
    (["launch", "--dry-run", *SITE, "--per-gpu", "sanity"], 2, "--per-gpu needs GPUs"),
    (["launch", "--dry-run", *SITE, "sanity", "x=1"], 2, "unknown variable 'x' for payload sanity"),
    (["launch", "--dry-run", *SITE, "sanity", "=1"], 2, "payload argument '=1': expected var=value"),
    (["launch", "--dry-run", *SITE, "--env", "=x", "sanity"], 2, "--env '=***': expected KEY=VALUE"),
    (["launch", "--dry-run", *SITE, "--env", "HPCAI_TEST_NEVER_SET", "sanity"], 2, "not set in this environment"),
    (["launch", "--dry-run", *SITE, "--env", "A;B=1", "sanity"], 2, "--env 'A;B=***': expected KEY=VALUE"),
    (["launch", "--dry-run", *SITE, "--bind", "/a:/b:/c", "sanity"], 2, "--bind '/a:/b:/c': expected"),
    (["launch", "--dry-run", *SITE, "--bind", "/a\n:/b", "sanity"], 2, "--bind '/a\\n:/b': expected"),
    (["launch", "--dry-run", *SITE, "--bind", "/a,rel", "sanity"], 2, "--bind '/a,rel': expected"),
    (["launch", "--dry-run", "--site", "generic-slurm", "sanity"], 2, "Missing option '--image'"),
    (["launch", "--dry-run", *SITE], 2, "no payload given; valid:"),
    (["launch", "--dry-run", *SITE, "--cmd"], 2, "--cmd needs a command after `--`"),
    (["launch", "--dry-run", *SITE, "--site", "../../etc/passwd", "sanity"], 2, "unknown site '../../etc/passwd'"),
    (["launch", "--dry-run", *SITE, "../payloads/sanity"], 2, "unknown payload '../payloads/sanity'"),
    (["launch", "--site", "local", "--runtime", "apptainer", "--image", "/no/such.sif", "--cmd", "--", "true"], 2,
     "image not found: /no/such.sif"),
    (["submit", "--no-submit", *SITE, "--time", "1\n2", "sanity"], 2, "--time '1\\n2': control characters"),
    (["submit", "--no-submit", *SITE, "--account", "a b;c\n", "sanity"], 2, "--account 'a b;c\\n': control"),
    (["submit", "--no-submit", *SITE, "-o", "a\nb", "sanity"], 2, "control characters"),
    (["submit", "--no-submit", *SITE, "--repeat", "0", "sanity"], 2, "--repeat must be at least 1"),
    (["submit", "--no-submit", *SITE, "--wait", "sanity"], 2, "--wait needs a submitted job"),
    (["submit", "--no-submit", *SITE, "--nodelist", "nid[001-", "sanity"], 2, "--nodelist 'nid[001-': not a host"),
    (["submit", "--no-submit", "--site", "local", "--image", "x.sif", "sanity"], 2, "submit needs a Slurm, PBS Pro or Flux site"),
    (["submit", "--no-submit", *SITE, "--srun-arg=--error=/tmp/x", "sanity"], 2, "hpcai sets --error itself"),
    ([*SWEEP, "--partition", "a\nb", "sanity"], 2, "--partition 'a\\nb': control characters"),
    ([*SWEEP, "--time", "soon", "sanity"], 2, "--time 'soon': expected minutes"),
    ([*SWEEP, "nopayload"], 2, "unknown payload 'nopayload'"),
    ([*SWEEP, "--var", "steps=x", "hf-clm"], 2, "variable steps='x': expected an integer"),
    ([*SWEEP, "--srun-arg=--mpi=none", "sanity"], 2, "hpcai sets --mpi itself"),
    ([*SWEEP, "--bind", "rel", "sanity"], 2, "--bind 'rel': expected"),
    ([*SWEEP, "--env", "A B=1", "sanity"], 2, "--env 'A B=***': expected KEY=VALUE"),
    (["sweep", "--no-submit", "--nodes", "99999999", *SITE, "sanity"], 2, "--nodes must be between 1 and 100000"),
    (["sweep", "--no-submit", "--nodes", "1", "--site", "local", "--image", "x", "sanity"], 2,
     "sweep --submit needs a Slurm, PBS Pro or Flux site"),
    (["sweep", "--nodes", "1,x", "--image", "x", "sanity"], 2, "--nodes must be a comma-separated list"),
    (["sweep", "--nodes", "0", "--image", "x", "sanity"], 2, "--nodes must list node counts >= 1"),
    (["sweep", "--nodes", "1", "--var", "novalue", "--image", "x", "sanity"], 2, "--var must look like NAME=V1,V2"),
    (["sweep", "--nodes", "1", "--var", "=1", "--image", "x", "sanity"], 2, "--var must look like NAME=V1,V2"),
    (["sweep", "--nodes", "1", "--repeat", "0", "--image", "x", "sanity"], 2, "--repeat must be at least 1"),
    (["sweep", "--nodes", "1", "--wait", "--image", "x", "sanity"], 2, "--wait waits for submitted jobs"),
    (["results", "show", "/no/such"], 2, "no such run record or folder: /no/such"),
    (["results", "show"], 2, "no such run record or folder: runs"),
    (["results", "compare", "/no/such"], 2, "no such run record or folder: /no/such"),
    (["results", "export", "--csv", "--json", "."], 2, "choose one format"),
    (["results", "export", "--csv", "/no/such"], 2, "no such run record or folder"),
    (["results", "plot", "--output", "x.png", "."], 2, "no run records"),
    (["results", "parse", "--payload", "nccl-tests", "/no/such.log"], 2, "no such log file: /no/such.log"),
    (["results", "parse", "--payload", "nope", "/dev/null"], 2, "unknown parser 'nope'"),
    (["results", "parse", "--payload", "nccl-tests", "/dev/null"], 2, "/dev/null"),
    (["results", "bogus"], 2, "No such command 'bogus'"),
    (["payloads", "show", "../etc"], 2, "unknown payload '../etc'"),
    (["payloads", "show", ""], 2, "unknown payload ''"),
    (["payloads", "list", "--x"], 2, "No such option: --x"),
    (["sites", "show", "../../etc/passwd"], 2, "unknown site '../../etc/passwd'"),
    (["sites", "show", ""], 2, "unknown site ''"),
    (["render", "nope"], 2, "unknown flavor 'nope'"),
    (["render", "pytorch-cpu", "--format", "rpm"], 2, "unknown format 'rpm'"),
    (["render", "pytorch-cpu", "--mpi", "lam"], 2, "unknown MPI 'lam'"),
    (["render", "pytorch-cpu", "--payloads", "nope"], 2, "unknown payload 'nope'"),
    (["build", "nope"], 2, "unknown flavor 'nope'"),
    (["inspect", ""], 2, "inspect needs an image reference"),
    (["versions", "--x"], 2, "No such option: --x"),
    (["doctor", "--x"], 2, "No such option: --x"),
    (["nosuchcommand"], 2, "No such command 'nosuchcommand'"),
    # the error line echoes user input as text: rich markup shown as typed, no terminal control
    (["render", "pytorch-cpu", "--base", "[/]x"], 2, "--base (BASE_IMAGE) '[/]x': expected an image reference"),
    (["launch", "--dry-run", *SITE, "[red]x"], 2, "unknown payload '[red]x'"),
    (["launch", "--dry-run", *SITE, "[bold]"], 2, "unknown payload '[bold]'"),
    (["sites", "show", "\x1b]8;;http://evil\x07x"], 2, "unknown site '\\x1b]8;;http://evil\\x07x'"),
    (["results", "compare", "--min-runs", "0"], 2, "--min-runs': Input should be greater than or equal to 1"),
    (["results", "export"], 2, "choose one format"),
    (["results", "plot", "--output", "x.png", "--kind", "pie"], 2, "unknown plot kind 'pie'"),
    (["payloads", "show", "nope"], 2, "unknown payload 'nope'"),
    (["sites", "show", "nope"], 2, "unknown site 'nope'"),
]


@pytest.mark.parametrize("argv, code, fragment", CASES, ids=[" ".join(c[0])[:80] for c in CASES])
def test_one_line_no_traceback_nothing_written(hpcai_exe, tmp_path, argv, code, fragment):
    res = subprocess.run([*hpcai_exe, *argv], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert res.returncode == code, res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], res.stderr
    assert not list(tmp_path.iterdir()), "a refused command wrote something"


def test_a_file_where_a_folder_belongs(hpcai_exe, tmp_path):
    (tmp_path / "afile").write_text("mine\n")
    (tmp_path / "x.sif").write_text("")
    base = [*hpcai_exe, "launch", "--site", "local", "--runtime", "apptainer", "--image", "x.sif"]
    for out, fragment in ((["-o", "afile"], "--output-dir afile: afile is a file, not a folder"),
                          (["-o", "afile/run"], "--output-dir afile/run: afile is a file, not a folder")):
        res = subprocess.run([*base, *out, "--cmd", "--", "true"], capture_output=True, text=True, cwd=tmp_path)
        assert res.returncode == 2 and res.stderr.strip() == f"error: {fragment}", res.stderr
    (tmp_path / "runs").write_text("")
    res = subprocess.run([*base, "--cmd", "--", "true"], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.strip() == "error: the runs folder runs: runs is a file, not a folder"
    assert (tmp_path / "afile").read_text() == "mine\n"


def test_output_on_a_full_device_is_one_line(hpcai_exe, tmp_path):
    with open("/dev/full", "w") as full:
        res = subprocess.run([*hpcai_exe, "payloads", "list"], stdout=full, stderr=subprocess.PIPE, text=True)
    assert res.returncode == 1 and res.stderr.strip() == "error: No space left on device: the output"


def test_an_unwritable_output_dir_is_one_line(hpcai_exe, tmp_path):
    (tmp_path / "x.sif").write_text("")  # --userns: as root here Apptainer runs only in that mode
    res = subprocess.run([*hpcai_exe, "launch", "--site", "local", "--runtime", "apptainer", "--userns",
                          "--image", "x.sif", "-o", "/proc/hpcai-run", "--cmd", "--", "true"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines() == ["error: No such file or directory: /proc/hpcai-run"]
