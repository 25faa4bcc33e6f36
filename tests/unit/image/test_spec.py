"""ImageSpec: flavors, option parsing, tag and labels, validation of bad input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hpcai.errors import UsageError
from hpcai.image.flavors import Mpi, flavors
from hpcai.image.values import parse_mpi, parse_switch
from hpcai.image.spec import make_spec, split_image

ALL_FLAVORS = ["pytorch-ngc", "tensorflow-ngc", "pytorch-rocm", "tensorflow-rocm", "pytorch-poplar",
               "pytorch-cpu", "tensorflow-cpu"]


def test_the_seven_flavors_exist():
    assert sorted(flavors()) == sorted(ALL_FLAVORS)


def test_default_bases_and_version_overrides():
    assert make_spec("pytorch-ngc", sha="abc").base == "nvcr.io/nvidia/pytorch:26.03-py3"
    # NVIDIA's last TensorFlow container: the flavor's own default, whatever the PyTorch one.
    assert make_spec("tensorflow-ngc", sha="abc").base == "nvcr.io/nvidia/tensorflow:25.02-tf2-py3"
    assert make_spec("pytorch-ngc", ngc_version="24.12", sha="abc").base == "nvcr.io/nvidia/pytorch:24.12-py3"
    assert make_spec("tensorflow-rocm", rocm_version="6.3", sha="a").base == "rocm/tensorflow:rocm6.3-py3.12-tf2.18-dev"
    assert make_spec("pytorch-cpu", sha="a").base == "debian:bookworm-slim"
    assert make_spec("pytorch-cpu", base="my.reg:5000/deb:12", sha="a").base == "my.reg:5000/deb:12"


@pytest.mark.parametrize("ref,expected", [
    ("nvcr.io/nvidia/pytorch:25.06-py3", ("nvcr.io/nvidia/pytorch", "25.06-py3")),
    ("my.reg:5000/deb", ("my.reg:5000/deb", "latest")),
    ("debian", ("debian", "latest")),
])
def test_split_image(ref, expected):
    assert split_image(ref) == expected


def test_tag_format_ss_and_override(tmp_path: Path):
    spec = make_spec("pytorch-ngc", sha="0123456789ab")
    assert spec.tag == "hpcai/pytorch-ngc-hpc:26.03-py3-0123456789ab"
    libs = tmp_path / "ss11"
    libs.mkdir()
    (libs / "libfabric.so.1").write_bytes(b"")
    assert make_spec("pytorch-ngc", hpc_libs=str(libs), sha="s", repository="reg.site/ai/").tag == \
        "reg.site/ai/pytorch-ngc-hpc-ss:26.03-py3-s"
    assert make_spec("pytorch-cpu", tag="mine:1", sha="s").tag == "mine:1"


@pytest.mark.parametrize("options, name, digest", [
    ({}, "pytorch-ngc-hpc", False),
    ({"mpi": "mpich"}, "pytorch-ngc-hpc-mpich", False), ({"mpi": "none"}, "pytorch-ngc-hpc-nompi", False),
    ({"ofi": "0"}, "pytorch-ngc-hpc-noofi", False), ({"horovod": "1"}, "pytorch-ngc-hpc-hvd", False),
    ({"arch": "arm64"}, "pytorch-ngc-hpc-arm64", False),
    ({"mpi": "mpich", "horovod": "1", "ofi": "0"}, "pytorch-ngc-hpc-mpich-noofi-hvd", False),
    ({"payloads": "none"}, "pytorch-ngc-hpc", True), ({"payloads": "sanity,osu"}, "pytorch-ngc-hpc", True),
    ({"sets": ["libfabric=2.6.0"]}, "pytorch-ngc-hpc", True),
])
def test_every_variant_has_a_tag_of_its_own(options, name, digest):
    tag = make_spec("pytorch-ngc", sha="s", **options).tag
    assert re.fullmatch(rf"hpcai/{name}:26\.03-py3-s" + (r"-[0-9a-f]{6}" if digest else ""), tag), tag


def test_variant_tags_never_collide_and_unused_versions_do_not_count():
    variants = [{}, {"mpi": "mpich"}, {"mpi": "none"}, {"ofi": "0"}, {"horovod": "1"}, {"arch": "arm64"},
                {"payloads": "none"}, {"payloads": "sanity"}, {"payloads": "sanity,osu"},
                {"sets": ["libfabric=2.6.0"]}, {"sets": ["openmpi=5.0.9"]}, {"mpi": "mpich", "horovod": "1"}]
    tags = [make_spec("pytorch-ngc", sha="s", **v).tag for v in variants]
    assert len(set(tags)) == len(tags), tags
    # Open MPI's version does not change an MPICH image, nor libfabric's a CPU image (Debian's packages).
    assert make_spec("pytorch-ngc", sha="s", mpi="mpich", sets=["openmpi=5.0.9"]).tag == \
        make_spec("pytorch-ngc", sha="s", mpi="mpich").tag
    assert make_spec("pytorch-cpu", sha="s", sets=["libfabric=2.6.0"]).tag == make_spec("pytorch-cpu", sha="s").tag


@pytest.mark.parametrize("value,expected", [
    (None, Mpi.OMPI), ("", Mpi.OMPI), ("1", Mpi.OMPI), ("ompi", Mpi.OMPI), ("mpich", Mpi.MPICH),
    ("0", Mpi.NONE), ("none", Mpi.NONE),
])
def test_parse_mpi(value, expected):
    assert parse_mpi(value) is expected


def test_bad_choices_list_the_valid_ones():
    with pytest.raises(UsageError, match=r"unknown flavor 'pytorch-tpu'; valid: pytorch-cpu, pytorch-ngc"):
        make_spec("pytorch-tpu")
    with pytest.raises(UsageError, match=r"unknown MPI 'intel'; valid: 0, 1, mpich, none, ompi"):
        parse_mpi("intel")
    with pytest.raises(UsageError, match=r"unknown WITH_OFI value 'maybe'; valid: "):
        parse_switch("WITH_OFI value", "maybe", True)
    with pytest.raises(UsageError, match=r"unknown architecture 'riscv'; valid: amd64, arm64"):
        make_spec("pytorch-cpu", arch="riscv")


def test_payloads_default_explicit_none_and_unsupported():
    assert make_spec("pytorch-cpu", sha="a").payloads == flavors()["pytorch-cpu"].default_payloads
    assert make_spec("pytorch-cpu", payloads="sanity, osu", sha="a").payloads == ("sanity", "osu")
    assert make_spec("pytorch-cpu", payloads="none", sha="a").payloads == ()
    with pytest.raises(UsageError, match=r"payload 'nccl-tests' does not support flavor pytorch-cpu; "
                                         r"payloads for pytorch-cpu: .*sanity"):
        make_spec("pytorch-cpu", payloads="nccl-tests")
    with pytest.raises(UsageError, match=r"unknown payload 'nope'; valid: .*sanity"):
        make_spec("pytorch-cpu", payloads="nope")


def test_hpc_libs_must_exist_and_hold_libfabric(tmp_path: Path):
    with pytest.raises(UsageError, match="is not a directory"):
        make_spec("pytorch-cpu", hpc_libs=str(tmp_path / "missing"))
    (tmp_path / "libcxi.so.1").write_bytes(b"")
    with pytest.raises(UsageError, match=r"holds no libfabric\.so\*"):
        make_spec("pytorch-cpu", hpc_libs=str(tmp_path))


def test_horovod_needs_mpi():
    with pytest.raises(UsageError, match="Horovod needs MPI"):
        make_spec("pytorch-cpu", mpi="none", horovod="1")


def test_labels_carry_options_versions_and_payloads():
    spec = make_spec("pytorch-ngc", mpi="mpich", horovod="1", payloads="sanity,osu", sets=["libfabric=2.2.0"],
                     sha="cafe", build_date="2026-01-01T00:00:00Z")
    labels = spec.labels()
    assert labels["hpcai.flavor"] == "pytorch-ngc"
    assert labels["hpcai.mpi"] == "mpich" and labels["hpcai.horovod"] == "1" and labels["hpcai.ofi"] == "1"
    assert labels["hpcai.payloads"] == "sanity,osu"
    assert labels["hpcai.component.libfabric"] == "2.2.0"
    assert labels["hpcai.component.mpich"] == "4.3.2"
    assert labels["hpcai.component.horovod"] == "0.28.1"
    assert labels["hpcai.component.osu-micro-benchmarks"] == "7.5.2"
    assert "hpcai.component.openmpi" not in labels  # not in this image
    assert labels["org.opencontainers.image.revision"] == "cafe" == labels["hpcai.git-sha"]
    assert labels["org.opencontainers.image.created"] == "2026-01-01T00:00:00Z"
    assert labels["org.opencontainers.image.base.name"] == "nvcr.io/nvidia/pytorch:26.03-py3"


def test_missing_build_inputs_are_refused(tmp_path: Path):
    with pytest.raises(UsageError, match="wheelhouse .* does not exist"):
        make_spec("pytorch-cpu", wheelhouse=str(tmp_path / "nowheels"))
    with pytest.raises(UsageError, match="CA bundle .* does not exist"):
        make_spec("pytorch-cpu", ca_bundle=str(tmp_path / "ca.crt"))


def test_rocm_images_bake_rccl_tests_from_the_pinned_commit():
    """rccl-tests is a ROCm default, pinned to the mirror's commit archive with its sha256; the
    release tag AMD's 6.4 images match has no known checksum and needs --allow-unverified."""
    for fl in ("pytorch-rocm", "tensorflow-rocm"):
        assert "rccl-tests" in flavors()[fl].default_payloads
        spec = make_spec(fl, sha="a")
        assert spec.sources["rccl-tests"].verified
        assert spec.labels()["hpcai.component.rccl-tests"] == "ae3e6357cb3514d5649b3b5dfaa80cb2d2af3532"
    with pytest.raises(UsageError, match=r"^rccl-tests rocm-6\.4\.0 has no known sha256 .*pass "
                                         r"--allow-unverified .*--set rccl-tests=VERSION$"):
        make_spec("pytorch-rocm", payloads="sanity,rccl-tests", sets=["rccl-tests=rocm-6.4.0"], sha="a")
    spec = make_spec("pytorch-rocm", payloads="sanity,rccl-tests", sets=["rccl-tests=rocm-6.4.0"],
                     allow_unverified=True, sha="a")
    assert spec.labels()["hpcai.component.rccl-tests"] == "rocm-6.4.0"
    assert not spec.sources["rccl-tests"].verified


