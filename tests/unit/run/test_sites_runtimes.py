"""The packaged sites: which runtimes each offers and prefers, validated; the Slingshot values
in exactly one place (entrypoints/hooks.d/slingshot-env.sh), sites holding only their documented
deviations; CSCS's current values (docs.cscs.ch software/communication/nccl, 2026-08)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from hpcai.errors import UsageError
from hpcai.run.site import available_sites, load_site, parse_site
from hpcai.run.slingshot import _lines, profile_env, profile_path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[3]
# site -> (preferred, offered); docs/sites.md (each site, and "Other container paths"), from each
# site's own documentation
RUNTIMES = {
    "cray-ex-amd": ("apptainer", ("apptainer", "singularity", "charliecloud")),
    "cray-ex-nvidia": ("apptainer", ("apptainer", "singularity", "podman-hpc", "charliecloud")),
    "cscs-alps": ("ce", ("ce",)),
    "generic-ib": ("pyxis", ("pyxis", "enroot", "apptainer", "singularity", "charliecloud")),
    "jsc-ib": ("apptainer", ("apptainer",)),
    "local": ("docker", ()),  # this machine: whatever it has, no warning
}


@pytest.mark.parametrize("name,want", sorted(RUNTIMES.items()))
def test_each_site_offers_and_prefers(name, want):
    site = load_site(name)
    assert (site.runtime, site.runtimes) == want


def test_every_packaged_site_validates_and_offers_its_preference():
    for name in available_sites():
        site = load_site(name)
        assert not site.runtimes or site.runtime == site.runtimes[0], name


@pytest.mark.parametrize("text,message", [
    ('runtimes = ["apptainer", "rkt"]\n', "runtimes 'rkt' is not one of: apptainer,"),
    ('runtime = "sarus"\nruntimes = ["apptainer"]\n', "runtime 'sarus' is not among the site's runtimes: apptainer"),
    ('fabric_profile = "infiniband"\n', "fabric_profile 'infiniband' is not one of: \"\", slingshot"),
    ('fabric_hooks = "yes"\n', "key 'fabric_hooks' must be true or false"),
])
def test_bad_site_runtime_keys_are_one_line(text, message):
    with pytest.raises(UsageError) as err:
        parse_site("x", text, "x.toml")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_bad_site_file_exits_2_in_one_line(hpcai, tmp_path, monkeypatch):
    (tmp_path / "mine.toml").write_text('runtime = "rkt"\n')
    monkeypatch.setenv("HPCAI_SITE_PATH", str(tmp_path))
    res = hpcai("sites", "show", "mine")
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1 and "runtime 'rkt'" in res.stderr


def test_slingshot_values_have_one_copy():
    """No site repeats a profile value (only documented deviations), and neither the hook nor any
    site TOML holds the profile's own FI_CXI/NCCL defaults as literals."""
    profile = {name: value for name, value, _ in _lines()}
    hook = (REPO / "entrypoints/hooks.d/20-nccl-net.sh").read_text()
    assert not re.search(r"hpcai_set (FI_|NCCL_SOCKET|NCCL_PROTO|NCCL_CROSS|NCCL_NET_GDR|MPICH_GPU|TORCH_NCCL)", hook)
    assert "2048" not in hook and "hybrid" not in hook
    for path in sorted((REPO / "launcher/hpcai/run/sites").glob("*.toml")):
        data = tomllib.loads(path.read_text())
        env = data.get("env", {})
        # a Slingshot site repeats none of it; an InfiniBand site no libfabric cxi value
        uses = data.get("fabric_profile") == "slingshot"
        same = {k for k, v in env.items() if profile.get(k) == v and (uses or k.startswith("FI_"))}
        assert not same, f"{path.name} repeats the Slingshot profile's {sorted(same)}"


def test_profile_per_gpu_and_sites_using_it():
    nv, amd = profile_env("slingshot", "nvidia"), profile_env("slingshot", "amd")
    assert nv["FI_HMEM_CUDA_USE_GDRCOPY"] == "1" and "HSA_FORCE_FINE_GRAIN_PCIE" not in nv
    assert amd["HSA_FORCE_FINE_GRAIN_PCIE"] == "1" and "FI_HMEM_CUDA_USE_GDRCOPY" not in amd
    assert profile_env("", "nvidia") == {}
    # the Slingshot sites use it (another site may too)
    assert {"cray-ex-amd", "cray-ex-nvidia", "cscs-alps"} <= \
        {n for n in available_sites() if load_site(n).fabric_profile == "slingshot"}
    assert profile_path().name == "slingshot-env.sh"


def test_site_deviations_win_over_the_profile():
    from hpcai.run.plan import LaunchOptions, plan_launch
    from plan_helpers import CRAY

    def env(site):
        opts = LaunchOptions(image="IMG.sif", payload="nccl-tests", site=site, runtime="apptainer",
                             output_dir="/tmp/hpcai-never-written")
        return plan_launch(opts, host=CRAY, check=False).container_env

    alps, amd, nv = env("cscs-alps"), env("cray-ex-amd"), env("cray-ex-nvidia")
    # CSCS documents 16384/software (nccl_env_vars); HPE's BKC and OLCF 2048/hybrid
    assert (alps["FI_CXI_DEFAULT_TX_SIZE"], alps["FI_CXI_RX_MATCH_MODE"]) == ("16384", "software")
    assert (nv["FI_CXI_DEFAULT_TX_SIZE"], nv["FI_CXI_RX_MATCH_MODE"]) == ("2048", "hybrid")
    assert (amd["FI_MR_CACHE_MONITOR"], amd["FI_CXI_RDZV_PROTO"], amd["NCCL_SOCKET_IFNAME"]) == \
        ("kdreg2", "alt_read", "hsn0,hsn1,hsn2,hsn3")
    assert amd["HSA_FORCE_FINE_GRAIN_PCIE"] == "1" and nv["FI_HMEM_CUDA_USE_GDRCOPY"] == "1"


def test_alps_hosts_detect_cscs_alps_and_perlmutter_stays():
    from hpcai.run.site import detect_site
    from plan_helpers import FakeHost

    assert detect_site(FakeHost(hostname="clariden-ln001")) == "cscs-alps"
    assert detect_site(FakeHost(hostname="daint-ln002")) == "cscs-alps"
    assert detect_site(FakeHost(hostname="login22.perlmutter")) == "cray-ex-nvidia"
