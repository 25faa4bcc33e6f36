"""Payload manifests: every shipped manifest is well-formed, and variables validate as documented."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys

import pytest

from hpcai import payloads
from hpcai.errors import UsageError
from hpcai.payloads import load_payload
from hpcai.resources import package_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

NAMES = payloads.available_payloads()
FLAVORS = tomllib.loads(package_file("flavors.toml").read_text())["flavors"]
ROOT = payloads.payloads_root()


def test_every_issue_payload_is_shipped():
    assert NAMES == sorted(["sanity", "mpi-allreduce", "ddp-bench", "hvd-synthetic", "hf-clm",
                            "tf-resnet50", "nccl-tests", "rccl-tests", "osu", "openclip", "mila-suite"])


@pytest.mark.parametrize("name", NAMES)
def test_manifest_loads_and_is_complete(name):
    m = load_payload(name)
    assert m.description and m.geometry in payloads.GEOMETRIES
    assert m.raw["run"]["command"], "a payload must say what it runs"
    assert m.sanity, "a payload must say what a good run prints"
    assert m.headline in {x.name for x in m.metrics}
    assert all(f == "*" or f in FLAVORS for f in m.flavors)
    # every variable's default passes its own validation (type, choices)
    assert set(m.validate_vars({})) == {v.name for v in m.variables}
    for prof in m.raw.get("profiles", {}):
        m.validate_vars({}, profiles=(prof,))


@pytest.mark.parametrize("flavor", sorted(FLAVORS))
def test_default_payloads_support_their_flavor(flavor):
    """Rendering refuses a payload for a flavor it does not support: the defaults must all fit."""
    for name in FLAVORS[flavor]["default_payloads"]:
        assert load_payload(name).supports(flavor), f"{name} vs {flavor}"


def test_gpu_only_payloads_install_only_for_their_family():
    assert load_payload("nccl-tests").install_steps("cuda").build == "build.sh"
    assert load_payload("nccl-tests").install_steps("rocm").build is None
    assert load_payload("rccl-tests").install_steps("rocm").build == "build.sh"
    assert not load_payload("nccl-tests").supports("pytorch-cpu")
    assert not load_payload("openclip").supports("tensorflow-ngc")
    mpi = load_payload("mpi-allreduce")  # Debian's mpi4py on CPU, compiled elsewhere
    assert mpi.install_steps("cpu").runtime == "install-debian.sh" and mpi.install_steps("cpu").build is None
    assert mpi.install_steps("cuda").build == "build-mpi4py.sh"


def test_unknown_variable_lists_valid_ones():
    with pytest.raises(UsageError) as exc:
        load_payload("ddp-bench").validate_vars({"batchsize": 8})
    msg = str(exc.value)
    assert "unknown variable 'batchsize'" in msg
    assert "valid: backend, batch_size, image_size, iters, model, threads, warmup" in msg


@pytest.mark.parametrize("var,value,expect", [
    ("iters", "ten", "expected an integer"),
    ("backend", "mpi", "valid: auto, nccl, gloo"),
])
def test_bad_values_are_usage_errors(var, value, expect):
    with pytest.raises(UsageError, match=expect):
        load_payload("ddp-bench").validate_vars({var: value})


def test_values_layer_defaults_family_profile_then_overrides():
    m = load_payload("ddp-bench")
    assert m.validate_vars({})["image_size"] == "224"
    assert m.validate_vars({}, family="cpu")["image_size"] == "64"
    assert m.validate_vars({}, family="cpu", profiles=("quick",))["image_size"] == "32"
    assert m.validate_vars({"image_size": 48}, family="cpu", profiles=("quick",))["image_size"] == "48"
    assert load_payload("hf-clm").validate_vars({"pretrained": "yes"})["pretrained"] == "true"


def test_command_is_the_in_image_runner_with_overrides():
    m = load_payload("nccl-tests")
    assert m.command({"max_bytes": "1G"}) == ["/opt/hpcai/bin/hpcai-bench", "nccl-tests", "max_bytes=1G"]
    with pytest.raises(UsageError):
        m.command({"maxbytes": "1G"})


def test_benchmark_argv_substitutes_variables():
    argv = load_payload("nccl-tests").benchmark_argv({"collective": "all_gather"})
    assert argv[:7] == ["/opt/hpcai/bin/all_gather_perf", "-b", "1M", "-e", "8G", "-f", "2"]
    argv = load_payload("mpi-allreduce").benchmark_argv()
    assert argv[:2] == ["/opt/hpcai/venv/bin/python", "/opt/hpcai/payloads/mpi-allreduce/allreduce.py"]


def test_malformed_manifest_names_the_problem(tmp_path, monkeypatch):
    bad = tmp_path / "payloads" / "broken"
    bad.mkdir(parents=True)
    (bad / "payload.toml").write_text('description = "x"\n[run]\ncommand = ["{nope}"]\n')
    monkeypatch.setattr(payloads, "payloads_root", lambda: tmp_path / "payloads")
    with pytest.raises(UsageError, match=r"undefined variable \{nope\}"):
        load_payload("broken")
    (bad / "payload.toml").write_text('geometry = "per-socket"\n')
    with pytest.raises(UsageError, match="valid: per-gpu, per-node, single"):
        load_payload("broken")
    with pytest.raises(UsageError, match="unknown payload '_runner'"):
        load_payload("_runner")


def _scripts(suffix):
    return sorted(p for p in ROOT.rglob(f"*{suffix}"))


def test_install_and_run_scripts_are_shellcheck_clean():
    exe = shutil.which("shellcheck") or str(__import__("pathlib").Path(sys.executable).parent / "shellcheck")
    scripts = [str(p) for p in _scripts(".sh")]
    assert len(scripts) >= 8
    res = subprocess.run([exe, "--shell=bash", "-x", "-P", "SCRIPTDIR", *scripts], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout


@pytest.mark.parametrize("path", [ROOT / "_runner" / "hpcai-bench", ROOT / "sanity" / "sanity.py"],
                         ids=lambda p: p.name)
def test_in_image_python_parses_as_python_3_8(path):
    """The runner and sanity run with the base image's Python (Poplar's Ubuntu 20.04 has 3.8)."""
    ast.parse(path.read_text(), feature_version=(3, 8))


@pytest.mark.parametrize("path", _scripts(".py"), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_payload_python_compiles(path):
    compile(path.read_text(), str(path), "exec")


def test_every_referenced_json_config_is_valid():
    import json

    for path in ROOT.rglob("*.json"):
        json.loads(path.read_text())
