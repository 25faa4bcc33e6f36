"""Site profiles: schema validation, search path, detection, host-dependent binds."""

from __future__ import annotations

import pytest
from plan_helpers import FakeHost

from hpcai.run import site
from hpcai.errors import UsageError
from hpcai.resources import package_file

# the packaged site files: a new one is checked without an edit here
ALL = sorted(p.stem for p in package_file("run", "sites").glob("*.toml"))


def test_every_packaged_site_validates():
    assert len(ALL) >= 10 and {"local", "generic-slurm", "cray-ex-nvidia"} <= set(ALL)
    assert site.available_sites() == ALL
    for name in ALL:
        s = site.load_site(name)
        assert s.name == name and s.description


def test_unknown_key_lists_valid_keys():
    with pytest.raises(UsageError) as exc:
        site.parse_site("x", 'runtme = "docker"\n', "x.toml")
    msg = str(exc.value)
    assert msg.startswith("x.toml: unknown key(s) runtme; valid: account, apptainer_command, apptainer_userns, backend, binds")
    assert "master_addr_suffix" in msg and "runtime" in msg


@pytest.mark.parametrize("text, message", [
    ('gpus_per_node = "4"', "must be an integer"),
    ('runtime = "rkt"', "runtime 'rkt' is not one of: apptainer, singularity, charliecloud, docker, podman"),
    ('mpi = "pmi9"', 'is not one of: "", pmi2'),
    ('binds = "/usr"', "must be a list of strings"),
    ('hostnames = ["("]', "bad hostnames regex"),
    ("this is not toml", "malformed TOML"),
])
def test_bad_values(text, message):
    with pytest.raises(UsageError, match=None) as exc:
        site.parse_site("x", text)
    assert message in str(exc.value)


def test_defaults_come_from_the_schema():
    s = site.parse_site("mine", 'runtime = "charliecloud"\n')
    assert s.backend == "srun" and s.containall and "SLURM_*" in s.pass_env and s.env == {}


def test_user_dirs_override_and_extend(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "mysite.toml").write_text('runtime = "docker"\n')
    (tmp_path / "b" / "mysite.toml").write_text('runtime = "podman"\n')
    (tmp_path / "b" / "local.toml").write_text('backend = "local"\nruntime = "podman"\n')
    monkeypatch.setenv("HPCAI_SITE_PATH", f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    assert "mysite" in site.available_sites()
    assert site.load_site("mysite").runtime == "podman"  # later folder wins
    assert site.load_site("local").runtime == "podman"


def test_detection_by_hostname_else_fallback(monkeypatch):
    monkeypatch.delenv("HPCAI_SITE", raising=False)
    assert site.detect_site(FakeHost(hostname="jwb0123")) == "jsc-ib"
    assert site.detect_site(FakeHost(hostname="frontier01234")) == "cray-ex-amd"
    assert site.detect_site(FakeHost(hostname="login22.perlmutter")) == "cray-ex-nvidia"
    assert site.detect_site(FakeHost(hostname="laptop")) == "generic-slurm"
    assert site.detect_site(FakeHost(hostname="laptop", commands=())) == "local"
    monkeypatch.setenv("HPCAI_SITE", "jsc-ib")
    assert site.resolve_site(None, FakeHost(hostname="laptop")).name == "jsc-ib"
    assert site.resolve_site("local", FakeHost()).name == "local"  # --site wins


def test_binds_newest_libfabric_and_optional_only_if_present():
    host = FakeHost(paths={"/opt/cray/libfabric/1.9.0/lib64", "/opt/cray/libfabric/1.22.0/lib64",
                           "/opt/cray/libfabric/2.3.1/lib64", "/usr/share/libdrm"})
    binds, warnings = site.site_binds(site.load_site("cray-ex-amd"), host)
    assert binds == [("/opt/cray/libfabric/2.3.1/lib64", "/host/lib"), ("/usr", "/host/usr"),
                     ("/var/spool/slurmd", "/var/spool/slurmd"), ("/usr/share/libdrm", "/usr/share/libdrm")]
    assert warnings == []
