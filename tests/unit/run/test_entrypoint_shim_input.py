"""Hostile corpus, round three (issue 25), part H: the entrypoint and the rank shim refuse bad rank
input instead of guessing. `SLURM_PROCID='1 2'` used to be warned about and ignored, so the shim
fell back to rank 0 and two ranks wrote rank-0 files; now every rank and size variable the scripts
read must be a non-negative decimal integer, a size at least 1, a rank below its size, and a host
list short and free of control characters. Each refusal is one line on stderr that starts with
the script's name, exit 2, and nothing run. An empty value is no malformed number: it counts as
unset, as `${VAR:-…}` has it, so the run goes on and an empty RANK is filled in from the launcher.
Under `--per-gpu` the shim keeps every copy's port (base + local rank) within 65535. The shim also refuses a `--forward` that is no
forwarding style, a `--prefix` that is no variable-name word, and an option whose value was left out, and the entrypoint skips (with a warning) a hook whose
file name it cannot turn into its HPCAI_HOOK_<NAME> switch instead of crashing on it.

The lists come from the scripts themselves (HPCAI__RANKS, HPCAI__SIZES, HPCAI__RANK_BOUNDS,
HPCAI__HOSTLISTS in the entrypoint's library, _s_styles in the shim), and a test checks that the scripts
read no number that is not on them. Every case runs under dash and bash.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hpcai.run import hostnames

from hpcai.run.runtimes import RUNTIMES

pytestmark = pytest.mark.hostile

REPO = Path(__file__).resolve().parents[3]
ENTRYPOINT = REPO / "entrypoints" / "hpcai-entrypoint"
LIB = REPO / "entrypoints" / "hpcai-lib.sh"  # the functions and lists the entrypoint and the shim share
SHIM = REPO / "entrypoints" / "hpcai-shim"
HOOKS = REPO / "entrypoints" / "hooks.d"
SHELLS = [s for s in ("dash", "bash") if shutil.which(s)]
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}
SCRIPTS = {"hpcai-entrypoint": ENTRYPOINT, "hpcai-shim": SHIM}


def _words(name: str, path: Path = LIB) -> list[str]:
    """The words of the shell variable NAME='…' assigned in PATH."""
    match = re.search(rf"^{name}='([^']*)'", path.read_text(), re.M)
    assert match, f"no {name}= in {path.name}"
    return match.group(1).split()


RANKS = _words("HPCAI__RANKS")
SIZES = _words("HPCAI__SIZES")
BOUNDS = [(pair.split(":")[0], pair.split(":")[1:]) for pair in _words("HPCAI__RANK_BOUNDS")]
HOSTLISTS = _words("HPCAI__HOSTLISTS")
HOSTLIST_MAX = int(re.search(r"^HPCAI__HOSTLIST_MAX=(\d+)$", LIB.read_text(), re.M).group(1))
STYLES = _words("_s_styles", SHIM)
NUMBERS = RANKS + SIZES
# Numbers the scripts read that are no rank or size: a bad one is still a warning and ignored.
NOT_RANKS = {"SLURM_JOB_ID", "HPCAI_GPUS_PER_NODE", "MASTER_PORT"}
BAD = ["1 2", "-1", "01x", " 1", "1\n2", "9" * 20, "abc"]  # '' is no bad value: it counts as unset
BAD_IDS = ["space", "negative", "trailing-x", "leading-space", "newline", "20-digits", "abc"]
SHOWN = ("RANK", "WORLD_SIZE", "MASTER_ADDR")  # what the payload writes to its marker


@pytest.fixture(params=SHELLS)
def shell(request) -> str:
    return request.param


@pytest.fixture(params=sorted(SCRIPTS))
def script(request) -> str:
    return request.param


def run(shell: str, script: str, env: dict[str, str], workdir: Path, options: tuple[str, ...] = (),
        opts: tuple[str, ...] = (), show: tuple[str, ...] = SHOWN,
        unset: str = "") -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run SCRIPT (entrypoint or shim, the shim with --exit-dir WORKDIR/exit) on a command that
    leaves WORKDIR/ran: the values of SHOW, space-separated (UNSET for an unset one); returns the
    process and that marker."""
    marker = workdir / "ran"
    values = " ".join(f'"${{{name}-{unset}}}"' for name in show)
    cmd = ["sh", "-c", f'printf "{" ".join(["%s"] * len(show))}" {values} >"$0"', str(marker)]
    argv = [shell, *opts, str(SCRIPTS[script])]
    if script == "hpcai-shim":
        (workdir / "exit").mkdir(exist_ok=True)
        argv += [*options, "--exit-dir", str(workdir / "exit"), "--"]
    proc = subprocess.run([*argv, *cmd], env={**BASE_ENV, "TMPDIR": str(workdir), "HOME": str(workdir), **env},
                          capture_output=True, text=True, timeout=30, check=False, cwd=workdir)
    return proc, marker


