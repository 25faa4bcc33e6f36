"""pyxis and enroot runtimes: exact token lists, the plan's srun line (pyxis's options among srun's
own, the values in srun's environment), hostile values kept as one token or refused in one line,
and `hpcai sqsh`'s bad input. Token tests only: the real runs are tests/integration/test_pyxis_slurm.py."""

from __future__ import annotations

import os

import pytest
from plan_helpers import SHIM_PATH, FakeHost

from hpcai.errors import UsageError
from hpcai.image import sqsh
from hpcai.run.plan import LaunchOptions, plan_launch
from hpcai.run.runtimes import ContainerSpec, StepOptions, get_runtime, step

ENTRY = "/opt/hpcai/bin/hpcai-entrypoint"
BENCH = "/opt/hpcai/bin/hpcai-bench"


def spec(**kw):
    base = dict(image="/img/x.sqsh", command=(BENCH, "osu", "size=1M"), payload=("osu", "size=1M"),
                binds=(("/a", "/a"), ("/opt/cray/lf", "/host/lib:ro")),
                env=(("NCCL_SOCKET_IFNAME", "hsn0,hsn1"), ("Q", "$(id) it's")), secret_names=("HF_TOKEN",))
    base.update(kw)
    return ContainerSpec(**base)


# ---- pyxis: srun options + the in-container command ------------------------------------------------

def test_pyxis_step_options_and_command():
    pyxis = get_runtime("pyxis")
    assert step(pyxis, spec()) == StepOptions(
        options=("--container-image=/img/x.sqsh", "--container-mounts=/a:/a,/opt/cray/lf:/host/lib:ro",
                 "--container-env=NCCL_SOCKET_IFNAME,Q,HF_TOKEN", "--container-writable",
                 "--no-container-entrypoint", "--no-container-mount-home"),
        env=(("NCCL_SOCKET_IFNAME", "hsn0,hsn1"), ("Q", "$(id) it's")))
    assert pyxis.argv(spec()) == [ENTRY, BENCH, "osu", "size=1M"]
    assert pyxis.argv(spec(entrypoint="", command=("hostname",))) == ["hostname"]


def test_pyxis_minimal_and_home_follows_containall():
    options = step(get_runtime("pyxis"), spec(binds=(), env=(), secret_names=(), containall=False))
    assert options.options == ("--container-image=/img/x.sqsh", "--container-writable",
                               "--no-container-entrypoint")