def test_gpu_arch_list_reaches_the_rccl_tests_hook_on_rocm():
    from hpcai.image.render import render

    spec = make_spec("pytorch-rocm", gpu_archs="gfx90a", payloads="sanity,rccl-tests", sha="abc")
    assert spec.gpu_archs == ("gfx90a",) and spec.labels()["hpcai.gpu-archs"] == "gfx90a"
    text = render(spec)
    assert text.count('HPCAI_GPU_ARCHS="gfx90a"') == 1
    assert text.index("HPCAI_GPU_ARCHS") < text.index("RUN /opt/hpcai-build/install/payload-hook.sh")


def test_git_sha_read_from_the_git_folder(tmp_path):
    """Branch ref file and detached HEAD are read directly; packed refs are left to git."""
    from hpcai.resources import _head_from_files

    sha = "0123456789abcdef0123456789abcdef01234567"
    (tmp_path / "refs" / "heads").mkdir(parents=True)
    (tmp_path / "refs" / "heads" / "main").write_text(sha + "\n")
    (tmp_path / "HEAD").write_text("ref: refs/heads/main\n")
    assert _head_from_files(tmp_path) == sha[:12]
    (tmp_path / "HEAD").write_text(sha + "\n")  # detached
    assert _head_from_files(tmp_path) == sha[:12]
    (tmp_path / "HEAD").write_text("ref: refs/heads/packed-only\n")
    assert _head_from_files(tmp_path) is None