def assert_refused(proc: subprocess.CompletedProcess[str], script: str, marker: Path, *needles: str) -> None:
    """Exit 2, one line on stderr from SCRIPT naming each needle, nothing on stdout, nothing run."""
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and proc.stderr.endswith("\n"), lines
    assert lines[0].startswith(f"{script}: "), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert proc.stdout == "" and not marker.exists()
    assert not list(marker.parent.glob("exit/*"))  # the shim wrote no exit file


def assert_ran(proc: subprocess.CompletedProcess[str], marker: Path) -> str:
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    return marker.read_text()


# --- the lists are the scripts' whole truth ---------------------------------------------------

def _numbers_read() -> set[str]:
    """Every variable name passed to hpcai_uint, hpcai_first_uint or _rk_from in the scripts."""
    names: set[str] = set()
    for path in [ENTRYPOINT, LIB, SHIM, *sorted(HOOKS.glob("*.sh"))]:
        text = path.read_text().replace("\\\n", " ")
        for line in text.splitlines():
            code = line.split("#", 1)[0]
            for match in re.finditer(r"\b(?:hpcai_uint|hpcai_first_uint|_rk_from)\b((?:\s+[A-Z][A-Z0-9_]*)+)", code):
                names.update(match.group(1).split())
    return names


def test_the_scripts_read_no_number_off_the_lists():
    read = _numbers_read()
    assert {"SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "LOCAL_RANK"} <= read  # the grep works
    assert read - set(NUMBERS) == NOT_RANKS
    # torch's own rank variables: a user's value is kept (hpcai_set) and reaches the payload, so
    # they are on the lists even where no hook reads them as a number
    torch = {v for v in _words("HPCAI__FILL_EMPTY") if not v.startswith("MASTER_")}
    assert torch <= set(NUMBERS)
    assert set(NUMBERS) - read <= torch
    assert len(NUMBERS) == len(set(NUMBERS))


def test_the_issue_s_examples_are_on_the_lists():
    named = {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_NNODES", "OMPI_COMM_WORLD_RANK",
             "PMI_RANK", "PMIX_RANK", "LOCAL_RANK", "RANK", "WORLD_SIZE"}
    assert named <= set(NUMBERS)
    assert {rank for rank, _ in BOUNDS} <= set(RANKS)
    assert {size for _, sizes in BOUNDS for size in sizes} <= set(SIZES)


def test_the_shim_s_styles_are_those_the_runtimes_declare():
    from hpcai.run.runtimes import get_runtime

    assert sorted(STYLES) == sorted({get_runtime(name).shim_forward for name in RUNTIMES})


# --- every rank variable, every bad value, both scripts, both shells --------------------------

@pytest.mark.parametrize("value", BAD, ids=BAD_IDS)
@pytest.mark.parametrize("var", NUMBERS)
def test_a_malformed_rank_variable_is_refused(shell, script, tmp_path, var, value):
    proc, marker = run(shell, script, {var: value}, tmp_path)
    assert_refused(proc, script, marker, f"{var}=", "not a non-negative decimal integer")
    assert "\x1b" not in proc.stderr and "Illegal number" not in proc.stderr


# --- an empty value counts as unset ----------------------------------------------------------

# The launcher each variable belongs to, so that emptying it changes what the run would read;
# torch's own variables (and HPCAI_NNODES) with Slurm's, from which the entrypoint fills them.
SLURM_JOB = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_LOCALID": "1",
             "SLURM_NODEID": "1", "SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "4", "SLURM_NPROCS": "4",
             "SLURM_TASKS_PER_NODE": "2(x2)", "SLURM_NTASKS_PER_NODE": "2", "SLURM_STEP_NUM_NODES": "2",
             "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2", "HPCAI_NNODES": "2",
             "SLURM_JOB_NODELIST": "nid[001234-001235]"}
