"""Real SIFs under the real Apptainer: one converted from the Docker image, one built from the def.

Both behave the same (issue 24): `apptainer run X.sif` runs the baked suite, `apptainer run X.sif
PAYLOAD` one payload, `apptainer run X.sif CMD` a command; `apptainer test` runs %test;
`run-help`/`inspect --helpfile` list the payloads; the labels are the Docker image's. The SIFs come
from the session fixtures in tests/conftest.py (`pytorch_cpu_sif`: `hpcai sif`; `pytorch_cpu_def_sif`:
`hpcai build --builder apptainer`), each made once and cached across sessions. As root on these
machines Apptainer runs a SIF only in user-namespace mode (root's bounding set lacks one capability:
docs/development.md, "Apptainer on the test machine"), hence --userns on every run.
"""

from __future__ import annotations

import json
import subprocess

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(3600)]

ORIGINS = ("converted", "def")
# Labels whose values a def build sets anew: when it ran and from which commit (the cached def SIF
# may come from an earlier commit with the same def and context: its cache key leaves these out).
PER_BUILD = {"hpcai.build-date", "hpcai.git-sha", "org.opencontainers.image.created",
             "org.opencontainers.image.revision"}
OURS = ("hpcai.", "org.opencontainers.")


@pytest.fixture(params=ORIGINS)
def sif(request) -> str:
    """Each test below runs on both SIFs."""
    return request.getfixturevalue("pytorch_cpu_sif" if request.param == "converted" else "pytorch_cpu_def_sif")


