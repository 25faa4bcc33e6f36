"""The image commands through the real CLI entry point: bad input, dry runs, versions, render, sif.

No engine is needed here: dry runs print the token lists, and the "no daemon" case points the
docker SDK at a socket that does not exist. Apptainer is never installed on CI, so `sif` is
checked through its dry run and its missing-binary error only.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)


def _one_line_error(res, code: int = 2) -> str:
    assert res.exit_code == code, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Traceback" not in res.stderr
    return lines[0]


def test_help_lists_the_images_panel(hpcai):
    res = hpcai("--help")
    assert res.exit_code == 0
    for cmd in ("build", "render", "versions", "inspect", "sif"):
        assert cmd in res.stdout
    assert "Images" in res.stdout


def test_unknown_flavor(hpcai):
    line = _one_line_error(hpcai("build", "pytorch-tpu", "--dry-run"))
    assert "unknown flavor 'pytorch-tpu'; valid: pytorch-cpu, pytorch-ngc, pytorch-poplar" in line


def test_unknown_option_value_from_make_variable(hpcai, monkeypatch):
    monkeypatch.setenv("WITH_MPI", "intel")
    line = _one_line_error(hpcai("render", "pytorch-cpu"))
    assert "unknown MPI 'intel'; valid: 0, 1, mpich, none, ompi" in line


def test_empty_make_variables_mean_unset(hpcai, monkeypatch):
    for var in ("WITH_MPI", "WITH_OFI", "WITH_HVD", "HPC_LIBS_DIR", "PAYLOADS", "NGC_VERSION", "TAG", "DOCKER"):
        monkeypatch.setenv(var, "")
    res = hpcai("build", "pytorch-ngc", "--dry-run")
    assert res.exit_code == 0, res.stderr
    assert "hpcai/pytorch-ngc-hpc:26.03-py3-" in res.stdout


def test_unknown_cli_option(hpcai):
    line = _one_line_error(hpcai("build", "pytorch-cpu", "--with-gpus"))
    assert "--with-gpus" in line


def test_hpc_libs_missing_or_without_libfabric(hpcai, tmp_path: Path):
    line = _one_line_error(hpcai("build", "pytorch-cpu", "--dry-run", "--hpc-libs", str(tmp_path / "nope")))
    assert "is not a directory" in line
    (tmp_path / "libcxi.so.1").write_bytes(b"")
    line = _one_line_error(hpcai("build", "pytorch-cpu", "--dry-run", "--hpc-libs", str(tmp_path)))
    assert "holds no libfabric.so*" in line


def test_unverified_version_needs_the_flag(hpcai):
    line = _one_line_error(hpcai("render", "pytorch-ngc", "--set", "libfabric=9.9.9"))
    assert "libfabric 9.9.9 has no known sha256" in line and "--allow-unverified" in line
    res = hpcai("render", "pytorch-ngc", "--set", "libfabric=9.9.9", "--allow-unverified")
    assert res.exit_code == 0
    assert 'LIBFABRIC_SHA256="unverified"' in res.stdout


def test_version_selection_by_set_and_env(hpcai, monkeypatch):
    res = hpcai("render", "pytorch-ngc", "--set", "libfabric=2.2.0")
    assert 'LIBFABRIC_URL="https://github.com/ofiwg/libfabric/releases/download/v2.2.0/' in res.stdout
    monkeypatch.setenv("OPENMPI_VERSION", "4.1.8")
    res = hpcai("render", "pytorch-ngc", "--set", "openmpi=5.0.9")
    assert 'OPENMPI_VERSION="5.0.9"' in res.stdout  # --set wins over the variable
    res = hpcai("render", "pytorch-ngc")
    assert 'OPENMPI_VERSION="4.1.8"' in res.stdout


def test_no_docker_daemon(hpcai, monkeypatch):
    if not shutil.which("docker"):
        pytest.skip("docker CLI not installed (the message then says so, also exit 2)")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    line = _one_line_error(hpcai("build", "pytorch-cpu", "--payloads", "none"))
    assert "no Docker daemon reachable" in line
    assert "sudo dockerd" in line and "Podman" in line


def test_dry_run_prints_the_classic_builder_command(hpcai, monkeypatch):
    monkeypatch.delenv("HPCAI_WORK_DIR", raising=False)
    res = hpcai("build", "pytorch-cpu", "--dry-run", "--tag", "t:1")
    assert res.exit_code == 0
    cmd = res.stdout.strip().splitlines()[-1]
    assert cmd.startswith("DOCKER_BUILDKIT=0 docker build --network host -f ")
    assert cmd.endswith("-t t:1 build/context/pytorch-cpu")


def test_podman_builder(hpcai, monkeypatch):
    monkeypatch.delenv("HPCAI_WORK_DIR", raising=False)
    monkeypatch.setenv("DOCKER", "podman")
    res = hpcai("build", "pytorch-cpu", "--dry-run", "--tag", "t:1")
    assert res.exit_code == 0
    assert res.stdout.strip().splitlines()[-1].startswith("podman build --network host -f ")
    assert "--format docker --layers" in res.stdout
    line = _one_line_error(hpcai("build", "pytorch-cpu", "--builder", "buildah"))
    assert "unknown builder 'buildah'; valid: apptainer, docker, podman" in line


def test_versions_table_and_json(hpcai):
    res = hpcai("versions")
    assert res.exit_code == 0 and "libfabric" in res.stdout and "2.5.1" in res.stdout
    data = json.loads(hpcai("versions", "--json").stdout)
    assert data["openmpi"]["version"] == "5.0.10" and "4.1.8" in data["openmpi"]["alternates"]


def test_render_both_formats_to_stdout(hpcai):
    docker = hpcai("render", "tensorflow-rocm", "--mpi", "mpich")
    assert docker.exit_code == 0 and docker.stdout.startswith("# hpcai image: tensorflow-rocm")
    assert docker.stderr == ""
    app = hpcai("render", "pytorch-poplar", "--format", "apptainer")
    assert app.exit_code == 0 and "Bootstrap: docker\nFrom: graphcore/pytorch:3.3.0-ubuntu-20.04" in app.stdout


def test_render_context_holds_everything_the_files_name(hpcai, tmp_path: Path):
    ctx = tmp_path / "ctx"
    res = hpcai("render", "pytorch-cpu", "--context", str(ctx), "--payloads", "sanity,mpi-allreduce")
    assert res.exit_code == 0
    for rel in ("Dockerfile", "hpcai.def", "install/lib.sh", "install/openmpi.sh", "runtime/bin/hpcai-entrypoint",
                "hpcai-bench", "payloads/sanity/payload.toml", "payload-hooks/mpi-allreduce/payload.toml"):
        assert (ctx / rel).exists(), rel
    assert not (ctx / "payloads" / "ddp-bench").exists()  # only the selected payloads
    # Every COPY source of the Dockerfile exists in the context.
    for line in (ctx / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            for src in line.split()[1:-1]:
                assert (ctx / src).exists(), line


def test_sif_without_apptainer_and_dry_runs(hpcai, monkeypatch):
    monkeypatch.setenv("HPCAI_WORK_DIR", "w")
    monkeypatch.setenv("PATH", "/nonexistent")
    line = _one_line_error(hpcai("sif", "hpcai/pytorch-cpu-hpc:bookworm-slim-abc"))
    assert "neither apptainer nor singularity is installed" in line
    res = hpcai("sif", "hpcai/pytorch-cpu-hpc:bookworm-slim-abc", "--dry-run")
    name = "hpcai_pytorch-cpu-hpc_bookworm-slim-abc.sif"
    assert res.stdout.strip().splitlines() == [
        f"# def: w/sif/{name}/hpcai-convert.def (the image from docker-daemon://hpcai/pytorch-cpu-hpc:"
        "bookworm-slim-abc, its %help from the image's labels)",
        f"apptainer build --notest --force {name}.part w/sif/{name}/hpcai-convert.def",
        f"mv {name}.part {name}"]
    res = hpcai("sif", "img:1", "--dry-run", "--builder", "podman", "-o", "x.sif")
    lines = res.stdout.strip().splitlines()
    assert "(the image from docker-archive://w/sif/x.sif/image.tar, " in lines[0]
    assert lines[1] == "podman save --format docker-archive -o w/sif/x.sif/image.tar img:1"
    assert lines[2] == "apptainer build --notest --force x.sif.part w/sif/x.sif/hpcai-convert.def"
    line = _one_line_error(hpcai("sif", "img:1", "--dry-run", "-o", "bad:name.sif"))
    assert "contains ':'" in line
    line = _one_line_error(hpcai("sif", "img:1", "--builder", "apptainer"))
    assert "unknown builder 'apptainer'; valid: docker, podman" in line


@pytest.mark.parametrize("image", ["x;id", "", "Hpcai/X:1", "-o", "x:1\nFrom: evil", "a b"])
def test_sif_refuses_an_image_that_is_no_reference(hpcai, image):
    for extra in ((), ("--dry-run",)):  # before any engine, command or def sees it
        line = _one_line_error(hpcai("sif", *extra, "--", image))
        assert line.startswith("error: IMAGE "), line


def test_sif_of_a_flavor_uses_its_tag(hpcai, monkeypatch):
    monkeypatch.setenv("HPCAI_WORK_DIR", "w")
    res = hpcai("sif", "pytorch-cpu", "--dry-run", "--tag", "hpcai/x:1")
    assert "apptainer build --notest --force hpcai_x_1.sif.part w/sif/hpcai_x_1.sif/hpcai-convert.def" in res.stdout


def test_sif_refuses_an_image_missing_from_the_engine(hpcai):
    if not shutil.which("docker") or not shutil.which("apptainer"):
        pytest.skip("needs the docker CLI and apptainer (the message lists the engine's images)")
    line = _one_line_error(hpcai("sif", "hpcai/no-such-image:1", "-o", "/nonexistent/x.sif"))
    assert line.startswith("error: unknown docker image 'hpcai/no-such-image:1'; valid: ")


def test_build_with_apptainer_dry_run(hpcai, monkeypatch, tmp_path: Path):
    monkeypatch.setenv("HPCAI_WORK_DIR", "w")
    res = hpcai("build", "pytorch-cpu", "--builder", "apptainer", "--dry-run", "--tag", "t:1", "-o",
                str(tmp_path / "out.sif"))
    assert res.exit_code == 0, res.stderr
    assert res.stdout.strip().splitlines() == [
        "# context: w/context/pytorch-cpu (the command runs there; then out.sif.part is renamed to out.sif)",
        f"apptainer build --fakeroot --force {tmp_path}/out.sif.part hpcai.def"]
    monkeypatch.setenv("DOCKER", "apptainer")  # the Make variable picks the builder too
    res = hpcai("build", "pytorch-cpu", "--dry-run", "--tag", "t:1", "--no-cache")
    assert res.stdout.strip().endswith(f"build --fakeroot --force --disable-cache {Path.cwd()}/t_1.sif.part hpcai.def")


def test_build_bootstrap_and_output_need_the_apptainer_builder(hpcai, tmp_path: Path):
    line = _one_line_error(hpcai("build", "pytorch-cpu", "--dry-run", "--bootstrap", "docker-daemon"))
    assert "--bootstrap is for --builder apptainer" in line
    line = _one_line_error(hpcai("build", "pytorch-cpu", "--dry-run", "-o", "x.sif"))
    assert "-o/--output is for --builder apptainer" in line
    line = _one_line_error(hpcai("build", "pytorch-cpu", "--builder", "apptainer", "--bootstrap", "oras",
                                 "--dry-run"))
    assert "unknown bootstrap 'oras'; valid: docker, docker-daemon, localimage" in line
    line = _one_line_error(hpcai("build", "pytorch-cpu", "--builder", "apptainer", "--bootstrap", "localimage",
                                 "--dry-run"))
    assert "'debian:bookworm-slim' is no such path" in line
    line = _one_line_error(hpcai("build", "pytorch-cpu", "--builder", "apptainer", "--base", str(tmp_path),
                                 "--dry-run"))
    assert "is a path: build on it with --bootstrap localimage" in line
    res = hpcai("build", "pytorch-cpu", "--builder", "apptainer", "--bootstrap", "localimage", "--base",
                str(tmp_path), "--dry-run", "--tag", "t:1")
    assert res.exit_code == 0, res.stderr


def test_apptainer_progress_names_the_step_from_the_sh_trace():
    """%post runs under `sh -x`: `+ cd /` and the install step's command, as dash quotes it."""
    from hpcai.image.build import ApptainerProgress
    from hpcai.image.render import builder_steps, final_steps, payload_hooks
    from hpcai.image.spec import make_spec

    spec = make_spec("pytorch-cpu", payloads="sanity,mpi-allreduce")
    hooks = payload_hooks(spec)
    steps = [*builder_steps(spec, hooks), *final_steps(spec, hooks)]
    progress = ApptainerProgress(steps)
    assert progress.see("INFO:    Starting build...").startswith("the base image")
    assert progress.see("INFO:    Running post scriptlet").startswith("%post")
    assert progress.see("+ cd /").startswith("%post")
    venv = steps.index(next(s for s in steps if s.script == "python-venv.sh")) + 1
    line = progress.see("+ /opt/hpcai-build/install/python-venv.sh")
    assert line.startswith(f"step {venv}/{len(steps)} (python venv and framework): ")
    hook = next(i for i, s in enumerate(steps, 1) if s.payload == "mpi-allreduce")
    assert progress.see("+ /opt/hpcai-build/install/payload-hook.sh mpi-allreduce install-debian.sh").startswith(
        f"step {hook}/{len(steps)} (payload mpi-allreduce")
    assert progress.see("+ apt-get install -y x").startswith(f"step {hook}/")  # a command inside a step
    assert progress.see("INFO:    Running testscript").startswith("%test")
    assert progress.see("+ /bin/sh -c 'a b").startswith("%test")  # unbalanced quotes: no crash


