"""`--profile caraml` against CARAML's own files (issue 26, 1b): no drift between what CARAML says
and what we run.

CARAML's llm_benchmark_nvidia_amd.yaml and resnet50_benchmark.xml come from the pinned archive in
tests/infra/mirror/ (FZJ-JSC/CARAML @59cba3e, checked against its SHA256SUMS line) and are
evaluated by JUBE's own parser, per tag set, as `jube run` would. Each system tag's values are
compared with the plan of `hpcai launch --profile caraml --site SITE … --json` (SITE: the site
file whose caraml_system is that tag), and what depends on the world size (Megatron's global
batch, ResNet's batch per device) with the payload's own rule for the plan's ranks: gpt_layout.py
and tf_cnn.per_device_batch (tf-cnn-benchmarks), the code the image runs.

Left out on purpose (docs/workflows.md): CARAML's `container` tag sets (they pull images), its
account names and data paths (JSC's), and the Graphcore batch rule (IPU replicas: its train.py is
not ported; the GC200 site's time, nodes, tasks and threads are still checked).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import tarfile
from pathlib import Path

import pytest

from hpcai.errors import UsageError
from hpcai.run.site import CARAML_SYSTEMS, available_sites, load_site, parse_site

REPO = Path(__file__).resolve().parents[3]
MIRROR = REPO / "tests" / "infra" / "mirror"
CARAML = "github/FZJ-JSC/CARAML/59cba3e4f2c3f12c6dee3b85133122c731909852.tar.gz"
JUBE = "github/FZJ-JSC/JUBE/REL-2.7.1.tar.gz"
PAYLOADS = REPO / "payloads"
LLM_SYSTEMS = ("JEDI", "GH200", "WAIH100", "H100", "A100", "MI250")  # the yaml's system tags
SIZES = ("800M", "13B", "175B")


def _checked(rel: str) -> Path:
    """A mirror archive, after its SHA256SUMS line."""
    lines = [ln.split() for ln in (MIRROR / "SHA256SUMS").read_text().splitlines() if ln.strip()]
    want = next((digest for digest, name in lines if name == rel), None)
    assert want, f"{rel} is not listed in tests/infra/mirror/SHA256SUMS"
    path = MIRROR / rel
    assert hashlib.sha256(path.read_bytes()).hexdigest() == want, f"{rel}: checksum mismatch"
    return path


@pytest.fixture(scope="module")
def caraml(tmp_path_factory) -> Path:
    """CARAML's tree at the pinned commit, unpacked from the checked archive."""
    dest = tmp_path_factory.mktemp("caraml")
    with tarfile.open(_checked(CARAML)) as tar:
        tar.extractall(dest, filter="data")
    (root,) = dest.iterdir()
    return root