FAMILIES = {
    "OMPI_": {"OMPI_COMM_WORLD_RANK": "6", "OMPI_COMM_WORLD_LOCAL_RANK": "2", "OMPI_COMM_WORLD_SIZE": "8",
              "OMPI_COMM_WORLD_LOCAL_SIZE": "4"},
    "PMI_": {"PMI_RANK": "3", "PMI_SIZE": "4", "PMI_LOCAL_RANK": "1", "PMI_LOCAL_SIZE": "2",
             "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"},
    "PALS_": {"PALS_RANKID": "5", "PALS_LOCAL_RANKID": "1", "PALS_NODEID": "1", "PMI_SIZE": "8",
              "PMI_LOCAL_SIZE": "4"},
    "PMIX_": {"PMIX_RANK": "2"},
    "FLUX_": {"FLUX_TASK_RANK": "5", "FLUX_TASK_LOCAL_ID": "1", "FLUX_JOB_SIZE": "8", "FLUX_JOB_NNODES": "2"},
}
FAMILIES["MPI_"] = FAMILIES["PMI_"]  # Hydra's MPI_LOCALRANKID, MPI_LOCALNRANKS
TORCH = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")


def family_of(var: str) -> dict[str, str]:
    return next((env for prefix, env in FAMILIES.items() if var.startswith(prefix)), SLURM_JOB)


def test_every_variable_has_a_launcher_that_reads_it():
    for var in NUMBERS:
        assert var in family_of(var) or var in TORCH, var


@pytest.mark.parametrize("var", NUMBERS)
def test_an_empty_rank_variable_counts_as_unset(shell, script, tmp_path, var):
    # RANK='' (or SLURM_PROCID='', …) is what a wrapper's `-e RANK=` or `RANK= cmd` leaves: no
    # number to refuse, but no number either. The run goes on exactly as if it were unset, with
    # at most one warning naming it; torch's own variables are filled in from the launcher.
    env = family_of(var)
    show = (*TORCH, var)
    (tmp_path / "empty").mkdir()
    (tmp_path / "unset").mkdir()
    proc, marker = run(shell, script, {**env, var: ""}, tmp_path / "empty", show=show, unset="(unset)")
    want_proc, want_marker = run(shell, script, {k: v for k, v in env.items() if k != var},
                                 tmp_path / "unset", show=show, unset="(unset)")
    assert (want_proc.returncode, want_proc.stderr) == (0, "")
    assert proc.returncode == 0, proc.stderr
    got = dict(zip(show, marker.read_text().split(" ")))
    want = dict(zip(show, want_marker.read_text().split(" ")))
    if var in TORCH:  # filled in from the launcher, with the one warning that says so
        assert got == want and got[var] not in ("", "(unset)")
        assert proc.stderr == f"hpcai-entrypoint: warning: {var} is set but empty; using {var}='{got[var]}'\n"
    else:  # passed over as unset; the launcher's own variable is left as it is
        assert {**got, var: "(unset)"} == want and got[var] == ""
        assert proc.stderr in ("", f"hpcai-entrypoint: warning: ignoring {var}='': not a non-negative integer\n")
    # the shim named the rank's exit file by the same rank
    assert sorted(p.name for p in (tmp_path / "empty").glob("exit/*")) == \
        sorted(p.name for p in (tmp_path / "unset").glob("exit/*"))


@pytest.mark.parametrize(("procid", "refused"), [("3", False), ("4", True)])
def test_an_empty_size_hands_the_bound_to_the_next_one(shell, script, tmp_path, procid, refused):
    # SLURM_STEP_NUM_TASKS='' is unset: SLURM_PROCID is checked against SLURM_NTASKS, as 30-ranks reads it
    env = {"SLURM_PROCID": procid, "SLURM_STEP_NUM_TASKS": "", "SLURM_NTASKS": "4"}
    proc, marker = run(shell, script, env, tmp_path)
    if refused:
        assert_refused(proc, script, marker, "SLURM_PROCID=4 is not below SLURM_NTASKS=4")
    else:
        assert proc.returncode == 0 and marker.read_text() == "3 4 "
        assert proc.stderr == "hpcai-entrypoint: warning: ignoring SLURM_STEP_NUM_TASKS='': not a non-negative integer\n"


