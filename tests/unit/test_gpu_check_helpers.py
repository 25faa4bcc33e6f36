"""The helpers of `make gpu-check` (tests/gpu/gpucheck.py), run for real on a machine without a GPU:
the payload runner from the source tree (sanity needs no torch), `hpcai results parse` over its log,
the entrypoint's --check report and GPU hook, the figures report. What needs a GPU and torch
(ddp-bench over NCCL, hf-clm) is tests/gpu/test_gpu_bare_metal.py's, through these same functions."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "gpu"))

import gpucheck  # noqa: E402

SMI = """\
0, NVIDIA H100 80GB HBM3, 550.54.15, 81559, 00000000:19:00.0
1, NVIDIA H100 80GB HBM3, 550.54.15, 81559, 00000000:3B:00.0
No devices were found
"""


def test_nvidia_smi_rows_are_read():
    gpus = gpucheck.parse_gpu_csv(SMI)
    assert gpus == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "driver": "550.54.15", "memory_mib": 81559,
         "pci_bus_id": "00000000:19:00.0"},
        {"index": 1, "name": "NVIDIA H100 80GB HBM3", "driver": "550.54.15", "memory_mib": 81559,
         "pci_bus_id": "00000000:3B:00.0"},
    ]
    facts = gpucheck.machine_facts({"torch": "2.6.0", "cuda_build": "12.4", "nccl": "2.21.5"}, gpus)
    assert facts["gpu"] == "NVIDIA H100 80GB HBM3" and facts["gpus"] == 2 and facts["driver"] == "550.54.15"


def test_the_runner_command_line_one_rank_and_torchrun():
    assert gpucheck.bench_argv("py", "sanity") == ["py", str(gpucheck.RUNNER), "sanity"]
    assert gpucheck.bench_argv("py", "ddp-bench", ["backend=nccl"], profile="quick", nproc=4) == [
        "py", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4",
        str(gpucheck.RUNNER), "--profile", "quick", "ddp-bench", "backend=nccl"]


def test_outer_launcher_variables_never_reach_the_runner(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_PROCID", "3")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("HPCAI_BENCH_PROFILE", "hpe")
    env = gpucheck.bench_env(tmp_path)
    assert "SLURM_PROCID" not in env and "RANK" not in env and "HPCAI_BENCH_PROFILE" not in env
    assert env["HPCAI_PAYLOADS_DIR"] == str(REPO / "payloads")
    assert not Path(env["HPCAI_PREFIX"], "venv").exists()  # payloads run with the given interpreter


def test_result_line_is_rank_zeros_last_for_the_payload():
    text = ("HPCAI_RESULT {\"payload\": \"sanity\", \"status\": \"FAIL\"}\n"
            "[default0]:HPCAI_RESULT {\"payload\": \"sanity\", \"status\": \"PASS\"}\n"
            "HPCAI_RESULT {\"payload\": \"ddp-bench\", \"status\": \"PASS\"}\nHPCAI_RESULT {cut\n")
    assert gpucheck.result_line(text, "sanity") == {"payload": "sanity", "status": "PASS"}
    assert gpucheck.result_line(text, "hf-clm") is None


def test_sanity_from_the_source_tree_then_hpcai_results_parse(tmp_path, monkeypatch):
    """The gpu-check path end to end, on this machine's CPU: runner -> log -> `hpcai results parse`."""
    monkeypatch.setenv("HPCAI_GPU_OUT", str(tmp_path / "out"))
    session = gpucheck.new_session_dir()
    assert session.parent == tmp_path / "out" and gpucheck.new_session_dir() != session
    run = gpucheck.run_bench(sys.executable, "sanity", session)
    assert run.returncode == 0, run.output
    assert run.result["status"] == "PASS" and run.result["metrics"] == {"world_size": 1.0}, run.result
    assert run.log.read_text() == run.output and "hpcai-sanity: rank=0 gpu=" in run.output
    parsed = gpucheck.results_parse(run.log, "sanity")
    assert parsed.returncode == 0, parsed.stderr
    rows = gpucheck.table_rows(parsed.table)
    assert rows["ranks_reporting"][:2] == ["1", "ranks"] and rows["ranks_missing"][0] == "0", parsed.table
    # One headline per payload (issue 25): the manifest's, as the record has it.
    assert parsed.headline == "world_size" and parsed.metric("world_size") == 1


