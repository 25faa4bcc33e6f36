"""One record per component (components.toml): install script, `when`, system packages, and the
rule that reads them (ImageSpec.stack, the system-packages step). Loading refuses a bad record with
one line that names the component and the field."""

from __future__ import annotations

import pytest

from hpcai.errors import UsageError
from hpcai.image import components
from hpcai.image.components import Condition
from hpcai.image.flavors import trait_names
from hpcai.image.spec import make_spec
from hpcai.resources import data_path

FIXED = {"sha": "0123456789ab", "build_date": "2026-01-01T00:00:00Z"}
STACK = ["cassini-headers", "cxi-driver", "libcxi", "libfabric", "pmix", "openmpi", "mpich", "aws-ofi-nccl", "horovod"]
RECORD = {"version": "1.0", "url": "https://example.invalid/x-{version}.tar.gz", "sha256": "0" * 64,
          "install": "pmix.sh", "when": ["from_source", "mpi:ompi"]}


def test_the_stack_records_in_build_order_each_with_its_script():
    stack = [n for n, c in components.manifest().items() if c.install]
    assert stack == STACK  # the records' order is the build order
    for name in stack:
        assert (data_path("dockerfiles", "install") / components.manifest()[name].install).is_file()
    # Sources that payload hooks fetch have no script and are never built by the stack.
    for name in ("osu-micro-benchmarks", "nccl-tests", "rccl-tests", "ucx", "gdrcopy"):
        comp = components.manifest()[name]
        assert not comp.install and not comp.when.terms


def test_the_spec_stack_is_the_records_whose_when_holds():
    def stack(flavor, mpi="ompi", ofi="1", hvd="0"):
        return make_spec(flavor, mpi=mpi, ofi=ofi, horovod=hvd, payloads="none", **FIXED).stack()

    assert stack("pytorch-ngc", hvd="1") == ["libfabric", "pmix", "openmpi", "aws-ofi-nccl", "horovod"]
    assert stack("pytorch-rocm", mpi="mpich") == ["libfabric", "mpich", "aws-ofi-nccl"]
    assert stack("pytorch-ngc", mpi="none", ofi="0") == []
    assert stack("pytorch-ngc", ofi="0") == ["libfabric", "pmix", "openmpi"]  # MPI runs over libfabric
    assert stack("pytorch-poplar") == ["libfabric", "pmix", "openmpi"]  # no NCCL/RCCL plugin
    assert stack("pytorch-cpu", hvd="1") == ["horovod"]  # Debian's MPI; Horovod from its sdist
    cxi = make_spec("pytorch-ngc", cxi="1", payloads="none", **FIXED).stack()
    assert cxi[:4] == ["cassini-headers", "cxi-driver", "libcxi", "libfabric"]  # libcxi before libfabric


def test_every_spec_trait_can_be_named_in_a_condition():
    names = trait_names()
    for flavor in ("pytorch-ngc", "pytorch-cpu"):
        for key, value in make_spec(flavor, payloads="none", **FIXED).traits().items():
            assert (key if isinstance(value, bool) else f"{key}:{value}") in names


@pytest.mark.parametrize("terms, traits, holds", [
    ((("from_source",), ("mpi:ompi",)), {"from_source": True, "mpi": "ompi"}, True),
    ((("from_source",), ("mpi:ompi",)), {"from_source": True, "mpi": "mpich"}, False),
    ((("ofi", "!mpi:none"),), {"ofi": False, "mpi": "mpich"}, True),  # one alternative is enough
    ((("ofi", "!mpi:none"),), {"ofi": False, "mpi": "none"}, False),
    ((("!from_source",),), {"from_source": False}, True),
    ((), {"from_source": True}, False),  # no terms: never
])
def test_condition_terms_all_hold_and_alternatives_any(terms, traits, holds):
    assert Condition(terms).holds(traits) is holds


