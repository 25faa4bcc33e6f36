"""30-ranks: torch.distributed variables from Slurm, Open MPI, Flux, PMI/PALS and PMIx."""

from __future__ import annotations

SLURM = {
    "SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_PROCID": "5", "SLURM_LOCALID": "1",
    "SLURM_NTASKS": "8", "SLURM_NODEID": "1", "SLURM_TASKS_PER_NODE": "4(x2)",
    "SLURM_JOB_NODELIST": "nid[001234-001236,001300]",
}


def test_slurm_step(run_entrypoint):
    run = run_entrypoint(SLURM, hooks=["ranks"])
    assert run.exported() == {
        "RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4",
        "NODE_RANK": "1", "MASTER_ADDR": "nid001234", "MASTER_PORT": str(61000 + 4242 % 4536),
    }
    assert run.stderr == ""


def test_step_values_win_over_job_values(run_entrypoint):
    env = {**SLURM, "SLURM_STEP_NODELIST": "nid[001300-001301]", "SLURM_STEP_NUM_TASKS": "6",
           "SLURM_STEP_TASKS_PER_NODE": "3(x2)"}
    got = run_entrypoint(env, hooks=["ranks"]).exported()
    assert (got["MASTER_ADDR"], got["WORLD_SIZE"], got["LOCAL_WORLD_SIZE"]) == ("nid001300", "6", "3")


def test_uneven_tasks_per_node(run_entrypoint):
    env = {**SLURM, "SLURM_NODEID": "2", "SLURM_TASKS_PER_NODE": "4(x2),3"}
    assert run_entrypoint(env, hooks=["ranks"]).exported()["LOCAL_WORLD_SIZE"] == "3"


