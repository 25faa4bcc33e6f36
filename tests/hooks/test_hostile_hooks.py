"""The entrypoint and its hooks under hostile input (hardening issue): malformed rank numbers,
set-but-empty rank variables, cache and private folders that another user planted, and `sh -e`.

A malformed rank or size (`SLURM_PROCID=abc`, `LOCAL_RANK=1e3`: every variable of the
entrypoint's HPCAI__RANKS and HPCAI__SIZES) is refused before any hook runs: exit 2 and one line,
`hpcai-entrypoint: error: VAR='…' is not a non-negative decimal integer …`, because ranks that
guessed would share rank 0's files (tests/unit/run/test_entrypoint_shim_input.py has the whole matrix).
An empty one counts as unset: one warning, and torch's own (RANK='') are filled in. Any other
malformed number (a job id, GPUs per node) is still one warning and ignored.

The cases run under errexit (`sh -e`, `bash -e`; two that test inheriting it or a site hook's
arithmetic do not): errexit only adds ways to stop, so a case that passes under it passes
without it too, and the rest of tests/hooks runs without it. Each asserts the exit code, the
exact stderr lines (so no "Illegal number", no shell error, nothing but the expected
`hpcai-entrypoint: warning:` lines, or the one `error:` line of a refusal) and that the payload
(`env -0`) ran, or, for a refusal, that neither it nor any hook did.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from hooklib import BASE_ENV, ENTRYPOINT, HOOKS, LIB, REPO, as_root, hook_file

pytestmark = pytest.mark.hostile
ERREXIT = ("-e",)
WARN = "hpcai-entrypoint: warning: "
ERROR = "hpcai-entrypoint: error: "
OTHER_UID = 12345  # owns the planted folders; no such user needs to exist

SLURM = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_PROCID": "5", "SLURM_LOCALID": "1",
         "SLURM_NTASKS": "8", "SLURM_NODEID": "1", "SLURM_TASKS_PER_NODE": "4(x2)",
         "SLURM_JOB_NODELIST": "nid[001234-001235]"}
SLURM_RESULT = {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4",
                "NODE_RANK": "1", "MASTER_ADDR": "nid001234", "MASTER_PORT": str(61000 + 4242 % 4536)}
OMPI = {"OMPI_COMM_WORLD_RANK": "6", "OMPI_COMM_WORLD_LOCAL_RANK": "2",
        "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}
PMI = {"PMI_RANK": "3", "PMI_SIZE": "4", "PMI_LOCAL_RANK": "1", "PMI_LOCAL_SIZE": "2"}
HYDRA = {"PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}
PALS = {"PALS_RANKID": "5", "PALS_LOCAL_RANKID": "1", "PALS_NODEID": "1", "PMI_SIZE": "8",
        "PMI_LOCAL_SIZE": "4"}
FLUX = {"FLUX_TASK_RANK": "5", "FLUX_TASK_LOCAL_ID": "1", "FLUX_JOB_SIZE": "8", "FLUX_JOB_NNODES": "2"}
NO_SLURM_TPN = {k: v for k, v in SLURM.items() if k != "SLURM_TASKS_PER_NODE"}

# (variable, the launcher environment in which it is read)
RANK_INPUTS = [
    ("SLURM_PROCID", SLURM), ("SLURM_LOCALID", SLURM), ("SLURM_NTASKS", SLURM),
    ("SLURM_STEP_NUM_TASKS", {**SLURM, "SLURM_STEP_NUM_TASKS": "6"}),
    ("SLURM_NPROCS", {**{k: v for k, v in SLURM.items() if k != "SLURM_NTASKS"}, "SLURM_NPROCS": "8"}),
    ("SLURM_NODEID", SLURM), ("SLURM_JOB_ID", SLURM),
    ("SLURM_NTASKS_PER_NODE", {**NO_SLURM_TPN, "SLURM_NTASKS_PER_NODE": "4"}),
    ("OMPI_COMM_WORLD_RANK", OMPI), ("OMPI_COMM_WORLD_LOCAL_RANK", OMPI),
    ("OMPI_COMM_WORLD_SIZE", OMPI), ("OMPI_COMM_WORLD_LOCAL_SIZE", OMPI),
    ("PMI_RANK", PMI), ("PMI_SIZE", PMI), ("PMI_LOCAL_RANK", PMI), ("PMI_LOCAL_SIZE", PMI),
    ("MPI_LOCALRANKID", HYDRA), ("MPI_LOCALNRANKS", HYDRA),
    ("PALS_RANKID", PALS), ("PALS_LOCAL_RANKID", PALS), ("PALS_NODEID", PALS),
    ("FLUX_TASK_RANK", FLUX), ("FLUX_TASK_LOCAL_ID", FLUX), ("FLUX_JOB_SIZE", FLUX), ("FLUX_JOB_NNODES", FLUX),
    ("PMIX_RANK", {"PMIX_RANK": "2"}),
]
MALFORMED = ["abc", "1e3"]


def _words(name: str) -> list[str]:
    match = re.search(rf"^{name}='([^']*)'", LIB.read_text(), re.M)
    assert match, name
    return match.group(1).split()


# The rank and size variables hpcai_check_job refuses a malformed value of: all of RANK_INPUTS but
# the job id, which is no rank (a malformed one is still one warning and ignored).
CHECKED = set(_words("HPCAI__RANKS") + _words("HPCAI__SIZES"))
RANK_NUMBERS = [(var, env) for var, env in RANK_INPUTS if var in CHECKED]
OTHER_NUMBERS = [(var, env) for var, env in RANK_INPUTS if var not in CHECKED]
assert [var for var, _ in OTHER_NUMBERS] == ["SLURM_JOB_ID"]
# Stranger values, tried on one variable: each one's quoted form in the warning.
STRANGE = ["-1", "0x10", " 5", "5 ", "+5", "5.0", "9" * 19, "1;reboot", "$(id)",
           "a'b\\c\x1b[31m\n\tz", "7" * 70 + "x"]


def quoted(value: str) -> str:
    """The entrypoint's hpcai_quote, in Python: what a warning shows of a value."""
    out = []
    for i, ch in enumerate(value):
        if i == 64:
            out.append("...")
            break
        if ch in "\\'":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        else:
            out.append(ch if " " <= ch <= "~" else "?")
    return "'" + "".join(out) + "'"


