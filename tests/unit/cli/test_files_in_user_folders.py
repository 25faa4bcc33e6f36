"""Hostile corpus, round three (issue 25), part D: the files hpcai writes and reads in folders that
a user, or another user, controls (one rule each, in hpcai.files).

Writers, one property over every writer: a symbolic link planted at the exact name it writes (for
a run record also at .reserve, plan.json, status.json, metrics.json and energy/), pointing at a
victim. The victim is never changed, and the writer either refuses in one line (exit 2) or puts
its own regular file where the link was.

Readers, one property over every reader of a file from a user's folder (site files, a record's
plan/status/metrics, baselines, the digests cache, power CSVs) and every way a file is not one: a
FIFO (a reader would wait for ever), a link to /dev/zero (it would fill memory), JSON or TOML
nested 100,000 deep (RecursionError), a sparse file over the size bound, binary garbage. Among many
files it is one warning line naming it and the good ones beside it are still read; named by the
user it is one error line, exit 2. Never a hang (each test has a timeout), a traceback or a
MemoryError.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from run_records import hvd_log, make_run

from hpcai import files
from hpcai.errors import UsageError
from hpcai import record

pytestmark = pytest.mark.hostile

VICTIM = b"the victim's own data\n"
DEEP = 100_000


# ---- writers --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Writer:
    name: str
    target: Callable[[Path], Path]  # tmp -> the name the writer will write (where the link goes)
    run: Callable[..., tuple[int, str]]  # Env -> (exit code, stderr)
    folder: bool = False  # the writer makes a folder there: the link points at a victim folder


def _call(fn: Callable[[], object]) -> tuple[int, str]:
    """A writer called in-process, as the CLI would report it: a refusal is exit 2 and one line."""
    try:
        fn()
    except (UsageError, FileExistsError) as exc:
        return 2, f"error: {exc}\n"
    return 0, ""


@dataclass
class Env:
    tmp: Path
    hpcai: Callable  # the in-process CLI (conftest's fixture)
    hpcai_exe: list[str]  # argv prefix for the CLI as a subprocess


def _cli(env: Env, *argv: str) -> tuple[int, str]:
    res = env.hpcai(*argv)
    return res.exit_code, res.stderr


FAKE_APPTAINER = '#!/bin/sh\nif [ "$1" = inspect ]; then echo "{}"; exit 0; fi\nexit 0\n'


def _launch(env: Env) -> tuple[int, str]:
    """A real `hpcai launch -o out` (a subprocess: signals, exit code) on a stand-in apptainer."""
    fake = env.tmp / "bin" / "apptainer"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(FAKE_APPTAINER)
    fake.chmod(0o755)
    (env.tmp / "img.sif").write_bytes(b"not really a SIF")
    res = subprocess.run([*env.hpcai_exe, "launch", "--site", "local", "--runtime", "apptainer", "--userns",
                          "--image", str(env.tmp / "img.sif"), "-o", str(env.tmp / "out"), "--no-entrypoint",
                          "--cmd", "--", "true"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}", "HOME": str(env.tmp),
                              "XDG_CACHE_HOME": str(env.tmp / "cache"), "HPCAI_SITE": ""})
    return res.returncode, res.stderr


def _records(tmp: Path) -> None:
    from hpcai.results.runs import finalize

    for name in ("a", "b"):
        finalize(make_run(tmp / "runs", name, "hvd-synthetic", hvd_log(1000)))


def _context(env: Env) -> tuple[int, str]:
    return _cli(env, "render", "pytorch-cpu", "--context", str(env.tmp / "ctx"))


def _digest(env: Env) -> tuple[int, str]:
    from hpcai.run import digests

    image = env.tmp / "img.sif"
    image.write_bytes(b"image")
    return _call(lambda: digests.image_sha256(image))  # XDG_CACHE_HOME: the test's tmp/cache


def _exit_code_file(env: Env) -> tuple[int, str]:
    from hpcai.run import energy

    return _call(lambda: energy._run_and_record(env.tmp / "energy" / "exit-code-node1.txt", ["true"]))


def _measurer(env: Env) -> tuple[int, str]:
    from hpcai.run import energy

    def claim() -> None:
        if not energy._is_measurer(env.tmp / "energy", "node1"):
            raise FileExistsError("another task holds the node's measurer lock")

    return _call(claim)


def _finalize(env: Env) -> tuple[int, str]:
    from hpcai.results.runs import finalize

    return _call(lambda: finalize(env.tmp / "runs" / "a"))


def _run_dir(env: Env) -> Path:
    (env.tmp / "out").mkdir(exist_ok=True)
    return env.tmp / "out"


def _sweep_claim(env: Env) -> tuple[int, str]:
    from hpcai.run import sweep

    return _call(lambda: sweep.claim(env.tmp / "sw", "sanity"))


def _submit_write_once(env: Env) -> tuple[int, str]:
    from hpcai.run import submit

    return _call(lambda: submit.write_once(env.tmp / "out" / submit.SCRIPT, "#!/bin/sh\n"))


def _prepare(tmp: Path, name: str) -> None:
    """What a writer needs in place before the link is planted."""
    if name in ("results export -o", "results plot -o", "finalize metrics.json"):
        _records(tmp)
    if name == "render --context: a link inside an earlier context":
        from hpcai.image.context import prepare_context
        from hpcai.image.spec import make_spec

        prepare_context(make_spec("pytorch-cpu"), tmp / "ctx")
        (tmp / "ctx" / "Dockerfile").unlink()
    if name.startswith(("record.", "submit ", "sweep --no-submit", "energy")):
        (tmp / "out").mkdir(exist_ok=True)
        (tmp / "energy").mkdir(exist_ok=True)
        (tmp / "sw").mkdir(exist_ok=True)


_LAUNCH = [Writer(f"launch -o: a link at {name}", lambda t, n=name: t / "out" / n, _launch, folder=name == "energy")
           for name in (record.RESERVE, record.PLAN, record.STATUS, record.METRICS, record.ENERGY, record.LOGS)]

WRITERS = [
    *_LAUNCH,
    Writer("results export -o", lambda t: t / "out.csv",
           lambda e: _cli(e, "results", "export", "--csv", str(e.tmp / "runs"), "-o", str(e.tmp / "out.csv"))),
    Writer("results plot -o", lambda t: t / "out.png",
           lambda e: _cli(e, "results", "plot", str(e.tmp / "runs"), "-o", str(e.tmp / "out.png"))),
    Writer("edf -o", lambda t: t / "env.toml", lambda e: _cli(e, "edf", "img", "-o", str(e.tmp / "env.toml"))),
    Writer("render --context: the folder a link", lambda t: t / "ctx", _context, folder=True),
    Writer("render --context: a link inside an earlier context", lambda t: t / "ctx" / "Dockerfile", _context),
    Writer("submit --no-submit -o: a link at submit.sbatch", lambda t: t / "out" / "submit.sbatch",
           lambda e: _cli(e, "submit", "--no-submit", "--site", "generic-slurm", "--image", "x.sif",
                          "-o", str(e.tmp / "out"), "sanity")),
    Writer("sweep --no-submit -o: a link at sweep.json", lambda t: t / "sw" / "sweep.json",
           lambda e: _cli(e, "sweep", "--no-submit", "--nodes", "1", "--site", "generic-slurm", "--image", "x.sif",
                          "-o", str(e.tmp / "sw"), "sanity")),
    Writer("record.write_json (a link planted after the claim)", lambda t: t / "out" / record.PLAN,
           lambda e: _call(lambda: record.write_json(_run_dir(e) / record.PLAN, {"payload": "x"}))),
    Writer("record.write_status", lambda t: t / "out" / record.STATUS,
           lambda e: _call(lambda: record.write_status(_run_dir(e), record.RunStatus(state="running")))),
    Writer("record.reserve_space", lambda t: t / "out" / record.RESERVE,
           lambda e: _call(lambda: record.reserve_space(_run_dir(e), 128 << 10))),
    Writer("finalize metrics.json", lambda t: t / "runs" / "a" / record.METRICS, _finalize),
    Writer("digests cache", lambda t: t / "cache" / "hpcai" / "digests.json", _digest),
    Writer("energy exit-code file", lambda t: t / "energy" / "exit-code-node1.txt", _exit_code_file),
    Writer("energy measurer lock", lambda t: t / "energy" / ".measurer-node1", _measurer),
    Writer("submit.write_once", lambda t: t / "out" / "submit.sbatch", _submit_write_once),
    Writer("sweep.claim", lambda t: t / "sw" / "sweep.json", _sweep_claim),
]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("writer", WRITERS, ids=[w.name for w in WRITERS])
def test_no_writer_follows_a_planted_link(tmp_path, hpcai, hpcai_exe, monkeypatch, writer):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HPCAI_SITE", "")
    for var in ("SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    victims = tmp_path / "victims"
    victims.mkdir()
    (victims / "victim").write_bytes(VICTIM)
    (victims / "victim").chmod(0o644)
    _prepare(tmp_path, writer.name)
    link = writer.target(tmp_path)
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_file():  # an earlier copy (finalize's metrics.json): the link takes its place
        link.unlink()
    link.symlink_to(victims if writer.folder else victims / "victim")
    before = _snapshot(victims)

    code, err = writer.run(Env(tmp_path, hpcai, hpcai_exe))

    assert _snapshot(victims) == before, "the victim was written through the link"
    assert stat.S_IMODE((victims / "victim").stat().st_mode) == 0o644
    assert "Traceback" not in err
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), err
    else:
        assert code == 0, err
        assert not link.is_symlink() and (link.is_dir() if writer.folder else link.is_file())


def test_every_writer_named_in_the_issue_is_covered():
    """The property's list names every kind of writer issue 25 lists (a new one goes here)."""
    names = " ".join(w.name for w in WRITERS)
    for writer in (".reserve", "plan.json", "status.json", "metrics.json", "export -o", "plot -o", "edf -o",
                   "--context", "submit.sbatch", "sweep.json", "digests", "energy"):
        assert writer in names, writer