@pytest.fixture(scope="module")
def platform(tmp_path_factory) -> str:
    """JUBE's Slurm platform folder (CARAML's `init_with: platform.xml`): the installed package's
    data, else the folder in the JUBE archive of the mirror."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("JUBE")
        for f in dist.files or ():
            if str(f).endswith("platform/slurm/platform.xml"):
                return str(Path(dist.locate_file(f)).resolve().parent)
    except PackageNotFoundError:
        pass
    dest = tmp_path_factory.mktemp("jube")
    with tarfile.open(_checked(JUBE)) as tar:
        tar.extractall(dest, filter="data")
    return str(next(dest.glob("*/platform/slurm")))


def jube_rows(path: Path, tags: set[str], sets: tuple[str, ...], platform: str, step: str) -> list[dict[str, str]]:
    """Every work package's parameter values for TAGS, as JUBE's step expands them (templates such
    as `1;2` become one package each) and substitutes them (python-mode values evaluated)."""
    jubeio = pytest.importorskip("jube.jubeio", reason="JUBE 2.7.1 is not installed (tests/infra/jube-up.sh)")
    from jube import parameter as jp

    parser = jubeio.Parser(str(path), tags=set(tags), include_path=[platform])
    bench = list(parser.benchmarks_from_xml()[0].values())[0]
    merged = jp.Parameterset()
    for name in sets:
        merged.add_parameterset(bench.parametersets[name])
    for name, value in (("jube_step_name", step), ("jube_benchmark_home", "/bench"), ("jube_wp_relpath", "wp")):
        merged.add_parameter(jp.Parameter.create_parameter(name, value))
    todo, rows = [merged], []
    while todo:  # jube/step.py's loop: substitute, expand new templates, again
        one = todo.pop()
        one.parameter_substitution()
        if one.has_templates:
            todo += list(one.expand_templates())
            continue
        one.parameter_substitution(final_sub=True)
        rows.append({p.name: str(p.value) for p in one})
    return rows


def site_of(tag: str) -> str:
    sites = [n for n in available_sites() if load_site(n).caraml_system == tag]
    assert len(sites) == 1, f"CARAML system {tag}: sites {sites}"
    return sites[0]


def load_by_path(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plan(hpcai, tmp_path, *args: str) -> dict:
    res = hpcai("launch", "--json", "--image", "x.sif", "-o", str(tmp_path / "r"), "--profile", "caraml", *args)
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def test_every_caraml_system_has_one_site():
    """Each system tag of CARAML's files is one site file; a site names only CARAML's tags."""
    assert {site_of(tag) for tag in CARAML_SYSTEMS} == {
        "jedi", "jureca-gh200", "jureca-waih100", "jureca-h100", "jureca-a100", "jureca-mi250", "jureca-gc200"}


@pytest.mark.parametrize("system", LLM_SYSTEMS)
@pytest.mark.parametrize("size", SIZES)
def test_megatron_gpt_caraml_profile_is_carmls_yaml(caraml, platform, hpcai, tmp_path, system, size):
    (want,) = jube_rows(caraml / "llm_training" / "llm_benchmark_nvidia_amd.yaml", {system, size},
                        ("systemInfo", "modelParameter", "systemParameter"), platform, "benchmark")
    got = plan(hpcai, tmp_path, "--site", site_of(system), "megatron-gpt", f"model_size={size}")
    v = got["payload_values"]
    # the model and its split: CARAML's modelParameter row for the size
    assert (v["num_layers"], v["hidden_size"], v["num_attention_heads"], v["tp"], v["pp"], v["micro_batch_size"],
            v["seq_len"]) == (want["nlayers"], want["nhidden"], want["nheads"], want["tp_size"], want["pp_size"],
                              want["micro_batch_size"], want["sequence_length"])
    args = want["modelargs"].split()
    assert v["precision"] == next(a[2:] for a in args if a in ("--fp16", "--bf16"))
    # the run's length: no iteration count, CARAML's wall time (--exit-duration-in-mins) and job limit
    assert (v["iters"], float(v["exit_duration"]), got["time"]) == ("0", float(want["exit_duration"]), want["timelimit"])
    # the job: CARAML's nodes for the size (no -N given), one rank per GPU, its queue, and its one
    # task's threads per node split over our ranks
    assert (got["nodes"], got["ntasks_per_node"], got["gpus_per_node"], got["partition"]) == \
        (int(want["nodes"]), int(want["gpus_per_node"]), int(want["gpus_per_node"]), want["queue"])
    assert got["cpus_per_task"] * got["ntasks_per_node"] == int(want["threadspertask"]) * int(want["taskspernode"])
    # what the world size decides, by the rule the image runs (gpt_layout.py)
    layout = load_by_path("gpt_layout", PAYLOADS / "megatron-gpt" / "gpt_layout.py")
    given = {k: (int(v[k]) if v[k].isdigit() else v[k]) for k in layout.KEYS}
    world = got["nodes"] * got["ntasks_per_node"]
    if int(want["dp_size"]) == 0:  # GH200 x 175B: 16 GPUs for tp 8 x pp 8, CARAML's own dp is 0
        with pytest.raises(ValueError, match="16 ranks do not divide into tp=8 x pp=8"):
            layout.layout(size, given, world)
        return
    lay = layout.layout(size, given, world)
    assert (lay["dp"], lay["global_batch_size"]) == (int(want["dp_size"]), int(want["global_batch_size"]))
    ffn = args[args.index("--ffn-hidden-size") + 1] if "--ffn-hidden-size" in args else None
    assert lay["ffn_hidden_size"] == int(ffn or 4 * int(want["nhidden"]))  # Megatron's default: 4 x hidden
    # and the values reach the benchmark's command line as the runner builds it
    from hpcai.payloads import load_payload

    argv = load_payload("megatron-gpt").benchmark_argv(v)
    for flag, value in (("--num-layers", want["nlayers"]), ("--tp", want["tp_size"]), ("--pp", want["pp_size"]),
                        ("--exit-duration", want["exit_duration"]), ("--iters", "0")):
        assert argv[argv.index(flag) + 1] == value


NVIDIA_SYSTEMS = ("JEDI", "GH200", "WAIH100", "H100", "A100")  # the yaml's Megatron-LM (f7727433) systems


@pytest.mark.parametrize("system", NVIDIA_SYSTEMS)
@pytest.mark.parametrize("size", SIZES)
def test_megatron_lm_argv_is_caramls_cmd(caraml, platform, system, size):
    """The implementation=megatron-lm run: pretrain_gpt.py's arguments (megatron_lm.caraml_argv,
    the code the image runs) are, token for token, the CMD of CARAML's job script for the system
    and size, with our paths where CARAML has its shell variables."""
    (want,) = jube_rows(caraml / "llm_training" / "llm_benchmark_nvidia_amd.yaml", {system, size},
                        ("systemInfo", "modelParameter", "systemParameter"), platform, "benchmark")
    script = want["preprocess"]
    cmd = script[script.index('export CMD="') + len('export CMD="'):]
    cmd = cmd[:cmd.index('"')].replace("\\\n", " ").split()
    assert cmd[0] == "$(pwd)/pretrain_gpt.py"
    layout = load_by_path("gpt_layout", PAYLOADS / "megatron-gpt" / "gpt_layout.py")
    megatron_lm = load_by_path("megatron_lm", PAYLOADS / "megatron-gpt" / "megatron_lm.py")
    world = int(want["total_devices"])
    if int(want["dp_size"]) == 0:  # GH200 x 175B: no layout (see the profile's test)
        return
    size_row = layout.size_row(size)
    short = layout.short_names(layout.layout(size, {}, world), int(want["sequence_length"]))
    short["ffn_explicit"] = bool(size_row["ffn_hidden_size"])
    got = megatron_lm.caraml_argv(short, "/run/data/corpus_text_document", "/run/out", "/opt/hpcai",
                                  float(want["exit_duration"]), log_interval=5)
    tree = megatron_lm.tree("/opt/hpcai")
    shell = {tree["vocab"]: "$VOCAB_FILE", tree["merges"]: "$MERGE_FILE", "/run/out/tensorboard": "$TENSORBOARD_PATH",
             "/run/out/checkpoints": "$CHECKPOINT_PATH", "/run/data/corpus_text_document": "$LLM_DATA_PATH"}
    assert [shell.get(token, token) for token in got] == cmd[1:]


def test_megatron_lm_argv_counts_iterations_as_samples_and_drops_a_zero_wall_time():
    layout = load_by_path("gpt_layout", PAYLOADS / "megatron-gpt" / "gpt_layout.py")
    megatron_lm = load_by_path("megatron_lm", PAYLOADS / "megatron-gpt" / "megatron_lm.py")
    short = layout.short_names(layout.layout("800M", {}, 4), 2048)
    got = megatron_lm.caraml_argv(short, "/d", "/o", "/opt/hpcai", 0, iters=10)
    assert got[got.index("--train-samples") + 1] == "320" and "--exit-duration-in-mins" not in got
    assert "--ffn-hidden-size" not in got and "--fp16" in got  # 800M: CARAML's modelargs


def test_megatron_lm_reports_tokens_per_second_as_caramls_jube_result():
    """CARAML's perf_patterns: Tokens/second = (1 / elp_pat_avg) x global batch x sequence length,
    elp_pat_avg the mean over every logged interval, the first included."""
    megatron_lm = load_by_path("megatron_lm", PAYLOADS / "megatron-gpt" / "megatron_lm.py")
    log = (REPO / "tests/fixtures/logs/megatron_caraml.log").read_text().splitlines()
    got = megatron_lm.figures(log)
    row = megatron_lm.summary(got, {"gbs": 512, "seq": 2048}, "800M")
    mean = sum(got["elapsed"]) / len(got["elapsed"])
    assert got["elapsed"][:3] == [9.81, 2.41, 2.43] and row["logged_intervals"] == len(got["elapsed"])
    assert row["tokens_per_second"] == pytest.approx(512 * 2048 / mean)
    assert row["implementation"] == "megatron-lm" and row["iterations"] == got["iterations"] > 0
    assert megatron_lm.summary(megatron_lm.figures(["no iteration here"]), {"gbs": 1, "seq": 1}, "800M") is None


RESNET_SYSTEMS = CARAML_SYSTEMS  # the xml adds GC200


@pytest.mark.parametrize("synthetic", [False, True], ids=["imagenet", "synthetic"])
@pytest.mark.parametrize("system", RESNET_SYSTEMS)
def test_tf_cnn_benchmarks_caraml_profile_is_caramls_xml(caraml, platform, hpcai, tmp_path, system, synthetic):
    rows = jube_rows(caraml / "resnet50" / "resnet50_benchmark.xml", {system} | ({"synthetic"} if synthetic else set()),
                     ("systemInfo", "systemParameter", "modelParameter"), platform, "execute")
    site = site_of(system)
    data = [] if synthetic else ["data_dir=/data/imagenet"]
    # with no -N and no --ntasks-per-node: CARAML's first node count and its largest tasks per node
    default = plan(hpcai, tmp_path, "--site", site, "tf-cnn-benchmarks", *data)
    assert default["nodes"] == min(int(r["nodes"]) for r in rows)
    assert default["ntasks_per_node"] == max(int(r["taskspernode"]) for r in rows)
    per_device = load_by_path("tf_cnn", PAYLOADS / "tf-cnn-benchmarks" / "tf_cnn.py").per_device_batch
    from hpcai.payloads import load_payload

    manifest = load_payload("tf-cnn-benchmarks")
    points = sorted({(int(r["nodes"]), int(r["taskspernode"])) for r in rows})
    for nodes, tasks in points:
        got = plan(hpcai, tmp_path, "--site", site, "-N", str(nodes), "--ntasks-per-node", str(tasks),
                   "tf-cnn-benchmarks", *data)
        mine = [r for r in rows if (int(r["nodes"]), int(r["taskspernode"])) == (nodes, tasks)]
        for want in mine:
            assert (got["cpus_per_task"], got["time"], got["partition"]) == \
                (int(want["threadspertask"]), want["timelimit"], want["queue"])
        v = got["payload_values"]
        assert (v["data_dir"] == "") == synthetic and {r["dataset"] for r in mine} == \
            {"ImageNet(synthetic)" if synthetic else "ImageNet"}
        if system == "GC200":  # Graphcore's train.py: IPU replicas, not ported (one rank, 4 IPUs)
            assert {r["tf_model"] for r in mine} == {"resnet50_mlperf_pod4_bs20"} and got["ntasks"] == 1
            continue
        assert got["ntasks"] == int(mine[0]["total_devices"])
        for want in mine:  # CARAML's global batch sweep, each point's batch per device
            assert per_device(int(v["batch_size"]), int(want["global_batch_size"]), got["ntasks"]) == \
                int(want["batch_size_per_device"])
        args = mine[0]["args_exec"]
        assert "--variable_update horovod --use_fp16=True" in args and "--model resnet50_v2" in args
        assert (v["variable_update"], v["use_fp16"], v["model"]) == ("horovod", "true", "resnet50_v2")
        argv = manifest.benchmark_argv(v)
        assert {"--variable-update", "horovod", "--use_fp16=true", "--model=resnet50_v2"} <= set(argv)
        assert ("--data_dir=/data/imagenet" in argv) == ("--data_dir=" in args) == (not synthetic)
    # CARAML's example rows: 8 images per device, the profile's batch when no global batch is given
    assert per_device(int(default["payload_values"]["batch_size"]), 0, default["ntasks"]) == 8


# --- the mechanism the profile rides on (no JUBE needed) ------------------------------------------

def test_profile_rows_follow_the_model_size_and_var_value_wins():
    from hpcai.payloads import load_payload

    m = load_payload("megatron-gpt")
    big = m.validate_vars({"model_size": "175B"}, profiles=("caraml",))
    assert (big["tp"], big["pp"], big["num_layers"], big["precision"]) == ("8", "8", "96", "bf16")
    mine = m.validate_vars({"model_size": "13B", "tp": "4"}, profiles=("caraml",))
    assert (mine["tp"], mine["pp"]) == ("4", "2")  # a var=value wins over the row
    tiny = m.validate_vars({"model_size": "tiny"}, profiles=("caraml",))
    assert tiny["tp"] == "0" and tiny["exit_duration"] == "30"  # no row for tiny: the size's own (gpt_layout)


def test_launch_rows_give_nodes_time_and_cpus_where_the_command_line_gives_none(hpcai, tmp_path):
    got = plan(hpcai, tmp_path, "--site", "jedi", "megatron-gpt", "model_size=13B")
    assert (got["nodes"], got["time"], got["cpus_per_task"]) == (44, "00:15:00", 18)
    mine = plan(hpcai, tmp_path, "--site", "jedi", "-N", "2", "--time", "5", "-c", "72", "megatron-gpt",
                "model_size=13B")
    assert (mine["nodes"], mine["time"], mine["cpus_per_task"]) == (2, "5", 72)
    other = plan(hpcai, tmp_path, "--site", "jsc-ib", "megatron-gpt")  # no caraml_system: the site's CPUs
    assert (other["nodes"], other["time"], other["cpus_per_task"]) == (1, "00:15:00", 12)


def test_gpt_layout_fills_what_is_left_at_zero_from_the_caraml_rows():
    layout = load_by_path("gpt_layout", PAYLOADS / "megatron-gpt" / "gpt_layout.py")
    lay = layout.layout("13B", {}, 176)  # CARAML's 44 JEDI nodes x 4 GPUs, without the profile
    assert (lay["num_layers"], lay["tp"], lay["pp"], lay["dp"], lay["global_batch_size"]) == (40, 2, 2, 44, 5632)
    assert layout.layout("tiny", {}, 4)["global_batch_size"] == 8
    with pytest.raises(ValueError, match="global batch 30 is not a multiple of dp=4 x micro batch 4"):
        layout.layout("800M", {"global_batch_size": 30}, 4)


@pytest.mark.parametrize("toml, message", [
    ('[launch.a]\nnodes = "4"\n', r"launch.a.nodes '4': expected a whole number from 1"),
    ('[launch.a]\n"size=x" = { nodes = 2 }\n', r"row 'size=x' selects on 'size', which is none of: caraml_system, n"),
    ('[launch.a]\n"n=2" = { srun_args = ["--exclusive"] }\n', r"unknown key in .*\[launch.a.\"n=2\"\]: 'srun_args'"),
    ('[launch.a]\ncpus = 4\n', r"unknown key in .*\[launch.a\]: 'cpus'; valid: cpus_per_node, cpus_per_task, nodes, srun_args, time"),
    ('[profiles.a."n=x"]\nn = 2\n', r"variable n='x': expected an integer"),
    ('[profiles.a."m=1"]\nn = 2\n', r"row 'm=1' selects on 'm', which is none of: n"),
])
def test_bad_rows_name_the_manifest(tmp_path, monkeypatch, toml, message):
    from hpcai import payloads

    bad = tmp_path / "payloads" / "broken"
    bad.mkdir(parents=True)
    monkeypatch.setattr(payloads, "payloads_root", lambda: tmp_path / "payloads")
    (bad / "payload.toml").write_text('[vars]\nn = { default = 1 }\n[profiles.a]\nn = 2\n' + toml)
    with pytest.raises(UsageError, match=message):
        payloads.load_payload("broken")


def test_caraml_system_is_one_of_carmls_tags():
    assert parse_site("x", 'caraml_system = "JEDI"\n').caraml_system == "JEDI"
    with pytest.raises(UsageError, match="caraml_system 'JUWELS' is not one of: \"\", JEDI, GH200"):
        parse_site("x", 'caraml_system = "JUWELS"\n')