def malformed(var: str, value: str) -> str:
    return f"{WARN}ignoring {var}={quoted(value)}: not a non-negative integer"


def refusal(var: str, value: str) -> str:
    return f"{ERROR}{var}={quoted(value)} is not a non-negative decimal integer (at most 18 digits)"


def run_witnessed(run_entrypoint, env: dict[str, str], hooks: list[str] | None = None, **kwargs):
    """run_entrypoint under errexit with HOOKS (None: every hook of the repository) and a first
    hook, 00-witness, that leaves a file: (run, that file). No file: no hook ran."""
    scratch = Path(tempfile.mkdtemp(prefix="hpcai-witness-"))
    scratch.chmod(0o755)
    hooks_dir = scratch / "hooks"
    hooks_dir.mkdir()
    for src in sorted(HOOKS.glob("*.sh")) if hooks is None else [hook_file(name) for name in hooks]:
        shutil.copy(src, hooks_dir / src.name)
    (hooks_dir / "00-witness.sh").write_text(': >"$HPCAI_TEST_WITNESS"\n')
    witness = scratch / "a-hook-ran"
    try:
        run = run_entrypoint({**env, "HPCAI_HOOKS_DIR": str(hooks_dir), "HPCAI_TEST_WITNESS": str(witness)},
                             opts=ERREXIT, **kwargs)
        return run, witness.exists()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def assert_refused(run, hook_ran: bool, line: str) -> None:
    """Exit 2, exactly LINE on stderr, and neither a hook nor the payload ran."""
    assert run.rc == 2, run.stderr
    assert run.stderr.splitlines() == [line]
    assert (run.stdout, hook_ran) == ("", False)


def assert_clean(run, warnings: list[str], rc: int = 0) -> None:
    """Exit code, exactly these stderr lines, and the payload (`env -0`) ran."""
    assert run.rc == rc, run.stderr
    assert run.stderr.splitlines() == warnings
    assert "Illegal number" not in run.stderr and "Traceback" not in run.stderr
    assert run.env.get("PATH") == BASE_ENV["PATH"], "the payload did not run"


# --- malformed numbers: a rank or size is refused; an empty one, or another number, is one ------
# --- warning and is ignored as if it were unset ----------------------------------------------

_unset_cache: dict[tuple[str, str], dict[str, str]] = {}