def test_write_atomic_leaves_no_temp_file_and_keeps_the_old_file_on_failure(tmp_path):
    path = tmp_path / "f.json"
    path.write_text("old")
    with pytest.raises(TypeError):
        files.write_atomic(path, object())  # type: ignore[arg-type]  # fails inside the write
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["f.json"]


def test_write_new_refuses_any_name_taken(tmp_path):
    (tmp_path / "v").write_text("v")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for name in ("v", "dangling"):
        with pytest.raises(FileExistsError):
            files.write_new(tmp_path / name, "new")
    assert not (tmp_path / "nowhere").exists() and (tmp_path / "v").read_text() == "v"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "v"]


def test_user_outputs_get_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        files.write_atomic(tmp_path / "a", "x", None)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o640


# ---- readers --------------------------------------------------------------------------------

def _deep(fmt: str) -> bytes:
    if fmt == "toml":
        return ("a = " + "[" * DEEP + "]" * DEEP + "\n").encode()
    return ("[" * DEEP + "]" * DEEP).encode()


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as fh:
        fh.truncate(size)


BAD = {
    "fifo": lambda p, fmt, limit: os.mkfifo(p),
    "link to /dev/zero": lambda p, fmt, limit: p.symlink_to("/dev/zero"),
    "nested 100,000 deep": lambda p, fmt, limit: p.write_bytes(_deep(fmt)),
    "sparse, over the size bound": lambda p, fmt, limit: _sparse(p, limit + 1),
    "binary garbage": lambda p, fmt, limit: p.write_bytes(b"\xff\xfe\x00" + bytes(range(256)) * 8),
}