def test_preset_values_survive(run_entrypoint):
    preset = {"RANK": "99", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    run = run_entrypoint({**SLURM, **preset}, hooks=["ranks"])
    assert run.exported() == {"LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4",
                              "NODE_RANK": "1"}
    assert {k: run.env[k] for k in preset} == preset
    assert run.stderr == ""


def test_an_empty_rank_variable_is_filled_with_a_warning(run_entrypoint):
    # torch fails on LOCAL_RANK=''; it is never a choice, so it counts as unset: hpcai_check_job
    # lets it through (only a non-empty malformed value is refused) and hpcai_set fills it.
    run = run_entrypoint({**SLURM, "LOCAL_RANK": ""}, hooks=["ranks"])
    assert run.env["LOCAL_RANK"] == "1"
    assert run.warnings == ["hpcai-entrypoint: warning: LOCAL_RANK is set but empty; using LOCAL_RANK='1'"]


def test_other_empty_values_still_count_as_set(run_entrypoint):
    # CUDA_VISIBLE_DEVICES='' means "no GPU": only the rank variables are filled when empty.
    env = {"LOCAL_RANK": "1", "HPCAI_GPU_BIND": "local-rank", "HPCAI_GPU_VENDOR": "cuda",
           "CUDA_VISIBLE_DEVICES": ""}
    run = run_entrypoint(env, hooks=["gpu"])
    assert (run.exported(), run.env["CUDA_VISIBLE_DEVICES"], run.stderr) == ({}, "", "")


def test_empty_tasks_per_node_warns_and_leaves_it_unset(run_entrypoint):
    run = run_entrypoint({**SLURM, "SLURM_TASKS_PER_NODE": ""}, hooks=["ranks"])
    assert run.rc == 0
    assert "LOCAL_WORLD_SIZE" not in run.env and run.env["RANK"] == "5"
    assert run.warnings == ["hpcai-entrypoint: warning: SLURM_TASKS_PER_NODE is empty; "
                            "LOCAL_WORLD_SIZE not set"]


def test_malformed_tasks_per_node_warns(run_entrypoint):
    run = run_entrypoint({**SLURM, "SLURM_TASKS_PER_NODE": "four"}, hooks=["ranks"])
    assert run.rc == 0 and "LOCAL_WORLD_SIZE" not in run.env
    assert len(run.warnings) == 1 and "'four'" in run.warnings[0]


def test_open_mpi_ranks_win_over_a_stale_batch_step(run_entrypoint):
    # mpirun inside an sbatch script: every rank inherits the batch step's SLURM_PROCID=0.
    env = {"SLURM_JOB_ID": "77", "SLURM_PROCID": "0", "SLURM_NODEID": "0",
           "SLURM_JOB_NODELIST": "nid[007-008]", "OMPI_COMM_WORLD_RANK": "6",
           "OMPI_COMM_WORLD_LOCAL_RANK": "2", "OMPI_COMM_WORLD_SIZE": "8",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}
    assert run_entrypoint(env, hooks=["ranks"]).exported() == {
        "RANK": "6", "LOCAL_RANK": "2", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4",
        "MASTER_ADDR": "nid007", "MASTER_PORT": str(61000 + 77)}


def test_mpiexec_inside_allocation_uses_pmi(run_entrypoint):
    env = {"SLURM_JOB_ID": "5", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
           "SLURM_JOB_NODELIST": "n1", "PMI_RANK": "3", "PMI_SIZE": "4",
           "PMI_LOCAL_RANK": "1", "PMI_LOCAL_SIZE": "2"}
    got = run_entrypoint(env, hooks=["ranks"]).exported()
    assert (got["RANK"], got["LOCAL_RANK"], got["WORLD_SIZE"], got["LOCAL_WORLD_SIZE"]) == (
        "3", "1", "4", "2")


def test_srun_pmi2_agreeing_pmi_rank_keeps_slurm_family(run_entrypoint):
    got = run_entrypoint({**SLURM, "PMI_RANK": "5"}, hooks=["ranks"]).exported()
    assert got["NODE_RANK"] == "1" and got["RANK"] == "5"


def test_pals_under_pbs(run_entrypoint, workdir):
    nodefile = workdir / "nodefile"
    nodefile.write_text("x3005c0s7b0n0\nx3005c0s7b1n0\n")
    env = {"PALS_RANKID": "5", "PALS_LOCAL_RANKID": "1", "PALS_NODEID": "1",
           "PMI_SIZE": "8", "PMI_LOCAL_SIZE": "4", "PBS_JOBID": "123456.polaris-pbs-01",
           "PBS_NODEFILE": str(nodefile)}
    assert run_entrypoint(env, hooks=["ranks"]).exported() == {
        "RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4",
        "NODE_RANK": "1", "MASTER_ADDR": "x3005c0s7b0n0", "MASTER_PORT": str(61000 + 123456 % 4536)}


# What `flux run -N 2 -n 8` sets for task 5 (flux-environment(7)), with the simple PMI server's
# PMI_RANK/PMI_SIZE beside it. Flux names neither tasks per node nor a node id.
FLUX = {"FLUX_TASK_RANK": "5", "FLUX_TASK_LOCAL_ID": "1", "FLUX_JOB_SIZE": "8", "FLUX_JOB_NNODES": "2",
        "FLUX_JOB_ID": "f2Xb3sYw5", "PMI_RANK": "5", "PMI_SIZE": "8"}


def test_flux_task(run_entrypoint):
    run = run_entrypoint(FLUX, hooks=["ranks"])
    # block task map: 4 tasks a node, task 5 on node 1; the F58 job id gives no port
    assert run.exported() == {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4",
                              "NODE_RANK": "1"}
    assert run.stderr == ""


def test_flux_uneven_job_sets_no_node_values(run_entrypoint):
    run = run_entrypoint({**FLUX, "FLUX_JOB_SIZE": "7", "PMI_SIZE": "7"}, hooks=["ranks"])
    assert run.exported() == {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "7"}
    assert run.warnings == ["hpcai-entrypoint: warning: FLUX_JOB_SIZE=7 tasks on FLUX_JOB_NNODES=2 nodes are "
                            "uneven; LOCAL_WORLD_SIZE and NODE_RANK not set"]


def test_mpiexec_inside_a_flux_job_uses_pmi(run_entrypoint):
    # a hydra mpiexec started by one Flux task: its PMI_RANK disagrees with FLUX_TASK_RANK
    env = {**FLUX, "FLUX_TASK_RANK": "0", "FLUX_TASK_LOCAL_ID": "0", "PMI_RANK": "3", "PMI_SIZE": "4",
           "PMI_LOCAL_RANK": "1", "PMI_LOCAL_SIZE": "2"}
    got = run_entrypoint(env, hooks=["ranks"]).exported()
    assert (got["RANK"], got["LOCAL_RANK"], got["WORLD_SIZE"], got["LOCAL_WORLD_SIZE"]) == ("3", "1", "4", "2")


def test_slurm_and_open_mpi_win_over_a_stale_flux_task(run_entrypoint):
    assert run_entrypoint({**FLUX, **SLURM, "PMI_RANK": "5"}, hooks=["ranks"]).exported()["NODE_RANK"] == "1"
    ompi = {"OMPI_COMM_WORLD_RANK": "6", "OMPI_COMM_WORLD_SIZE": "8"}
    assert run_entrypoint({**FLUX, **ompi}, hooks=["ranks"]).exported()["RANK"] == "6"


def test_pmix_only(run_entrypoint):
    assert run_entrypoint({"PMIX_RANK": "2"}, hooks=["ranks"]).exported() == {"RANK": "2"}


def test_no_launcher_exports_nothing(run_entrypoint):
    run = run_entrypoint({"HOME": "/root"}, hooks=["ranks"])
    assert (run.rc, run.exported(), run.stderr) == (0, {}, "")


def test_launcher_variables_are_never_touched(run_entrypoint):
    env = {**SLURM, "PMI_RANK": "5", "PMIX_RANK": "5", "PALS_APINFO": "/var/spool/x",
           "SLINGSHOT_VNIS": "1234", "SLINGSHOT_DEVICES": "cxi0"}
    run = run_entrypoint(env, hooks=None)
    assert not run.removed()
    assert {k: run.env[k] for k in env} == env