def exported_without(run_entrypoint, shell: str, var: str, env: dict[str, str]) -> dict[str, str]:
    key = (shell, var + repr(sorted(env.items())))
    if key not in _unset_cache:
        clean = run_entrypoint({k: v for k, v in env.items() if k != var}, hooks=["ranks"])
        assert (clean.rc, clean.stderr) == (0, "")
        _unset_cache[key] = clean.exported()
    return _unset_cache[key]


@pytest.mark.parametrize("value", MALFORMED)
@pytest.mark.parametrize(("var", "env"), RANK_NUMBERS, ids=[v for v, _ in RANK_NUMBERS])
def test_a_malformed_rank_number_is_refused_before_any_hook(run_entrypoint, var, env, value):
    run, hook_ran = run_witnessed(run_entrypoint, {**env, var: value}, hooks=["ranks"])
    assert_refused(run, hook_ran, refusal(var, value))


@pytest.mark.parametrize("value", MALFORMED)
@pytest.mark.parametrize(("var", "env"), OTHER_NUMBERS, ids=[v for v, _ in OTHER_NUMBERS])
def test_a_malformed_job_id_is_one_warning_and_ignored(run_entrypoint, shell, var, env, value):
    run, hook_ran = run_witnessed(run_entrypoint, {**env, var: value}, hooks=["ranks"])
    assert hook_ran  # the witness works: a run that goes on runs it
    assert_clean(run, [malformed(var, value)])
    got = {k: v for k, v in run.exported().items() if k not in (var, "HPCAI_HOOKS_DIR", "HPCAI_TEST_WITNESS")}
    assert got == exported_without(run_entrypoint, shell, var, env)


@pytest.mark.parametrize(("var", "env"), RANK_INPUTS, ids=[v for v, _ in RANK_INPUTS])
def test_an_empty_rank_number_is_one_warning_and_counts_as_unset(run_entrypoint, shell, var, env):
    # SLURM_PROCID='' is no number to refuse: it is passed over as if unset (${VAR:-…})
    run = run_entrypoint({**env, var: ""}, hooks=["ranks"], opts=ERREXIT)
    assert_clean(run, [malformed(var, "")])
    got = {k: v for k, v in run.exported().items() if k != var}
    assert got == exported_without(run_entrypoint, shell, var, env)


@pytest.mark.parametrize("value", STRANGE)
def test_strange_values_are_quoted_safely_in_the_refusal(run_entrypoint, value):
    run, hook_ran = run_witnessed(run_entrypoint, {**SLURM, "SLURM_PROCID": value}, hooks=["ranks"])
    assert_refused(run, hook_ran, refusal("SLURM_PROCID", value))  # one line, whatever the value holds
    assert "\x1b" not in run.stderr


def test_every_hook_at_once_with_every_rank_number_malformed(run_entrypoint, workdir):
    bad = {var: "1e3" for var, _ in RANK_INPUTS}
    env = {**SLURM, **OMPI, **PMI, **HYDRA, **PALS, **bad, "TMPDIR": str(workdir),
           "HPCAI_HOST_LIB": str(workdir / "absent"), "HPCAI_GPU_VENDOR": "cuda",
           "HPCAI_GPU_BIND": "local-rank", "USER": "bob", "HOME": str(workdir)}
    run, hook_ran = run_witnessed(run_entrypoint, env, hooks=None)
    # one line for the first of them (HPCAI__RANKS order), however many there are
    assert_refused(run, hook_ran, refusal("SLURM_PROCID", "1e3"))
    assert os.listdir(workdir) == []  # no cache or fabric folder was made


@pytest.mark.parametrize(("value", "rank"), [("0", "0"), ("00005", "5"), ("08", "8"),
                                             ("9" * 17 + "8", "9" * 17 + "8")])
def test_well_formed_numbers_pass_as_decimal(run_entrypoint, value, rank):
    # a rank is below its task count: the largest 18-digit count holds the largest 18-digit rank
    env = {**SLURM, "SLURM_PROCID": value, "SLURM_NTASKS": "9" * 18}
    run = run_entrypoint(env, hooks=["ranks"], opts=ERREXIT)
    assert_clean(run, [])
    assert (run.env["RANK"], run.env["WORLD_SIZE"]) == (rank, "9" * 18)


