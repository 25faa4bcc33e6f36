"""Runtimes: exact token lists, and hostile strings passing through as single, unchanged tokens."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from hpcai.errors import UsageError
from hpcai.run.runtimes import RUNTIMES, ContainerSpec, get_runtime
from hpcai.run.runtimes.docker import SECCOMP_PROFILE

HOSTILE = ["a b", "it's", 'say "hi"', "x; rm -rf /", "$(id)", "`id`", "line1\nline2", "--", "*"]


def spec(**kw):
    base = dict(image="/img dir/x.sif", command=("/opt/hpcai/bin/hpcai-bench", "osu", "size=1M"),
                payload=("osu", "size=1M"), binds=(("/a", "/a"), ("/opt/cray/lf", "/host/lib")),
                env=(("NCCL_SOCKET_IFNAME", "hsn0,hsn1"), ("Q", "$(id)")), gpu="nvidia")
    base.update(kw)
    return ContainerSpec(**base)


def test_apptainer_exec_env_through_apptainerenv():
    assert get_runtime("apptainer").argv(spec()) == [
        "env", "APPTAINERENV_NCCL_SOCKET_IFNAME=hsn0,hsn1", "APPTAINERENV_Q=$(id)",
        "apptainer", "exec", "--containall", "--cleanenv", "--nv",
        "--bind", "/a", "--bind", "/opt/cray/lf:/host/lib", "/img dir/x.sif",
        "/opt/hpcai/bin/hpcai-entrypoint", "/opt/hpcai/bin/hpcai-bench", "osu", "size=1M"]


def test_singularity_run_uses_runscript_and_its_prefix():
    argv = get_runtime("singularity").argv(spec(apptainer_command="run", containall=False, gpu="amd", env=()))
    assert argv == ["singularity", "run", "--cleanenv", "--rocm", "--bind", "/a",
                    "--bind", "/opt/cray/lf:/host/lib", "/img dir/x.sif", "osu", "size=1M"]


def test_run_mode_falls_back_to_exec_for_raw_commands():
    argv = get_runtime("apptainer").argv(spec(apptainer_command="run", payload=(), env=(),
                                              command=("hostname",)))
    assert argv[:2] == ["apptainer", "exec"] and argv[-2:] == ["/opt/hpcai/bin/hpcai-entrypoint", "hostname"]


def test_charliecloud():
    assert get_runtime("charliecloud").argv(spec(entrypoint="")) == [
        "ch-run", "-b", "/a", "-b", "/opt/cray/lf:/host/lib", "--set-env", "--env-no-expand",
        "--set-env=NCCL_SOCKET_IFNAME=hsn0,hsn1", "--set-env=Q=$(id)", "/img dir/x.sif", "--",
        "/opt/hpcai/bin/hpcai-bench", "osu", "size=1M"]


def test_charliecloud_image_env_only_when_the_image_has_one():
    argv = get_runtime("charliecloud").argv(spec(env=(), binds=(), image_env=False))
    assert argv[:3] == ["ch-run", "/img dir/x.sif", "--"]


def test_docker_and_podman():
    s = spec(image="img:1", name="hpcai-r-0", labels=(("hpcai.run", "r"),), secret_names=("HF_TOKEN",))
    assert get_runtime("docker").argv(s) == [
        "docker", "run", "--rm", "--network", "host", "--ipc", "host", "--pid", "host",
        "--security-opt", f"seccomp={SECCOMP_PROFILE}", "--name=hpcai-r-0",
        "--label", "hpcai.run=r", "--gpus", "all", "-v", "/a:/a", "-v", "/opt/cray/lf:/host/lib",
        "-e", "NCCL_SOCKET_IFNAME=hsn0,hsn1", "-e", "Q=$(id)", "-e", "HF_TOKEN",
        "img:1", "/opt/hpcai/bin/hpcai-bench", "osu", "size=1M"]
    podman = get_runtime("podman").argv(s)
    assert podman[0] == "podman" and podman[podman.index("--device") + 1] == "nvidia.com/gpu=all"


def test_docker_without_entrypoint_overrides_it():
    argv = get_runtime("docker").argv(spec(image="img", entrypoint="", command=("sh", "-c", "echo $RANK"),
                                           env=(), binds=(), gpu="none"))
    assert argv[-5:] == ["--entrypoint", "sh", "img", "-c", "echo $RANK"]


# every runtime that wraps the command (a plugin of srun puts its values in srun's environment)
WRAPPING = [n for n in RUNTIMES if get_runtime(n).step(ContainerSpec(image="/img.sqsh", command=("true",))) is None]


@pytest.mark.parametrize("name", WRAPPING)
def test_hostile_arguments_stay_single_tokens(name):
    """Hostile words stay one token each; a value with a line break is kept as one token too, or,
    where the runtime writes it into a file line (enroot's environment file), refused by name."""
    runtime = get_runtime(name)
    argv = runtime.argv(spec(command=("/bin/echo", *HOSTILE), env=(("V", "a b;$(x)"),)))
    assert argv[-len(HOSTILE):] == HOSTILE
    assert any(t.endswith("V=a b;$(x)") for t in argv)
    try:
        argv = runtime.argv(spec(command=("/bin/echo",), env=(("V", "a b;$(x)\n"),)))
    except UsageError as exc:
        assert str(exc).startswith("--env V ") and "\n" not in str(exc).rstrip("\n")
    else:
        assert any(t.endswith("V=a b;$(x)\n") for t in argv)


def test_unknown_runtime_lists_choices():
    with pytest.raises(UsageError, match="unknown runtime 'rkt'; valid: apptainer, ") as err:
        get_runtime("rkt")
    assert all(name in str(err.value) for name in ("charliecloud", "docker", "podman", "singularity"))


# --- Apptainer's mode: --userns, and check_mode's view of this host ------------------------------

def test_apptainer_userns_comes_first_in_exec_and_in_the_instance_start():
    app = get_runtime("apptainer")
    assert app.argv(spec(userns=True, env=()))[:4] == ["apptainer", "exec", "--userns", "--containall"]
    assert app.group_start(spec(userns=True))[:6] == ["apptainer", "-q", "instance", "start", "--userns",
                                                      "--containall"]
    peer = app.argv(spec(userns=True, peers=2, env=()))  # a rank in the node's instance asks for it too
    assert peer[:5] == ["apptainer", "exec", "--userns", "--cleanenv", "instance://{group}"]
    assert "--userns" not in app.argv(spec()) and "--userns" not in app.group_start(spec())


def _dry_run_argv(hpcai, *options):
    import json

    res = hpcai("launch", "--dry-run", "--json", "--runtime", "apptainer", "--image", "/images/x.sif", *options)
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)["argv"]


