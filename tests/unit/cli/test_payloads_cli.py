"""`hpcai payloads list` and `hpcai payloads show`: tables, JSON, and one-line errors."""

from __future__ import annotations

import json


def test_list_json_has_every_payload_with_its_headline(hpcai):
    res = hpcai("payloads", "list", "--json")
    assert res.exit_code == 0, res.stderr
    entries = {e["name"]: e for e in json.loads(res.stdout)}
    assert entries["nccl-tests"]["headline"] == "busbw_avg"
    assert entries["nccl-tests"]["flavors"] == ["pytorch-ngc", "tensorflow-ngc"]
    assert entries["hf-clm"]["parser"] == "hf-trainer"
    from hpcai.payloads import available_payloads

    assert sorted(entries) == available_payloads() and entries["mila-suite"]["headline"] == "score"
    assert entries["megatron-gpt"]["headline"] == "tokens_per_second" and entries["megatron-gpt"]["parser"] == "megatron"


def test_list_for_a_flavor_keeps_only_supported_payloads(hpcai):
    res = hpcai("payloads", "list", "--flavor", "tensorflow-cpu", "--json")
    names = [e["name"] for e in json.loads(res.stdout)]
    from hpcai.payloads import available_payloads, load_payload

    assert names == [n for n in available_payloads() if load_payload(n).supports("tensorflow-cpu")]
    assert {"hvd-synthetic", "mpi-allreduce", "tf-resnet50"} <= set(names) and "ddp-bench" not in names


def test_list_table_names_what_each_measures(hpcai):
    res = hpcai("payloads", "list")
    assert res.exit_code == 0
    for word in ("payload", "sanity", "openclip", "busbw_avg", "per-gpu"):
        assert word in res.stdout


def test_show_lists_variables_metrics_and_the_command(hpcai):
    res = hpcai("payloads", "show", "nccl-tests")
    assert res.exit_code == 0, res.stderr
    out = res.stdout
    assert "runs: /opt/hpcai/bin/all_reduce_perf -b 1M -e 8G -f 2 -n 100" in out
    assert "collective" in out and "all_gather" in out and "busbw_avg" in out
    assert "install [cuda]: build=build.sh runtime=-" in out
    assert "sanity: ^# Out of bounds values : 0 OK" in out


def test_show_json(hpcai):
    res = hpcai("payloads", "show", "mpi-allreduce", "--json")
    doc = json.loads(res.stdout)
    assert doc["name"] == "mpi-allreduce" and doc["vars"]["max_bytes"]["default"] == 16777216
    assert doc["command"][1] == "/opt/hpcai/payloads/mpi-allreduce/allreduce.py"


def test_unknown_payload_and_flavor_are_one_line_exit_2(hpcai):
    res = hpcai("payloads", "show", "nccl")
    assert res.exit_code == 2
    assert res.stderr.strip() == ("error: unknown payload 'nccl'; valid: ddp-bench, hf-clm, hvd-synthetic, "
                                  "megatron-gpt, mila-suite, mila-training, mpi-allreduce, nccl-tests, openclip, osu, rccl-tests, sanity, tf-cnn-benchmarks, tf-resnet50")
    res = hpcai("payloads", "list", "--flavor", "pytorch")
    assert res.exit_code == 2 and res.stderr.startswith("error: unknown flavor 'pytorch'; valid: pytorch-cpu")


def test_image_listing_without_the_engine_is_a_clean_error(hpcai, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    res = hpcai("payloads", "list", "--image", "bench.sif")
    assert res.exit_code == 1
    assert res.stderr.strip() == "error: cannot inspect bench.sif: apptainer not found"


def test_help_panel(hpcai):
    res = hpcai("--help")
    assert "Payloads" in res.stdout and "payloads" in res.stdout


def test_image_default_command_and_runscript_run_the_suite(hpcai):
    """`docker run IMG` (CMD) and `apptainer run bench.sif [payload var=value]` (%runscript) both
    reach hpcai-bench behind the entrypoint; with no arguments it runs the default suite."""
    docker = hpcai("render", "pytorch-cpu")
    assert docker.exit_code == 0, docker.stderr
    assert 'CMD ["/opt/hpcai/bin/hpcai-bench"]' in docker.stdout
    assert "COPY hpcai-bench /opt/hpcai/bin/hpcai-bench" in docker.stdout
    definition = hpcai("render", "pytorch-cpu", "--format", "apptainer")
    assert definition.exit_code == 0, definition.stderr
    runscript = definition.stdout.split("%runscript", 1)[1].split("\n%", 1)[0]
    # no arguments: the suite; arguments: the entrypoint, which runs a payload name with hpcai-bench
    assert "exec /opt/hpcai/bin/hpcai-entrypoint /opt/hpcai/bin/hpcai-bench\n" in runscript
    assert 'exec /opt/hpcai/bin/hpcai-entrypoint "$@"' in runscript
