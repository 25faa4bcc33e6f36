"""The components manifest: pins, alternates, --set / <NAME>_VERSION selection, unverified versions."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hpcai.image import components
from hpcai.image.components import UNVERIFIED
from hpcai.errors import UsageError

REPO = Path(__file__).resolve().parents[3]
from hpcai.resources import data_path

HEX64 = re.compile(r"^[0-9a-f]{64}$")


def test_every_pinned_source_has_version_url_and_sha256():
    comps = components.manifest()
    for name in ("libfabric", "openmpi", "mpich", "pmix", "aws-ofi-nccl", "horovod", "nccl-tests",
                 "osu-micro-benchmarks"):
        assert name in comps
    for comp in comps.values():
        for src in comp.known.values():
            # rccl-tests alone has no trusted checksum for its release tag (an alternate: --allow-unverified).
            assert HEX64.match(src.sha256) or (comp.name == "rccl-tests" and not src.verified), \
                (comp.name, src.version)
            # Debian's repacks are `debian:pool/…` paths under the build's own Debian archive.
            assert src.url.startswith(("https://", "debian:pool/")), (comp.name, src.url)
            assert src.version.removesuffix("-archive") in src.url
            assert "{" not in src.url


def test_defaults_match_the_reference_versions():
    comps = components.manifest()
    assert comps["libfabric"].default.version == "2.5.1"
    assert comps["libfabric"].default.sha256.startswith("ac34788a")
    assert comps["openmpi"].default.url.endswith("/v5.0/openmpi-5.0.10.tar.bz2")


def test_set_selects_a_vetted_alternate_with_its_checksum():
    chosen = components.resolve(components.parse_sets(["libfabric=2.2.0"]))
    assert chosen["libfabric"].version == "2.2.0"
    assert chosen["libfabric"].sha256.startswith("ff6d0524")
    assert chosen["openmpi"].version == "5.0.10"  # others keep their defaults


def test_env_selection_and_empty_means_unset():
    env = {"LIBFABRIC_VERSION": "2.5.0", "OSU_MICRO_BENCHMARKS_VERSION": "7.5.1", "MPICH_VERSION": ""}
    assert components.env_selections(env) == {"libfabric": "2.5.0", "osu-micro-benchmarks": "7.5.1"}


def test_unknown_version_needs_allow_unverified():
    with pytest.raises(UsageError, match=r"libfabric 9\.9\.9 has no known sha256; known versions: 2\.5\.1, "):
        components.resolve({"libfabric": "9.9.9"})
    src = components.resolve({"libfabric": "9.9.9"}, allow_unverified=True)["libfabric"]
    assert src.sha256 == UNVERIFIED and not src.verified
    assert src.url.endswith("/v9.9.9/libfabric-9.9.9.tar.bz2")


def test_unverified_version_uses_the_url_template():
    # horovod's default url is one concrete PyPI file; other versions use the sdist path pattern.
    src = components.resolve({"horovod": "0.28.0"}, allow_unverified=True)["horovod"]
    assert src.url == "https://files.pythonhosted.org/packages/source/h/horovod/horovod-0.28.0.tar.gz"


def test_unknown_component_and_malformed_set_are_refused():
    with pytest.raises(UsageError, match=r"unknown component 'libfabrik'; valid: aws-ofi-nccl, "):
        components.parse_sets(["libfabrik=1"])
    with pytest.raises(UsageError, match="NAME=VERSION"):
        components.parse_sets(["libfabric"])


# fetch.sh is the one download+verify helper every install script uses: run it for real on a
# local file (the air-gapped "sources/" path), good and tampered.
@pytest.fixture
def build_dir(tmp_path: Path) -> Path:
    (tmp_path / "sources").mkdir()
    return tmp_path


def _fetch(build_dir: Path, url: str, sha: str) -> subprocess.CompletedProcess:
    script = data_path("dockerfiles", "install", "fetch.sh")
    return subprocess.run(["bash", str(script), url, sha], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HPCAI_BUILD": str(build_dir)}, check=False)


def test_fetch_verifies_and_names_the_file_on_mismatch(build_dir: Path):
    tarball = build_dir / "sources" / "libfabric-2.5.1.tar.bz2"
    tarball.write_bytes(b"pretend tarball\n")
    good = subprocess.run(["sha256sum", str(tarball)], capture_output=True, text=True).stdout.split()[0]
    url = "https://example.invalid/v2.5.1/libfabric-2.5.1.tar.bz2"
    ok = _fetch(build_dir, url, good)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == str(build_dir / "downloads" / "libfabric-2.5.1.tar.bz2")
    bad = _fetch(build_dir, url, "0" * 64)
    assert bad.returncode != 0
    assert f"checksum mismatch for libfabric-2.5.1.tar.bz2: expected {'0' * 64}, got {good}" in bad.stderr


def test_failed_download_stops_the_install_script(build_dir: Path):
    """fetch inside "$(...)" must still stop the script (it once ran on and failed later in tar)."""
    script = data_path("dockerfiles", "install", "pmix.sh")
    res = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False,
                         env={"PATH": "/usr/bin:/bin", "HPCAI_BUILD": str(build_dir),
                              "PMIX_URL": "file:///nonexistent/pmix-0.tar.bz2", "PMIX_SHA256": "0" * 64})
    assert res.returncode != 0
    assert "download failed: file:///nonexistent/pmix-0.tar.bz2" in res.stderr
    assert "tar:" not in res.stderr and "configure" not in res.stderr


def test_fetch_names_a_url_fragment_file_and_resolves_debian_paths(build_dir: Path):
    """URL#NAME saves as NAME (GitHub archives of release/shs-14.0.0 share one last part), and a
    debian:pool/… source is fetched from the Debian archive of the build's apt sources."""
    (build_dir / "sources" / "shs-libcxi-14.0.0.tar.gz").write_bytes(b"cxi")
    sha = hashlib.sha256(b"cxi").hexdigest()
    url = "https://github.com/HewlettPackard/shs-libcxi/archive/refs/tags/release/shs-14.0.0.tar.gz#shs-libcxi-14.0.0.tar.gz"
    res = _fetch(build_dir, url, sha)
    assert res.returncode == 0 and res.stdout.strip().endswith("/downloads/shs-libcxi-14.0.0.tar.gz"), res.stderr
    lib = data_path("dockerfiles", "install", "lib.sh")
    resolved = subprocess.run(["bash", "-c", f". {lib}; debian_url pool/main/p/pmix/pmix_4.2.2.orig.tar.xz"],
                              capture_output=True, text=True, check=False)
    lines = [line.split() for f in (*Path("/etc/apt").rglob("*.sources"), *Path("/etc/apt").rglob("*.list"))
             for line in f.read_text().splitlines()]
    uris = [w[-1] if w[0] == "URIs:" else w[1] for w in lines if w and w[0] in ("URIs:", "deb") and len(w) > 1
            and (w[-1] if w[0] == "URIs:" else w[1]).rstrip("/").endswith("/debian")]
    if uris:  # this machine's own archive: the path lands under it
        assert resolved.stdout.strip() == uris[0].rstrip("/") + "/pool/main/p/pmix/pmix_4.2.2.orig.tar.xz"
    else:
        assert resolved.returncode != 0 and "no Debian archive in the build's apt sources" in resolved.stderr


