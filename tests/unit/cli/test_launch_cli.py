"""`hpcai launch/submit/sites/doctor` through the real CLI entry point (no engine needed)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from plan_helpers import CRAY, check_golden

from hpcai.run.options import options_argv
from hpcai.run.site import available_sites
from hpcai.run.submit import sbatch_script
from hpcai.run.plan import LaunchOptions, plan_launch

REPO = Path(__file__).resolve().parents[3]


def test_dry_run_prints_command_on_stdout_site_on_stderr(hpcai, tmp_path):
    run = tmp_path / "r"
    res = hpcai("launch", "--dry-run", "--site", "generic-slurm", "--image", "x.sif", "-N", "2",
                "-o", str(run), "sanity")
    assert res.exit_code == 0, res.stderr
    argv = shlex.split(res.stdout)
    assert argv[:4] == ["srun", "--nodes=2", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    assert argv[-4:] == ["x.sif", "/opt/hpcai/bin/hpcai-entrypoint", "/opt/hpcai/bin/hpcai-bench", "sanity"]
    assert "# site: generic-slurm" in res.stderr and f"# run record: {run}" in res.stderr
    assert not run.exists()  # a dry run starts and creates nothing


def test_cmd_after_double_dash_keeps_hostile_tokens(hpcai, tmp_path):
    hostile = ["a b", "it's", "x; rm -rf /", "$(id)", "line1\nline2"]
    res = hpcai("launch", "--dry-run", "--site", "generic-slurm", "--image", "x.sif",
                "-o", str(tmp_path / "r"), "--cmd", "--", "/bin/echo", *hostile)
    assert res.exit_code == 0, res.stderr
    assert shlex.split(res.stdout)[-len(hostile):] == hostile


def test_json_is_the_plan(hpcai, tmp_path):
    res = hpcai("launch", "--json", "--site", "cray-ex-nvidia", "--image", "x.sif", "-o",
                str(tmp_path / "r"), "nccl-tests", "min_bytes=1M")
    plan = json.loads(res.stdout)
    assert plan["site"] == "cray-ex-nvidia" and plan["ntasks_per_node"] == 4 and plan["nodes"] == 1
    assert plan["payload"] == "nccl-tests" and plan["payload_vars"] == {"min_bytes": "1M"}
    assert plan["argv"][0] == "srun" and plan["hpcai_version"]


def test_bad_input_exits_2_with_one_line_listing_choices(hpcai, tmp_path):
    common = ["launch", "--image", "x.sif", "-o", str(tmp_path / "r")]
    sif = tmp_path / "real.sif"
    sif.write_bytes(b"SIF")
    for args, needle in [
        (["--site", "mars", "sanity"], "error: unknown site 'mars'; valid: alcf-polaris, cray-ex-amd, cray-ex-nvidia"),
        (["--site", "local", "--runtime", "lxc", "sanity"], "error: unknown runtime 'lxc'; valid: apptainer"),
        (["--site", "generic-slurm", "--image", str(sif), "nosuch"], "error: unknown payload 'nosuch'; valid: "),
        (["--site", "generic-slurm", "--image", str(sif), "sanity", "bogus=1"], "error: unknown variable 'bogus'"),
        (["--site", "generic-slurm", "sanity"], "error: image not found: x.sif"),
        (["--site", "generic-slurm", "--image", str(sif), "--mpi", "mpich", "sanity"], "error: unknown mpi type 'mpich'"),
        (["--site", "generic-slurm", "--cmd"], "error: --cmd needs a command"),
    ]:
        res = hpcai(*common, *args)
        assert res.exit_code == 2, (args, res.stderr)
        assert needle in res.stderr and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert not (tmp_path / "r").exists()


def test_golden_sbatch_script():
    opts = LaunchOptions(image="/scratch/IMG.sif", payload="nccl-tests", payload_args=("min_bytes=1M",),
                         nodes=2, site="cray-ex-nvidia", time="00:30:00", partition="gpu",
                         account="proj", output_dir="/scratch/runs/r1", env=("HF_TOKEN=hf_x", "A=1"))
    plan = plan_launch(opts, host=CRAY, check=False)
    text = sbatch_script(plan, opts, "/usr/bin/python3")
    check_golden("submit-cray-ex-nvidia.sbatch", text)
    assert "hf_x" not in text
    last = shlex.split(text.splitlines()[-1])
    assert last[:5] == ["exec", "/usr/bin/python3", "-m", "hpcai", "launch"]
    assert last[5:] == options_argv(opts)


def test_options_roundtrip_through_the_cli(hpcai, tmp_path):
    opts = LaunchOptions(image="x.sif", cmd=("sh", "-c", "echo $RANK; x"), nodes=3, site="generic-slurm",
                         ntasks_per_node=2, binds=("/a:/b",), env=("K=v w",), mpi="pmix",
                         output_dir=str(tmp_path / "r"), per_gpu=False)
    res = hpcai("launch", "--json", *options_argv(opts))
    plan = json.loads(res.stdout)
    assert plan["nodes"] == 3 and plan["ntasks_per_node"] == 2 and plan["mpi"] == "pmix"
    assert plan["command"] == ["sh", "-c", "echo $RANK; x"] and plan["env"]["K"] == "v w"


def test_submit_no_submit_writes_script(hpcai, tmp_path):
    res = hpcai("submit", "--no-submit", "--site", "generic-slurm", "--image", "x.sif",
                "-o", str(tmp_path / "r"), "-N", "2", "sanity")
    assert res.exit_code == 0, res.stderr
    script = tmp_path / "r" / "submit.sbatch"
    assert res.stdout.strip() == str(script) and "#SBATCH --nodes=2" in script.read_text()
    local = hpcai("submit", "--no-submit", "--site", "local", "--image", "x", "-o", str(tmp_path / "l"), "sanity")
    assert local.exit_code == 2 and "needs a Slurm, PBS Pro or Flux site" in local.stderr


def test_submit_hands_an_absolute_done_file_to_the_jobs_launch(hpcai, tmp_path, monkeypatch):
    """The job's `hpcai launch` writes it (JUBE's done_file): by absolute path, whatever the job's cwd."""
    monkeypatch.chdir(tmp_path)
    res = hpcai("submit", "--no-submit", "--site", "generic-slurm", "--image", "x.sif", "-o", "r",
                "--done-file", "ready", "sanity")
    assert res.exit_code == 0, res.stderr
    line = (tmp_path / "r" / "submit.sbatch").read_text().splitlines()[-1]
    assert f" --done-file {tmp_path / 'ready'} " in line and line.startswith("exec ")
    assert not (tmp_path / "ready").exists()  # the job writes it, when it ends