@pytest.mark.parametrize("change, message", [
    ({"when": ["from_source", "mpi:openmpi"]},
     r"^components\.toml: components\.x\.when: unknown term 'mpi:openmpi'; valid: from_source, ofi, cxi, horovod, mpi:ompi"),
    ({"when": ["fromsource|ofi"]}, r"^components\.toml: components\.x\.when: unknown term 'fromsource'"),
    ({"debian_when": ["!cpu"]}, r"^components\.toml: components\.x\.debian_when: unknown term '!cpu'"),
    ({"when": "from_source"}, r"^components\.toml: key 'components\.x\.when' must be a list of strings, got 'from_source'$"),
    ({"install": "pmx.sh"},
     r"^components\.toml: components\.x\.install 'pmx\.sh': no such script in dockerfiles/install/$"),
    ({"install": "../lib.sh"}, r"^components\.toml: components\.x\.install '\.\./lib\.sh': expected a script name"),
    ({"install": ""}, r"^components\.toml: components\.x: `install` and `when` go together"),
    ({"builder_packages": ["libnuma dev"]},
     r"^components\.toml: components\.x\.builder_packages 'libnuma dev': expected a Debian package name"),
    ({"debian_final_packages": ["mpich"]},
     r"^components\.toml: components\.x\.debian_final_packages: no `debian_when` says when to install them$"),
    ({"builder_package": ["libnuma-dev"]}, r"^components\.toml: unknown key\(s\) components\.x\.builder_package; valid: "),
    ({"gpu_kernels": "yes"}, r"^components\.toml: key 'components\.x\.gpu_kernels' must be true or false"),
    ({"gpu_kernels": True, "install": "", "when": []}, r"^components\.toml: components\.x\.gpu_kernels: .*only beside `install`$"),
    ({"sha256": "ABC"}, r"^components\.toml: components\.x\.sha256 'ABC': expected a sha256 digest"),
    ({"alternates": [{"version": "1.0"}]}, r"^components\.toml: missing key\(s\) components\.x\.alternates\[0\]\.url$"),
    ({"alternates": {"version": "1.0"}}, r"^components\.toml: components\.x\.alternates must be a list of tables"),
])
def test_a_bad_record_is_refused_naming_the_component_and_field(change, message):
    with pytest.raises(UsageError, match=message):
        components.parse_record("x", {**RECORD, **change})


def test_a_good_record_loads_with_its_packages():
    comp = components.parse_record("x", {**RECORD, "builder_packages": ["libevent-dev"],
                                         "final_packages": ["libevent-core-2.1-7"],
                                         "debian_when": ["!from_source", "mpi:ompi"],
                                         "debian_builder_packages": ["libopenmpi-dev"]})
    source = {"from_source": True, "mpi": "ompi"}
    debian = {"from_source": False, "mpi": "ompi"}
    assert comp.built(source) and not comp.built(debian)
    assert comp.system_packages("builder", source) == ("libevent-dev",)
    assert comp.system_packages("final", source) == ("libevent-core-2.1-7",)
    assert comp.system_packages("builder", debian) == ("libopenmpi-dev",)
    assert comp.system_packages("final", debian) == ()
    assert comp.system_packages("builder", {"from_source": True, "mpi": "none"}) == ()


def test_system_packages_per_configuration_from_the_records():
    def packages(flavor, mpi="ompi", ofi="1", hvd="0"):
        spec = make_spec(flavor, mpi=mpi, ofi=ofi, horovod=hvd, payloads="none", **FIXED)
        return {stage: set(components.system_packages(stage, spec.traits())) for stage in ("builder", "final")}

    from_source = {"builder": {"libnuma-dev", "libevent-dev", "libhwloc-dev", "zlib1g-dev", "flex", "openssh-client"},
                   "final": {"libnuma1", "libevent-core-2.1-7", "libevent-pthreads-2.1-7", "libhwloc15",
                             "openssh-client"}}
    for flavor in ("pytorch-ngc", "tensorflow-ngc", "pytorch-rocm", "tensorflow-rocm", "pytorch-poplar"):
        assert packages(flavor) == from_source, flavor
    with_hvd = packages("pytorch-ngc", hvd="1")
    assert with_hvd["builder"] == from_source["builder"] | {"cmake", "git"}
    assert with_hvd["final"] == from_source["final"]
    # MPICH from source: libfabric's libnuma, hwloc (MPICH's and aws-ofi-nccl's); no PMIx, no libevent.
    assert packages("pytorch-rocm", mpi="mpich") == {"builder": {"libnuma-dev", "libhwloc-dev", "libtool-bin"},
                                                     "final": {"libnuma1", "libhwloc15"}}
    # The CPU flavors take MPI and libfabric from Debian.
    assert packages("pytorch-cpu") == {"builder": {"libopenmpi-dev", "openmpi-bin", "libfabric-dev"},
                                       "final": {"openmpi-bin", "libopenmpi3", "libfabric1", "libfabric-bin"}}
    assert packages("tensorflow-cpu", mpi="mpich", ofi="0", hvd="1") == {
        "builder": {"libmpich-dev", "mpich", "cmake", "git"}, "final": {"mpich", "libmpich12"}}
    assert packages("pytorch-cpu", mpi="none", ofi="0") == {"builder": set(), "final": set()}


def test_the_record_schema_as_json_schema_holds_every_record():
    """The same keys as JSON Schema (hpcai.schema writes it): every record of components.toml
    passes, and one the reader refuses (an unknown key, a bad digest) is refused there too."""
    from jsonschema import Draft202012Validator

    schema = components.RECORD.json_schema("a components.toml record")
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    for name, record in components._raw()["components"].items():
        assert list(validator.iter_errors(record)) == [], name
    for change in ({"builder_package": ["x"]}, {"sha256": "ABC"}, {"alternates": [{"version": "1"}]}):
        assert list(validator.iter_errors({**RECORD, **change})), change