@pytest.mark.parametrize(("spec", "node", "shown"), [
    ("4(x08)", "9", "'4(x08)'"),  # decimal, never octal: 8 nodes of 4, so node 9 is past the end
    ("4(x1e3)", "1", "'4(x1e3)'"),
    ("a\nb", "1", "'a\\nb'"),
])
def test_malformed_tasks_per_node_never_stops_it(run_entrypoint, spec, node, shown):
    env = {**SLURM, "SLURM_TASKS_PER_NODE": spec, "SLURM_NODEID": node}
    run = run_entrypoint(env, hooks=["ranks"], opts=ERREXIT)
    assert_clean(run, [f"{WARN}cannot read tasks per node from SLURM_TASKS_PER_NODE={shown}; "
                       "LOCAL_WORLD_SIZE not set"])
    assert "LOCAL_WORLD_SIZE" not in run.env and run.env["RANK"] == "5"


def test_pbs_job_id_without_a_number_is_ignored(run_entrypoint):
    run = run_entrypoint({**PALS, "PBS_JOBID": "x.server"}, hooks=["ranks"], opts=ERREXIT)
    assert_clean(run, [f"{WARN}ignoring PBS_JOBID='x.server': no job number at its start"])
    assert "MASTER_PORT" not in run.env


NO_LOCAL_RANK = f"{WARN}HPCAI_GPU_BIND=local-rank but no local rank is known; not binding"


@pytest.mark.parametrize(("env", "warnings", "visible"), [
    ({"LOCAL_RANK": "1e3"}, None, None),  # a malformed local rank: refused, nothing bound
    ({"LOCAL_RANK": "", "HPCAI_GPUS_PER_NODE": "4"},  # empty: unset, as without a launcher
     [malformed("LOCAL_RANK", ""), NO_LOCAL_RANK], None),
    ({"LOCAL_RANK": "09", "HPCAI_GPUS_PER_NODE": "08"}, [], "1"),  # decimal, never octal
    ({"LOCAL_RANK": "5", "HPCAI_GPUS_PER_NODE": "four"},
     [malformed("HPCAI_GPUS_PER_NODE", "four")], "5"),
], ids=["malformed-rank", "empty-rank", "octal-looking", "malformed-gpus"])
def test_gpu_binding_with_malformed_numbers(run_entrypoint, env, warnings, visible):
    env = {**env, "HPCAI_GPU_BIND": "local-rank", "HPCAI_GPU_VENDOR": "cuda"}
    if warnings is None:
        run, hook_ran = run_witnessed(run_entrypoint, env, hooks=["gpu"])
        assert_refused(run, hook_ran, refusal("LOCAL_RANK", env["LOCAL_RANK"]))
        return
    run = run_entrypoint(env, hooks=["gpu"], opts=ERREXIT)
    assert_clean(run, warnings)
    assert run.env.get("CUDA_VISIBLE_DEVICES") == visible


# --- set-but-empty rank variables: filled like unset ones, with a warning ----------------------

@pytest.mark.parametrize("var", sorted(SLURM_RESULT))
def test_an_empty_rank_variable_is_filled_with_a_warning(run_entrypoint, var):
    run = run_entrypoint({**SLURM, var: ""}, hooks=["ranks"], opts=ERREXIT)
    value = SLURM_RESULT[var]
    assert_clean(run, [f"{WARN}{var} is set but empty; using {var}='{value}'"])
    assert run.exported() == SLURM_RESULT


def test_an_empty_rank_variable_with_nothing_to_fill_it_stays_quietly(run_entrypoint):
    run = run_entrypoint({"RANK": "", "MASTER_ADDR": ""}, hooks=["ranks"], opts=ERREXIT)
    assert_clean(run, [])
    assert (run.env["RANK"], run.env["MASTER_ADDR"]) == ("", "")


def test_an_empty_master_addr_gets_the_hostname_suffix_like_a_derived_one(run_entrypoint):
    env = {**SLURM, "SLURM_JOB_NODELIST": "local", "MASTER_ADDR": "", "HPCAI_MASTER_ADDR_SUFFIX": "host"}
    run = run_entrypoint(env, hooks=["ranks", "hostname"], opts=ERREXIT)
    assert_clean(run, [f"{WARN}MASTER_ADDR is set but empty; using MASTER_ADDR='local'"])
    assert run.env["MASTER_ADDR"] in {"127.0.0.1", "::1"}


# --- private folders: only this user's, never one that someone else planted --------------------

@pytest.fixture
def shared_tmp(workdir):
    """A TMPDIR like /tmp: sticky and world-writable."""
    tmp = workdir / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    return tmp