def test_sites_and_doctor(hpcai):
    res = hpcai("sites", "list", "--json")
    names = [s["name"] for s in json.loads(res.stdout)]
    assert names == available_sites() and "local" in names  # the one search path, read twice
    show = json.loads(hpcai("sites", "show", "jsc-ib", "--json").stdout)
    assert show["master_addr_suffix"] == "i" and show["mpi"] == "pspmix"
    text = hpcai("sites", "show", "cray-ex-nvidia")
    assert "libfabric_dest: /host/lib" in text.stdout
    bad = hpcai("sites", "show", "mars")
    assert bad.exit_code == 2 and "valid: alcf-polaris, cray-ex-amd" in bad.stderr
    doc = json.loads(hpcai("doctor", "--json").stdout)
    checks = {c["name"]: c["found"] for c in doc["checks"]}
    assert set(checks) >= {"srun", "apptainer", "ch-run", "docker", "podman", "enroot", "sarus", "/dev/cxi*",
                           "sbatch", "mpiexec", "qsub", "qstat"}  # each scheduler hpcai submits to
    assert bool(checks["enroot"]) == bool(shutil.which("enroot"))
    assert bool(checks["qsub"]) == bool(shutil.which("qsub"))
    assert doc["site"] in names
    table = hpcai("doctor")
    assert table.exit_code == 0 and "detected site" in table.stdout


@pytest.mark.parametrize("name", ["launch", "submit", "sweep"])
def test_every_launch_option_is_declared_once_and_reaches_each_command(name):
    """issue 13: the options were declared in six places. typer's launch, submit and sweep and the
    argparse fast path are all made from hpcai/options.py; each command takes every launch option
    (sweep: all but the node count, host list and record folder, which its points set), with help."""
    import typer

    from hpcai.run import options
    from hpcai.cli.main import app

    table = {"launch": options.LAUNCH, "submit": options.SUBMIT, "sweep": options.SWEEP}[name]
    command = typer.main.get_command(app).commands[name]
    declared = {p.name: (tuple(sorted(p.opts + p.secondary_opts)), p.envvar, bool(p.help))
                for p in command.params if p.opts[0].startswith("-")}
    assert declared == {o.name: (tuple(sorted(o.flags[0].split("/") + list(o.flags[1:]))), o.envvar, True)
                        for o in table}
    every = {o.name for o in options.PLAN} - ({"nodes", "nodelist", "output_dir", "done_file"} if name == "sweep" else set())
    assert every <= set(declared)


