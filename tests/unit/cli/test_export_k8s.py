"""`hpcai export k8s`: the MPIJob it writes, checked against the MPIJob v2beta1 schema as
mpi-operator's CRD defines it (tests/fixtures/k8s/mpijob-v2beta1.schema.json, whose $comment says
where it was read), each pod template against Kubernetes' own PodTemplateSpec schema
(kubernetes-validate, strict: an unknown field is an error), and the rules the operator's
validation applies before it runs a job. The job run for real (docker, the real -ssh images and
MPI) is tests/integration/test_k8s_mpijob.py; here the image's labels, which a local engine would
give, are set by the test (`labels` fixture)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from hpcai import k8s

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "fixtures/k8s/mpijob-v2beta1.schema.json").read_text())
K8S_VERSION = "1.37.0"  # the newest schema kubernetes-validate holds
IMAGE = "registry.example/hpcai/pytorch-ngc-hpc-ssh:25.06-py3-abc1234"
CUDA = {"hpcai.ssh": "1", "hpcai.mpi": "ompi", "hpcai.family": "cuda", "hpcai.payloads": "sanity,nccl-tests,ddp-bench"}


@pytest.fixture
def labels(monkeypatch):
    """Stand-in for the local engine's `image inspect` (the real one: tests/integration)."""
    found: dict[str, str] = {}
    monkeypatch.setattr("hpcai.image.engine.local_labels", lambda image: dict(found))
    return found


def operator_rules(job: dict) -> list[str]:
    """What mpi-operator's validation (pkg/apis/kubeflow/validation) refuses after defaulting."""
    spec, name = job["spec"], job["metadata"]["name"]
    replicas = spec["mpiReplicaSpecs"]
    problems = []
    if set(replicas) - {"Launcher", "Worker"} or "Launcher" not in replicas:
        problems.append(f"replica types {sorted(replicas)}")
    if replicas["Launcher"].get("replicas") != 1:
        problems.append("launcher replicas must be 1")
    workers = replicas.get("Worker", {}).get("replicas", 0)
    if "Worker" in replicas and workers < 1:
        problems.append("worker replicas must be >= 1")
    for role, r in replicas.items():
        if r.get("restartPolicy") not in ("Never", "OnFailure"):
            problems.append(f"{role} restartPolicy {r.get('restartPolicy')}")
        if not r["template"]["spec"].get("containers"):
            problems.append(f"{role} has no container")
    last = f"{name}-worker-{max(workers - 1, 0)}"
    if not k8s.DNS_LABEL.fullmatch(last) or len(last) > 63:
        problems.append(f"{last} is not a DNS label")
    if spec.get("slotsPerWorker", 1) < 0 or not spec.get("sshAuthMountPath", "/root/.ssh"):
        problems.append("slots or ssh path")
    if spec.get("runPolicy", {}).get("cleanPodPolicy", "None") not in ("None", "Running", "All"):
        problems.append("cleanPodPolicy")
    return problems


def check_job(job: dict) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(job)
    for role, replica in job["spec"]["mpiReplicaSpecs"].items():
        doc = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": role.lower()},
               "template": replica["template"]}
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    assert operator_rules(job) == []


def written(hpcai, *args: str) -> tuple[dict, str]:
    res = hpcai("export", "k8s", *args)
    assert res.exit_code == 0, res.stderr
    job = yaml.safe_load(res.stdout)
    check_job(job)
    return job, res.stderr


def containers(job: dict, role: str) -> dict:
    return job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]["containers"][0]