def cache_env(tmp: Path, **extra: str) -> dict[str, str]:
    return {**SLURM, "SLURM_JOB_ID": "31", "USER": "bob", "TMPDIR": str(tmp),
            "HOME": str(tmp.parent), "HPCAI_GPU_VENDOR": "cuda", **extra}


def fallback_of(run, base: Path, why: str, uid: int | None = None) -> Path:
    """The mktemp folder named in the one warning about BASE; checks the line exactly."""
    lines = run.stderr.splitlines()
    assert len(lines) == 1, lines
    match = re.fullmatch(re.escape(f"{WARN}{base} {why}; using {base}.") + r"(\w{8}) instead", lines[0])
    assert match, lines[0]
    new = Path(f"{base}.{match.group(1)}")
    assert new.is_dir() and not new.is_symlink()
    owner = os.geteuid() if uid is None else uid
    assert (new.stat().st_uid, new.stat().st_mode & 0o777) == (owner, 0o700)
    return new


def assert_caches_in(run, folder: Path) -> None:
    assert run.rc == 0 and run.env.get("PATH") == BASE_ENV["PATH"], run.stderr
    assert "Illegal number" not in run.stderr
    assert run.exported() == {"CUDA_CACHE_PATH": f"{folder}/cuda-cache",
                              "TRITON_CACHE_DIR": f"{folder}/triton"}


needs_root = pytest.mark.skipif(not as_root(), reason="needs root to plant another user's folder")


@needs_root
@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o700, 0o755])
def test_another_users_cache_folder_is_never_used(run_entrypoint, shared_tmp, mode):
    planted = shared_tmp / "hpcai-bob-31"
    planted.mkdir()
    (planted / "triton").mkdir()
    planted.chmod(mode)
    os.chown(planted, OTHER_UID, OTHER_UID)
    run = run_entrypoint(cache_env(shared_tmp), hooks=["caches"], opts=ERREXIT)
    new = fallback_of(run, planted, "belongs to another user")
    assert_caches_in(run, new)
    assert os.listdir(planted) == ["triton"]


@pytest.mark.parametrize("target", ["own-dir", "missing"])
def test_a_symlink_planted_at_the_cache_folder_is_never_followed(run_entrypoint, shared_tmp, target):
    elsewhere = shared_tmp.parent / "elsewhere"
    if target == "own-dir":
        elsewhere.mkdir(mode=0o700)
    planted = shared_tmp / "hpcai-bob-31"
    planted.symlink_to(elsewhere)
    run = run_entrypoint(cache_env(shared_tmp), hooks=["caches"], opts=ERREXIT)
    new = fallback_of(run, planted, "is a symbolic link")
    assert_caches_in(run, new)
    assert planted.is_symlink() and (not elsewhere.exists() or os.listdir(elsewhere) == [])


@pytest.mark.parametrize("mode", [0o770, 0o720, 0o703, 0o777])
def test_an_own_cache_folder_that_others_can_write_is_not_used(run_entrypoint, shared_tmp, mode):
    own = shared_tmp / "hpcai-bob-31"
    own.mkdir()
    own.chmod(mode)
    run = run_entrypoint(cache_env(shared_tmp), hooks=["caches"], opts=ERREXIT)
    new = fallback_of(run, own, "is writable by group or others")
    assert_caches_in(run, new)
    assert own.stat().st_mode & 0o777 == mode  # left as it was


def test_a_file_at_the_cache_folder_is_not_used(run_entrypoint, shared_tmp):
    planted = shared_tmp / "hpcai-bob-31"
    planted.write_text("not a folder")
    run = run_entrypoint(cache_env(shared_tmp), hooks=["caches"], opts=ERREXIT)
    assert_caches_in(run, fallback_of(run, planted, "is not a folder"))


@pytest.mark.parametrize("mode", [0o700, 0o755])
def test_an_own_private_cache_folder_is_reused_quietly(run_entrypoint, shared_tmp, mode):
    own = shared_tmp / "hpcai-bob-31"
    own.mkdir()
    own.chmod(mode)
    run = run_entrypoint(cache_env(shared_tmp), hooks=["caches"], opts=ERREXIT)
    assert run.stderr == ""
    assert_caches_in(run, own)


