"""hpcai-entrypoint in real containers: which libfabric gets mapped, under Docker and Charliecloud.

The proof is the loader's own record: a process started through the entrypoint loads
libfabric.so.1 (`LD_PRELOAD=libfabric.so.1 cat /proc/self/maps`, i.e. the same search a
DT_NEEDED dependency gets) and prints its /proc/self/maps; `fi_info -l` must also succeed with
that copy. The "host" directory holds a real copy of the image's own libfabric, so it loads,
and its mapped path (/host/lib/...) tells it apart from the image's.

Image: the session's `pytorch_cpu_image` (tests/conftest.py) when it exists and carries
libfabric and fi_info; otherwise a stand-in built here from debian:bookworm-slim with Debian's
libfabric1/libfabric-bin plus the entrypoint, installed exactly as in hpcai images
(/opt/hpcai/bin/hpcai-entrypoint, /opt/hpcai/entrypoint.d/). The -ss case adds a layer with
the libfabric baked into /opt/hpcai/hpc-libs (what `--hpc-libs DIR` produces).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENTRY = "/opt/hpcai/bin/hpcai-entrypoint"
STANDIN_TAG = "hpcai-test/entrypoint-standin:latest"
# The payload: does libfabric work (fi_info), which file did the loader map, what env is seen.
PROBE = ('fi_info -l >/dev/null 2>&1 && echo FI_INFO_OK; '
         'LD_PRELOAD=libfabric.so.1 cat /proc/self/maps | grep libfabric; echo ---ENV---; env')
STANDIN_DOCKERFILE = f"""\
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends libfabric1 libfabric-bin \\
    && rm -rf /var/lib/apt/lists/*
COPY hpcai-entrypoint hpcai-lib.sh /opt/hpcai/bin/
COPY hooks.d/ /opt/hpcai/entrypoint.d/
RUN mkdir -p /host/lib /host/usr
ENV HPCAI_PREFIX=/opt/hpcai
ENTRYPOINT ["{ENTRY}"]
"""


def sh(*argv: str, timeout: float = 900, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                          check=False, **kw)


def docker_build(context: Path, tag: str) -> None:
    proc = sh("docker", "build", "--network", "host", "-q", "-t", tag, str(context),
              env={**os.environ, "DOCKER_BUILDKIT": "0"})
    assert proc.returncode == 0, proc.stderr[-3000:]


@dataclass
class Probe:
    rc: int
    maps: list[str]
    fi_info_ok: bool
    env: dict[str, str]
    stdout: str
    stderr: str

    @property
    def warnings(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if "hpcai-entrypoint: warning" in line]


def parse_probe(proc: subprocess.CompletedProcess) -> Probe:
    head, _, env_text = proc.stdout.partition("---ENV---\n")
    maps = sorted({line.split()[-1] for line in head.splitlines() if "libfabric" in line})
    env = dict(line.split("=", 1) for line in env_text.splitlines() if "=" in line)
    return Probe(proc.returncode, maps, "FI_INFO_OK" in head, env, proc.stdout, proc.stderr)


def _usable(tag: str) -> bool:
    """The real image can serve when it has the entrypoint, libfabric and fi_info."""
    proc = sh("docker", "run", "--rm", "--entrypoint", "sh", tag, "-c",
              "ldconfig -p | grep -q 'libfabric.so.1 ' && command -v fi_info >/dev/null "
              f"&& test -x {ENTRY}")
    return proc.returncode == 0


@pytest.fixture(scope="module")
def image(request) -> str:
    try:
        tag = request.getfixturevalue("pytorch_cpu_image")
    except pytest.FixtureLookupError:
        tag = None
    if tag and _usable(tag):
        return tag
    if tag:
        warnings.warn(f"{tag} lacks the entrypoint, libfabric or fi_info; using the stand-in image")
    with tempfile.TemporaryDirectory() as ctx:
        for name in ("hpcai-entrypoint", "hpcai-lib.sh"):
            shutil.copy(REPO / "entrypoints" / name, Path(ctx) / name)
        shutil.copytree(REPO / "entrypoints/hooks.d", Path(ctx) / "hooks.d")
        (Path(ctx) / "Dockerfile").write_text(STANDIN_DOCKERFILE)
        docker_build(Path(ctx), STANDIN_TAG)
    return STANDIN_TAG


@pytest.fixture(scope="module")
def own_libfabric(image) -> str:
    """The image's own libfabric file (what gets mapped when nothing is swapped)."""
    proc = sh("docker", "run", "--rm", "-e", "HPCAI_HOOK_HOST_FABRIC=0", image, "sh", "-c", PROBE)
    probe = parse_probe(proc)
    assert probe.rc == 0 and probe.fi_info_ok and len(probe.maps) == 1, proc.stdout + proc.stderr
    return probe.maps[0]


@pytest.fixture(scope="module")
def host_lib(image, own_libfabric, tmp_path_factory) -> Path:
    """A "host" libfabric dir: a real copy of the image's libfabric under its versioned name."""
    out = tmp_path_factory.mktemp("hostlib")
    out.chmod(0o755)
    cid = sh("docker", "create", image).stdout.strip()
    try:
        name = os.path.basename(own_libfabric)
        assert sh("docker", "cp", "-L", f"{cid}:{own_libfabric}", str(out / name)).returncode == 0
    finally:
        sh("docker", "rm", "-f", cid)
    (out / "libfabric.so.1").symlink_to(name)
    return out


@pytest.fixture(scope="module")
def ss_image(image, host_lib, tmp_path_factory) -> str:
    """The image with its libfabric baked into /opt/hpcai/hpc-libs (an -ss image's layout)."""
    ctx = tmp_path_factory.mktemp("ssctx")
    shutil.copytree(host_lib, ctx / "hpc-libs", symlinks=True)
    (ctx / "Dockerfile").write_text(
        f"FROM {image}\nCOPY hpc-libs/ /opt/hpcai/hpc-libs/\n"
        "ENV HPCAI_HPC_LIBS=/opt/hpcai/hpc-libs\n")
    tag = f"{image.rsplit(':', 1)[0]}-ss:test"
    docker_build(ctx, tag)
    return tag


def lib_copy(src: Path, dst: Path, versions: dict[str, str | None]) -> Path:
    """dst/ with libfabric files: name -> None (a real copy of src) or a symlink target."""
    dst.mkdir(mode=0o755)
    real = next(p for p in src.iterdir() if not p.is_symlink())
    for name, target in versions.items():
        if target is None:
            shutil.copy(real, dst / name)
        else:
            (dst / name).symlink_to(target)
    return dst


# --- Docker -------------------------------------------------------------------------------

def docker_probe(image: str, *, binds: dict[Path, str] = {}, env: dict[str, str] = {},
                 args: list[str] | None = None, extra: list[str] = ()) -> Probe:
    argv = ["docker", "run", "--rm", *extra]
    for src, dst in binds.items():
        argv += ["-v", f"{src}:{dst}:ro"]
    for key, value in env.items():
        argv += ["-e", f"{key}={value}"]
    argv += [image, *(args if args is not None else ["sh", "-c", PROBE])]
    return parse_probe(sh(*argv, timeout=120))


pytestmark = pytest.mark.timeout(1200)


@pytest.mark.docker
def test_docker_empty_host_dir_maps_the_image_libfabric(image, own_libfabric, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    probe = docker_probe(image, binds={empty: "/host/lib"}, env={"HPCAI_STRICT_FABRIC": "1"})
    assert (probe.rc, probe.maps, probe.fi_info_ok) == (0, [own_libfabric], True)
    assert not own_libfabric.startswith("/host/")
    assert probe.env["HPCAI_FABRIC"] == "image" and probe.warnings == []


@pytest.mark.docker
def test_docker_host_libfabric_is_mapped(image, host_lib):
    probe = docker_probe(image, binds={host_lib: "/host/lib"})
    name = next(p.name for p in host_lib.iterdir() if not p.is_symlink())
    assert (probe.rc, probe.maps, probe.fi_info_ok) == (0, [f"/host/lib/{name}"], True)
    assert probe.env["HPCAI_FABRIC"] == "host"
    private, *rest = probe.env["LD_LIBRARY_PATH"].split(":")
    assert private.startswith("/tmp/hpcai-") and rest[-1] == "/host/lib"


@pytest.mark.docker
def test_docker_ss_image_maps_baked_copy_and_host_still_wins(ss_image, host_lib):
    probe = docker_probe(ss_image)
    assert probe.rc == 0 and probe.fi_info_ok
    assert len(probe.maps) == 1 and probe.maps[0].startswith("/opt/hpcai/hpc-libs/libfabric.so.1")
    assert probe.env["HPCAI_FABRIC"] == "baked"
    with_host = docker_probe(ss_image, binds={host_lib: "/host/lib"})
    assert len(with_host.maps) == 1 and with_host.maps[0].startswith("/host/lib/")


@pytest.mark.docker
def test_docker_user_variables_are_untouched(image, host_lib):
    user = {"RANK": "7", "MASTER_ADDR": "10.9.8.7", "LD_LIBRARY_PATH": "/user/lib",
            "FI_MR_CACHE_MONITOR": "kdreg2", "SLINGSHOT_VNIS": "1234", "PALS_APINFO": "/x"}
    slurm = {"SLURM_JOB_ID": "1234", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3",
             "SLURM_LOCALID": "1", "SLURM_NTASKS": "8", "SLURM_NODEID": "0",
             "SLURM_TASKS_PER_NODE": "4(x2)", "SLURM_JOB_NODELIST": "nid[001234-001235]"}
    probe = docker_probe(image, binds={host_lib: "/host/lib"}, env={**user, **slurm})
    assert probe.rc == 0 and probe.maps[0].startswith("/host/lib/")
    assert {k: probe.env[k] for k in ("RANK", "MASTER_ADDR", "FI_MR_CACHE_MONITOR",
                                      "SLINGSHOT_VNIS", "PALS_APINFO")} == {
        k: user[k] for k in ("RANK", "MASTER_ADDR", "FI_MR_CACHE_MONITOR", "SLINGSHOT_VNIS",
                             "PALS_APINFO")}
    parts = probe.env["LD_LIBRARY_PATH"].split(":")
    assert parts[0] == "/tmp/hpcai-nouser-1234-0-3" and parts[1:2] == ["/user/lib"]
    assert (probe.env["LOCAL_RANK"], probe.env["WORLD_SIZE"], probe.env["LOCAL_WORLD_SIZE"]) == ("1", "8", "4")


@pytest.mark.docker
def test_docker_jsc_suffix_resolves_via_etc_hosts_and_warns_otherwise(image):
    env = {"SLURM_JOB_ID": "9", "SLURM_PROCID": "0", "SLURM_JOB_NODELIST": "jwb[0001-0004]",
           "HPCAI_MASTER_ADDR_SUFFIX": "i"}
    probe = docker_probe(image, env=env, extra=["--add-host", "jwb0001i:10.11.12.13"])
    assert (probe.rc, probe.env["MASTER_ADDR"], probe.warnings) == (0, "10.11.12.13", [])
    missing = docker_probe(image, env=env)
    assert (missing.rc, missing.env["MASTER_ADDR"]) == (0, "jwb0001")
    assert missing.warnings == ["hpcai-entrypoint: warning: jwb0001i does not resolve; "
                                "MASTER_ADDR stays jwb0001"]


@pytest.mark.docker
def test_docker_two_versions_and_broken_links_pick_newest(image, host_lib, tmp_path):
    name = next(p.name for p in host_lib.iterdir() if not p.is_symlink())
    lib = lib_copy(host_lib, tmp_path / "two", {
        name: None, "libfabric.so.1.9.9": None, "libfabric.so.1": "libfabric.so.1.9.9",
        "libfabric.so.1.99.0": "/nonexistent/libfabric.so.1.99.0", "libcxi.so.1": "/nonexistent"})
    probe = docker_probe(image, binds={lib: "/host/lib"})
    assert (probe.rc, probe.maps, probe.fi_info_ok) == (0, [f"/host/lib/{name}"], True)
    assert len(probe.warnings) == 2
    assert "broken symlink /host/lib/libfabric.so.1.99.0 ignored" in probe.warnings[0]
    assert "several libfabric versions in /host/lib" in probe.warnings[1] and name in probe.warnings[1]


@pytest.mark.docker
def test_docker_unreadable_host_dir_falls_back_or_stops_in_strict_mode(image, own_libfabric, host_lib, tmp_path):
    lib = lib_copy(host_lib, tmp_path / "locked", {"libfabric.so.1.20.0": None})
    lib.chmod(0o700)  # owned by root; the container runs as nobody
    probe = docker_probe(image, binds={lib: "/host/lib"}, extra=["--user", "65534:65534"])
    assert (probe.rc, probe.maps) == (0, [own_libfabric])
    assert probe.warnings == ["hpcai-entrypoint: warning: host library dir /host/lib is not "
                              "readable; using the image's libfabric"]
    strict = docker_probe(image, binds={lib: "/host/lib"}, env={"HPCAI_STRICT_FABRIC": "1"},
                          extra=["--user", "65534:65534"])
    assert strict.rc == 78 and strict.maps == [] and "FI_INFO_OK" not in strict.stdout
    assert "error: host library dir /host/lib is not readable" in strict.stderr


@pytest.mark.docker
def test_docker_empty_tasks_per_node_still_launches(image):
    env = {"SLURM_JOB_ID": "3", "SLURM_PROCID": "1", "SLURM_TASKS_PER_NODE": ""}
    probe = docker_probe(image, env=env)
    assert probe.rc == 0 and probe.env["RANK"] == "1" and "LOCAL_WORLD_SIZE" not in probe.env
    assert len(probe.warnings) == 1


@pytest.mark.docker
def test_docker_check_reports_host_fabric_and_fails_on_unusable_one(image, host_lib, tmp_path):
    name = next(p.name for p in host_lib.iterdir() if not p.is_symlink())
    ok = sh("docker", "run", "--rm", "-v", f"{host_lib}:/host/lib:ro", image, "--check", timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    lines = ok.stdout.splitlines()
    assert f"libfabric:        /host/lib/{name} (source: host)" in lines
    assert any(line.startswith("providers:") and "tcp" in line for line in lines)
    assert lines[-1] == "OK"
    junk = tmp_path / "junk"
    junk.mkdir(mode=0o755)
    (junk / "libfabric.so.1.20.0").write_text("not an ELF file\n")
    bad = sh("docker", "run", "--rm", "-v", f"{junk}:/host/lib:ro", image, "--check", timeout=120)
    assert bad.returncode == 1
    assert bad.stdout.splitlines()[-1] == "FAIL: host libfabric /host/lib/libfabric.so.1.20.0 cannot be loaded"


# --- Charliecloud ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ch_dir(tmp_path_factory):
    """ch_dir(docker_tag) -> the image as a Charliecloud directory image (ch-convert tar -> dir).

    Used for the -ss variant: packing a second SquashFS would cost minutes of CI for a layer
    of one file; a directory image is what `ch-convert -o dir` gives sites, and ch-run runs it
    the same way.
    """
    env = {**os.environ, "USER": os.environ.get("USER") or "root"}
    made: list[Path] = []

    def convert(tag: str) -> Path:
        work = tmp_path_factory.mktemp("chdir")
        made.append(work)
        cid = sh("docker", "create", tag).stdout.strip()
        try:
            with open(work / "image.tar", "wb") as tar:
                assert subprocess.run(["docker", "export", cid], stdout=tar, check=False).returncode == 0
        finally:
            sh("docker", "rm", "-f", cid)
        proc = sh("ch-convert", "-i", "tar", "-o", "dir", str(work / "image.tar"), str(work / "root"), env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        (work / "image.tar").unlink()
        return work / "root"

    yield convert
    for work in made:  # a full image tree: do not leave it to pytest's basetemp rotation
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def ch_job():
    """A Slurm job id for ch-run probes. ch-run resets TMPDIR to /tmp, which it shares with the
    host, so the entrypoint's private dirs land in the host's /tmp: they are removed here."""
    job = str(os.getpid() * 100 + int(time.time()) % 100)
    yield job
    for path in Path("/tmp").glob(f"hpcai-hpcaitest-{job}-*"):
        shutil.rmtree(path, ignore_errors=True)


def ch_probe(root: Path, job: str, *, binds: dict[Path, str] = {},
             env: dict[str, str] = {}) -> Probe:
    argv = ["ch-run"]
    for src, dst in binds.items():
        argv += ["-b", f"{src}:{dst}"]
    argv += [str(root), "--", ENTRY, "sh", "-c", PROBE]
    # ch-run passes the caller's environment through, as under srun; keep it small and known.
    base = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "USER": "hpcaitest", "HOME": "/nonexistent", "SLURM_JOB_ID": job, "SLURM_PROCID": "0"}
    return parse_probe(sh(*argv, env={**base, **env}, timeout=120))


@pytest.mark.charliecloud
def test_charliecloud_own_host_and_ss_copies_are_mapped(image, ss_image, own_libfabric, host_lib,
                                                        ch_squashfs, ch_dir, ch_job, tmp_path):
    root = Path(ch_squashfs(image))
    empty = tmp_path / "empty"
    empty.mkdir()
    own = ch_probe(root, ch_job, binds={empty: "/host/lib"})
    assert (own.rc, own.maps, own.fi_info_ok) == (0, [own_libfabric], True), own.stderr
    host = ch_probe(root, ch_job, binds={host_lib: "/host/lib"}, env={"RANK": "5"})
    name = next(p.name for p in host_lib.iterdir() if not p.is_symlink())
    assert (host.rc, host.maps, host.fi_info_ok) == (0, [f"/host/lib/{name}"], True), host.stderr
    assert host.env["RANK"] == "5"  # the user's value survives
    # the private dir is per job, step and rank, in the /tmp ch-run shares with the host
    private = Path(f"/tmp/hpcai-hpcaitest-{ch_job}-0-0")
    assert host.env["LD_LIBRARY_PATH"].split(":")[0] == str(private)
    assert os.readlink(private / "libfabric.so.1") == f"/host/lib/{name}"
    ss = ch_probe(ch_dir(ss_image), ch_job)
    assert ss.rc == 0 and ss.maps[0].startswith("/opt/hpcai/hpc-libs/"), ss.stderr


@pytest.mark.charliecloud
def test_charliecloud_bad_host_dir_never_breaks_the_launch(image, own_libfabric, host_lib, ch_squashfs,
                                                           ch_job, tmp_path):
    root = Path(ch_squashfs(image))
    name = next(p.name for p in host_lib.iterdir() if not p.is_symlink())
    lib = lib_copy(host_lib, tmp_path / "two", {
        name: None, "libfabric.so.1.9.9": None, "libfabric.so.1.99.0": "/nonexistent/x"})
    probe = ch_probe(root, ch_job, binds={lib: "/host/lib"})
    assert (probe.rc, probe.maps) == (0, [f"/host/lib/{name}"])
    assert len(probe.warnings) == 2
    junk = tmp_path / "junk"
    junk.mkdir(mode=0o755)
    (junk / "README").write_text("no libfabric here\n")
    fallback = ch_probe(root, ch_job, binds={junk: "/host/lib"})
    assert (fallback.rc, fallback.maps) == (0, [own_libfabric])
    strict = ch_probe(root, ch_job, binds={junk: "/host/lib"}, env={"HPCAI_STRICT_FABRIC": "1"})
    assert strict.rc == 78 and "no usable libfabric.so.1 in /host/lib" in strict.stderr