def test_entrypoint_check_and_gpu_hook(tmp_path):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": str(tmp_path), "HPCAI_DEBUG": "1"}
    check = gpucheck.run_entrypoint(["--check"], env)
    assert check.returncode == 0 and check.stdout.rstrip().endswith("OK"), (check.stdout, check.stderr)
    assert "gpus" in check.fields() and check.fields()["LOCAL_RANK"] == "unset", check.stdout
    env.update(HPCAI_GPU_BIND="local-rank", LOCAL_RANK="1", HPCAI_GPU_VENDOR="cuda")
    run = gpucheck.run_entrypoint(["sh", "-c", 'echo "$CUDA_VISIBLE_DEVICES"'], env)
    assert run.returncode == 0 and run.stdout.strip() == "1", (run.stdout, run.stderr)
    assert run.hook_set("CUDA_VISIBLE_DEVICES") == ("1", "gpu"), run.stderr


def test_report_lines(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HPCAI_GPU_REPORT", str(tmp_path / "r" / "gpu.jsonl"))
    path = gpucheck.append_report({"check": "ddp-bench", "gpu": "X", "ex_per_sec_total": 1234.5678})
    gpucheck.append_report({"check": "hf-clm", "samples_per_second": 12.0})
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert path == tmp_path / "r" / "gpu.jsonl" and [x["check"] for x in lines] == ["ddp-bench", "hf-clm"]
    assert all("time" in x for x in lines)
    out = capsys.readouterr().out
    assert "gpu-check: check=ddp-bench gpu=X ex_per_sec_total=1234.57" in out and str(path) in out


def test_a_python_without_cuda_torch_is_passed_over_with_the_reason(monkeypatch):
    monkeypatch.setenv("HPCAI_GPU_PYTHON", sys.executable)
    python, info, why = gpucheck.find_python(need_cuda=True)
    if python is None:  # the usual case: the test venv has no torch, or a CPU build
        assert len(why) == 1 and why[0].startswith(sys.executable + ": ") and \
            ("no torch" in why[0] or "sees no CUDA" in why[0]), why
    else:
        assert info["cuda"] and info["devices"] > 0, info


def test_rocminfo_lists_the_gpu_agents_in_hips_order():
    """rocminfo's GPU agents (an MI250X node's GCDs here; CPU agents and the ISA/pool `Name:`
    lines are not GPUs) are what the ROCm gpu-check (tests/gpu/test_gpu_rocm.py) runs on."""
    text = (REPO / "tests/fixtures/logs/rocminfo_mi250x.txt").read_text()
    gpus = gpucheck.parse_rocminfo(text)
    assert [(g["index"], g["name"], g["arch"]) for g in gpus] == [(i, "AMD Instinct MI250X", "gfx90a") for i in range(4)]
    assert gpucheck.parse_rocminfo("ROCk module is loaded\n") == []
    facts = gpucheck.machine_facts({"torch": "2.6.0+rocm6.4", "hip": "6.4.43482", "nccl": "2.22.3"}, gpus)
    assert facts["gpu"] == "AMD Instinct MI250X" and facts["gpus"] == 4 and facts["hip"] == "6.4.43482"


def test_rccl_tests_for_the_rocm_check_is_the_pinned_mirror_copy(tmp_path, monkeypatch):
    archive, sha = gpucheck.component_archive("rccl-tests")
    assert archive.is_file() and archive.name.startswith("ae3e635") and len(sha) == 64
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))  # no hipcc there: one clear reason, nothing built
    assert gpucheck.build_rccl_tests(tmp_path, ["gfx90a"]) == (None, f"no hipcc in {tmp_path}/bin (set ROCM_PATH)")


def test_megatron_lm_is_baked_from_the_mirror_as_install_sh_bakes_it(tmp_path):
    """gpu-check's stand-in for install.sh's CUDA step, run here (no GPU needed): the pinned
    Megatron-LM with CARAML's patch applied, the torch port and CARAML's GPT-2 files."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("megatron_lm_baked", gpucheck.PAYLOADS / "megatron-gpt/megatron_lm.py")
    megatron_lm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(megatron_lm)
    printed = gpucheck.bake_megatron_lm(tmp_path / "prefix", tmp_path / "work")
    tree = tmp_path / "prefix/share/megatron-lm"
    assert "patching file megatron/training.py" in printed and "port_torch.py: megatron/initialize.py" in printed
    assert "TFLOPs(megatron)" in (tree / "megatron/training.py").read_text()  # CARAML's patch is in
    assert "from megatron.torch_port import Adam, SGD" in (tree / "megatron/optimizer/__init__.py").read_text()
    assert megatron_lm.baked(str(tmp_path / "prefix")) and megatron_lm.ported(str(tmp_path / "prefix"))
    assert (tree / "caraml-tokenizers/gpt2-merges.txt").is_file()