def _start_tokens(argv):
    return [token for i, token in enumerate(argv) if i and argv[i - 1] == "--start"]


def test_userns_option_reaches_exec_in_a_dry_run(hpcai):
    argv = _dry_run_argv(hpcai, "--site", "local", "--userns", "--cmd", "--", "true")
    i = argv.index("apptainer")
    assert argv[i:i + 4] == ["apptainer", "exec", "--userns", "--containall"]
    assert "--userns" not in _dry_run_argv(hpcai, "--site", "local", "--cmd", "--", "true")


def test_userns_option_reaches_the_instance_start_and_the_ranks_exec(hpcai):
    """A node's MPI ranks share one instance: --userns in its start tokens and in each rank's exec."""
    argv = _dry_run_argv(hpcai, "--site", "generic-slurm", "--ntasks-per-node", "2", "--userns", "mpi-allreduce")
    assert _start_tokens(argv)[:5] == ["apptainer", "-q", "instance", "start", "--userns"]
    i = argv.index("--", argv.index("--exit-dir"))
    tail = argv[i + 1:]
    assert tail[tail.index("apptainer"):][:4] == ["apptainer", "exec", "--userns", "--cleanenv"]
    assert "instance://{group}" in tail
    without = _dry_run_argv(hpcai, "--site", "generic-slurm", "--ntasks-per-node", "2", "mpi-allreduce")
    assert _start_tokens(without)[:5] == ["apptainer", "-q", "instance", "start", "--containall"]
    assert "--userns" not in without