def test_a_malformed_value_is_refused_under_errexit_too(shell, script, tmp_path):
    proc, marker = run(shell, script, {"SLURM_PROCID": "1 2", "SLURM_NTASKS": "4"}, tmp_path, opts=("-e",))
    assert_refused(proc, script, marker, "SLURM_PROCID='1 2'")


# --- sizes and ranks ---------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["0", "000"])
@pytest.mark.parametrize("var", SIZES)
def test_a_size_of_zero_is_refused(shell, script, tmp_path, var, value):
    proc, marker = run(shell, script, {var: value}, tmp_path)
    assert_refused(proc, script, marker, f"{var}={value}", "at least 1")


BOUND_CASES = [(rank, size) for rank, sizes in BOUNDS for size in sizes]


@pytest.mark.parametrize(("rank", "size"), BOUND_CASES, ids=[f"{r}-{s}" for r, s in BOUND_CASES])
@pytest.mark.parametrize(("rank_value", "size_value"), [("4", "4"), ("9", "4"), ("01", "1")])
def test_a_rank_not_below_its_size_is_refused(shell, script, tmp_path, rank, size, rank_value, size_value):
    proc, marker = run(shell, script, {rank: rank_value, size: size_value}, tmp_path)
    assert_refused(proc, script, marker, f"{rank}={int(rank_value)} is not below {size}={size_value}")


@pytest.mark.parametrize(("rank", "size"), BOUND_CASES, ids=[f"{r}-{s}" for r, s in BOUND_CASES])
@pytest.mark.parametrize(("rank_value", "size_value"), [("0", "1"), ("3", "4"), ("003", "04")])
def test_a_rank_below_its_size_runs(shell, script, tmp_path, rank, size, rank_value, size_value):
    proc, marker = run(shell, script, {rank: rank_value, size: size_value}, tmp_path)
    assert_ran(proc, marker)


def test_a_rank_is_checked_against_the_size_it_is_paired_with(shell, script, tmp_path):
    # a step's task count comes before the job's, as in 30-ranks: rank 5 of a 6-task step in an
    # 8-task job runs; rank 6 of it does not, whatever the job's count
    env = {"SLURM_STEP_NUM_TASKS": "6", "SLURM_NTASKS": "8"}
    proc, marker = run(shell, script, {**env, "SLURM_PROCID": "5"}, tmp_path)
    assert_ran(proc, marker)
    marker.unlink()
    for path in (tmp_path / "exit").glob("*"):
        path.unlink()
    proc, marker = run(shell, script, {**env, "SLURM_PROCID": "6"}, tmp_path)
    assert_refused(proc, script, marker, "SLURM_PROCID=6 is not below SLURM_STEP_NUM_TASKS=6")


SLURM = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_NODEID": "0", "SLURM_NNODES": "1",
         "SLURM_JOB_NODELIST": "nid[001234-001235]"}


@pytest.mark.parametrize(("rank", "size"), [("0", "1"), ("3", "4")])
def test_good_slurm_ranks_still_work(shell, script, tmp_path, rank, size):
    env = {**SLURM, "SLURM_PROCID": rank, "SLURM_LOCALID": rank, "SLURM_NTASKS": size,
           "SLURM_TASKS_PER_NODE": size}
    proc, marker = run(shell, script, env, tmp_path)
    assert assert_ran(proc, marker) == f"{rank} {size} nid001234"
    if script == "hpcai-shim":
        assert (tmp_path / "exit" / f"rank-{rank}.exit").read_text() == "0\n"


# --- host lists ---------------------------------------------------------------------------------

HOSTILE_LISTS = {"newline": "nid[001-002]\nevil", "tab": "a\tb", "space": "a b", "escape": "a\x1b[31m",
                 "del": "a\x7f", "cr": "nid001\r"}


@pytest.mark.parametrize("value", list(HOSTILE_LISTS.values()), ids=list(HOSTILE_LISTS))
@pytest.mark.parametrize("var", HOSTLISTS)
def test_a_host_list_with_a_control_character_is_refused(shell, script, tmp_path, var, value):
    proc, marker = run(shell, script, {var: value}, tmp_path)
    assert_refused(proc, script, marker, f"{var}=", "not a host list")
    assert "\x1b" not in proc.stderr and "\r" not in proc.stderr


