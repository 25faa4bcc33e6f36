"""--runtime ce: srun's --environment names an EDF written into the run record; the task's
command (entrypoint, payload) runs inside the container, so no rank shim wraps it. With the
site's fabric_hooks CE's aws_ofi_nccl hook brings the fabric; without, hpcai's own swap goes in
the EDF. Planned against a fake host; the EDF is parsed back and checked against the schema.
No Container Engine exists off CSCS Alps: nothing here runs one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from plan_helpers import CRAY, SHIM_PATH, FakeHost

from hpcai.errors import UsageError
from hpcai.run import edf
from hpcai.run.backends import srun
from hpcai.run.plan import LaunchOptions, plan_launch
from hpcai.run.site import parse_site

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

IMAGE = "nvcr.io#nvidia/pytorch:25.11-py3"


def plan_for(tmp_path, **kw):
    kw.setdefault("site", "cscs-alps")
    kw.setdefault("nodes", 2)
    return plan_launch(LaunchOptions(image=IMAGE, payload="nccl-tests", output_dir=str(tmp_path / "run"), **kw),
                       host=CRAY, check=False)


def the_edf(plan) -> dict:
    doc = tomllib.loads(plan.files["environment.toml"])
    assert edf.check(doc) == []
    return doc


def test_cscs_alps_prefers_ce_and_names_the_edf_in_srun(tmp_path):
    plan = plan_for(tmp_path)
    run = tmp_path / "run"
    assert plan.runtime.name == "ce"
    i = plan.argv.index(f"--environment={run}/environment.toml")
    assert plan.argv[0] == "srun" and "--mpi=pmi2" in plan.argv[:i]
    tail = plan.argv[i + 1:]
    assert tail[-2:] == ["/opt/hpcai/bin/hpcai-bench", "nccl-tests"]
    doc = the_edf(plan)
    assert doc["image"] == IMAGE and doc["entrypoint"] is False
    assert edf.flatten(doc["annotations"]) == {"com.hooks.aws_ofi_nccl.enabled": "true",
                                              "com.hooks.aws_ofi_nccl.variant": "cuda-dl"}
    assert not any(m.split(":")[1] == "/host/lib" for m in doc["mounts"])  # CE's hook swaps libfabric
    assert not any(k.startswith(("FI_", "NCCL_")) for k in doc["env"])    # …and sets these itself
    assert doc["env"]["PMIX_MCA_psec"] == "^munge" and doc["env"]["MASTER_PORT"]


def test_user_env_survives_the_hook_mode(tmp_path):
    doc = the_edf(plan_for(tmp_path, env=("FI_CXI_RX_MATCH_MODE=hybrid", "NCCL_DEBUG=INFO")))
    assert doc["env"]["FI_CXI_RX_MATCH_MODE"] == "hybrid" and doc["env"]["NCCL_DEBUG"] == "INFO"


def test_hooks_off_puts_hpcais_swap_in_the_edf(tmp_path, monkeypatch):
    text = (Path(__file__).parents[3] / "launcher/hpcai/run/sites/cscs-alps.toml").read_text()
    mine = tmp_path / "sites"
    mine.mkdir()
    (mine / "alps-noh.toml").write_text(text.replace("fabric_hooks = true", "fabric_hooks = false"))
    monkeypatch.setenv("HPCAI_SITE_PATH", str(mine))
    doc = the_edf(plan_for(tmp_path, site="alps-noh"))
    assert doc["mounts"][0] == "/opt/cray/libfabric/1.22.0/lib64:/host/lib"
    assert edf.flatten(doc["annotations"]) == {"com.hooks.cxi.enabled": "false"}
    assert doc["env"]["FI_CXI_DEFAULT_TX_SIZE"] == "16384" and doc["env"]["FI_CXI_RX_MATCH_MODE"] == "software"
    assert doc["env"]["FI_CXI_DEFAULT_CQ_SIZE"] == "131072"  # from the Slingshot profile


def test_secrets_stay_out_of_the_edf(tmp_path):
    plan = plan_for(tmp_path, env=("HF_TOKEN=hf_abc123secret",))
    assert "hf_abc123secret" not in plan.files["environment.toml"] and "hf_abc123secret" not in " ".join(plan.argv)
    assert plan.secret_env["HF_TOKEN"] == "hf_abc123secret"  # srun's environment, inherited by CE


@pytest.mark.parametrize("kw,message", [
    ({"backend": "mpiexec"}, "the ce runtime is a plugin of srun"),
    ({"energy": True}, "--energy wraps each rank"),
])
def test_refused_where_ce_cannot_work(tmp_path, kw, message):
    with pytest.raises(UsageError, match=message):
        plan_for(tmp_path, **kw)


def test_a_sif_or_a_missing_file_is_refused(tmp_path):
    from hpcai.run.runtimes import get_runtime

    sif = tmp_path / "x.sif"
    sif.write_bytes(b"SIF")
    with pytest.raises(UsageError, match="is a SIF, which the Container Engine cannot run"):
        get_runtime("ce").labels(str(sif))
    with pytest.raises(UsageError, match="image not found"):
        get_runtime("ce").labels(str(tmp_path / "absent.sqsh"))
    assert get_runtime("ce").labels(IMAGE) == {}


def test_the_edf_is_written_new_and_private_when_the_step_starts(tmp_path):
    """srun's run_step writes plan.files before it starts srun (here: `true` stands in for srun,
    which is real on this machine but CE is not)."""
    plan = plan_for(tmp_path)
    run = Path(plan.run_dir)
    run.mkdir(parents=True)
    srun._write_files(plan)
    path = run / "environment.toml"
    assert path.read_text() == plan.files["environment.toml"] and path.stat().st_mode & 0o777 == 0o600
    with pytest.raises(FileExistsError):  # never over another run's file
        srun._write_files(plan)


def test_a_site_with_hooks_but_no_ce_keeps_its_swap(tmp_path):
    plan = plan_launch(LaunchOptions(image="IMG.sif", payload="nccl-tests", site="cray-ex-nvidia",
                                     output_dir=str(tmp_path / "run")), host=CRAY, check=False)
    assert ("/opt/cray/libfabric/1.22.0/lib64", "/host/lib") in plan.binds and not plan.files
    assert plan.container_env["FI_CXI_DEFAULT_TX_SIZE"] == "2048"


def test_runtime_not_offered_by_the_site_is_a_warning(tmp_path):
    plan = plan_launch(LaunchOptions(image="IMG.sif", payload="nccl-tests", site="cscs-alps", runtime="apptainer",
                                     output_dir=str(tmp_path / "run")), host=FakeHost(), check=False)
    assert "site cscs-alps lists the runtimes ce; apptainer may not be installed there" in plan.warnings


def test_parse_site_refuses_a_preferred_runtime_it_does_not_offer():
    with pytest.raises(UsageError, match="runtime 'ce' is not among the site's runtimes: apptainer"):
        parse_site("x", 'runtime = "ce"\nruntimes = ["apptainer"]\n')


def test_per_gpu_runs_the_shim_inside_with_its_folder_mounted(tmp_path):
    plan = plan_for(tmp_path, per_gpu=True)
    i = plan.argv.index(f"--environment={tmp_path}/run/environment.toml")
    assert plan.argv[i + 1:i + 3] == ["/bin/sh", SHIM_PATH] and "--per-gpu" in plan.argv
    mounts = the_edf(plan)["mounts"]
    shim_dir = str(Path(SHIM_PATH).parent)
    assert f"{shim_dir}:{shim_dir}:ro" in mounts and f"{tmp_path}/run/logs:{tmp_path}/run/logs" in mounts