def test_the_site_asks_for_userns_and_no_userns_overrides_it(hpcai, site_path, monkeypatch):
    monkeypatch.setenv("HPCAI_SITE_PATH", site_path("nosetuid", 'backend = "srun"\nruntime = "apptainer"\n'
                                                                 'apptainer_userns = true\n'))
    site = ("--site", "nosetuid", "--ntasks-per-node", "2", "mpi-allreduce")
    assert _start_tokens(_dry_run_argv(hpcai, *site))[4] == "--userns"
    assert "--userns" not in _dry_run_argv(hpcai, "--no-userns", *site)


CAP_STATUS = "Name:\tpython3\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapBnd:\t{bnd}\n"


@pytest.mark.parametrize("bounding, missing", [
    ("000001fffeffffff", ["CAP_SYS_RESOURCE"]),  # these VMs: root lacks CAP_SYS_RESOURCE
    ("000001ffffffffff", []),
    ("000000fffeffffff", ["CAP_SYS_RESOURCE", "CAP_CHECKPOINT_RESTORE"]),
    ("00000000a80425fb", None),  # a container's default set: many
])
def test_root_caps_missing_reads_the_bounding_set(tmp_path, monkeypatch, bounding, missing):
    from hpcai.run.runtimes import apptainer

    status = tmp_path / "status"
    status.write_text(CAP_STATUS.format(bnd=bounding))
    monkeypatch.setattr(apptainer.os, "geteuid", lambda: 0)
    got = apptainer.root_caps_missing(str(status))
    if missing is None:
        assert "CAP_SYS_ADMIN" in got and "CAP_CHOWN" not in got and len(got) > 20
    else:
        assert got == missing


def test_root_caps_missing_is_empty_for_users_and_unreadable_files(tmp_path, monkeypatch):
    from hpcai.run.runtimes import apptainer

    status = tmp_path / "status"
    status.write_text(CAP_STATUS.format(bnd="000001fffeffffff"))
    monkeypatch.setattr(apptainer.os, "geteuid", lambda: 1000)  # a user: Apptainer picks its own mode
    assert apptainer.root_caps_missing(str(status)) == []
    monkeypatch.setattr(apptainer.os, "geteuid", lambda: 0)
    for text in ("Name:\tx\n", "CapBnd:\tnot-hex\n", "CapBnd:\n"):
        status.write_text(text)
        assert apptainer.root_caps_missing(str(status)) == []
    assert apptainer.root_caps_missing(str(tmp_path / "absent")) == []


def _proc_sys(tmp_path, **values):
    for name, value in values.items():
        path = tmp_path / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{value}\n")
    return str(tmp_path)


@pytest.mark.parametrize("uid, values, why", [
    (0, {"user__max_user_namespaces": 63711}, ""),
    (0, {}, ""),  # nothing to read: no reason to refuse
    (0, {"user__max_user_namespaces": 0}, "user namespaces are switched off (sysctl user.max_user_namespaces = 0)"),
    (1000, {"user__max_user_namespaces": 0}, "user namespaces are switched off"),
    (1000, {"kernel__unprivileged_userns_clone": 0},
     "unprivileged user namespaces are switched off (sysctl kernel.unprivileged_userns_clone = 0)"),
    (0, {"kernel__unprivileged_userns_clone": 0}, ""),  # root is not unprivileged
    (1000, {"kernel__unprivileged_userns_clone": 1, "user__max_user_namespaces": 10}, ""),
])
def test_userns_problem_reads_the_sysctls(tmp_path, monkeypatch, uid, values, why):
    from hpcai.run.runtimes import apptainer

    monkeypatch.setattr(apptainer.os, "geteuid", lambda: uid)
    got = apptainer.userns_problem(_proc_sys(tmp_path, **values))
    assert got.startswith(why) if why else got == ""