@needs_root
def test_an_own_folder_the_owner_cannot_write_is_not_used(run_entrypoint, shared_tmp):
    own = shared_tmp / "hpcai-bob-31"
    own.mkdir(mode=0o500)
    os.chown(own, 65534, 65534)
    run = run_entrypoint(cache_env(shared_tmp, HOME=str(shared_tmp)), hooks=["caches"],
                         opts=ERREXIT, user="65534")
    assert_caches_in(run, fallback_of(run, own, "is not writable by its owner", uid=65534))


def test_no_writable_tmpdir_leaves_the_caches_alone(run_entrypoint, workdir):
    tmp = workdir / "no-such-tmp"
    run = run_entrypoint(cache_env(tmp), hooks=["caches"], opts=ERREXIT)
    assert (run.rc, run.exported()) == (0, {})
    assert run.stderr.splitlines() == [
        f"{WARN}no private folder in {tmp}: {tmp}/hpcai-bob-31 cannot be created, and mktemp "
        "failed; caches stay in their default places"]
    assert run.env.get("PATH") == BASE_ENV["PATH"]


@needs_root
def test_rocm_caches_avoid_a_planted_folder_too(run_entrypoint, shared_tmp):
    planted = shared_tmp / "hpcai-bob-31"
    planted.mkdir(mode=0o777)
    os.chown(planted, OTHER_UID, OTHER_UID)
    run = run_entrypoint(cache_env(shared_tmp, HPCAI_GPU_VENDOR="rocm"), hooks=["caches"], opts=ERREXIT)
    new = fallback_of(run, planted, "belongs to another user")
    assert run.exported() == {"MIOPEN_USER_DB_PATH": f"{new}/miopen-1",
                              "MIOPEN_CUSTOM_CACHE_DIR": f"{new}/miopen-1",
                              "TRITON_CACHE_DIR": f"{new}/triton"}


@pytest.mark.parametrize(("user", "name"), [("../../etc", "hpcai-.._.._etc-31"),
                                            ("a/b c\nd", "hpcai-a_b_c_d-31")])
def test_a_hostile_user_name_never_leads_out_of_tmpdir(run_entrypoint, shared_tmp, user, name):
    run = run_entrypoint(cache_env(shared_tmp, USER=user), hooks=["caches"], opts=ERREXIT)
    assert run.stderr == ""
    assert_caches_in(run, shared_tmp / name)
    assert os.listdir(shared_tmp) == [name]


