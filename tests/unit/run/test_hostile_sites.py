"""Hostile and careless site files (issue 12): a site in a shared HPCAI_SITE_PATH is read by every
launch, so each value that reaches argv, a bind or a generated script is checked when the file is
read. Each case is a real `hpcai launch --dry-run` subprocess: exit 2, one line naming the file and
the key, no traceback, nothing written."""

from __future__ import annotations

import subprocess

import pytest

# (site TOML, fragment of the error after "<file>: ")
BAD_SITES = [
    ('partition = "gpu\\ntouch /tmp/x #"', "partition 'gpu\\ntouch /tmp/x #' holds a control character"),
    ('account = "proj\\r"', "account 'proj\\r' holds a control character"),
    ('srun_options = ["--exclusive\\nrm -rf ~"]', "srun_options '--exclusive\\nrm -rf ~' holds a control"),
    ('sbatch_options = ["--qos=x\\nid"]', "sbatch_options '--qos=x\\nid' holds a control character"),
    ('sbatch_options = ["--qos=\\u001b]8;;http://x\\u0007"]', "holds a control character"),
    ('distribution = "block\\tcyclic"', "distribution 'block\\tcyclic' holds a control character"),
    ('cpu_bind = "cores\\u0000"', "cpu_bind 'cores\\x00' holds a control character"),
    ('env = { FOO = "a\\nb" }', "env 'a\\nb' holds a control character"),
    ('env = { "1BAD" = "x" }', "env key '1BAD' is not a variable name"),
    ('env = { "A B" = "x" }', "env key 'A B' is not a variable name"),
    ('env = { "X;id" = "x" }', "env key 'X;id' is not a variable name"),
    ('binds = ["relative/dir"]', "binds 'relative/dir': expected /SRC[:/DST[:ro|rw]] with absolute paths"),
    ('binds = ["/a:relative"]', "binds '/a:relative': expected /SRC[:/DST"),
    ('binds = ["/a,/b"]', "binds '/a,/b': expected /SRC[:/DST"),
    ('binds = ["/a:/b:/c"]', "binds '/a:/b:/c': expected /SRC[:/DST"),
    ('binds = [""]', "binds '': expected /SRC[:/DST"),
    ('optional_binds = ["~/data"]', "optional_binds '~/data': expected /SRC[:/DST"),
    ('optional_binds = ["/x\\n:/y"]', "optional_binds '/x\\n:/y' holds a control character"),
    ('libfabric_dest = "host/lib"', "libfabric_dest 'host/lib': expected an absolute path"),
    ('libfabric_dest = "/host/lib:/x"', "libfabric_dest '/host/lib:/x': expected an absolute path"),
    ('libfabric = "opt/cray/libfabric/*/lib64"', "libfabric 'opt/cray/libfabric/*/lib64': expected an absolute"),
    ('pass_env = ["SLURM_*", "$(id)"]', "pass_env '$(id)': expected a variable name"),
    ('pass_env = ["A*B"]', "pass_env 'A*B': expected a variable name, optionally ending in *"),
    ('master_addr_suffix = "i;id"', "master_addr_suffix 'i;id': expected host name characters"),
    ('master_addr_suffix = "-ib`id`"', "master_addr_suffix '-ib`id`': expected host name characters"),
    ("gpus_per_node = -1", "gpus_per_node -1: expected between 0 and 64"),
    ("gpus_per_node = 100000", "gpus_per_node 100000: expected between 0 and 64"),
    ("cpus_per_node = -8", "cpus_per_node -8: expected between 0 and 4096"),
    ("master_port = 70000", "master_port 70000: expected a port"),
    ("master_port = -1", "master_port -1: expected a port"),
    ('gpus_per_node = "4"', "key 'gpus_per_node' must be an integer, got '4'"),
    ("gpus_per_node = true", "key 'gpus_per_node' must be an integer, got True"),
    ('binds = "/scratch"', "key 'binds' must be a list of strings, got '/scratch'"),
    ("binds = [1, 2]", "key 'binds' must be a list of strings, got [1, 2]"),
    ('env = { A = ["x"] }', "key 'env' must be a table of string values"),
    ('containall = "yes"', "key 'containall' must be true or false"),
    ('runtime = "lxc"', "runtime 'lxc' is not one of: apptainer"),
    ('backend = "pbs"', "backend 'pbs' is not one of: srun, mpiexec, flux, local"),
    ('gpu = "intel"', "gpu 'intel' is not one of: nvidia, amd, none"),
    ('mpi = "pmi9"', "mpi 'pmi9' is not one of:"),
    ('mpi_types = ["pmix", "nope"]', "mpi_types 'nope' is not one of:"),
    ('apptainer_command = "shell"', "apptainer_command 'shell' is not one of: exec, run"),
    ('hostnames = ["("]', "bad hostnames regex '('"),
    ('hostname = ["nid"]', "unknown key(s) hostname; valid:"),
    ("backend = ", "malformed TOML"),
    ("[[binds]]\nsrc = 1", "key 'binds' must be a list of strings"),
]