@pytest.mark.parametrize("var", HOSTLISTS)
def test_a_100_kb_host_list_is_refused(shell, script, tmp_path, var):
    value = "nid[" + "1," * 50_000 + "2]"
    proc, marker = run(shell, script, {var: value}, tmp_path)
    assert_refused(proc, script, marker, f"{var} is {len(value)} characters long", str(HOSTLIST_MAX))
    assert len(proc.stderr) < 200


@pytest.mark.parametrize("var", HOSTLISTS)
def test_a_host_list_of_the_longest_length_runs(shell, script, tmp_path, var):
    value = "nid[" + ",".join(f"{i:06d}" for i in range(0, 2 * 9400, 2))
    value = value[:HOSTLIST_MAX - 1] + "]"
    assert len(value) == HOSTLIST_MAX
    proc, marker = run(shell, script, {var: value}, tmp_path)
    assert assert_ran(proc, marker).endswith(" nid000000")


def test_the_host_list_bound_sits_below_slurm_s_own_ceiling():
    # Slurm sets no environment string of 128 KiB or more (MAX_ENV_STRLEN); the whole of a
    # 9,408-node machine is 18 bytes compressed, and 9,000 isolated 6-digit nodes fit the bound.
    assert len("nid[" + ",".join("0" * 6 for _ in range(9000)) + "]") < HOSTLIST_MAX < 128 * 1024


# --- --per-gpu: every copy's port is a port --------------------------------------------------------

def per_gpu(shell: str, env: dict[str, str], workdir: Path, *options: str):
    return run(shell, "hpcai-shim", env, workdir, options=("--per-gpu", *options), show=("MASTER_PORT",))


def node_ports(shell: str, tmp_path: Path, env: dict[str, str], copies: int, *options: str) -> list[int]:
    """The ports of a node's COPIES per-GPU copies (Slurm local ranks 0..COPIES-1)."""
    ports = []
    for local in range(copies):
        workdir = tmp_path / f"copy-{local}"
        workdir.mkdir()
        env_rank = {**env, "SLURM_PROCID": str(local), "SLURM_LOCALID": str(local), "SLURM_NODEID": "0",
                    "SLURM_NTASKS": str(copies)}
        proc, marker = per_gpu(shell, env_rank, workdir, *options)
        ports.append(int(assert_ran(proc, marker)))
    return ports


@pytest.mark.parametrize("copies", [1, 4, 8])
@pytest.mark.parametrize("job_id", ["4242", "4528", "4531", "4532", "4535", "9071", "9" * 18])
def test_per_gpu_ports_from_the_job_id_stay_below_65536(shell, tmp_path, job_id, copies):
    # Under sbatch hpcai.plan does not know the job id, so the shim alone keeps 61000 + id % 4536
    # + local rank a port: the base moves down, the same on every copy, only when it must.
    env = {"SLURM_JOB_ID": job_id, "SLURM_TASKS_PER_NODE": str(copies)}
    ports = node_ports(shell, tmp_path, env, copies)
    base = 61000 + int(job_id) % 4536
    if base + copies - 1 <= 65535:
        assert ports[0] == base  # enroot's rule, as hpcai.plan computes it when it knows the id
    assert ports[0] == hostnames.master_port(job_id, copies=copies)  # one rule: plan and shim agree
    assert ports == list(range(ports[0], ports[0] + copies))
    assert 61000 <= ports[0] and ports[-1] <= 65535


def test_per_gpu_ports_fit_with_no_local_size_known(shell, tmp_path):
    # no tasks-per-node: each copy bounds its own port by its local rank
    env = {"SLURM_JOB_ID": "4535", "SLURM_PROCID": "3", "SLURM_LOCALID": "3", "SLURM_NTASKS": "4"}
    proc, marker = per_gpu(shell, env, tmp_path)
    assert 61000 <= int(assert_ran(proc, marker)) <= 65535


@pytest.mark.parametrize("how", ["env", "--port"])
def test_a_chosen_per_gpu_port_that_fits_is_kept(shell, tmp_path, how):
    env = {"SLURM_TASKS_PER_NODE": "4", "SLURM_JOB_ID": "4535"}
    options = ("--port", "65532") if how == "--port" else ()
    if how == "env":
        env["MASTER_PORT"] = "65532"
    assert node_ports(shell, tmp_path, env, 4, *options) == [65532, 65533, 65534, 65535]


