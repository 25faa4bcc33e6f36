"""Real image builds on the local Docker engine (classic builder), then checks inside the image.

The session fixture `pytorch_cpu_image` (tests/conftest.py) runs `hpcai build pytorch-cpu` once
on the local Debian base; these tests inspect that image, rebuild after touching one payload
file (the stack layers must come from the cache), build an -ss image from a site-libraries
folder, and break a download's checksum on purpose.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from imagebuild import pip_build_inputs

import hpcai.payloads

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def docker_run(image: str, *argv: str, entrypoint: str | None = None) -> subprocess.CompletedProcess:
    cmd = ["docker", "run", "--rm"]
    if entrypoint is not None:
        cmd += ["--entrypoint", entrypoint]
    return subprocess.run([*cmd, image, *argv], capture_output=True, text=True, timeout=300, check=False)


def test_image_has_mpi_libfabric_and_the_framework(pytorch_cpu_image):
    mpi = docker_run(pytorch_cpu_image, "mpirun", "--version")
    assert mpi.returncode == 0, mpi.stderr
    assert "Open MPI" in mpi.stdout
    fi = docker_run(pytorch_cpu_image, "fi_info", "--version")
    assert fi.returncode == 0, fi.stderr
    assert re.search(r"libfabric: \d+\.\d+", fi.stdout)
    torch = docker_run(pytorch_cpu_image, "python", "-c", "import torch, sys; print(torch.__version__, sys.prefix)")
    assert torch.returncode == 0, torch.stderr
    assert "+cpu" in torch.stdout and "/opt/hpcai/venv" in torch.stdout


def test_image_has_no_toolchain_and_no_build_leftovers(pytorch_cpu_image):
    res = docker_run(pytorch_cpu_image, "-c",
                     "command -v gcc cc c++ make ld; ls -d /opt/hpcai-build /usr/include/mpi.h 2>/dev/null; "
                     "echo PIP_CERT=${PIP_CERT:-}; echo LD=$LD_LIBRARY_PATH",
                     entrypoint="/bin/sh")
    assert res.stdout.splitlines() == ["PIP_CERT=", "LD=/opt/hpcai/lib"], res.stdout
    # Not in a lower layer either: the final stage never copies the CA bundle or the wheelhouse.
    history = subprocess.run(["docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}", pytorch_cpu_image],
                             capture_output=True, text=True, check=True).stdout
    assert "ca-bundle" not in history and "wheelhouse" not in history, history


def test_bind_destinations_default_suite_and_self_test(pytorch_cpu_image):
    # Empty mount points for the host's libraries (a read-only SquashFS cannot get new ones).
    res = docker_run(pytorch_cpu_image, "-c",
                     "find /host | sort; echo SUITE=$HPCAI_DEFAULT_SUITE; echo PLUGIN=${NCCL_NET_PLUGIN-unset}",
                     entrypoint="/bin/sh")
    labels = json.loads(subprocess.run(["docker", "image", "inspect", "--format", "{{json .Config.Labels}}",
                                        pytorch_cpu_image], capture_output=True, text=True, check=True).stdout)
    mpi = ["/host/mpi", *(f"/host/mpi/dep{n}" for n in range(4)), "/host/mpi/lib"]  # the MPI swap's
    assert res.stdout.splitlines() == ["/host", "/host/lib", *mpi, "/host/usr",
                                       f"SUITE={labels['hpcai.payloads']}", "PLUGIN=unset"], res.stdout
    # What the def's %test runs, through the entrypoint as `apptainer test` would.
    check = docker_run(pytorch_cpu_image, "/opt/hpcai/bin/hpcai-bench", "--self-test")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "self-test: ok   import torch" in check.stdout and "FAIL" not in check.stdout


def test_labels_via_inspect(pytorch_cpu_image, hpcai):
    res = hpcai("inspect", pytorch_cpu_image, "--json")
    assert res.exit_code == 0, res.stderr
    labels = json.loads(res.stdout)
    assert labels["hpcai.flavor"] == "pytorch-cpu"
    assert labels["hpcai.mpi"] == "ompi" and labels["hpcai.ofi"] == "1"
    assert labels["hpcai.payloads"].split(",")[0] == "sanity"
    assert labels["hpcai.component.framework"].startswith("torch==")
    assert labels["org.opencontainers.image.base.name"] == "debian:bookworm-slim"
    assert re.match(r"\d{4}-\d\d-\d\dT", labels["hpcai.build-date"])
    table = hpcai("inspect", pytorch_cpu_image)
    assert "hpcai.flavor" in table.stdout
    bad = hpcai("inspect", "hpcai/does-not-exist:0")
    assert bad.exit_code == 2 and "no image 'hpcai/does-not-exist:0'" in bad.stderr


@pytest.fixture
def payload_copy(tmp_path: Path, monkeypatch) -> Path:
    """A private copy of the payloads tree that the CLI (in-process) uses instead of the repo's."""
    root = tmp_path / "payloads"
    shutil.copytree(hpcai.payloads.payloads_root(), root, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(hpcai.payloads, "payloads_root", lambda: root)
    return root


def _steps(log: Path) -> list[tuple[str, bool]]:
    """(step text, came from cache) for each builder step in a build log."""
    steps: list[tuple[str, bool]] = []
    for line in log.read_text().splitlines():
        m = re.match(r"^Step \d+/\d+ : (.*)$", line)
        if m:
            steps.append((m.group(1), False))
        elif "Using cache" in line and steps:
            steps[-1] = (steps[-1][0], True)
    return steps


def test_rebuild_after_touching_a_payload_file_reuses_the_stack(pytorch_cpu_image, payload_copy, hpcai,
                                                               tmp_path, monkeypatch):
    monkeypatch.setenv("HPCAI_WORK_DIR", str(tmp_path / "work"))
    run_script = payload_copy / "sanity" / "sanity.py"
    # a mark of this run: the same touch in an earlier run left its layer in Docker's cache, which
    # a COPY of the same content reuses (content-addressed), so a fixed mark is "copied anew" once
    mark = f"touched by test_build_docker {uuid.uuid4().hex}"
    run_script.write_text(run_script.read_text() + f"\n# {mark}\n")
    res = hpcai("build", "pytorch-cpu", *pip_build_inputs(), "--tag", "hpcai-test/cache:touched")
    assert res.exit_code == 0, res.stderr
    log = next((tmp_path / "work" / "logs").glob("*.log"))
    steps = _steps(log)
    first_payload_copy = next(i for i, (text, _) in enumerate(steps) if text.startswith("COPY payloads/"))
    before = steps[:first_payload_copy]
    assert all(cached for text, cached in before if not text.startswith("FROM")), \
        [t for t, c in before if not c]
    assert not steps[first_payload_copy][1]  # the touched payload folder is copied anew
    touched = docker_run("hpcai-test/cache:touched", "tail", "-n1", "/opt/hpcai/payloads/sanity/sanity.py",
                         entrypoint="")
    assert mark in touched.stdout
    subprocess.run(["docker", "rmi", "hpcai-test/cache:touched"], capture_output=True, check=False)


def test_hpc_libs_build_yields_ss_image_with_the_libraries(pytorch_cpu_image, hpcai, tmp_path, monkeypatch):
    monkeypatch.setenv("HPCAI_WORK_DIR", str(tmp_path / "work"))
    libs = tmp_path / "ss11-libs"
    libs.mkdir()
    real = sorted(Path("/usr/lib/x86_64-linux-gnu").glob("libfabric.so.1*"))
    if real:  # a real shared object when the host has one, else a stand-in file
        shutil.copy(real[-1], libs / "libfabric.so.1")
    else:
        (libs / "libfabric.so.1").write_bytes(b"\x7fELF stand-in")
    (libs / "libcxi.so.1").write_bytes(b"\x7fELF stand-in")
    res = hpcai("build", "pytorch-cpu", *pip_build_inputs(), "--hpc-libs", str(libs))
    assert res.exit_code == 0, res.stderr
    tag = res.stdout.strip().splitlines()[-1]
    assert re.match(r"^hpcai/pytorch-cpu-hpc-ss:bookworm-slim-\w+$", tag), tag
    # The -ss image shares every layer of the -hpc image up to the site libraries.
    steps = _steps(next((tmp_path / "work" / "logs").glob("*.log")))
    libs_copy = next(i for i, (text, _) in enumerate(steps) if text.startswith("COPY hpc-libs/"))
    assert all(cached for text, cached in steps[:libs_copy] if not text.startswith("FROM")), \
        [t for t, c in steps[:libs_copy] if not c]
    inside = docker_run(tag, "-c", "ls /opt/hpcai/hpc-libs; echo LD=$LD_LIBRARY_PATH", entrypoint="/bin/sh")
    assert "libfabric.so.1" in inside.stdout and "libcxi.so.1" in inside.stdout
    assert "LD=/opt/hpcai/hpc-libs:/opt/hpcai/lib" in inside.stdout
    labels = json.loads(hpcai("inspect", tag, "--json").stdout)
    assert labels["hpcai.hpc-libs"] == "/opt/hpcai/hpc-libs"
    subprocess.run(["docker", "rmi", tag], capture_output=True, check=False)


def test_checksum_mismatch_fails_the_build_naming_the_file(pytorch_cpu_image, payload_copy, hpcai,
                                                          tmp_path, monkeypatch):
    """A payload hook downloads OSU through the shared helper; the air-gapped sources folder
    holds a tampered tarball of that name: the build must stop, exit 2, and name the file."""
    monkeypatch.setenv("HPCAI_WORK_DIR", str(tmp_path / "work"))
    probe = payload_copy / "fetch-probe"
    probe.mkdir()
    (probe / "payload.toml").write_text('description = "fetch probe"\nflavors = ["*"]\ngeometry = "single"\n'
                                        'downloads = ["osu-micro-benchmarks"]\n'
                                        '[install."*"]\nbuild = "build.sh"\n[run]\ncommand = ["true"]\n')
    (probe / "build.sh").write_text('#!/bin/bash\nset -euo pipefail\n'
                                    '"$HPCAI_FETCH" "$OSU_MICRO_BENCHMARKS_URL" "$OSU_MICRO_BENCHMARKS_SHA256"\n')
    sources = tmp_path / "sources"
    sources.mkdir()
    (sources / "osu-micro-benchmarks-7.5.2.tar.gz").write_bytes(b"not the real tarball\n")
    res = hpcai("build", "pytorch-cpu", *pip_build_inputs(), "--payloads", "fetch-probe",
                "--sources", str(sources), "--tag", "hpcai-test/mismatch:1")
    assert res.exit_code == 2, res.stderr
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("error: checksum mismatch for osu-micro-benchmarks-7.5.2.tar.gz: expected 618de3d0")
    assert "log: " in line


def test_failed_step_names_the_step_and_shows_the_log_tail(pytorch_cpu_image, payload_copy, hpcai,
                                                           tmp_path, monkeypatch):
    monkeypatch.setenv("HPCAI_WORK_DIR", str(tmp_path / "work"))
    probe = payload_copy / "fail-probe"
    probe.mkdir()
    (probe / "payload.toml").write_text('description = "fails"\nflavors = ["*"]\ngeometry = "single"\n'
                                        '[install."*"]\nbuild = "build.sh"\n[run]\ncommand = ["true"]\n')
    (probe / "build.sh").write_text('#!/bin/bash\necho "fail-probe: something went wrong here" >&2\nexit 3\n')
    res = hpcai("build", "pytorch-cpu", *pip_build_inputs(), "--payloads", "fail-probe", "--tag", "hpcai-test/fail:1")
    assert res.exit_code == 1
    last = res.stderr.strip().splitlines()[-1]
    assert re.match(r"^error: build failed at step \d+/\d+ \(payload fail-probe \(build\)\); full log: .+\.log$", last)
    assert "fail-probe: something went wrong here" in res.stderr  # the log tail
    assert "Traceback" not in res.stderr


def test_tensorflow_cpu_image(tensorflow_cpu_image):
    res = docker_run(tensorflow_cpu_image, "python", "-c", "import tensorflow as tf; print('tf', tf.__version__)")
    assert res.returncode == 0, res.stderr[-2000:]
    assert re.search(r"^tf 2\.\d+", res.stdout, re.M)
    assert docker_run(tensorflow_cpu_image, "fi_info", "--version").returncode == 0


@pytest.mark.docker
@pytest.mark.slow
def test_horovod_build_runs_hvd_synthetic_under_mpirun(pytorch_cpu_image, hpcai, tmp_path, monkeypatch):
    """Horovod 0.28.1 from its checksummed sdist (C++17 patch), built into the CPU image, runs the
    real hvd-synthetic payload on 2 ranks (about 4 min of compiling on 2 idle cores)."""
    monkeypatch.setenv("HPCAI_WORK_DIR", str(tmp_path / "work"))
    res = hpcai("build", "pytorch-cpu", *pip_build_inputs(), "--horovod", "1",
                "--payloads", "sanity,hvd-synthetic", "--tag", "hpcai-test/hvd:1")
    assert res.exit_code == 0, res.stderr[-3000:]
    run = docker_run("hpcai-test/hvd:1", "python", "-c", "import horovod, horovod.torch; print(horovod.__version__)")
    assert run.returncode == 0 and run.stdout.strip() == "0.28.1", run.stdout + run.stderr[-3000:]
    run = subprocess.run(["docker", "run", "--rm", "-e", "HPCAI_BENCH_PROFILE=quick", "hpcai-test/hvd:1",
                          "mpirun", "--allow-run-as-root", "-np", "2", "/opt/hpcai/bin/hpcai-bench",
                          "hvd-synthetic"], capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    total = re.search(r"^Total img/sec on 2 CPU\(s\): ([\d.]+) \+-([\d.]+)$", run.stdout, re.M)
    assert total and float(total.group(1)) > 0, run.stdout[-3000:]
    assert '"payload": "hvd-synthetic"' in run.stdout and '"status": "PASS"' in run.stdout