def test_git_sha_checkout_first_then_the_wheel_stamp(tmp_path, monkeypatch):
    """A checkout's HEAD wins over a stamp an old build left there; an installed package (no
    .git) reads the stamp hatch_build.py wrote; neither gives 'unknown'."""
    from hpcai import resources

    pkg = tmp_path / "site" / "lib" / "hpcai"  # resources looks for .git two levels up: site/
    pkg.mkdir(parents=True)
    monkeypatch.setattr(resources, "_PKG", pkg)
    try:
        for stamp, expected in ((None, "unknown"), ("not a sha", "unknown"), ("0123456789ab\n", "0123456789ab")):
            if stamp is not None:
                (pkg / resources.COMMIT_STAMP).write_text(stamp)
            resources.git_sha.cache_clear()
            assert resources.git_sha() == expected
        git = tmp_path / "site" / ".git"
        git.mkdir()
        (git / "HEAD").write_text("ba" * 20 + "\n")
        resources.git_sha.cache_clear()
        assert resources.git_sha() == "ba" * 6
    finally:
        resources.git_sha.cache_clear()  # later tests get the real checkout's sha again


# The grammars of the values a spec writes into the Dockerfile and def: real references pass, the
# rest is refused naming the option (tests/unit/image/test_hostile_render.py runs the hostile corpus).
@pytest.mark.parametrize("base", [
    "nvcr.io/nvidia/pytorch:25.06-py3", "rocm/pytorch:rocm6.4_ubuntu22.04_py3.10_pytorch_release_2.6.0",
    "graphcore/pytorch:3.3.0-ubuntu-20.04", "debian", "localhost:5000/a/b_c__d--e:1",
    "registry.example.org/ns/deb@sha256:" + "0f" * 32, "/images/base.sif", "./sandbox/", "../bases/x.sif",
])
def test_real_bases_pass_their_grammar(base):
    assert make_spec("pytorch-cpu", base=base, sha="a").base == base