@pytest.mark.parametrize("how", ["env", "--port"])
@pytest.mark.parametrize("local", [0, 3])
def test_a_chosen_per_gpu_port_past_65535_is_refused_on_every_copy(shell, tmp_path, how, local):
    # MASTER_PORT=65533 with 4 copies on a node: the last would get 65536. Every copy of the node
    # refuses alike (not only the one past the end), before anything runs.
    env = {"SLURM_JOB_ID": "4242", "SLURM_PROCID": str(local), "SLURM_LOCALID": str(local),
           "SLURM_NTASKS": "4", "SLURM_TASKS_PER_NODE": "4"}
    options = ("--port", "65533") if how == "--port" else ()
    if how == "env":
        env["MASTER_PORT"] = "65533"
    proc, marker = per_gpu(shell, env, tmp_path, *options)
    assert_refused(proc, "hpcai-shim", marker, "MASTER_PORT=65533 + local rank 3 is 65536, past 65535",
                   "at most 65532")


@pytest.mark.parametrize(("env", "needle"), [
    ({"MASTER_PORT": "0"}, "MASTER_PORT=0 is not a port"),
    ({"MASTER_PORT": "65536"}, "MASTER_PORT=65536 + local rank 0 is 65536, past 65535"),
    ({"MASTER_PORT": "9" * 18}, f"MASTER_PORT={'9' * 18} + local rank 0"),
    ({"LOCAL_RANK": "40000"}, "MASTER_PORT=29500 + local rank 40000 is 69500, past 65535"),  # torch's default
], ids=["zero", "65536", "18-digits", "default-port"])
def test_a_per_gpu_port_out_of_range_is_refused(shell, tmp_path, env, needle):
    proc, marker = per_gpu(shell, env, tmp_path)
    assert_refused(proc, "hpcai-shim", marker, needle)


def test_without_per_gpu_the_port_is_left_as_it_is(shell, tmp_path):
    proc, marker = run(shell, "hpcai-shim", {"MASTER_PORT": "65535", "LOCAL_RANK": "3"}, tmp_path,
                       show=("MASTER_PORT",))
    assert assert_ran(proc, marker) == "65535"


# --- the shim's options -------------------------------------------------------------------------

