"""The entrypoint runs a payload name through hpcai-bench, and every other command as it is.

`docker run IMG ddp-bench` and `apptainer run x.sif ddp-bench` (the def's %runscript hands its
arguments to the entrypoint) must run the payload; `docker run IMG ls -la` must run ls. A
synthetic prefix stands in for /opt/hpcai: bin/hpcai-bench is a script that prints how it was
called, payloads/NAME/payload.toml makes NAME a payload. Run under dash and bash (hooklib).
"""

from __future__ import annotations

from pathlib import Path

import pytest

BENCH = "#!/bin/sh\necho BENCH\nprintf '[%s]\\n' \"$@\"\n"


@pytest.fixture
def prefix(workdir) -> Path:
    """A prefix with a recording hpcai-bench and two payloads, sanity and ddp-bench."""
    root = workdir / "opt-hpcai"
    _script(root / "bin" / "hpcai-bench", BENCH)
    for name in ("sanity", "ddp-bench"):
        _payload(root / "payloads", name)
    return root


def _script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def _payload(folder: Path, name: str) -> None:
    (folder / name).mkdir(parents=True, exist_ok=True)
    (folder / name / "payload.toml").write_text(f'name = "{name}"\n')


def _run(run_entrypoint, prefix: Path, args: list[str], **env: str):
    return run_entrypoint({"HPCAI_PREFIX": str(prefix), **env}, hooks=[], args=args)


def test_a_payload_name_runs_hpcai_bench_with_its_arguments(run_entrypoint, prefix):
    run = _run(run_entrypoint, prefix, ["ddp-bench", "steps=2", "a b", "v=$HOME", "*"])
    assert run.rc == 0, run.stderr
    # Every argument arrives as it was given: nothing is split, expanded or globbed.
    assert run.stdout.splitlines() == ["BENCH", "[ddp-bench]", "[steps=2]", "[a b]", "[v=$HOME]", "[*]"]
    assert run.stderr == ""


def test_a_payload_name_alone(run_entrypoint, prefix):
    run = _run(run_entrypoint, prefix, ["sanity"])
    assert (run.rc, run.stdout.splitlines()) == (0, ["BENCH", "[sanity]"])


def test_payloads_dir_overrides_the_prefix(run_entrypoint, prefix, workdir):
    other = workdir / "elsewhere"
    _payload(other, "osu")
    run = _run(run_entrypoint, prefix, ["osu", "size=8"], HPCAI_PAYLOADS_DIR=str(other))
    assert run.stdout.splitlines() == ["BENCH", "[osu]", "[size=8]"]
    # The prefix's own payloads are not looked at then: `sanity` is a command (none such here).
    run = _run(run_entrypoint, prefix, ["sanity"], HPCAI_PAYLOADS_DIR=str(other))
    assert run.rc == 127 and "BENCH" not in run.stdout


def test_any_other_command_runs_as_it_is(run_entrypoint, prefix):
    run = _run(run_entrypoint, prefix, ["printf", "%s|", "sanity", "x y"])
    assert (run.rc, run.stdout, run.stderr) == (0, "sanity|x y|", "")


def test_an_unknown_word_is_a_command(run_entrypoint, prefix):
    run = _run(run_entrypoint, prefix, ["no-such-payload-or-command"])
    assert run.rc == 127 and "BENCH" not in run.stdout
    assert "no-such-payload-or-command" in run.stderr


def test_a_folder_without_payload_toml_is_no_payload(run_entrypoint, prefix):
    (prefix / "payloads" / "echo").mkdir()  # a folder, but no manifest: echo stays echo
    run = _run(run_entrypoint, prefix, ["echo", "hi"])
    assert (run.rc, run.stdout) == (0, "hi\n")


@pytest.mark.parametrize("word", ["../x", "-x", "./sanity", "sanity/", "/x", "..", ".x", "a b", ""])
def test_paths_options_and_odd_words_are_never_payloads(run_entrypoint, prefix, word):
    # Each would find a payload.toml if the word were joined to the payloads folder unchecked.
    _payload(prefix, "x")                      # payloads/../x/payload.toml
    _payload(prefix / "payloads", "-x")
    _payload(prefix / "payloads", ".x")
    _payload(prefix / "payloads", "a b")
    run = _run(run_entrypoint, prefix, [word, "arg"])
    assert "BENCH" not in run.stdout, (word, run.stdout)
    assert run.rc != 0  # none of these is a command here either: exec fails, as it would anyway


def test_an_absolute_path_to_hpcai_bench_is_a_command(run_entrypoint, prefix):
    # The image's CMD (docker run IMG, no arguments) is the path: it must not get hpcai-bench twice.
    run = _run(run_entrypoint, prefix, [str(prefix / "bin" / "hpcai-bench"), "--list"])
    assert run.stdout.splitlines() == ["BENCH", "[--list]"]


def test_no_arguments_start_the_shell(run_entrypoint, prefix, workdir):
    shell = _script(workdir / "fake-shell", "#!/bin/sh\necho SHELL-RAN \"$#\"\n")
    run = _run(run_entrypoint, prefix, [], SHELL=str(shell))
    assert (run.rc, run.stdout) == (0, "SHELL-RAN 0\n")


def test_the_base_entrypoint_gets_hpcai_bench_as_the_command(run_entrypoint, prefix, workdir):
    base = _script(workdir / "nvidia_entrypoint.sh", "#!/bin/sh\necho BASE\nexec \"$@\"\n")
    run = _run(run_entrypoint, prefix, ["sanity", "n=1"], HPCAI_BASE_ENTRYPOINT=str(base))
    assert run.stdout.splitlines() == ["BASE", "BENCH", "[sanity]", "[n=1]"]


def test_check_is_not_a_payload(run_entrypoint, prefix):
    _payload(prefix / "payloads", "check")
    run = _run(run_entrypoint, prefix, ["--check"])
    assert "BENCH" not in run.stdout and run.stdout.rstrip().endswith("OK")
