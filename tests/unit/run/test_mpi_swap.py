"""The host MPI swap in the plan: the site's `mpi_swap` table, when it applies, its binds and variables.

Pure: a FakeHost stands in for the Cray node's /opt/cray tree. The real swap (the hook in the MPICH
image, /proc/self/maps, an MPI program over 2 Slurm nodes) is tests/integration/test_host_mpi_swap.py.
"""

from __future__ import annotations

import pytest
from plan_helpers import FakeHost

from hpcai.errors import UsageError
from hpcai.run import mpi_swap
from hpcai.run.options import options_argv
from hpcai.run.plan import LaunchOptions, plan_launch
from hpcai.run.site import MpiSwap, parse_site

SWAP = ('mpi_swap = { lib = "/opt/cray/pe/mpich/*/ofi/gnu/*/lib-abi-mpich", '
        'deps = ["/opt/cray/pe/pmi/*/lib/libpmi*.so.0", "/opt/cray/pe/lib64/libpals.so.0"], mpi = "cray_shasta" }')
CRAY = FakeHost(paths={
    "/opt/cray/pe/mpich/8.1.28/ofi/gnu/12.3/lib-abi-mpich", "/opt/cray/pe/mpich/8.1.29/ofi/gnu/12.3/lib-abi-mpich",
    "/opt/cray/pe/pmi/6.1.13/lib/libpmi.so.0", "/opt/cray/pe/pmi/6.1.14/lib/libpmi.so.0",
    "/opt/cray/pe/pmi/6.1.14/lib/libpmi2.so.0", "/opt/cray/pe/lib64/libpals.so.0"})


class LinkedHost(FakeHost):
    """libpals.so.0 in /opt/cray/pe/lib64 is a link into the PALS folder, as on Cray EX."""

    def realpath(self, path):
        return {"/opt/cray/pe/lib64/libpals.so.0": "/opt/cray/pals/1.3.2/lib/libpals.so.0.0.0"}.get(path, path)


def site(extra: str = SWAP, name: str = "cray"):
    return parse_site(name, f'backend = "srun"\nruntime = "apptainer"\n{extra}\n')


def test_the_table_is_read_with_its_defaults():
    assert site().mpi_swap == MpiSwap(lib="/opt/cray/pe/mpich/*/ofi/gnu/*/lib-abi-mpich",
                                      deps=("/opt/cray/pe/pmi/*/lib/libpmi*.so.0", "/opt/cray/pe/lib64/libpals.so.0"),
                                      mpi="cray_shasta", dest="/host/mpi")
    assert site("").mpi_swap is None


@pytest.mark.parametrize("text, says", [
    ('mpi_swap = "/opt/cray"', "mpi_swap must be a table"),
    ('mpi_swap = { deps = [] }', "mpi_swap needs lib; valid: deps, dest, lib, mpi (lib required)"),
    ('mpi_swap = { lib = "/x", libs = "/y" }', "mpi_swap key(s) libs; valid: deps, dest, lib, mpi"),
    ('mpi_swap = { lib = "relative/lib" }', "mpi_swap.lib 'relative/lib': expected an absolute path"),
    ('mpi_swap = { lib = "/x", deps = "/y" }', "mpi_swap.deps must be a list of path globs"),
    ('mpi_swap = { lib = "/x", deps = ["/a:/b"] }', "mpi_swap.deps '/a:/b': expected an absolute path"),
    ('mpi_swap = { lib = "/x", dest = "/host" }', "mpi_swap.dest '/host': expected"),
    ('mpi_swap = { lib = "/x", mpi = "pmi3" }', "mpi_swap.mpi 'pmi3' is not one of: pmi2, pmix"),
    ('mpi_swap = { lib = 3 }', "mpi_swap.lib must be a string"),
])
def test_a_bad_table_is_one_line_naming_what_is_valid(text, says):
    with pytest.raises(UsageError) as err:
        site(text)
    assert says in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("image_mpi, asked, on", [
    ("mpich", None, True), ("mpich", True, True), ("mpich", False, False),
    ("ompi", None, False), ("none", None, False), ("", None, False), ("", True, True), ("", False, False)])
def test_when_the_swap_applies(image_mpi, asked, on):
    assert mpi_swap.wanted(site(), image_mpi, asked)[0] is on


