"""The in-image runner hpcai-bench, run for real as a subprocess on this host.

Payload folders here are small real programs written by the test (python one-liners), plus the
real `sanity` payload, which needs only the standard library. HPCAI_PAYLOADS_DIR and HPCAI_PREFIX
point the runner at them instead of /opt/hpcai.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcai.payloads import payloads_root

RUNNER = payloads_root() / "_runner" / "hpcai-bench"

GOOD = '''
description = "prints a number"
sanity = ['^speed: ']
[run]
command = ["{python}", "-c", "import sys; print('speed: ' + sys.argv[1]); open('{out}/r.json','w').write('{\\"a\\": {\\"b\\": 7}}')", "{value}"]
[vars]
value = { default = 42.0, help = "what to print" }
[profiles.quick]
value = 3
[metrics.speed]
regex = '^speed: ([\\d.]+)'
unit = "x/s"
headline = true
[metrics.from_file]
file = "r.json"
key = "a.b"
'''

INSANE = '''
description = "exits 0 but prints the wrong thing"
sanity = ['^all good$']
[run]
command = ["{python}", "-c", "print('speed: 1')"]
[metrics.speed]
regex = '^speed: ([\\d.]+)'
headline = true
'''

NEEDS = '''
description = "needs a module nobody has"
requires.modules = ["no_such_module_hpcai"]
sanity = ['x']
[run]
command = ["{python}", "-c", "print('x')"]
[metrics.x]
regex = '(x)'
'''


@pytest.fixture
def image(tmp_path):
    """A fake /opt/hpcai: payloads folder and a prefix whose venv python is this interpreter."""
    root = tmp_path / "payloads"
    for name, text in (("good", GOOD), ("insane", INSANE), ("needs", NEEDS)):
        (root / name).mkdir(parents=True)
        (root / name / "payload.toml").write_text(text)
    shutil.copytree(payloads_root() / "sanity", root / "sanity")
    prefix = tmp_path / "prefix"
    (prefix / "venv" / "bin").mkdir(parents=True)
    os.symlink(sys.executable, prefix / "venv" / "bin" / "python")
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "WORLD_SIZE",
                        "HPCAI_BENCH_PROFILE", "HPCAI_DEFAULT_SUITE", "HPCAI_OUTPUT_DIR", "SLURM_NTASKS")}
    env.update(HPCAI_PAYLOADS_DIR=str(root), HPCAI_PREFIX=str(prefix))

    def run(*args, **extra):
        return subprocess.run([sys.executable, str(RUNNER), *args], capture_output=True, text=True,
                              env=dict(env, **extra), timeout=120)
    return run


def results(stdout):
    return [json.loads(line.split(" ", 1)[1]) for line in stdout.splitlines()
            if line.startswith("HPCAI_RESULT ")]


def test_one_payload_passes_with_metrics_from_regex_and_file(image):
    res = image("good", "value=12.5")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "speed: 12.5" in res.stdout  # the payload's own output is passed through
    assert "hpcai-bench: good speed = 12.5 x/s (higher is better) [headline]" in res.stdout
    (r,) = results(res.stdout)
    assert r["status"] == "PASS" and r["metrics"] == {"speed": 12.5, "from_file": 7.0}
    assert r["vars"] == {"value": "12.5"}


def test_profile_from_flag_or_environment(image):
    assert results(image("--profile", "quick", "good").stdout)[0]["metrics"]["speed"] == 3.0
    assert results(image("good", HPCAI_BENCH_PROFILE="quick").stdout)[0]["metrics"]["speed"] == 3.0


def test_unknown_variable_is_exit_2_listing_valid_ones(image):
    res = image("good", "speed=1")
    assert res.returncode == 2
    assert res.stderr.strip() == "hpcai-bench: error: unknown variable 'speed' for payload good; valid: value"
    res = image("good", "value=fast")
    assert res.returncode == 2 and "variable value='fast': expected a number" in res.stderr


def test_unknown_payload_lists_the_image_contents(image):
    res = image("nccl-tests")
    assert res.returncode == 2
    assert "unknown payload 'nccl-tests'; valid: good, insane, needs, sanity" in res.stderr


def test_failed_sanity_fails_the_run(image):
    res = image("insane")
    assert res.returncode == 1
    assert "hpcai-bench: insane sanity: missing ['^all good$']" in res.stdout
    assert results(res.stdout)[0]["status"] == "FAIL"


def test_missing_requirement_fails_when_asked_for_and_skips_in_the_suite(image):
    res = image("needs")
    assert res.returncode == 1
    assert results(res.stdout)[0]["reason"] == "not in this image: no_such_module_hpcai"
    suite = image(HPCAI_DEFAULT_SUITE="sanity good needs")
    assert suite.returncode == 0, suite.stdout
    assert [r["status"] for r in results(suite.stdout)] == ["PASS", "PASS", "SKIP"]


def test_default_suite_runs_sanity_first_and_prints_a_table(image):
    res = image()
    assert [r["payload"] for r in results(res.stdout)] == ["sanity", "good", "insane", "needs"]
    assert res.returncode == 1  # "insane" fails, so the suite does
    table = res.stdout[res.stdout.index("payload "):].splitlines()
    assert table[0].split() == ["payload", "status", "headline", "value", "unit", "seconds"]
    assert table[2].split()[:5] == ["sanity", "PASS", "world_size", "1", "ranks"]
    assert table[3].split()[:5] == ["good", "PASS", "speed", "42", "x/s"]
    assert table[4].split()[:2] == ["insane", "FAIL"]


def test_only_rank_0_judges_and_reports(image):
    res = image("good", RANK="1", WORLD_SIZE="2")
    assert res.returncode == 0
    assert "speed: 42" in res.stdout and "HPCAI_RESULT" not in res.stdout
    res = image("insane", RANK="3")
    assert res.returncode == 0  # exit status is all a non-zero rank contributes


def test_real_sanity_payload_reports_rank_and_libraries(image):
    res = image("sanity", RANK="0", WORLD_SIZE="4", LOCAL_RANK="0")
    assert res.returncode == 0, res.stdout
    assert "hpcai-sanity: rank=0 local_rank=0 world_size=4 host=" in res.stdout
    assert "hpcai-sanity: rank=0 libfabric=" in res.stdout and "hpcai-sanity: rank=0 mpi=" in res.stdout
    assert results(res.stdout)[0]["metrics"] == {"world_size": 4.0}


def test_list_json_and_output_dir(image, tmp_path):
    listing = json.loads(image("--list", "--json").stdout)
    good = next(e for e in listing if e["name"] == "good")
    assert good["vars"] == {"value": 42.0} and good["headline"] == "speed"
    out = tmp_path / "run"
    res = image("good", HPCAI_OUTPUT_DIR=str(out))
    assert res.returncode == 0 and json.loads((out / "good" / "r.json").read_text()) == {"a": {"b": 7}}


def test_bad_arguments(image):
    assert image("--frobnicate").returncode == 2
    res = image("good", "=3")
    assert res.returncode == 2 and "expected var=value, got '=3'" in res.stderr
    assert "hpcai-bench NAME [var=value ...]" in image("--help").stdout


def test_self_test_checks_framework_mpi_and_fabric_by_environment(image):
    res = image("--self-test", HPCAI_FRAMEWORK="none", HPCAI_MPI="none", HPCAI_WITH_OFI="0")
    assert res.returncode == 0 and res.stdout == ""
    res = image("--self-test", HPCAI_FRAMEWORK="pytorch_missing", HPCAI_MPI="none", HPCAI_WITH_OFI="1")
    if Path("/usr/lib/x86_64-linux-gnu/libfabric.so.1").exists():
        assert res.returncode == 0 and "self-test: ok   libfabric load" in res.stdout
    else:
        assert res.returncode == 1 and "self-test: FAIL libfabric load" in res.stdout


def test_self_test_loads_the_net_plugin_it_finds(image, tmp_path):
    """Any libnccl-net*.so under $HPCAI_PREFIX/lib is dlopen'ed (a copy of libz stands in for the
    plugin here: the check is that the runner finds and loads it, not NCCL itself)."""
    import ctypes.util

    libz = ctypes.util.find_library("z")
    real = next((p for p in (Path("/usr/lib/x86_64-linux-gnu") / libz, Path("/lib/x86_64-linux-gnu") / libz)
                 if libz and p.exists()), None)
    if real is None:
        pytest.skip("no libz to stand in for the plugin")
    lib = tmp_path / "prefix" / "lib"
    lib.mkdir()
    shutil.copy(real, lib / "libnccl-net-ofi.so")
    res = image("--self-test", HPCAI_FRAMEWORK="none", HPCAI_MPI="none", HPCAI_WITH_OFI="0",
                HPCAI_PREFIX=str(tmp_path / "prefix"))
    assert res.returncode == 0 and "self-test: ok   load libnccl-net-ofi.so" in res.stdout
    (lib / "libnccl-net.so").write_text("not a library")
    res = image("--self-test", HPCAI_FRAMEWORK="none", HPCAI_MPI="none", HPCAI_WITH_OFI="0",
                HPCAI_PREFIX=str(tmp_path / "prefix"))
    assert res.returncode == 1 and "self-test: FAIL load libnccl-net.so" in res.stdout