def test_eight_ranks_racing_agree_on_one_private_folder(shell, shared_tmp, workdir):
    hooks = workdir / "hooks-race"
    hooks.mkdir()
    shutil.copy(hook_file("caches"), hooks)
    for attempt in range(3):
        tmp = shared_tmp / f"round-{attempt}"
        tmp.mkdir()
        procs = []
        for rank in range(8):
            env = {**BASE_ENV, **cache_env(tmp, SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank)),
                   "HPCAI_HOOKS_DIR": str(hooks)}
            procs.append(subprocess.Popen([shell, "-e", str(ENTRYPOINT), "sh", "-c",
                                           'echo "$CUDA_CACHE_PATH"'], env=env, cwd="/",
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        outputs = [p.communicate(timeout=30) for p in procs]
        results = [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs)]
        assert [(rc, err) for rc, _, err in results] == [(0, b"")] * 8
        assert {out for _, out, _ in results} == {f"{tmp}/hpcai-bob-31/cuda-cache\n".encode()}
        assert os.listdir(tmp) == ["hpcai-bob-31"]
        assert (tmp / "hpcai-bob-31").stat().st_mode & 0o777 == 0o700


# The host-fabric hook links the libfabric the payload loads into its private folder: same rule.

def fabric_env(root: Path, **extra: str) -> dict[str, str]:
    lib = root / "host-lib"
    lib.mkdir(exist_ok=True)
    (lib / "libfabric.so.1.22.0").write_bytes(b"\x7fELF fake")
    return {"HPCAI_HOST_LIB": str(lib), "HPCAI_HOST_USR": str(root / "absent"),
            "HPCAI_PREFIX": str(root / "prefix"), "TMPDIR": str(root / "tmp"), "USER": "alice",
            "SLURM_JOB_ID": "5", "SLURM_PROCID": "0", **extra}


@pytest.mark.parametrize("plant", ["symlink", "group-writable", "other-user"])
def test_a_planted_fabric_folder_is_never_used(run_entrypoint, shared_tmp, plant):
    private = shared_tmp / "hpcai-alice-5-0-0"
    why = {"symlink": "is a symbolic link", "group-writable": "is writable by group or others",
           "other-user": "belongs to another user"}[plant]
    if plant == "symlink":
        private.symlink_to(shared_tmp.parent)
    else:
        private.mkdir()
        private.chmod(0o775)
        if plant == "other-user":
            if not as_root():
                pytest.skip("needs root to plant another user's folder")
            os.chown(private, OTHER_UID, OTHER_UID)
    run = run_entrypoint(fabric_env(shared_tmp.parent), hooks=["host-fabric"], opts=ERREXIT)
    new = fallback_of(run, private, why)
    assert run.rc == 0 and run.env["LD_LIBRARY_PATH"].split(":")[0] == str(new)
    assert os.readlink(new / "libfabric.so.1") == str(shared_tmp.parent / "host-lib/libfabric.so.1.22.0")
    assert not (shared_tmp.parent / "libfabric.so.1").exists()


def test_a_hostile_rank_never_becomes_part_of_the_fabric_folder(run_entrypoint, shared_tmp):
    # refused before 10-host-fabric could name a folder after it; nothing made in TMPDIR or above
    run, hook_ran = run_witnessed(run_entrypoint, fabric_env(shared_tmp.parent, SLURM_PROCID="../../x"),
                                  hooks=["host-fabric"], args=["sh", "-c", 'echo "$$ $LD_LIBRARY_PATH"'])
    assert_refused(run, hook_ran, refusal("SLURM_PROCID", "../../x"))
    assert os.listdir(shared_tmp) == [] and sorted(os.listdir(shared_tmp.parent)) == ["host-lib", "tmp"]


def test_an_empty_rank_makes_the_fabric_folder_per_process(run_entrypoint, shared_tmp):
    # SLURM_PROCID='' counts as unset: the folder is keyed by the pid, as outside a job
    run = run_entrypoint(fabric_env(shared_tmp.parent, SLURM_PROCID=""), hooks=["host-fabric"],
                         args=["sh", "-c", 'echo "$$ $LD_LIBRARY_PATH"'], opts=ERREXIT)
    assert run.rc == 0 and run.stderr.splitlines() == [malformed("SLURM_PROCID", "")]
    pid, ld_path = run.stdout.split()
    assert ld_path.split(":")[0] == str(shared_tmp / f"hpcai-alice-5-0-{pid}")


# --- sh -e: the hooks pass under it, and nothing ends the entrypoint silently ------------------

def test_no_launcher_under_errexit(run_entrypoint):
    # the finding: `sh -e hpcai-entrypoint cmd` outside a job stopped with status 1, silently
    run = run_entrypoint({"HPCAI_GPU_VENDOR": "none"}, hooks=None, opts=ERREXIT)
    assert_clean(run, [])


def test_inherited_shellopts_errexit(run_entrypoint, shell):
    # bash takes SHELLOPTS from the environment; dash ignores it
    run = run_entrypoint({**SLURM, "SHELLOPTS": "errexit", "MASTER_PORT": "29500",
                          "HPCAI_GPU_VENDOR": "none"}, hooks=None)
    assert_clean(run, [])
    assert run.env["RANK"] == "5" and run.env["MASTER_PORT"] == "29500"


def test_every_hook_with_user_values_kept_under_errexit(run_entrypoint, workdir):
    # Kept user values (hpcai_set's old status 1) on every path: Slingshot defaults, GPU
    # binding, caches, diagnostics.
    lib = workdir / "hostlib"
    lib.mkdir()
    (lib / "libfabric.so.1.22.0").write_bytes(b"\x7fELF fake")
    (lib / "libcxi.so.1").write_bytes(b"\x7fELF fake")
    plugin = workdir / "prefix/lib/libnccl-net.so"
    plugin.parent.mkdir(parents=True)
    plugin.write_bytes(b"\x7fELF fake")
    kept = {"NCCL_NET": "Socket", "NCCL_SOCKET_IFNAME": "ib0", "FI_HMEM_CUDA_USE_GDRCOPY": "0",
            "CUDA_VISIBLE_DEVICES": "3", "CUDA_CACHE_PATH": "/mine", "TRITON_CACHE_DIR": "/mine",
            "RANK": "5", "MASTER_PORT": "29500", "NCCL_NET_PLUGIN": "/mine.so"}
    env = {**SLURM, **kept, "SLURM_NNODES": "2", "HPCAI_HOST_LIB": str(lib),
           "HPCAI_HOST_USR": str(workdir / "absent"), "HPCAI_PREFIX": str(workdir / "prefix"),
           "TMPDIR": str(workdir), "HPCAI_GPU_VENDOR": "cuda", "HPCAI_GPU_BIND": "local-rank",
           "HPCAI_DEBUG": "1", "HOME": str(workdir)}
    run = run_entrypoint(env, hooks=None, opts=ERREXIT)
    assert run.rc == 0 and run.env.get("PATH") == BASE_ENV["PATH"], run.stderr
    assert {k: run.env[k] for k in kept} == kept
    assert all(line.startswith("hpcai-entrypoint: ") for line in run.stderr.splitlines())
    assert "hpcai-entrypoint: kept  NCCL_NET=Socket  (user value; [nccl-net] would set AWS Libfabric)" \
        in run.stderr.splitlines()


def test_check_under_errexit(run_entrypoint, workdir):
    env = {**SLURM, "HPCAI_HOST_LIB": str(workdir / "absent"), "HPCAI_GPU_VENDOR": "none"}
    run = run_entrypoint(env, args=["--check"], opts=ERREXIT)
    assert (run.rc, run.stderr, run.stdout.splitlines()[-1]) == (0, "", "OK")


def test_a_failing_site_hook_under_errexit_says_so(run_entrypoint, workdir):
    hooks = workdir / "site-hooks"
    hooks.mkdir()
    (hooks / "10-site.sh").write_text("hpcai_set SITE 1\nfalse\nhpcai_set NEVER 1\n")
    run = run_entrypoint({"HPCAI_HOOKS_DIR": str(hooks)}, opts=ERREXIT)
    assert (run.rc, run.stdout) == (1, "")
    assert run.stderr.splitlines() == [
        "hpcai-entrypoint: error: stopped with status 1 in hook site before starting the payload"]


def test_a_site_hook_with_a_bad_number_in_arithmetic_is_never_silent(run_entrypoint, workdir):
    hooks = workdir / "site-hooks"
    hooks.mkdir()
    (hooks / "10-site.sh").write_text('hpcai_set SITE "$((SITE_N + 1))"\n')
    run = run_entrypoint({"HPCAI_HOOKS_DIR": str(hooks), "SITE_N": "1e3"})
    if run.rc == 0:  # bash reports the error and goes on
        assert run.env.get("PATH") == BASE_ENV["PATH"]
    else:  # dash stops the script: Illegal number
        assert run.stderr.splitlines()[-1] == (
            f"hpcai-entrypoint: error: stopped with status {run.rc} in hook site before starting "
            "the payload")


def test_shim_under_errexit_still_writes_the_exit_code(shell, workdir):
    # The shim under `sh -e` on its warning paths (an empty MASTER_ADDR filled; a number that is
    # passed over: hpcai_uint false inside 30-ranks' conditions, hpcai_bad_value, hpcai_quote) and
    # with no rank known (the rank's number falls back to 0), then a payload that fails: the shim
    # must neither stop on the way nor on the payload's status, and must write rank-0.exit.
    # SLURM_PROCID='' (counts as unset, one warning) leaves no rank; SLURM_JOB_ID='../x' is a
    # malformed number that is still ignored, not refused (it is no rank).
    env = {**BASE_ENV, **SLURM, "SLURM_PROCID": "", "SLURM_JOB_ID": "../x", "MASTER_ADDR": ""}
    proc = subprocess.run([shell, "-e", str(REPO / "entrypoints/hpcai-shim"), "--exit-dir",
                           str(workdir), "--master-addr", "10.1.2.3", "--", "sh", "-c",
                           'echo "$RANK $MASTER_ADDR $MASTER_PORT"; exit 3'], env=env, capture_output=True,
                          text=True, timeout=30, check=False)
    assert (proc.returncode, proc.stdout) == (3, " 10.1.2.3 29500\n")
    assert proc.stderr.splitlines() == [
        f"{WARN}MASTER_ADDR is set but empty; using MASTER_ADDR='10.1.2.3'",
        malformed("SLURM_PROCID", ""), malformed("SLURM_JOB_ID", "../x")]
    assert sorted(os.listdir(workdir)) == ["rank-0.exit"]
    assert (workdir / "rank-0.exit").read_text() == "3\n"