def test_gpu_job_has_slots_gpus_and_the_entrypoint(hpcai, labels):
    labels.update(CUDA)
    job, err = written(hpcai, "nccl-tests", "--image", IMAGE, "-N", "4", "--gpus-per-node", "8")
    assert err == ""  # the labels were there: no note
    spec = job["spec"]
    assert (spec["slotsPerWorker"], spec["mpiImplementation"], spec["sshAuthMountPath"]) == (8, "OpenMPI", "/root/.ssh")
    assert spec["mpiReplicaSpecs"]["Worker"]["replicas"] == 4
    worker, launcher = containers(job, "Worker"), containers(job, "Launcher")
    assert worker["resources"] == {"limits": {"nvidia.com/gpu": 8}}
    assert worker["command"] == ["/opt/hpcai/bin/hpcai-sshd"] and worker["image"] == IMAGE
    assert {e["name"]: e["value"] for e in worker["env"]} == {
        "MASTER_ADDR": "hpcai-nccl-tests-worker-0.hpcai-nccl-tests", "MASTER_PORT": "29500"}
    assert worker["readinessProbe"]["tcpSocket"] == {"port": 22}
    assert launcher["command"] == ["mpirun"] and "resources" not in launcher  # the launcher takes no GPU
    assert launcher["args"] == ["--hostfile", "/etc/mpi/hostfile", "-np", "32", "--map-by", "ppr:8:node",
                                "--bind-to", "none", "/opt/hpcai/bin/hpcai-entrypoint", "/opt/hpcai/bin/hpcai-bench",
                                "nccl-tests"]
    assert {e["name"]: e["value"] for e in launcher["env"]} == {
        "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "PRTE_MCA_prte_keep_fqdn_hostnames": "1"}
    assert spec["launcherCreationPolicy"] == "WaitForWorkersReady"
    assert spec["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 0}


def test_rocm_mpich_job(hpcai, labels):
    labels.update({**CUDA, "hpcai.mpi": "mpich", "hpcai.family": "rocm", "hpcai.payloads": "rccl-tests"})
    job, _ = written(hpcai, "rccl-tests", "--image", IMAGE, "-N", "2", "--gpus-per-node", "4",
                     "--ranks-per-node", "4", "--name", "rccl", "--namespace", "ml", "--time", "1:30:00")
    assert job["metadata"]["namespace"] == "ml" and job["spec"]["mpiImplementation"] == "MPICH"
    assert containers(job, "Worker")["resources"] == {"limits": {"amd.com/gpu": 4}}
    launcher = containers(job, "Launcher")
    assert launcher["command"] == ["mpiexec"] and launcher["env"] == []
    assert launcher["args"][:8] == ["-f", "/etc/mpi/hostfile", "-n", "8", "-ppn", "4", "-bind-to", "none"]
    assert job["spec"]["runPolicy"]["activeDeadlineSeconds"] == 5400


def test_cpu_job_without_labels_says_nothing_was_checked(hpcai, labels):
    job, err = written(hpcai, "ddp-bench", "iters=5", "--profile", "quick", "--image", "hpcai/x:1", "-N", "2")
    assert "resources" not in containers(job, "Worker")
    assert containers(job, "Launcher")["args"][-5:] == ["/opt/hpcai/bin/hpcai-bench", "--profile", "quick",
                                                        "ddp-bench", "iters=5"]
    assert job["spec"]["slotsPerWorker"] == 1
    assert err.strip() == ("note: image hpcai/x:1 is not in a local engine: its labels were not checked "
                           "(an ssh server, MPI ompi, payload ddp-bench)")


def test_a_payload_profile_gives_nodes_and_time_as_launch_takes_them(hpcai, labels):
    """CARAML's megatron-gpt sizes: 13B runs on 44 nodes for 15 minutes unless -N/--time say otherwise."""
    labels.update({**CUDA, "hpcai.payloads": "megatron-gpt"})
    job, _ = written(hpcai, "megatron-gpt", "--profile", "caraml", "model_size=13B", "--image", IMAGE,
                     "--gpus-per-node", "4")
    assert job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 44
    assert job["spec"]["runPolicy"]["activeDeadlineSeconds"] == 900
    job, _ = written(hpcai, "megatron-gpt", "--profile", "caraml", "model_size=13B", "--image", IMAGE,
                     "--gpus-per-node", "4", "-N", "2", "--time", "UNLIMITED")
    assert job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    assert "activeDeadlineSeconds" not in job["spec"]["runPolicy"]


def test_output_file(hpcai, labels, tmp_path):
    labels.update(CUDA)
    out = tmp_path / "job.yaml"
    res = hpcai("export", "k8s", "sanity", "--image", IMAGE, "-o", str(out))
    assert res.exit_code == 0 and res.stdout == ""
    check_job(yaml.safe_load(out.read_text()))
    assert f"wrote {out}" in res.stderr


@pytest.mark.parametrize("found,args,message", [
    ({**CUDA, "hpcai.ssh": "0"}, [], f"image {IMAGE} has no ssh server (label hpcai.ssh=0), which the MPIJob's "
     "workers run: build it with --ssh 1 (WITH_SSH=1)"),
    ({**CUDA, "hpcai.mpi": "none"}, [], f"image {IMAGE} has MPI none; an MPIJob needs one of: ompi, mpich"),
    (CUDA, ["--mpi", "mpich"], f"--mpi mpich: image {IMAGE} was built with ompi"),
    (CUDA, ["--gpu-vendor", "amd"], f"--gpu-vendor amd: image {IMAGE} is built for nvidia GPUs"),
    ({}, ["--gpu-vendor", "intel"], "unknown GPU vendor 'intel'"),
    ({}, ["--mpi", "impi"], "unknown MPI 'impi'"),
    (CUDA, ["--mpi", "impi"], "unknown MPI 'impi'"),
    (CUDA, ["--name", "Big_Job"], "--name 'Big_Job': the job's service and worker pods (Big_Job-worker-0) need DNS names"),
    (CUDA, ["--name", "1job"], "--name '1job': the job's service"),  # a Service's name starts with a letter
    (CUDA, ["--name", "a" * 55, "-N", "100"], "need DNS names"),
    (CUDA, ["--namespace", "ml/x"], "--namespace 'ml/x': not a Kubernetes namespace name"),
    (CUDA, ["--namespace", "n" * 64], "not a Kubernetes namespace name"),
    (CUDA, ["--time", "soon"], "--time 'soon': expected minutes"),
    (CUDA, ["-N", "0"], "--nodes must be between 1 and 100000, got 0"),
    (CUDA, ["-N", "3000000000"], "--nodes must be between 1 and 100000"),
    (CUDA, ["--ranks-per-node", "0"], "--ntasks-per-node must be between 1 and 4096, got 0"),
    (CUDA, ["--gpus-per-node", "-1"], "--gpus-per-node must be between 0 and"),
    (CUDA, ["nope=1"], "nope"),
    (CUDA, ["--profile", "huge"], "payload sanity has no profile 'huge'"),
])
def test_bad_input_is_one_line_and_writes_nothing(hpcai, labels, tmp_path, found, args, message):
    labels.update(found)
    out = tmp_path / "job.yaml"
    res = hpcai("export", "k8s", "sanity", *args, "--image", IMAGE, "-o", str(out))
    assert res.exit_code == 2 and message in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not out.exists()


def test_a_payload_the_image_lacks_is_refused(hpcai, labels):
    labels.update(CUDA)
    res = hpcai("export", "k8s", "hf-clm", "--image", IMAGE)
    assert res.exit_code == 2 and "unknown payload 'hf-clm'" in res.stderr and "nccl-tests" in res.stderr


def test_an_image_reference_with_a_control_character_is_refused(hpcai, labels):
    res = hpcai("export", "k8s", "sanity", "--image", "hpcai/x:1\nkind: Pod")
    assert res.exit_code == 2 and res.stdout == "" and len(res.stderr.strip().splitlines()) == 1


def test_the_schema_refuses_what_the_crd_would():
    """The checks bite: a typo'd field, a wrong type, an unknown MPI, a bad pod template."""
    good = k8s.mpijob(k8s.MpiJobRequest("j", IMAGE, ("/opt/hpcai/bin/hpcai-entrypoint", "x"), "x", 2, 1, 0,
                                        "nvidia", "ompi"))
    check_job(good)
    for path, value in [(("spec", "slotPerWorker"), 2), (("spec", "slotsPerWorker"), "2"),
                        (("spec", "mpiImplementation"), "MVAPICH"), (("spec", "runPolicy", "cleanupPolicy"), "All")]:
        bad = json.loads(json.dumps(good))
        node = bad
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        with pytest.raises(jsonschema.ValidationError):
            check_job(bad)
    bad = json.loads(json.dumps(good))
    bad["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["comand"] = ["x"]
    with pytest.raises(Exception, match="comand"):
        check_job(bad)
    bad = json.loads(json.dumps(good))
    bad["spec"]["mpiReplicaSpecs"]["Launcher"]["replicas"] = 2
    with pytest.raises(AssertionError):
        check_job(bad)