@pytest.mark.parametrize("args", [
    ["--site", "cray-ex-nvidia", "-N", "2", "nccl-tests", "min_bytes=1M"],
    ["--site", "local", "--ntasks-per-node", "2", "-e", "A=1", "--bind", "/a:/b", "--cmd", "--", "sh", "-c", "x;y"],
    ["--site", "jsc-ib", "--per-gpu", "--mpi", "pmi2", "-c", "3", "--time", "1:00", "osu"],
    ["--site", "generic-slurm", "-N", " 4", "--cpus-per-task", "+2", "--cmd", "--", "true"],
])
def test_plain_values_parse_as_typer_does(hpcai, tmp_path, monkeypatch, args):
    """cli.main.plain_values converts str/int/float/bool/list[str] without pydantic: the plan is the
    one typer's own (pydantic) conversion makes."""
    import hpcai.cli.main as main

    common = ["launch", "--json", "--image", "x.sif", "-o", str(tmp_path / "r"), *args]
    plain = hpcai(*common)
    monkeypatch.setattr(main, "plain_values", lambda command: None)  # typer's own conversion
    typer_own = hpcai(*common)
    assert plain.exit_code == typer_own.exit_code == 0, (plain.stderr, typer_own.stderr)
    drop = ("master_port", "rank_argvs", "argv")  # the local backend picks a free port each time
    a, b = json.loads(plain.stdout), json.loads(typer_own.stdout)
    assert {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}


@pytest.mark.parametrize("args", [["-N", "abc"], ["-N", "2.5"], ["--repeat", ""], ["--nodes"]])
def test_plain_values_refuse_as_typer_does(hpcai, tmp_path, monkeypatch, args):
    import hpcai.cli.main as main

    common = ["launch", "--dry-run", "--site", "generic-slurm", "--image", "x.sif", "-o", str(tmp_path / "r"),
              *args, "--cmd", "--", "true"]
    plain = hpcai(*common)
    monkeypatch.setattr(main, "plain_values", lambda command: None)
    typer_own = hpcai(*common)
    assert plain.exit_code == typer_own.exit_code == 2
    assert plain.stderr == typer_own.stderr and plain.stderr.count("\n") == 1, plain.stderr