def _plant(path: Path, kind: str, fmt: str, limit: int = files.MAX_BYTES) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
    BAD[kind](path, fmt, limit)


def _one_line(res, *fragments: str) -> None:
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2 and "Traceback" not in res.stderr, res.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert all(f in lines[0] for f in fragments), res.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", [record.PLAN, record.STATUS, record.METRICS])
@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_record_file_that_is_not_a_file(tmp_path, hpcai, kind, name):
    """Over a folder: the bad record is skipped with one warning naming it, the good ones are read;
    named alone: one error line."""
    from hpcai.results.runs import finalize

    for run in ("good1", "good2", "bad"):
        finalize(make_run(tmp_path / "runs", run, "hvd-synthetic", hvd_log(1000)))
    bad = tmp_path / "runs" / "bad"
    _plant(bad / name, kind, "json")
    for command in (["show"], ["export", "--csv"], ["compare"]):
        res = hpcai("results", *command, str(tmp_path / "runs"))
        assert res.exit_code == 0 and "Traceback" not in res.stderr, (command, res.stderr)
        warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("warning:")]
        assert len(warnings) == 1 and str(bad) in warnings[0] and name in warnings[0], res.stderr
        assert "good1" in res.stdout or command == ["compare"], res.stdout
    _one_line(hpcai("results", "show", str(bad)), str(bad), name)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_site_file_that_is_not_a_file(tmp_path, hpcai, monkeypatch, kind):
    """In HPCAI_SITE_PATH beside a good site: detection and `sites list` skip it with one warning
    line and go on; asked for by name it is one error line."""
    from hpcai.run.site import SITE_MAX_BYTES

    folder = tmp_path / "sites"
    folder.mkdir()
    (folder / "zzz-good.toml").write_text('backend = "local"\nruntime = "docker"\n')
    _plant(folder / "aaa-bad.toml", kind, "toml", SITE_MAX_BYTES)
    monkeypatch.setenv("HPCAI_SITE_PATH", str(folder))
    monkeypatch.setenv("HPCAI_SITE", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    for argv in (["sites", "list"], ["launch", "--dry-run", "--image", "x.sif", "sanity"]):
        res = hpcai(*argv)
        assert res.exit_code == 0 and "Traceback" not in res.stderr, (argv, res.stderr)
        warnings = [ln for ln in res.stderr.splitlines() if "aaa-bad" in ln]
        assert len(warnings) == 1 and warnings[0].startswith("warning: site aaa-bad skipped in "), res.stderr
    assert "zzz-good" in hpcai("sites", "list").stdout
    _one_line(hpcai("launch", "--dry-run", "--site", "aaa-bad", "--image", "x.sif", "sanity"), "aaa-bad.toml")
    _one_line(hpcai("sites", "show", "aaa-bad"), "aaa-bad.toml")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_baselines_file_that_is_not_a_file(tmp_path, hpcai, kind):
    from hpcai.results.runs import finalize

    finalize(make_run(tmp_path / "runs", "good", "hvd-synthetic", hvd_log(1000)))
    _plant(tmp_path / "baselines.toml", kind, "toml")
    _one_line(hpcai("results", "compare", str(tmp_path / "runs"), "--baseline", str(tmp_path / "baselines.toml")),
              "baselines.toml")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_digests_cache_that_is_not_a_file_only_costs_the_hash(tmp_path, monkeypatch, kind):
    from hpcai.run import digests

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cache = digests.cache_file()
    cache.parent.mkdir(parents=True)
    _plant(cache, kind, "json", digests.MAX_BYTES)
    image = tmp_path / "img.sif"
    image.write_bytes(b"image")
    assert digests.image_sha256(image) == "sha256:" + hashlib.sha256(b"image").hexdigest()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_power_csv_that_is_not_a_file_is_skipped(tmp_path, kind):
    from hpcai.results import energy

    (tmp_path / "power.node1.csv").write_text(",timestamps,pynvml:0\n0,10.0,50.0\n1,12.0,150.0\n")
    _plant(tmp_path / "power.node2.csv", kind, "csv", energy.POWER_CSV_MAX)
    summary = energy.summarize(tmp_path)
    assert summary is not None and summary["energy_wh"] > 0
    assert list(summary["files"]) == ["power.node1.csv"] and list(summary["skipped"]) == ["power.node2.csv"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", sorted(BAD))
def test_read_status_of_a_file_that_is_not_a_file_is_one_bad_file(tmp_path, kind):
    """What `hpcai sweep` reads after each point: a BadFile (one line), never a hang or a recursion."""
    _plant(tmp_path / record.STATUS, kind, "json")
    with pytest.raises(files.BadFile) as info:
        record.read_status(tmp_path)
    assert "\n" not in str(info.value) and record.STATUS in str(info.value)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", sorted(BAD))
def test_every_reader_rule_is_a_bad_file(tmp_path, kind):
    """hpcai.files itself, for JSON and TOML: the one definition the readers above rely on."""
    for fmt, read in (("json", files.read_json), ("toml", files.read_toml)):
        path = tmp_path / f"x.{fmt}"
        _plant(path, kind, fmt)
        with pytest.raises(files.BadFile) as info:
            read(path)
        assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_nan_is_written_as_null_and_refused_when_read(tmp_path):
    record.write_json(tmp_path / "m.json", {"v": float("nan"), "w": [float("inf")]})
    assert files.read_json(tmp_path / "m.json") == {"v": None, "w": [None]}
    (tmp_path / "n.json").write_text('{"v": NaN}')
    with pytest.raises(files.BadFile, match="not valid JSON"):
        files.read_json(tmp_path / "n.json")


# ---- outputs the user names that are not regular files (round three, D2) ----------------------
#
# Writers replace their target by a rename, so a device (`-o /dev/full`), a FIFO, a socket or a
# folder at a user's -o would be replaced (a device node gone) or fail naming the internal temp
# file. One property over every writer of a user-named output and every such target: one line,
# exit 2, naming the user's path, and the target as it was (still the device, FIFO or folder), no
# temp file left beside it. A missing folder is the same one line. (The rule: files.check_output.)

STANDINS = {  # hpcai sif/sqsh --builder podman, the tools replaced (no engine, image, apptainer or enroot)
    "podman": '#!/bin/sh\ncase "$1" in\n'
              '  image) echo \'[{"Id": "sha256:0", "Config": {"Labels": {"hpcai.flavor": "pytorch-cpu"}}}]\' ;;\n'
              '  save) echo archive > "$5" ;;\n'
              'esac\n',
    # apptainer build --notest --force OUT DEF: OUT noted in $STANDIN_LOG, then (once $STANDIN_GO
    # exists, when set) written
    "apptainer": '#!/bin/sh\n[ "$1" = build ] || exit 0\nout="$4"\n'
                 'echo "$out" >> "${STANDIN_LOG:-/dev/null}"\n'
                 'if [ -n "$STANDIN_GO" ]; then\n'
                 '  i=0; while [ ! -e "$STANDIN_GO" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n'
                 'fi\n'
                 'printf "SIF from %s\\n" "$out" > "$out"\n',
    # enroot import -o OUT URI: OUT written (refused where it exists, as enroot does), noted in $STANDIN_LOG
    "enroot": '#!/bin/sh\n[ -e "$3" ] && exit 1\necho sqsh > "$3"\necho "$3" >> "${STANDIN_LOG:-/dev/null}"\n',
}


def _standins(tmp: Path) -> dict[str, str]:
    """A folder of stand-in podman, apptainer and enroot, and the environment that puts it first on PATH."""
    folder = tmp / "standins"
    folder.mkdir(exist_ok=True)
    for name, text in STANDINS.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}", "HPCAI_WORK_DIR": str(tmp / "w")}


@dataclass(frozen=True)
class Output:
    name: str
    suffix: str
    argv: Callable[[Path, Path], list[str]]  # (tmp, target) -> the CLI's argv writing TARGET
    records: bool = False  # needs run records in tmp/runs
    standins: bool = False  # needs stand-in podman and apptainer


OUTPUTS = [
    Output("results export --csv -o", ".csv", lambda t, o: ["results", "export", "--csv", str(t / "runs"), "-o", str(o)],
           records=True),
    Output("results export --json -o", ".json",
           lambda t, o: ["results", "export", "--json", str(t / "runs"), "-o", str(o)], records=True),
    Output("results plot -o", ".png", lambda t, o: ["results", "plot", str(t / "runs"), "-o", str(o)], records=True),
    Output("edf -o", ".toml", lambda t, o: ["edf", "img", "-o", str(o)]),
    Output("sweep --jube", ".xml", lambda t, o: ["sweep", "--jube", str(o), "--nodes", "1", "--site", "generic-slurm",
                                                "--image", "x.sif", "sanity"]),
    Output("sif -o", ".sif", lambda t, o: ["sif", "img:1", "--builder", "podman", "-o", str(o)], standins=True),
    Output("sqsh -o --force", ".sqsh", lambda t, o: ["sqsh", "img:1", "--builder", "podman", "-o", str(o), "--force"],
           standins=True),
]


def _char_device(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a device node (mknod) needs root; the FIFO and folder cases cover the rule")
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # what /dev/null is: harmless if written


TARGETS: dict[str, Callable[[Path], None]] = {
    "character device": _char_device,
    "FIFO": os.mkfifo,
    "folder": lambda p: (p.mkdir(), (p / "inside").write_bytes(VICTIM)),
    "missing folder": lambda p: None,
}


def _state(path: Path) -> tuple:
    """What is at PATH: its kind and device number, or a folder's files, or nothing."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return ("nothing", os.path.lexists(path.parent))
    if stat.S_ISDIR(info.st_mode):
        return ("folder", _snapshot(path))
    return (stat.S_IFMT(info.st_mode), info.st_rdev)


def _cases():
    for out in OUTPUTS:
        for kind in TARGETS:
            yield pytest.param(out, kind, id=f"{out.name}: {kind}")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("out, kind", list(_cases()))
def test_no_writer_replaces_what_is_not_a_regular_file(tmp_path, hpcai, monkeypatch, out, kind):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HPCAI_SITE", "")
    if out.records:
        _records(tmp_path)
    if out.standins:
        for var, value in _standins(tmp_path).items():
            monkeypatch.setenv(var, value)
    target = (tmp_path / "missing" if kind == "missing folder" else tmp_path) / f"out{out.suffix}"
    TARGETS[kind](target)
    before = _state(target)

    res = hpcai(*out.argv(tmp_path, target))

    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2 and "Traceback" not in res.stderr, res
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(target) in lines[0], res.stderr
    assert ".tmp" not in lines[0] and ".part" not in lines[0], lines[0]  # the user's name, not a temp file's
    assert _state(target) == before, f"{target} was changed"
    assert not [p.name for p in target.parent.glob(f".{target.name}.*")] if target.parent.is_dir() else True


def test_the_same_writers_still_write_a_new_file_and_replace_a_regular_one(tmp_path, hpcai, monkeypatch):
    """The refusal above is for what is not a file: a new name or a regular file is still written."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HPCAI_SITE", "")
    _records(tmp_path)
    for var, value in _standins(tmp_path).items():
        monkeypatch.setenv(var, value)
    for out in OUTPUTS:
        target = tmp_path / f"out{out.suffix}"
        for _ in ("new", "over the first"):
            res = hpcai(*out.argv(tmp_path, target))
            assert res.exit_code == 0, (out.name, res.stderr)
            assert target.is_file() and target.stat().st_size > 0, out.name
        assert sorted(p.name for p in tmp_path.glob(".out*")) == [], out.name


@pytest.mark.parametrize("make", ["socket", "FIFO", "folder"])
def test_write_atomic_refuses_what_is_not_a_file_and_names_the_path(tmp_path, make):
    import socket

    target = tmp_path / "t"
    if make == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(target))
        sock.close()
    elif make == "FIFO":
        os.mkfifo(target)
    else:
        target.mkdir()
    mode = os.lstat(target).st_mode
    with pytest.raises(files.BadFile) as info:
        files.write_atomic(target, "x", None, "-o")
    assert str(info.value).startswith(f"-o {target}: is a ") and "\n" not in str(info.value)
    assert os.lstat(target).st_mode == mode and sorted(p.name for p in tmp_path.iterdir()) == ["t"]


