"""The docker/podman flags that let ranks on one node use Open MPI's single-copy (CMA) path:
the argv (here) and the profile file they name. The runs that show it working are in
tests/integration/test_cma_containers.py; benchmarks/container_parity.py measures the speed."""

from __future__ import annotations

import hashlib
import json

from hpcai.run.runtimes import ContainerSpec, get_runtime
from hpcai.run.runtimes.docker import SECCOMP_PROFILE

CMA = ("process_vm_readv", "process_vm_writev")
SPEC = ContainerSpec(image="img:1", command=("true",))


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_ranks_share_the_host_pid_namespace_without_an_init():
    for name in ("docker", "podman"):
        argv = get_runtime(name).argv(SPEC)
        assert _flag(argv, "--pid") == "host" and _flag(argv, "--ipc") == "host"
        assert "--init" not in argv  # podman refuses --init beside --pid host; nothing is PID 1
        assert "--cap-add" not in argv and "--privileged" not in argv
        assert argv.index("--pid") < argv.index("img:1")


def test_docker_gets_a_profile_instead_of_cap_sys_ptrace():
    argv = get_runtime("docker").argv(SPEC)
    assert _flag(argv, "--security-opt") == f"seccomp={SECCOMP_PROFILE}"
    assert "--security-opt" not in get_runtime("podman").argv(SPEC)  # its default allows CMA


def test_profile_denies_by_default_and_allows_cma_without_a_capability():
    profile = json.loads(SECCOMP_PROFILE.read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    unconditional = {n for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ALLOW"
                     and not rule.get("includes") and not rule.get("args") for n in rule["names"]}
    assert set(CMA) <= unconditional
    # what stays behind a capability the ranks do not have: the profile is not "unconfined"
    gated = {n: r["includes"]["caps"] for r in profile["syscalls"] if r["action"] == "SCMP_ACT_ALLOW"
             and r.get("includes", {}).get("caps") for n in r["names"]}
    for name, cap in (("bpf", "CAP_SYS_ADMIN"), ("perf_event_open", "CAP_SYS_ADMIN"),
                      ("init_module", "CAP_SYS_MODULE"), ("kcmp", "CAP_SYS_PTRACE")):
        assert gated[name] == [cap] and name not in unconditional


def test_profile_is_debians_containers_common_file_unchanged():
    digest = hashlib.sha256(SECCOMP_PROFILE.read_bytes()).hexdigest()
    assert digest == "cc374cf23846ce1f62f4dc807a8e2b8673c783c6f56cb475467621035d281e6c"