def test_launch_imports_no_pydantic(tmp_path):
    """typer 0.29 imports pydantic (~70 ms) to convert values unless plain_values gave them a plain
    conversion: `hpcai launch` must not pay it (benchmarks/launch_overhead.py)."""
    code = ("import sys\nfrom hpcai.cli.main import run\ntry:\n    run(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    assert e.code in (0, None), e.code\nprint(sorted(m for m in sys.modules if m.startswith('pydantic')))")
    res = subprocess.run([sys.executable, "-c", code, "launch", "--dry-run", "--site", "generic-slurm", "--image",
                          "x.sif", "-o", str(tmp_path / "r"), "-N", "2", "-e", "A=1", "--cmd", "--", "true"],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "[]"


def test_results_parse_json_imports_neither_pydantic_nor_rich():
    """`results parse --json` on a big log is timed with its start-up (benchmarks/parse_throughput.py):
    its Path and int parameters are converted plainly (no pydantic), and JSON is written without rich.
    The values still arrive as typer's own conversion gives them: a Path, a list of Paths."""
    log = REPO / "tests" / "fixtures" / "logs" / "nccl_allreduce_2.21.log"
    code = ("import sys\nfrom hpcai.cli.main import run\ntry:\n    run(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    assert e.code in (0, None), e.code\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'rich'}))")
    res = subprocess.run([sys.executable, "-c", code, "results", "parse", "-p", "nccl-tests", "--json", str(log)],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    *doc, modules = res.stdout.strip().splitlines()
    assert modules == "[]" and json.loads("\n".join(doc))["parser"] == "nccl-tests"


def test_launch_imports_only_its_own_cli_module(tmp_path):
    """cli.main.COMMANDS names the module of each command: `hpcai launch` imports launch's only."""
    from hpcai.cli import main

    for module in main.MODULES:
        app = main._build_app((module,))
        names = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
        assert names == {name for name, m in main.COMMANDS.items() if m == module}, module
    assert set(main.MODULES) == set(main.COMMANDS.values())
    code = ("import sys\nfrom hpcai.cli.main import run\ntry:\n    run(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('hpcai.cli.')))")
    res = subprocess.run([sys.executable, "-c", code, "launch", "--dry-run", "--site", "generic-slurm", "--image",
                          "x.sif", "-o", str(tmp_path / "r"), "--cmd", "--", "true"],
                         capture_output=True, text=True, check=False)
    assert res.stdout.strip().splitlines()[-1] == "['hpcai.cli.launch', 'hpcai.cli.main']", res.stderr


def test_image_hint_from_the_raw_command_line(monkeypatch):
    """What `hpcai launch` asks the engine about before typer parses (options.hint): the last
    value of the option before `--`, else its environment variable."""
    from hpcai.run.options import hint

    monkeypatch.delenv("HPCAI_IMAGE", raising=False)
    assert hint(["-N", "2", "--image", "a", "--image=b", "sanity"], "image") == "b"
    assert hint(["-i", "c", "--cmd", "--", "x", "--image", "d"], "image") == "c"
    assert hint(["--cmd", "--", "--image", "d"], "image") is None
    assert hint(["--image"], "image") is None
    monkeypatch.setenv("HPCAI_RUNTIME", "podman")
    assert hint([], "runtime") == "podman"


def test_profile_reaches_the_runner_and_the_record(hpcai, tmp_path):
    res = hpcai("launch", "--json", "--site", "generic-slurm", "--image", "x.sif", "-o", str(tmp_path / "r"),
                "--profile", "quick", "hf-clm", "steps=2")
    assert res.exit_code == 0, res.stderr
    plan = json.loads(res.stdout)
    assert plan["command"] == ["/opt/hpcai/bin/hpcai-bench", "--profile", "quick", "hf-clm", "steps=2"]
    assert plan["profiles"] == ["quick"]


@pytest.mark.parametrize("args, message", [
    (["--profile", "caraml", "hf-clm"], "error: payload hf-clm has no profile 'caraml'; its profiles: cpu, "
                                        "hpe, llama-2-7b, quick, wikitext2"),
    (["--profile", "quick", "--cmd", "--", "true"], "error: --profile sets a payload's variables; a --cmd "
                                                    "command has none"),
])
def test_bad_profile_is_one_line(hpcai, tmp_path, args, message):
    res = hpcai("launch", "--dry-run", "--site", "generic-slurm", "--image", "x.sif", "-o", str(tmp_path / "r"), *args)
    assert res.exit_code == 2 and res.stderr.strip() == message


def test_workflow_profile_brings_its_srun_shape_and_the_user_still_wins(hpcai, tmp_path):
    """--profile hpe on nccl-tests: HPE's srun options ([launch.hpe]) after the site's, the user's after."""
    res = hpcai("launch", "--json", "--site", "generic-slurm", "--image", "x.sif", "-N", "2", "-o", str(tmp_path / "r"),
                "--profile", "hpe", "--srun-arg=--cpu-bind=cores", "nccl-tests")
    assert res.exit_code == 0, res.stderr
    argv = json.loads(res.stdout)["argv"]
    # each option once: the user's --cpu-bind takes the profile's place (issue 25: no option twice)
    hpe = ["--exclusive", "--distribution=*:block", "--cpu-bind=cores", "--ntasks-per-socket=1", "--sockets-per-node=4"]
    start = argv.index("--exclusive")
    assert argv[start:start + len(hpe)] == hpe
    assert "--cpu-bind=socket" not in argv


def test_data_folder_is_mounted_at_data_with_hpcai_data(hpcai, tmp_path):
    data = tmp_path / "datasets"
    data.mkdir()
    res = hpcai("launch", "--json", "--site", "generic-slurm", "--image", "x.sif", "-o", str(tmp_path / "r"),
                "--data", str(data), "hf-clm")
    assert res.exit_code == 0, res.stderr
    plan = json.loads(res.stdout)
    assert f"{data}:/data" in plan["binds"] and plan["env"]["HPCAI_DATA"] == "/data"
    image = tmp_path / "x.sif"
    image.write_text("")
    missing = hpcai("launch", "--site", "generic-slurm", "--image", str(image), "-o", str(tmp_path / "r2"),
                    "--data", str(tmp_path / "nope"), "hf-clm")
    assert missing.exit_code == 2 and "--data" in missing.stderr and "no such folder" in missing.stderr
    assert not (tmp_path / "r2").exists()  # refused before anything was written


def test_srun_arg_passes_scheduler_options_through(hpcai, tmp_path):
    """HPE's Llama runs: srun --ntasks-per-socket=1 --sockets-per-node=4 --exclusive."""
    res = hpcai("launch", "--json", "--site", "generic-slurm", "--image", "x.sif", "-N", "2", "-o", str(tmp_path / "r"),
                "--srun-arg=--ntasks-per-socket=1", "--srun-arg", "--sockets-per-node=4", "--srun-arg=--exclusive",
                "sanity")
    assert res.exit_code == 0, res.stderr
    argv = json.loads(res.stdout)["argv"]
    shim = argv.index("/bin/sh")
    assert argv[shim - 3:shim] == ["--ntasks-per-socket=1", "--sockets-per-node=4", "--exclusive"]
    bad = hpcai("launch", "--dry-run", "--site", "generic-slurm", "--image", "x.sif", "-o", str(tmp_path / "b"),
                "--srun-arg=exclusive\n; rm -rf /", "sanity")
    assert bad.exit_code == 2 and bad.stderr.startswith("error: --srun-arg 'exclusive\\n; rm -rf /': expected one srun")


@pytest.mark.parametrize("args, env, what", [
    (["--partition", "gpu\ntouch /tmp/hpcai-pwned #"], {}, "--partition"),
    ([], {"HPCAI_ACCOUNT": "proj\ntouch /tmp/hpcai-pwned"}, "--account"),
    (["--time", "1:00\r\n#SBATCH --wrap=x"], {}, "--time"),
])
def test_no_value_breaks_out_of_a_batch_script_line(hpcai, tmp_path, monkeypatch, args, env, what):
    """issue 12: a newline in a #SBATCH value made the rest of it a command (and ended the directives)."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    run = tmp_path / "r"
    res = hpcai("submit", "--no-submit", "--site", "generic-slurm", "--image", "x.sif", "-o", str(run), *args, "sanity")
    assert res.exit_code == 2 and not run.exists()  # nothing written
    line = res.stderr.strip()
    assert "\n" not in line and line.startswith(f"error: {what} ") and "control characters (newline, tab, escape) cannot be part of it" in line


def test_a_newline_in_the_output_dir_or_a_site_option_is_refused(hpcai, tmp_path, site_path, monkeypatch):
    res = hpcai("submit", "--no-submit", "--site", "generic-slurm", "--image", "x.sif", "-o",
                str(tmp_path / "a\nb"), "sanity")
    assert res.exit_code == 2 and res.stderr.startswith("error: --output-dir ")
    monkeypatch.setenv("HPCAI_SITE_PATH", site_path("shared", 'backend = "srun"\nsbatch_options = ["--qos=x\\nid"]\n'))
    res = hpcai("submit", "--no-submit", "--site", "shared", "--image", "x.sif", "-o", str(tmp_path / "s"), "sanity")
    assert res.exit_code == 2 and res.stderr.startswith("error: ") and (
        "shared.toml: sbatch_options '--qos=x\\nid' holds a control character" in res.stderr)  # the file and key
    assert not (tmp_path / "s").exists()


def test_runtime_backend_and_mpi_help_list_every_registered_name():
    """The help text comes from the registries: a new runtime is its module plus a registry line."""
    from hpcai.run.backends import BACKENDS
    from hpcai.run.options import MPI_TYPES, PLAN
    from hpcai.run.runtimes import RUNTIMES

    helps = {opt.name: opt.help for opt in PLAN}
    assert len(RUNTIMES) >= 10 and helps["runtime"].startswith(", ".join(RUNTIMES) + " (default")
    assert helps["backend"].startswith(", ".join(BACKENDS)) and helps["mpi"].startswith(", ".join(MPI_TYPES))