def test_apptainer_bootstrap_choices(hpcai):
    res = hpcai("render", "pytorch-cpu", "--format", "apptainer", "--bootstrap", "docker-daemon")
    assert res.stdout.count("Bootstrap: docker-daemon\nFrom: debian:bookworm-slim\n") == 2
    line = _one_line_error(hpcai("render", "pytorch-cpu", "--format", "apptainer", "--bootstrap", "oras"))
    assert "unknown bootstrap 'oras'; valid: docker, docker-daemon, localimage" in line


def test_rccl_tests_tag_without_checksum_needs_allow_unverified(hpcai, monkeypatch):
    pinned = hpcai("render", "pytorch-rocm", "--payloads", "sanity,rccl-tests")  # the mirror's commit, checked
    assert pinned.exit_code == 0, pinned.stderr
    assert 'RCCL_TESTS_SHA256="e4717f46b8a3e66f961603a735ce677fdf72162e4df0060e0f3acc46c3135026"' in pinned.stdout
    tag = ("render", "pytorch-rocm", "--payloads", "sanity,rccl-tests", "--set", "rccl-tests=rocm-6.4.0")
    res = hpcai(*tag)
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.startswith("error: rccl-tests rocm-6.4.0 has no known sha256")
    assert "--allow-unverified" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    ok = hpcai(*tag, "--allow-unverified")
    assert ok.exit_code == 0, ok.stderr
    assert 'RCCL_TESTS_SHA256="unverified"' in ok.stdout and "payload-hook.sh rccl-tests build.sh" in ok.stdout
    monkeypatch.setenv("ALLOW_UNVERIFIED", "1")  # the Make route: make build-pytorch-rocm ALLOW_UNVERIFIED=1
    assert hpcai(*tag).exit_code == 0