def test_write_atomic_errors_name_the_users_path_not_the_temp_file(tmp_path):
    (tmp_path / "a-file").write_text("x")
    for path, words in ((tmp_path / "a-file" / "out.csv", "cannot be written"),
                        (tmp_path / "nowhere" / "out.csv", "does not exist")):
        with pytest.raises(files.BadFile) as info:
            files.write_atomic(path, "x", None, "-o")
        assert str(path) in str(info.value) and words in str(info.value) and ".tmp" not in str(info.value)


def test_names_hpcai_owns_keep_their_rule(tmp_path):
    """over_link (a record's own file): whatever is at the name is replaced, as before."""
    os.mkfifo(tmp_path / "status.json")
    files.write_atomic(tmp_path / "status.json", "{}", over_link=True)
    assert (tmp_path / "status.json").read_text() == "{}"


# ---- conversions: a private temp file each (round three, D3) -----------------------------------
#
# `hpcai sif` built to the fixed name OUT.part with --force: a user's own OUT.part was overwritten
# and then deleted (on success, failure or Ctrl-C), and two conversions to one OUT wrote one temp
# file. Each conversion now writes into a private folder of its own beside OUT (files.aside_dir).
# These tests replace podman and apptainer with stand-ins (STANDINS: a real conversion of the
# 1.4 GB test image takes minutes; the integration tests, `pytest tests/integration -k sif`, run
# the real one, Ctrl-C included). They run the CLI as a subprocess: signals, concurrency.