def apptainer(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["apptainer", "--quiet", *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


def run(sif_path: str, *args: str, env: tuple[str, ...] = (), timeout: float = 600) -> subprocess.CompletedProcess:
    """`apptainer run --userns [--env K=V…] SIF ARGS`."""
    opts = [arg for item in env for arg in ("--env", item)]
    return apptainer("run", "--userns", *opts, sif_path, *args, timeout=timeout)


def results(stdout: str) -> dict[str, dict]:
    return {r["payload"]: r for r in (json.loads(line.split(" ", 1)[1]) for line in stdout.splitlines()
                                      if line.startswith("HPCAI_RESULT "))}


def sif_labels(sif_path: str) -> dict[str, str]:
    res = apptainer("inspect", "--json", "--labels", sif_path)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["data"]["attributes"]["labels"]


def docker_labels(image: str) -> dict[str, str]:
    res = subprocess.run(["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", image],
                         capture_output=True, text=True, check=True)
    return {k: v for k, v in json.loads(res.stdout).items() if k.startswith(OURS)}


@pytest.mark.apptainer
def test_converted_sif_keeps_every_label(pytorch_cpu_sif, pytorch_cpu_image):
    want = docker_labels(pytorch_cpu_image)
    assert len(want) > 20 and "hpcai.payloads" in want and "hpcai.hpc-libs" in want
    got = sif_labels(pytorch_cpu_sif)
    assert {k: got.get(k) for k in want} == want


@pytest.mark.apptainer
def test_def_sif_has_the_same_labels(pytorch_cpu_def_sif, pytorch_cpu_image):
    """Same keys as the Docker image (empty ones too: hpcai.hpc-libs); same values but for
    PER_BUILD."""
    want = docker_labels(pytorch_cpu_image)
    got = {k: v for k, v in sif_labels(pytorch_cpu_def_sif).items() if k.startswith(OURS)}
    assert sorted(got) == sorted(want)
    assert {k: v for k, v in got.items() if k not in PER_BUILD} == {
        k: v for k, v in want.items() if k not in PER_BUILD}


@pytest.mark.apptainer
def test_no_arguments_run_the_default_suite(sif):
    # HPCAI_DEFAULT_SUITE through --env (it wins over the image's own): the runscript's no-argument
    # path, in seconds; test_def_sif_runs_the_whole_default_suite runs the real suite once.
    res = run(sif, env=("HPCAI_DEFAULT_SUITE=sanity",))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "=== hpcai-bench: sanity:" in res.stdout
    assert results(res.stdout)["sanity"]["status"] == "PASS"


@pytest.mark.apptainer
def test_def_sif_runs_the_whole_default_suite(pytorch_cpu_def_sif):
    """`apptainer run X.sif`, nothing else: every payload of the image's suite, each built by the
    def's own install steps (the converted SIF holds the Docker image's, which
    test_payloads_image.py runs). The payloads' quick profile keeps it near a minute."""
    res = run(pytorch_cpu_def_sif, env=("HPCAI_BENCH_PROFILE=quick",), timeout=1200)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    got = results(res.stdout)
    assert list(got) == ["sanity", "mpi-allreduce", "ddp-bench", "hf-clm", "mila-suite", "megatron-gpt"]
    assert all(r["status"] == "PASS" for r in got.values()), got


@pytest.mark.apptainer
def test_a_payload_name_runs_that_payload(sif):
    res = run(sif, "ddp-bench", "model=mlp", "image_size=16", "batch_size=2", "iters=2", "warmup=1")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "Benchmark: mlp with batch size 2" in res.stdout
    got = results(res.stdout)
    assert list(got) == ["ddp-bench"] and got["ddp-bench"]["status"] == "PASS"
    assert got["ddp-bench"]["vars"]["batch_size"] == "2" and got["ddp-bench"]["metrics"]["ex_per_sec_total"] > 0


@pytest.mark.apptainer
def test_any_other_command_runs_as_a_command(sif):
    res = run(sif, "sh", "-c", "echo hi")
    assert (res.returncode, res.stdout) == (0, "hi\n"), res.stderr
    # Arguments arrive as given: Apptainer's own OCI runscript would `eval` them ($HOME expanded,
    # 'a b' split); the shared %runscript passes them on with "$@".
    res = run(sif, "printf", "%s|", "a b", "v=$HOME", "*")
    assert (res.returncode, res.stdout) == (0, "a b|v=$HOME|*|"), res.stderr


@pytest.mark.apptainer
def test_apptainer_test_runs_the_checks(sif):
    res = apptainer("test", "--userns", sif)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "\nOK\n" in res.stdout  # hpcai-entrypoint --check
    for check in ("import torch", "MPI init", "libfabric load"):
        assert f"self-test: ok   {check}" in res.stdout


@pytest.mark.apptainer
def test_entrypoint_check_passes(sif):
    res = apptainer("exec", "--userns", sif, "/opt/hpcai/bin/hpcai-entrypoint", "--check")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.splitlines()[-1] == "OK"
    assert "libfabric:" in res.stdout and "Open MPI" in res.stdout


@pytest.mark.apptainer
def test_help_lists_the_payloads(sif):
    payloads = sif_labels(sif)["hpcai.payloads"].split(",")
    for args in (("run-help", sif), ("inspect", "--helpfile", sif)):
        res = apptainer(*args)
        assert res.returncode == 0, res.stderr
        assert f"Payloads: {', '.join(payloads)}." in res.stdout, (args, res.stdout)
        assert "apptainer run IMAGE.sif <payload>" in res.stdout


@pytest.mark.apptainer
def test_both_sifs_have_the_same_run_sections_and_payloads(pytorch_cpu_sif, pytorch_cpu_def_sif):
    for section in ("--runscript", "--test", "--helpfile"):
        converted, built = (apptainer("inspect", section, s).stdout for s in (pytorch_cpu_sif, pytorch_cpu_def_sif))
        assert converted == built and converted.strip(), section
    listings = []
    for path in (pytorch_cpu_sif, pytorch_cpu_def_sif):
        res = apptainer("exec", "--userns", path, "hpcai-bench", "--list", "--json")
        assert res.returncode == 0, res.stderr
        listings.append(json.loads(res.stdout))
    assert listings[0] == listings[1]
    assert [e["name"] for e in listings[0]] == ["ddp-bench", "hf-clm", "megatron-gpt", "mila-suite", "mpi-allreduce",
                                                "sanity"]


def test_docker_run_with_a_payload_name(pytorch_cpu_image):
    """The entrypoint runs a payload name through hpcai-bench, under Docker too."""
    res = subprocess.run(["docker", "run", "--rm", pytorch_cpu_image, "sanity"], capture_output=True, text=True,
                         timeout=600, check=False)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert results(res.stdout)["sanity"]["status"] == "PASS"
    res = subprocess.run(["docker", "run", "--rm", pytorch_cpu_image, "echo", "sanity"], capture_output=True,
                         text=True, timeout=600, check=False)
    assert (res.returncode, res.stdout) == (0, "sanity\n")


def hpcai_cli(*args: str, workdir, **kw) -> subprocess.Popen:
    import os
    import sys

    return subprocess.Popen([sys.executable, "-m", "hpcai", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "HPCAI_WORK_DIR": str(workdir)}, **kw)


@pytest.mark.apptainer
def test_a_failed_def_build_names_its_step_and_leaves_no_part(tmp_path):
    """A base the Docker engine lacks: apptainer fails at Bootstrap, hpcai says so in one line."""
    out = tmp_path / "x.sif"
    proc = hpcai_cli("build", "pytorch-cpu", "--builder", "apptainer", "--bootstrap", "docker-daemon",
                     "--base", "debian:hpcai-no-such-tag", "--payloads", "sanity", "-o", str(out), workdir=tmp_path)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 1, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: build failed at the base image (Bootstrap/From); full log: ")
    log = last.rsplit(" ", 1)[-1]
    assert "FATAL:" in open(log).read()  # apptainer's own reason, for the user to read
    assert stdout == "" and sorted(p.name for p in tmp_path.iterdir()) == ["context", "logs"]
    assert not any((tmp_path / "context").iterdir())  # the context folder went too


@pytest.mark.apptainer
def test_ctrl_c_during_a_conversion_leaves_nothing_behind(pytorch_cpu_image, tmp_path):
    """SIGINT to `hpcai sif` while apptainer converts: exit 130, no SIF, no .part, no work folder,
    and apptainer has stopped."""
    import signal
    import time

    out = tmp_path / "x.sif"
    proc = hpcai_cli("sif", pytorch_cpu_image, "-o", str(out), workdir=tmp_path)

    def converting() -> bool:
        """apptainer is building into the conversion's private part folder (`.x.sif.*.part`): the
        moment to interrupt. A log line is no such signal: on a loaded machine it can come late,
        after the step before (saving the image) has taken minutes, and the SIGINT then found the
        conversion finished."""
        parts = list(tmp_path.glob(".x.sif.*.part"))
        return bool(parts) and subprocess.run(["pgrep", "-f", str(parts[0])], capture_output=True,
                                              check=False).returncode == 0

    deadline = time.monotonic() + 900
    while proc.poll() is None and not converting() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, ("the conversion ended before apptainer was seen running", proc.communicate())
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert not out.exists() and not (tmp_path / "x.sif.part").exists()
    assert not any((tmp_path / "sif").iterdir())
    running = subprocess.run(["pgrep", "-f", str(out)], capture_output=True, text=True, check=False)
    assert running.stdout == ""


PODMAN_STANDIN = """\
FROM docker.io/library/debian:bookworm-slim
COPY hpcai-entrypoint hpcai-lib.sh /opt/hpcai/bin/
COPY hpcai-bench /opt/hpcai/bin/hpcai-bench
COPY payload.toml /opt/hpcai/payloads/sanity/payload.toml
ENV HPCAI_PREFIX=/opt/hpcai
LABEL hpcai.flavor="pytorch-cpu" hpcai.payloads="sanity" hpcai.mpi="none" org.opencontainers.image.title="stand-in"
ENTRYPOINT ["/opt/hpcai/bin/hpcai-entrypoint"]
"""


@pytest.mark.apptainer
@pytest.mark.podman
def test_sif_from_a_podman_image(tmp_path):
    """Podman has no daemon: `hpcai sif --builder podman` saves a docker-archive and converts that
    (Bootstrap: docker-archive). A small stand-in with the real entrypoint, a recording hpcai-bench
    and one payload keeps it under a minute."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(PODMAN_STANDIN)
    for name in ("hpcai-entrypoint", "hpcai-lib.sh"):
        (ctx / name).write_bytes((repo / "entrypoints" / name).read_bytes())
    (ctx / "hpcai-bench").write_text("#!/bin/sh\necho \"BENCH $*\"\n")
    (ctx / "payload.toml").write_text('description = "stand-in"\n')
    for name in ("hpcai-entrypoint", "hpcai-bench"):
        (ctx / name).chmod(0o755)
    tag = "localhost/hpcai-test/podman-standin:1"
    built = subprocess.run(["podman", "build", "-q", "-t", tag, str(ctx)], capture_output=True, text=True,
                           timeout=600, check=False)
    assert built.returncode == 0, built.stderr
    out = tmp_path / "standin.sif"
    proc = hpcai_cli("sif", tag, "--builder", "podman", "-o", str(out), workdir=tmp_path / "w")
    stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr[-3000:]
    assert stdout.strip() == str(out) and not (tmp_path / "w" / "sif" / out.name).exists()
    labels = sif_labels(str(out))
    assert labels["hpcai.payloads"] == "sanity" and labels["org.opencontainers.image.title"] == "stand-in"
    assert labels["org.label-schema.usage.singularity.deffile.bootstrap"] == "docker-archive"
    assert run(str(out), "sanity", "n=1").stdout == "BENCH sanity n=1\n"
    assert run(str(out), "echo", "hi").stdout == "hi\n"
    assert "Payloads: sanity." in apptainer("run-help", str(out)).stdout