def test_asking_where_it_cannot_work_is_refused():
    with pytest.raises(UsageError, match=r"this image has Open MPI \(hpcai.mpi=ompi\): build it with --mpi mpich"):
        mpi_swap.wanted(site(), "ompi", True)
    with pytest.raises(UsageError, match="site plain has no mpi_swap"):
        mpi_swap.wanted(site("", name="plain"), "mpich", True)
    assert mpi_swap.wanted(site("", name="plain"), "mpich", None) == (False, "")
    assert "give --host-mpi" in mpi_swap.wanted(site(), "", None)[1]


def test_newest_lib_and_newest_dep_per_name_are_bound():
    swap = mpi_swap.plan_swap(site(), LinkedHost(paths=CRAY.paths), None)
    assert swap.binds == [("/opt/cray/pe/mpich/8.1.29/ofi/gnu/12.3/lib-abi-mpich", "/host/mpi/lib"),
                          ("/opt/cray/pe/pmi/6.1.14/lib", "/host/mpi/dep0"),
                          ("/opt/cray/pals/1.3.2/lib", "/host/mpi/dep1")]
    assert swap.env == {"HPCAI_HOST_MPI_LIB": "/host/mpi/lib", "HPCAI_HOST_MPI_DEPS":
                        "/host/mpi/dep0/libpmi.so.0:/host/mpi/dep0/libpmi2.so.0:"
                        "libpals.so.0=/host/mpi/dep1/libpals.so.0.0.0"}
    assert (swap.mpi, swap.warnings) == ("cray_shasta", [])


def test_a_host_without_it_warns_or_is_refused_when_asked():
    assert mpi_swap.plan_swap(site(), FakeHost(), None).warnings == [
        "no host MPI: nothing matches the site's mpi_swap.lib /opt/cray/pe/mpich/*/ofi/gnu/*/lib-abi-mpich on "
        "this host; the image's MPI is used"]
    with pytest.raises(UsageError, match="--host-mpi: no host MPI"):
        mpi_swap.plan_swap(site(), FakeHost(), True)
    partial = mpi_swap.plan_swap(site(), FakeHost(paths={"/opt/cray/pe/mpich/8.1.29/ofi/gnu/12.3/lib-abi-mpich"}), None)
    assert partial.warnings[0].startswith("mpi_swap.deps /opt/cray/pe/pmi/*/lib/libpmi*.so.0 matches nothing")


def test_the_plan_binds_it_passes_it_and_uses_the_host_pmi(tmp_path, site_path, monkeypatch):
    monkeypatch.setenv("HPCAI_SITE_PATH", site_path("cray-swap", f'backend = "srun"\nruntime = "charliecloud"\n'
                                                                  f'mpi = "pmix"\n{SWAP}\n'))
    opts = LaunchOptions(image=str(tmp_path / "img.sqfs"), cmd=("true",), site="cray-swap", host_mpi=True,
                         runs_root=str(tmp_path), binds=("/my/mpi:/host/mpi/dep1",), env=("HPCAI_HOST_MPI_LIB=/mine",))
    plan = plan_launch(opts, host=CRAY, check=False)
    assert plan.binds[:2] == [("/opt/cray/pe/mpich/8.1.29/ofi/gnu/12.3/lib-abi-mpich", "/host/mpi/lib"),
                              ("/opt/cray/pe/pmi/6.1.14/lib", "/host/mpi/dep0")]
    assert ("/my/mpi", "/host/mpi/dep1") in plan.binds  # the user's bind wins over the swap's own
    assert plan.container_env["HPCAI_HOST_MPI_LIB"] == "/mine"  # and the user's --env
    assert "--mpi=cray_shasta" in plan.argv
    given = plan_launch(LaunchOptions(**{**opts.__dict__, "mpi": "pmi2"}), host=CRAY, check=False)
    assert "--mpi=pmi2" in given.argv
    off = plan_launch(LaunchOptions(**{**opts.__dict__, "host_mpi": False}), host=CRAY, check=False)
    assert "/host/mpi/lib" not in [d for _, d in off.binds] and "--mpi=pmix" in off.argv


def test_the_switch_travels_in_a_batch_scripts_launch_line():
    base = dict(image="img", payload="sanity")
    assert "--host-mpi" in options_argv(LaunchOptions(**base, host_mpi=True))
    assert "--no-host-mpi" in options_argv(LaunchOptions(**base, host_mpi=False))
    assert not any("host-mpi" in a for a in options_argv(LaunchOptions(**base)))