def test_fetch_warns_for_unverified(build_dir: Path):
    (build_dir / "sources" / "x-1.tar.gz").write_bytes(b"x")
    res = _fetch(build_dir, "https://example.invalid/x-1.tar.gz", UNVERIFIED)
    assert res.returncode == 0
    assert "x-1.tar.gz is NOT verified" in res.stderr


@pytest.mark.skipif(not shutil.which("shellcheck"), reason="shellcheck missing")
def test_shellcheck_clean_on_every_install_script():
    scripts = sorted(str(p) for p in data_path("dockerfiles").rglob("*.sh"))
    scripts += sorted(str(p) for p in data_path("apptainer").rglob("*.sh"))
    assert len(scripts) >= 10
    res = subprocess.run(["shellcheck", "-x", "-P", "SCRIPTDIR", *scripts], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_rccl_tests_is_pinned_to_the_mirrors_commit_archive():
    comp = components.manifest()["rccl-tests"]
    src = comp.default
    assert src.url == f"https://github.com/ROCm/rccl-tests/archive/{src.version}.tar.gz"
    assert len(src.version) == 40 and src.verified
    mirrored = REPO / "tests/infra/mirror/github/ROCm/rccl-tests" / f"{src.version}.tar.gz"
    assert hashlib.sha256(mirrored.read_bytes()).hexdigest() == src.sha256
    assert f"{src.sha256}  github/ROCm/rccl-tests/{src.version}.tar.gz" in (
        REPO / "tests/infra/mirror/SHA256SUMS").read_text()
    # The release tag has no known checksum: "unverified" makes fetch.sh download it unchecked with a warning.
    tag = next(a for a in comp.alternates if a.version == "rocm-6.4.0")
    assert tag.sha256 == UNVERIFIED and tag.env()["RCCL_TESTS_SHA256"] == "unverified"
    assert "RCCL_TESTS_URL" in (data_path("payloads") / "rccl-tests/build.sh").read_text()


# autotools_install (install/lib.sh) is the one configure/make/install sequence of the stack's
# install scripts. Run it for real: a small source archive with a `configure` that writes a
# Makefile, served from sources/ (the air-gapped path) and checked by its sha256.
TOY_CONFIGURE = """#!/bin/sh
prefix=NONE
for arg in "$@"; do case $arg in --prefix=*) prefix=${arg#--prefix=} ;; esac; done
echo "$@" > configure.args
printf 'all:\\n\\techo built > built.txt\\ninstall:\\n\\tmkdir -p %s/bin %s/lib\\n' "$prefix" "$prefix" > Makefile
printf '\\tprintf "%%s\\\\n" "#!/bin/sh" "echo fi_info 9.9" > %s/bin/fi_info\\n\\tchmod +x %s/bin/fi_info\\n' "$prefix" "$prefix" >> Makefile
"""


def _toy_archive(build_dir: Path, name: str) -> str:
    src = build_dir / "toy" / name
    src.mkdir(parents=True)
    (src / "configure").write_text(TOY_CONFIGURE)
    (src / "configure").chmod(0o755)
    archive = build_dir / "sources" / f"{name}.tar.gz"
    subprocess.run(["tar", "-czf", str(archive), "-C", str(build_dir / "toy"), name], check=True)
    return subprocess.run(["sha256sum", str(archive)], capture_output=True, text=True).stdout.split()[0]


@pytest.mark.parametrize("script, var", [("pmix.sh", "PMIX"), ("libfabric.sh", "LIBFABRIC")])
def test_an_install_script_configures_builds_and_installs_the_checked_archive(build_dir: Path, script, var):
    sha = _toy_archive(build_dir, "toy-1.0")
    prefix = build_dir / "prefix"
    env = {"PATH": "/usr/bin:/bin", "HPCAI_BUILD": str(build_dir), "HPCAI_PREFIX": str(prefix), "HPCAI_JOBS": "1",
           "HPCAI_FAMILY": "cpu", f"{var}_URL": "https://example.invalid/toy-1.0.tar.gz", f"{var}_SHA256": sha}
    res = subprocess.run(["bash", str(data_path("dockerfiles", "install", script))], capture_output=True,
                         text=True, env=env, check=False)
    assert res.returncode == 0, res.stderr
    tree = build_dir / "src" / "toy-1.0"
    args = (tree / "configure.args").read_text().split()
    assert args[:2] == [f"--prefix={prefix}", "--disable-static"]
    if script == "libfabric.sh":
        assert args[2:] == ["--enable-tcp", "--enable-shm", "--enable-rxm"]  # no GPU options on a CPU family
        assert res.stdout.splitlines()[-1] == "fi_info 9.9"  # the script's own check ran the installed tool
    assert (tree / "built.txt").read_text() == "built\n" and (prefix / "bin" / "fi_info").exists()
    env[f"{var}_SHA256"] = "0" * 64  # a tampered archive stops before configure
    (tree / "configure.args").unlink()
    bad = subprocess.run(["bash", str(data_path("dockerfiles", "install", script))], capture_output=True,
                         text=True, env=env, check=False)
    assert bad.returncode != 0 and "checksum mismatch for toy-1.0.tar.gz" in bad.stderr
    assert not (tree / "configure.args").exists()