def shim(shell: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([shell, str(SHIM), *args], env={**BASE_ENV, **(env or {})}, capture_output=True,
                          text=True, timeout=30, check=False)


@pytest.mark.parametrize("style", ["bogus", "docker", "", "Flags", "flags env", "flags\n", "../x"])
def test_a_bogus_style_is_refused_naming_the_styles(shell, tmp_path, style):
    marker = tmp_path / "ran"
    proc = shim(shell, "--forward", style, "--exit-dir", str(tmp_path), "--", "touch", str(marker))
    assert proc.returncode == 2 and not marker.exists() and list(tmp_path.iterdir()) == []
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hpcai-shim: ")
    if style:
        assert lines[0].endswith(": one of " + " ".join(STYLES))
    else:
        assert lines[0] == "hpcai-shim: option --forward needs a value"


@pytest.mark.parametrize("prefix", ["apptainer", "APPTAINER_X", "A B", "$(touch x)", "X\n"])
def test_a_prefix_that_is_no_name_word_is_refused(shell, tmp_path, prefix):
    """--prefix becomes part of variable names the shim sets with eval: capital letters only."""
    marker = tmp_path / "ran"
    proc = shim(shell, "--forward", "env", "--prefix", prefix, "--", "touch", str(marker))
    assert proc.returncode == 2 and not marker.exists() and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("hpcai-shim: bad --prefix ")


def test_env_forwarding_needs_its_prefix(shell, tmp_path):
    marker = tmp_path / "ran"
    proc = shim(shell, "--forward", "env", "--", "touch", str(marker))
    assert (proc.returncode, proc.stderr) == (2, "hpcai-shim: --forward env needs --prefix (APPTAINER or SINGULARITY)\n")
    assert not marker.exists()


@pytest.mark.parametrize("style", STYLES)
def test_every_style_is_accepted(shell, style):
    # --cleanup with `true` as the engine: the style is read, nothing is launched
    prefix = ["--prefix", "APPTAINER"] if style == "env" else []
    proc = shim(shell, "--forward", style, *prefix, "--cleanup", "hpcai.run=r1", "--", "true")
    assert (proc.returncode, proc.stderr) == (0, "")


VALUE_OPTIONS = re.search(r"^\s*(--forward \|[^)]*)\)$", SHIM.read_text(), re.M).group(1).replace("|", " ").split()
EMPTY_IS_NONE = {"--suffix", "--master-addr", "--port"}  # '' there means "not given"
LEFT_OUT = [(option, left_out) for option in VALUE_OPTIONS
            for left_out in (["--"], ["", "--"], ["--log-dir", "LOGS", "--"])
            if not (option in EMPTY_IS_NONE and left_out[0] == "")
            and not (option == "--start" and left_out[0] == "--log-dir")]  # a --start token may be --nv


@pytest.mark.parametrize(("option", "left_out"), LEFT_OUT,
                         ids=[f"{o}-{'empty' if a[0] == '' else a[0]}" for o, a in LEFT_OUT])
def test_an_option_without_its_value_is_refused(shell, tmp_path, option, left_out):
    marker = tmp_path / "ran"
    args = [a.replace("LOGS", str(tmp_path / "logs")) for a in left_out]
    proc = shim(shell, option, *args, "touch", str(marker))
    assert (proc.returncode, proc.stderr) == (2, f"hpcai-shim: option {option} needs a value\n")
    assert not marker.exists() and list(tmp_path.iterdir()) == []


def test_exit_dir_left_out_at_the_end_is_refused(shell):
    proc = shim(shell, "--forward", "flags", "--exit-dir")
    assert (proc.returncode, proc.stderr) == (2, "hpcai-shim: option --exit-dir needs a value\n")


@pytest.mark.parametrize("option", sorted(EMPTY_IS_NONE))
def test_an_empty_override_means_none(shell, tmp_path, option):
    marker = tmp_path / "ran"
    proc = shim(shell, option, "", "--", "touch", str(marker))
    assert (proc.returncode, proc.stderr) == (0, "") and marker.exists()


def test_a_start_token_may_be_an_option(shell):
    proc = shim(shell, "--forward", "env", "--prefix", "APPTAINER", "--start", "--nv", "--stop-instances", "x", "--",
                "true")
    assert (proc.returncode, proc.stderr) == (0, "")


def test_a_bad_option_with_a_control_character_is_one_line(shell):
    proc = shim(shell, "--x\n\x1b[31m", "--", "true")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "\x1b" not in proc.stderr


# --- hook file names ---------------------------------------------------------------------------

BAD_HOOKS = {"10-my hook.sh": "RAN_SPACE", "20-a*.sh": "RAN_GLOB", "25-$(touch PWNED).sh": "RAN_SUBST",
             "26-a\nb.sh": "RAN_NEWLINE"}
GOOD_HOOKS = {"30-ok.sh": "RAN_OK", "40 x*-fine.sh": "RAN_NUMBER_PART"}  # NAME is "ok", "fine"


@pytest.mark.parametrize("opts", [(), ("-e",)], ids=["plain", "errexit"])
def test_a_hook_name_with_a_space_or_glob_is_skipped_with_a_warning(shell, tmp_path, opts):
    hooks = tmp_path / "hooks dir*"  # the folder's own name is hostile too
    hooks.mkdir()
    for name, var in {**BAD_HOOKS, **GOOD_HOOKS, "my hook.sh": "RAN_NOT_A_HOOK"}.items():
        (hooks / name).write_text(f"export {var}=1\n")
    proc = subprocess.run([shell, *opts, str(ENTRYPOINT), "sh", "-c", "env"], cwd=tmp_path,
                          env={**BASE_ENV, "HPCAI_HOOKS_DIR": str(hooks)},
                          capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    ran = {line.split("=")[0] for line in proc.stdout.splitlines() if line.startswith("RAN_")}
    assert ran == set(GOOD_HOOKS.values())
    shown = ["'10-my hook.sh'", "'20-a*.sh'", "'25-$(touch PWNED).sh'", "'26-a\\nb.sh'"]
    assert proc.stderr.splitlines() == [
        f"hpcai-entrypoint: warning: skipping hook {name}: a hook is named NN-NAME.sh, NAME of letters, "
        "digits, '-' and '_'" for name in shown]
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "PWNED).sh").exists()