def test_every_flavor_default_base_and_component_version_is_in_grammar():
    from hpcai.image import components
    from hpcai.image.values import BASE, VERSION

    for name in ALL_FLAVORS:
        assert BASE.fullmatch(make_spec(name, sha="a", payloads="none").base), name
    for comp in components.manifest().values():
        for version in comp.known:
            assert VERSION.fullmatch(version), (comp.name, version)


@pytest.mark.parametrize("options, message", [
    ({"base": "debian:12 AS x"}, r"^--base \(BASE_IMAGE\) 'debian:12 AS x': expected an image reference like"),
    ({"ngc_version": "25.06\n"}, r"^--ngc-version \(NGC_VERSION\) '25.06\\n': control characters"),
    ({"sets": ["libfabric=2.5.1;id"], "allow_unverified": True}, r"^--set libfabric '2\.5\.1;id': expected a version"),
    ({"tag": "x:1 y"}, r"^--tag \(TAG\) 'x:1 y': expected an image reference like hpcai/pytorch-cpu:1"),
    ({"repository": "Reg/NS"}, r"^--repository \(HPCAI_REPOSITORY\) 'Reg/NS': expected a registry/namespace"),
    ({"payloads": "sanity,../x"}, r"^--payloads \(PAYLOADS\) '\.\./x': expected a payload folder name"),
])
def test_values_outside_their_grammar_name_the_option(options, message):
    with pytest.raises(UsageError, match=message):
        make_spec("pytorch-ngc", sha="a", **options)


def test_version_variables_are_named_by_where_they_came_from(monkeypatch):
    monkeypatch.setenv("LIBFABRIC_VERSION", "2.5.1 x")
    with pytest.raises(UsageError, match=r"^LIBFABRIC_VERSION '2\.5\.1 x': expected a version"):
        make_spec("pytorch-ngc", sha="a", allow_unverified=True)
    # --set wins over the variable, and so does its check
    with pytest.raises(UsageError, match=r"^--set libfabric '\$x': expected a version"):
        make_spec("pytorch-ngc", sha="a", sets=["libfabric=$x"], allow_unverified=True)
    assert make_spec("pytorch-ngc", sha="a", sets=["libfabric=2.5.0"]).sources["libfabric"].version == "2.5.0"


