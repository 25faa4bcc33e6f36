"""AMD GPUs at launch, with the real runtimes: docker and podman pass /dev/kfd and /dev/dri
(`--device`, `--group-add video`), Apptainer `--rocm`, and every copy of `--per-gpu` gets its own
ROCR_VISIBLE_DEVICES, for an image labelled hpcai.family=rocm.

There is no AMD GPU here, so the device files are fakes: character devices with /dev/null's
numbers at /dev/kfd, /dev/dri/card0 and /dev/dri/renderD128, made for this module and removed
after it (on a machine that has the real ones, those are used and left alone). The runtimes
accept them as they would the real ones; what a GPU would add (the ROCm runtime opening them) is
`make gpu-check`'s (tests/gpu/test_gpu_rocm.py). The flags themselves, per site and runtime, are
token-list tests in tests/unit/run/test_gpu_flags.py and test_runtimes.py.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest
from sifcache import cached_sif
from test_launch_apptainer_local import apptainer_build, debian_sif_path

pytestmark = [pytest.mark.docker]

FAKES = (Path("/dev/kfd"), Path("/dev/dri/card0"), Path("/dev/dri/renderD128"))
PROBE = 'stat -c "%n %F" /dev/kfd /dev/dri/renderD128; echo "groups $(id -G)"; echo "ROCR=$ROCR_VISIBLE_DEVICES"'
LABELLED = "FROM debian:bookworm-slim\nLABEL hpcai.family=rocm\n"
ROCM_DEF = "Bootstrap: localimage\nFrom: {base}\n\n%labels\n    hpcai.family rocm\n"


@pytest.fixture(scope="module")
def amd_devices():
    made = []
    if not FAKES[0].exists():
        if os.geteuid() != 0:
            pytest.skip("no /dev/kfd, and not root to make a fake one")
        FAKES[1].parent.mkdir(exist_ok=True)
        for dev in FAKES:
            os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))  # S_IFCHR, /dev/null's numbers
            made.append(dev)
    yield
    for dev in made:
        dev.unlink()
    if made and not any(FAKES[1].parent.iterdir()):
        FAKES[1].parent.rmdir()


def launch(hpcai_exe, runtime: str, image: str, run_dir: Path, *extra: str) -> list[str]:
    res = subprocess.run([*hpcai_exe, "launch", "--site", "local", "--runtime", runtime, *extra, "--image", image,
                          "--gpus-per-node", "2", "--per-gpu", "-o", str(run_dir), "--no-entrypoint",
                          "--cmd", "--", "sh", "-c", PROBE], capture_output=True, text=True, timeout=300)
    logs = sorted((run_dir / "logs").glob("rank-*")) if (run_dir / "logs").is_dir() else []
    assert res.returncode == 0, res.stderr[-2000:] + "".join(p.read_text()[-1000:] for p in logs)
    return [(run_dir / "logs" / f"rank-{r}.out").read_text() for r in range(2)]


def check(outputs: list[str], video_group: bool = True) -> None:
    for copy, out in enumerate(outputs):
        assert "/dev/kfd character special file" in out and "/dev/dri/renderD128 character special file" in out, out
        assert f"ROCR={copy}" in out.splitlines(), out  # one GPU per copy
        if video_group:
            assert "44" in next(line for line in out.splitlines() if line.startswith("groups ")).split(), out


@pytest.mark.parametrize("engine", ["docker", pytest.param("podman", marks=pytest.mark.podman)])
def test_the_engines_pass_the_amd_device_files_and_one_gpu_per_copy(engine, amd_devices, hpcai_exe, tmp_path):
    tag = "hpcai-test/gpu-label-rocm:1"
    build = subprocess.run([engine, "build", "-q", "-t", tag, "-f", "-", str(tmp_path)], input=LABELLED,
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    try:
        check(launch(hpcai_exe, engine, tag, tmp_path / "run"))  # video: GID 44 in Debian's /etc/group
    finally:
        subprocess.run([engine, "rmi", "-f", tag], capture_output=True, timeout=120)


@pytest.mark.apptainer
def test_apptainer_rocm_sees_the_device_files_and_one_gpu_per_copy(amd_devices, hpcai_exe, tmp_path):
    definition = ROCM_DEF.format(base=debian_sif_path())
    (tmp_path / "rocm.def").write_text(definition)
    key = hashlib.sha256(definition.encode()).hexdigest()[:16]
    sif = cached_sif(f"labels-rocm-{key}.sif", lambda part: apptainer_build(part, str(tmp_path / "rocm.def")))
    run_dir = tmp_path / "run"
    check(launch(hpcai_exe, "apptainer", str(sif), run_dir, "--userns"), video_group=False)
    argv = (run_dir / "plan.json").read_text()
    assert '"--rocm"' in argv and '"--nv"' not in argv