def test_progress_counts_steps_across_podman_stages():
    """Step lines as the real builders print them: docker's classic builder numbers the whole
    Dockerfile, podman/buildah each stage (lines from a real `hpcai build --builder podman` log)."""
    from hpcai.image.build import parse_step

    docker: dict[str, int] = {}
    assert parse_step("Step 7/40 : RUN bash /opt/hpcai-build/install/openmpi.sh", docker) == (
        7, 40, "RUN bash /opt/hpcai-build/install/openmpi.sh")
    podman: dict[str, int] = {}
    assert parse_step("[1/2] STEP 1/14: FROM debian:bookworm-slim AS builder", podman) == (
        1, 14, "FROM debian:bookworm-slim AS builder")
    assert parse_step("[1/2] STEP 14/14: RUN bash x.sh", podman)[:2] == (14, 14)
    assert parse_step("[2/2] STEP 3/20: COPY --from=builder /opt/hpcai /opt/hpcai", podman)[:2] == (17, 34)
    assert parse_step("--> Using cache 29e009bb7703", podman) is None


def test_render_context_never_deletes_a_users_folder(hpcai, tmp_path: Path):
    """issue 12: `hpcai render --context DIR` deleted DIR (`--context .` would wipe the working folder)."""
    mine = tmp_path / "work"
    mine.mkdir()
    (mine / "important.txt").write_text("keep me")
    res = hpcai("render", "pytorch-cpu", "--context", str(mine))
    assert res.exit_code == 2 and (mine / "important.txt").read_text() == "keep me"
    assert res.stderr.strip().startswith(f"error: --context {mine}: the folder is not empty")
    ctx = tmp_path / "ctx"
    for _ in range(2):  # a context made here may be made again in place
        assert hpcai("render", "pytorch-cpu", "--context", str(ctx)).exit_code == 0
    assert (ctx / "Dockerfile").is_file() and (ctx / ".hpcai-context").is_file()
    (tmp_path / "file").write_text("x")
    assert hpcai("render", "pytorch-cpu", "--context", str(tmp_path / "file")).exit_code == 2


def test_render_context_def_has_the_bootstrap_asked_for(hpcai, tmp_path):
    """`render --context DIR --bootstrap B` writes the def it prints into DIR, not the default one."""
    res = hpcai("render", "pytorch-cpu", "--format", "apptainer", "--bootstrap", "docker-daemon",
                "--context", str(tmp_path / "ctx"))
    assert res.exit_code == 0, res.stderr
    written = (tmp_path / "ctx" / "hpcai.def").read_text()
    assert written.count("Bootstrap: docker-daemon") == 2 and "Bootstrap: docker\n" not in written