def _sif_proc(hpcai_exe: list[str], tmp: Path, out: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen([*hpcai_exe, "sif", "img:1", "--builder", "podman", "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **_standins(tmp), "HPCAI_SITE": "", **env})


def _wait_lines(path: Path, count: int, procs: list[subprocess.Popen]) -> list[str]:
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= count:
            return lines
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.05)
    raise AssertionError(f"the stand-in apptainer did not start {count} time(s)")


@pytest.mark.timeout(120)
def test_two_conversions_to_one_output_never_share_a_temp_file(tmp_path, hpcai_exe):
    out, keep = tmp_path / "mp.sif", tmp_path / "mp.sif.part"
    keep.write_text("KEEP\n")
    log, go = tmp_path / "apptainer.log", tmp_path / "go"
    procs = [_sif_proc(hpcai_exe, tmp_path, out, STANDIN_LOG=str(log), STANDIN_GO=str(go)) for _ in range(2)]
    try:
        parts = [Path(p) for p in _wait_lines(log, 2, procs)]  # both are in apptainer at once
        assert parts[0] != parts[1] and parts[0].parent != parts[1].parent
        for part in parts:
            assert part.parent.parent == tmp_path and part.name == "mp.sif", part
            assert part.parent.name.startswith(".mp.sif.") and part.parent.name.endswith(".part"), part
            assert stat.S_IMODE(part.parent.stat().st_mode) == 0o700
        go.touch()
        results = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            p.kill() if p.poll() is None else None
    assert [p.returncode for p in procs] == [0, 0], results
    assert out.read_text() in {f"SIF from {part}\n" for part in parts}
    assert keep.read_text() == "KEEP\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["apptainer.log", "go", "mp.sif", "mp.sif.part", "standins",
                                                          "w"]
    assert sorted(p.name for p in (tmp_path / "w" / "sif").iterdir()) == []  # each work folder went too


@pytest.mark.timeout(120)
def test_ctrl_c_during_a_conversion_keeps_the_users_part_file(tmp_path, hpcai_exe):
    import signal

    out, keep = tmp_path / "mp.sif", tmp_path / "mp.sif.part"
    keep.write_text("KEEP\n")
    log = tmp_path / "apptainer.log"
    proc = _sif_proc(hpcai_exe, tmp_path, out, STANDIN_LOG=str(log), STANDIN_GO=str(tmp_path / "never"))
    try:
        (part,) = _wait_lines(log, 1, [proc])
        assert Path(part).parent.is_dir()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill() if proc.poll() is None else None
    assert proc.returncode == 130, err
    assert keep.read_text() == "KEEP\n" and not out.exists() and not Path(part).parent.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["apptainer.log", "mp.sif.part", "standins", "w"]


def test_a_successful_or_failed_conversion_keeps_the_users_part_file(tmp_path, hpcai, monkeypatch):
    for var, value in _standins(tmp_path).items():
        monkeypatch.setenv(var, value)
    out, keep = tmp_path / "mp.sif", tmp_path / "mp.sif.part"
    keep.write_text("KEEP\n")
    res = hpcai("sif", "img:1", "--builder", "podman", "-o", str(out))
    assert res.exit_code == 0 and res.stdout.strip() == str(out), res
    assert out.read_text().startswith("SIF from ") and keep.read_text() == "KEEP\n"
    (tmp_path / "standins" / "apptainer").write_text("#!/bin/sh\necho 'FATAL: no'\nexit 1\n")
    res = hpcai("sif", "img:1", "--builder", "podman", "-o", str(tmp_path / "mp2.sif"))
    assert res.exit_code == 1 and "apptainer failed converting img:1" in res.stderr, res
    assert keep.read_text() == "KEEP\n" and not (tmp_path / "mp2.sif").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mp.sif", "mp.sif.part", "standins", "w"]


def test_sqsh_never_removes_the_users_part_file(tmp_path, hpcai, monkeypatch):
    """`hpcai sqsh` removed a stale OUT.part before importing (enroot refuses to overwrite): a user's."""
    for var, value in _standins(tmp_path).items():
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("STANDIN_LOG", str(tmp_path / "enroot.log"))
    out, keep = tmp_path / "x.sqsh", tmp_path / "x.sqsh.part"
    keep.write_text("KEEP\n")
    res = hpcai("sqsh", "img:1", "--builder", "podman", "-o", str(out))
    assert res.exit_code == 0, res
    (part,) = (tmp_path / "enroot.log").read_text().split()
    assert Path(part).parent.name.startswith(".x.sqsh.") and Path(part).parent.parent == tmp_path
    assert out.read_text() == "sqsh\n" and keep.read_text() == "KEEP\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["enroot.log", "standins", "x.sqsh", "x.sqsh.part"]
