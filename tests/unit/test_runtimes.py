"""Runtimes: exact token lists, and hostile strings passing through as single, unchanged tokens."""

from __future__ import annotations

import pytest

from hpcai.errors import UsageError
from hpcai.run.runtimes import ContainerSpec, get_runtime
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


@pytest.mark.parametrize("name", ["apptainer", "singularity", "charliecloud", "docker", "podman"])
def test_hostile_arguments_stay_single_tokens(name):
    argv = get_runtime(name).argv(spec(command=("/bin/echo", *HOSTILE), env=(("V", "a b;$(x)\n"),)))
    assert argv[-len(HOSTILE):] == HOSTILE
    assert any(t.endswith("V=a b;$(x)\n") for t in argv)


def test_unknown_runtime_lists_choices():
    with pytest.raises(UsageError, match="unknown runtime 'rkt'; valid: apptainer, ") as err:
        get_runtime("rkt")
    assert all(name in str(err.value) for name in ("charliecloud", "docker", "podman", "singularity"))