def _launch(hpcai_exe, cwd, env, *extra):
    return subprocess.run([*hpcai_exe, "launch", "--dry-run", "--image", "x.sif", *extra, "sanity"],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=60)


@pytest.fixture
def env_with(tmp_path):
    import os

    def make(text: str | bytes, name: str = "shared") -> dict[str, str]:
        folder = tmp_path / "sites"
        folder.mkdir(exist_ok=True)
        data = text if isinstance(text, bytes) else text.encode()
        (folder / f"{name}.toml").write_bytes(data)
        return {**os.environ, "HPCAI_SITE_PATH": str(folder), "HPCAI_SITE": ""}

    return make


@pytest.mark.hostile
@pytest.mark.parametrize("toml, fragment", BAD_SITES, ids=[c[0][:60] for c in BAD_SITES])
def test_bad_site_value_is_one_line_naming_file_and_key(hpcai_exe, tmp_path, env_with, toml, fragment):
    env = env_with(toml)
    work = tmp_path / "work"
    work.mkdir()
    res = _launch(hpcai_exe, work, env, "--site", "shared")
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {tmp_path / 'sites' / 'shared.toml'}: "), res.stderr
    assert fragment in lines[0], lines[0]
    assert not list(work.iterdir())


@pytest.mark.hostile
@pytest.mark.parametrize("content", [b"\xff\xfe\x00binary\x00", "backend = ", 'runtime = "lxc"', "[x"],
                         ids=["binary", "malformed", "bad value", "cut"])
def test_a_broken_site_in_the_path_does_not_stop_detection(hpcai_exe, tmp_path, env_with, content):
    """One user's broken file in a shared HPCAI_SITE_PATH is skipped, with one warning, when the
    site is detected; asked for by name it is still refused."""
    env = env_with(content, name="aaa-broken")
    res = _launch(hpcai_exe, tmp_path, env)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    warnings = [ln for ln in res.stderr.splitlines() if "aaa-broken" in ln]
    assert len(warnings) == 1 and warnings[0].startswith("warning: site aaa-broken skipped in detection: ")
    named = _launch(hpcai_exe, tmp_path, env, "--site", "aaa-broken")
    assert named.returncode == 2 and len(named.stderr.strip().splitlines()) == 1 and "Traceback" not in named.stderr


def test_a_good_shared_site_with_every_checked_key_loads(hpcai_exe, tmp_path, env_with):
    env = env_with('backend = "srun"\nbinds = ["/scratch", "/opt/a:/opt/b"]\noptional_binds = ["/x:/y"]\n'
                   'env = { NCCL_SOCKET_IFNAME = "hsn0,hsn1", FI_PROVIDER = "cxi" }\npass_env = ["SLINGSHOT_*", "X"]\n'
                   'libfabric = "/opt/cray/libfabric/*/lib64"\nmaster_addr_suffix = "i"\nmaster_port = 29500\n'
                   'description = """two\nlines"""\n')
    res = _launch(hpcai_exe, tmp_path, env, "--site", "shared")
    assert res.returncode == 0, res.stderr
    assert "/opt/a:/opt/b" in res.stdout


@pytest.mark.parametrize("runtime, expected", [("apptainer", "--bind /scratch:/scratch:ro"),
                                               ("docker", "-v /scratch:/scratch:ro"),
                                               ("charliecloud", "-b /scratch ")])
def test_a_read_only_site_bind_keeps_its_option(hpcai_exe, tmp_path, env_with, runtime, expected):
    """`:ro`/`:rw` after the destination, as Apptainer and docker take it (ch-run -b has none)."""
    env = env_with('backend = "srun"\nbinds = ["/scratch:/scratch:ro"]\n')
    res = _launch(hpcai_exe, tmp_path, env, "--site", "shared", "--runtime", runtime)
    assert res.returncode == 0, res.stderr
    assert expected in res.stdout
    mine = _launch(hpcai_exe, tmp_path, env, "--site", "shared", "--runtime", runtime, "--bind", "/mine:/scratch")
    assert "/scratch:ro" not in mine.stdout and "/mine:/scratch" in mine.stdout  # one mount per destination
    assert "--bind /mine:/scratch replaces the site's /scratch:/scratch:ro" in mine.stderr