def test_check_mode_names_the_fix_in_one_line(monkeypatch):
    import shutil

    from hpcai.run.runtimes import apptainer

    app = get_runtime("apptainer")
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(apptainer, "root_caps_missing", lambda: ["CAP_SYS_RESOURCE"])
    monkeypatch.setattr(apptainer, "userns_problem", lambda: "")
    with pytest.raises(UsageError) as err:
        app.check_mode(spec())
    assert str(err.value) == ("apptainer as root without --userns needs every capability, and this host's bounding "
                              "set lacks CAP_SYS_RESOURCE: run in user-namespace mode with --userns (or "
                              "apptainer_userns = true in the site file)")
    app.check_mode(spec(userns=True))  # the mode that runs here
    monkeypatch.setattr(apptainer, "userns_problem", lambda: "user namespaces are switched off (x)")
    with pytest.raises(UsageError) as err:
        app.check_mode(spec(userns=True))
    assert str(err.value).startswith("apptainer --userns (user-namespace mode) cannot run here: user namespaces are "
                                     "switched off (x); ask for setuid mode instead (--no-userns")
    monkeypatch.setattr(shutil, "which", lambda name: None)  # not installed here: the nodes' ranks say
    app.check_mode(spec(userns=True))
    app.check_mode(spec())


def test_every_runtime_declares_the_one_contract():
    """Issue 28, item 2: every registered runtime is a Runtime, whose defaults answer each optional
    question (step, group_start, check_mode, prepare, joins, launcher_env, fabric_hooks), so no
    module of the launcher probes a runtime with hasattr/getattr."""
    import re
    from pathlib import Path

    from hpcai.run.runtimes import RUNTIMES, ContainerSpec, Runtime, get_runtime

    spec = ContainerSpec(image="x", command=("true",))
    for name in RUNTIMES:
        runtime = get_runtime(name)
        assert isinstance(runtime, Runtime) and runtime.name == name
        assert runtime.binary and isinstance(runtime.launcher_env, Mapping)
    docker = get_runtime("docker")
    assert (docker.step(spec), docker.group_start(spec), docker.prepare("x"), docker.check_mode(spec)) == (None, [], [], None)
    assert not docker.joins and not docker.fabric_hooks and dict(docker.launcher_env) == {}
    assert get_runtime("charliecloud").joins and get_runtime("apptainer").groups_any_ranks
    assert get_runtime("ce").fabric_hooks and get_runtime("enroot").launcher_env
    run = Path(__file__).resolve().parents[3] / "launcher" / "hpcai" / "run"
    probes = [f"{p.name}: {line.strip()}" for p in run.rglob("*.py") for line in p.read_text().splitlines()
              if re.search(r"(hasattr|getattr)\(runtime\b", line)]
    assert probes == []


def test_doctor_rows_come_from_the_registries():
    """`hpcai doctor` checks every launcher and runtime binary the registries name, with the hint
    each declares; a plugin of srun (pyxis, ce) is srun's row. A new runtime needs no doctor edit."""
    from hpcai.cli.doctor import checks
    from hpcai.run.backends import BACKENDS, get_backend
    from hpcai.run.runtimes import RUNTIMES, get_runtime

    rows = {what: (how, hint) for what, how, hint in checks()}
    for name in RUNTIMES:
        runtime = get_runtime(name)
        assert runtime.binary in rows, name
        assert runtime.doctor_hint or runtime.binary == "srun", name
    for name in BACKENDS:
        backend = get_backend(name)
        assert not backend.binary or rows[backend.binary] == (f"cmd:{backend.binary}", backend.doctor_hint)
    assert rows["apptainer"][0] == "apptainer:apptainer" and rows["ch-run"][0] == "cmd:ch-run"
    assert len(rows) == len(checks())  # one row per binary