def test_pyxis_relative_sqsh_becomes_absolute_and_uris_pass_verbatim(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pyxis = get_runtime("pyxis")
    assert step(pyxis, spec(image="x.sqsh")).options[0] == f"--container-image={tmp_path}/x.sqsh"
    for uri in ("docker://nvcr.io#nvidia/pytorch:25.06-py3", "dockerd://hpcai/pytorch-cpu:1"):
        assert step(pyxis, spec(image=uri)).options[0] == f"--container-image={uri}"


def test_wrapping_runtimes_have_no_step():
    assert step(get_runtime("apptainer"), spec()) is None and step(get_runtime("enroot"), spec()) is None


@pytest.mark.parametrize("path", ["/a b", "/tab\there", "/back\\slash", "/nl\nx"])
def test_pyxis_and_enroot_refuse_mount_paths_that_split_an_fstab_line(path):
    with pytest.raises(UsageError, match="may not hold spaces"):
        step(get_runtime("pyxis"), spec(binds=((path, "/x"),)))
    with pytest.raises(UsageError, match="may not hold spaces"):
        get_runtime("enroot").argv(spec(binds=(("/x", path),)))


def test_pyxis_labels_refuse_a_comma_and_a_missing_file(tmp_path):
    pyxis = get_runtime("pyxis")
    with pytest.raises(UsageError, match="without ','"):
        pyxis.labels("/a.sqsh,/b.sqsh")
    with pytest.raises(UsageError, match="image not found"):
        pyxis.labels(str(tmp_path / "missing.sqsh"))
    assert pyxis.labels("docker://nvcr.io#nvidia/pytorch:25.06-py3") == {}


# ---- enroot: enroot start ---------------------------------------------------------------------------

def test_enroot_start():
    assert get_runtime("enroot").argv(spec()) == [
        "enroot", "start", "--rw", "--mount", "/a:/a:none:x-create=auto,rbind",
        "--mount", "/opt/cray/lf:/host/lib:none:x-create=auto,rbind,ro",
        "--env", "NCCL_SOCKET_IFNAME=hsn0,hsn1", "--env", "Q=$(id) it's", "--env", "HF_TOKEN",
        "/img/x.sqsh", BENCH, "osu", "size=1M"]


def test_enroot_refuses_a_line_break_in_a_value_and_no_entrypoint():
    enroot = get_runtime("enroot")
    with pytest.raises(UsageError, match="--env Q"):
        enroot.argv(spec(env=(("Q", "a\nb"),)))
    with pytest.raises(UsageError, match="--no-entrypoint"):
        enroot.argv(spec(entrypoint=""))


def test_enroot_image_names(tmp_path):
    enroot = get_runtime("enroot")
    assert enroot.labels("pytorch") == {}  # a container made with `enroot create`
    with pytest.raises(UsageError, match="enroot create"):
        enroot.labels("a/b c")


# ---- the plan: srun line, environment, refusals ---------------------------------------------------

def _plan(tmp_path, **kw):
    kw.setdefault("image", "/img/x.sqsh")
    kw.setdefault("site", "generic-slurm")
    kw.setdefault("runtime", "pyxis")
    kw.setdefault("output_dir", str(tmp_path / "run"))
    kw.setdefault("cmd", ("env",))
    return plan_launch(LaunchOptions(**kw), host=FakeHost(), check=False)


def test_plan_puts_pyxis_options_after_srun_options_and_values_in_srun_env(tmp_path):
    plan = _plan(tmp_path, nodes=2, ntasks_per_node=2, env=("NCCL_DEBUG=INFO", "HF_TOKEN=hf_secret"),
                 binds=("/scratch",))
    argv = plan.argv
    image = argv.index("--container-image=/img/x.sqsh")
    assert argv[0] == "srun" and "--kill-on-bad-exit=1" in argv[:image]
    assert argv[image:] == ["--container-image=/img/x.sqsh", "--container-mounts=/scratch:/scratch",
                            "--container-env=NCCL_DEBUG,HF_TOKEN", "--container-writable",
                            "--no-container-entrypoint", "--no-container-mount-home", ENTRY, "env"]
    assert plan.secret_env["NCCL_DEBUG"] == "INFO" and plan.secret_env["HF_TOKEN"] == "hf_secret"
    assert plan.secret_env["ENROOT_LOGIN_SHELL"] == "n"  # enroot keeps the image's PATH (see enroot.py)
    assert "hf_secret" not in " ".join(argv) and "INFO" not in " ".join(argv)
    assert plan.to_json()["env"]["HF_TOKEN"] != "hf_secret"  # redacted in the record


def test_plan_no_entrypoint_runs_the_shim_inside_the_container(tmp_path):
    plan = _plan(tmp_path, no_entrypoint=True)
    logs = str(tmp_path / "run" / "logs")
    shim_dir = os.path.dirname(SHIM_PATH)
    mounts = next(a for a in plan.argv if a.startswith("--container-mounts="))
    assert mounts == f"--container-mounts={shim_dir}:{shim_dir}:ro,{logs}:{logs}"
    shim = plan.argv.index("/bin/sh")
    assert plan.argv.index("--no-container-entrypoint") < shim
    assert plan.argv[shim:shim + 4] == ["/bin/sh", SHIM_PATH, "--forward", "none"]
    assert plan.argv[-2:] == ["--", "env"]


@pytest.mark.parametrize("backend", ["local", "mpiexec"])
def test_pyxis_needs_srun(tmp_path, backend):
    with pytest.raises(UsageError, match="plugin of srun: use --backend srun"):
        _plan(tmp_path, backend=backend)


def test_pyxis_refuses_energy(tmp_path):
    with pytest.raises(UsageError, match="--energy"):
        _plan(tmp_path, energy=True)


def test_enroot_under_the_local_backend_gets_rank_variables_as_env_flags(tmp_path):
    plan = _plan(tmp_path, site="local", runtime="enroot", ntasks_per_node=2)
    assert [a[:3] for a in plan.rank_argvs] == [["enroot", "start", "--rw"]] * 2
    assert plan.secret_env == {"ENROOT_LOGIN_SHELL": "n"}  # enroot's own setting, in its environment
    for rank, argv in enumerate(plan.rank_argvs):
        assert f"RANK={rank}" in argv and "WORLD_SIZE=2" in argv and argv[-2:] == ["/img/x.sqsh", "env"]


# ---- hpcai sqsh ------------------------------------------------------------------------------------

def test_sqsh_name_and_uri():
    assert sqsh.sqsh_name("hpcai/pytorch-cpu-hpc:bookworm-slim-abc") == "hpcai_pytorch-cpu-hpc_bookworm-slim-abc.sqsh"
    assert sqsh.commands("hpcai/x:1", sqsh.Path("/o/x.sqsh.part"), "podman") == [
        ["enroot", "import", "-o", "/o/x.sqsh.part", "podman://hpcai/x:1"]]


@pytest.mark.parametrize("args, message", [
    (["a b"], "enroot imports NAME[:TAG]"),
    (["img@sha256:abc"], "no digest"),
    (["img:1", "-o", "x.img"], "name it *.sqsh"),
    (["img:1", "-o", "a:b.sqsh"], "without ':'"),
    (["img:1", "--builder", "rkt"], "unknown builder 'rkt'"),
])
def test_sqsh_bad_input_is_one_line_and_exit_2(hpcai, args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = hpcai("sqsh", *args)
    assert res.exit_code == 2, res
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_sqsh_refuses_to_overwrite(hpcai, tmp_path):
    out = tmp_path / "x.sqsh"
    out.write_text("keep")
    res = hpcai("sqsh", "img:1", "-o", str(out))
    assert res.exit_code == 2 and "exists" in res.stderr and out.read_text() == "keep"


def test_sqsh_dry_run_prints_the_enroot_command(hpcai, tmp_path):
    res = hpcai("sqsh", "hpcai/x:1", "-o", str(tmp_path / "x.sqsh"), "--dry-run")
    assert res.exit_code == 0
    assert res.stdout.strip() == f"enroot import -o {tmp_path}/x.sqsh.part dockerd://hpcai/x:1"
