"""GPU flags follow the requested geometry and the image's vendor (hpcai.run.gpu), not only the site:
the rule as a function, then real dry-runs against images in the local Docker engine that carry an
hpcai.family label (tiny images made from the Debian base), and launches of a SIF under a FAKE
apptainer (why a fake: test_a_sif_gets_its_gpu_flags_from_its_label)."""

from __future__ import annotations

import json
import subprocess

import pytest

from hpcai.labels import facts
from hpcai.run.gpu import choose_gpu


@pytest.mark.parametrize("site_gpu, gpus, family, want", [
    ("none", 1, "cuda", "nvidia"), ("none", 1, "rocm", "amd"), ("nvidia", 4, "", "nvidia"),
    ("nvidia", 4, "cuda", "nvidia"), ("amd", 8, "rocm", "amd"), ("nvidia", 0, "cuda", "none"),
    ("none", 0, "", "none"), ("nvidia", 4, "cpu", "none"), ("none", 1, "poplar", "none"),
])
def test_the_rule(site_gpu, gpus, family, want):
    labels = {"hpcai.family": family} if family else {}
    assert choose_gpu(site_gpu, gpus, facts(labels).family)[0] == want


def test_notes_say_why_no_flags_or_other_flags():
    assert "names the GPU vendor, so no GPU flags are passed" in choose_gpu("none", 1, None)[1]
    assert "this is a cpu image" in choose_gpu("nvidia", 4, "cpu")[1]
    assert choose_gpu("nvidia", 4, "rocm") == (
        "amd", "the image is built for amd GPUs (rocm) but site says nvidia: passing the amd flags")


@pytest.fixture(scope="module")
def labelled_images():
    """Tiny local images labelled like hpcai's CUDA and ROCm builds (the real ones need NGC/ROCm bases)."""
    tags = {}
    for family in ("cuda", "rocm"):
        tag = f"hpcai-test/gpu-label-{family}:1"
        subprocess.run(["docker", "build", "-q", "-t", tag, "-"], check=True, capture_output=True,
                       input=f"FROM debian:bookworm-slim\nLABEL hpcai.family={family}\n".encode())
        tags[family] = tag
    yield tags
    subprocess.run(["docker", "rmi", "-f", *tags.values()], capture_output=True, check=False)


def dry_run(hpcai_exe, runtime, image, *options):
    res = subprocess.run([*hpcai_exe, "launch", "--dry-run", "--json", "--site", "local", "--runtime", runtime,
                          "--image", image, *options, "--cmd", "--", "true"], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.mark.docker
@pytest.mark.parametrize("family, flags", [("cuda", ["--gpus", "all"]), ("rocm", ["--device", "/dev/kfd"])])
def test_a_workstation_gpu_reaches_the_container(labelled_images, hpcai_exe, family, flags):
    plan = dry_run(hpcai_exe, "docker", labelled_images[family], "--gpus-per-node", "1")
    argv = plan["argv"]
    assert any(argv[i:i + 2] == flags for i in range(len(argv))), argv
    without = dry_run(hpcai_exe, "docker", labelled_images[family])["argv"]
    assert "--gpus" not in without and "/dev/kfd" not in without


# A FAKE apptainer, on purpose and only here: this machine has no GPU, and the real Apptainer given
# --nv or --rocm without one still runs the container and exits 0, so a real launch could not show
# whether the flags were passed. The fake records the argv each rank's launch gives it, and answers
# `apptainer inspect --json --labels` with the image's GPU family (Apptainer's JSON layout). Every
# other Apptainer launch test runs the real binary (tests/integration/test_launch_apptainer_local.py).
FAKE_APPTAINER = """#!/bin/sh
if [ "$1" = inspect ]; then
  echo '{labels}'
  exit 0
fi
printf '%s\\n' "$@" > {log}
"""


@pytest.mark.parametrize("family, flag, other", [("cuda", "--nv", "--rocm"), ("rocm", "--rocm", "--nv")])
def test_a_sif_gets_its_gpu_flags_from_its_label(hpcai_exe, tmp_path, family, flag, other):
    fake = tmp_path / "bin" / "apptainer"
    fake.parent.mkdir()
    answer = json.dumps({"data": {"attributes": {"labels": {"hpcai.family": family}}}, "type": "container"})
    fake.write_text(FAKE_APPTAINER.format(labels=answer, log=tmp_path / "argv"))
    fake.chmod(0o755)
    image = tmp_path / "img.sif"
    image.write_bytes(b"not really a SIF")
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    for gpus, want in (("1", [flag]), ("0", [])):
        res = subprocess.run([*hpcai_exe, "launch", "--site", "local", "--runtime", "apptainer", "--userns",
                              "--image", str(image), "-o", str(tmp_path / f"run-{gpus}"), "--gpus-per-node", gpus,
                              "--no-entrypoint", "--cmd", "--", "true"],
                             capture_output=True, text=True, timeout=60, env=env)
        assert res.returncode == 0, res.stderr
        argv = (tmp_path / "argv").read_text().splitlines()
        assert argv[:2] == ["exec", "--userns"] and argv[-2:] == [str(image), "true"]
        assert [a for a in argv if a in (flag, other)] == want, argv