def test_apt_sources_file_name_is_in_grammar(tmp_path):
    bad = tmp_path / "my sources.list"
    bad.write_text("")
    with pytest.raises(UsageError, match=r"^--apt-sources \(APT_SOURCES\) file name 'my sources\.list': expected"):
        make_spec("pytorch-cpu", apt_sources=str(bad), sha="a")


# --- --cxi and --gpu-arch (issue 14) ------------------------------------------------------------

def test_cxi_builds_hpe_libcxi_before_libfabric_and_names_the_image():
    spec = make_spec("pytorch-ngc", cxi="1", payloads="none", sha="abc")
    assert spec.stack()[:4] == ["cassini-headers", "cxi-driver", "libcxi", "libfabric"]
    assert "-cxi" in spec.tag and spec.labels()["hpcai.component.libcxi"] == "14.0.0"
    assert spec.labels()["hpcai.cxi"] == "1"  # the label says so, as hpcai.ofi and hpcai.horovod do
    plain = make_spec("pytorch-ngc", payloads="none", sha="abc")
    assert "libcxi" not in plain.stack() and plain.labels()["hpcai.cxi"] == "0"


@pytest.mark.parametrize("flavor, ofi", [("pytorch-cpu", "1"), ("pytorch-ngc", "0")])
def test_cxi_needs_libfabric_built_from_source(flavor, ofi):
    with pytest.raises(UsageError, match=r"^--cxi \(WITH_CXI\) builds libfabric's cxi provider.*with --ofi 1$"):
        make_spec(flavor, cxi="1", ofi=ofi, payloads="none", sha="abc")


def test_gpu_arch_list_reaches_the_first_payload_build_hook_only():
    from hpcai.image.render import render

    spec = make_spec("pytorch-ngc", gpu_archs="80, 90a,80", payloads="sanity,nccl-tests,mpi-allreduce", sha="abc")
    assert spec.gpu_archs == ("80", "90a") and spec.labels()["hpcai.gpu-archs"] == "80,90a"
    text = render(spec)
    assert text.count('HPCAI_GPU_ARCHS="80,90a"') == 1
    # set after the stack (bumping it keeps the compiled stack's layers), before the first hook
    assert text.index("# Step: aws-ofi-nccl") < text.index("HPCAI_GPU_ARCHS") < text.index("RUN /opt/hpcai-build/install/payload-hook.sh")
    default = make_spec("pytorch-ngc", payloads="sanity,nccl-tests,mpi-allreduce", sha="abc")
    assert "HPCAI_GPU_ARCHS" not in render(default) and default.tag != spec.tag


def test_gpu_arch_list_reaches_mpich_first_when_it_compiles_gpu_kernels():
    from hpcai.image.render import render

    spec = make_spec("pytorch-ngc", mpi="mpich", gpu_archs="90", payloads="nccl-tests", sha="abc")
    text = render(spec)
    # yaksa (MPICH's GPU pack engine) compiles kernels: the list is set once, at MPICH's step,
    # after libfabric (whose layers stay cached when the list changes)
    assert text.count('HPCAI_GPU_ARCHS="90"') == 1
    assert text.index("# Step: mpich") < text.index("HPCAI_GPU_ARCHS") < text.index("# Step: aws-ofi-nccl")


@pytest.mark.parametrize("value, flavor, message", [
    ("sm_90", "pytorch-ngc", r"^--gpu-arch \(GPU_ARCHS\) value 'sm_90': expected a compute capability"),
    ("90;id", "pytorch-ngc", r"^--gpu-arch \(GPU_ARCHS\) value '90;id': expected"),
    ("90", "pytorch-rocm", r"^--gpu-arch \(GPU_ARCHS\) value '90': expected an AMD GPU processor name, e.g. gfx90a"),
    ("gfx90a", "pytorch-ngc", r"^--gpu-arch \(GPU_ARCHS\) value 'gfx90a': expected a compute capability"),
    ("gfx90a", "pytorch-cpu", r"^--gpu-arch \(GPU_ARCHS\) applies to CUDA and ROCm flavors only, not pytorch-cpu$"),
])
def test_bad_gpu_arch_is_one_line(value, flavor, message):
    with pytest.raises(UsageError, match=message):
        make_spec(flavor, gpu_archs=value, payloads="none", sha="abc")
