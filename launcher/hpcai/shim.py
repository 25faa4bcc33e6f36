"""The rank shim: the few things that must happen per rank, on the compute node, before the runtime.

srun and mpiexec start the same argv for every task, but each rank needs its own values:

    python -S -E …/hpcai/shim.py --kind docker --name 'hpcai-{jobid}-{rank}' --pass 'SLURM_*' \
        --exit-dir RUN/logs -- docker run --rm … IMAGE CMD…

1. rank variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, NODE_RANK) from Slurm, PMI,
   PALS or Open MPI, and MASTER_ADDR/MASTER_PORT from the step's host list and job id when the
   launcher could not know them — never overwriting a value already set;
2. forwarding: docker/podman get `--name=…` and `-e NAME` for every variable to pass (the value
   comes from this process, so it never shows in `ps`); apptainer gets `APPTAINERENV_NAME`;
   ch-run inherits the environment as is;
3. SIGTERM/SIGINT are passed on, and a docker/podman container is killed by name so none is left;
4. the exit code is written to `<exit-dir>/rank-<N>.exit`, which is how hpcai names failed ranks
   without Slurm accounting.
It starts once per rank, so it imports little: no argparse, no re (plus hostlist, lazily, for
bracketed host lists). The launcher runs it as a script, `python -S -E …/hpcai/shim.py`: without
the site module (and a venv's .pth files) Python starts in about two thirds of the time; hostnames
is then imported from this file's folder, and site-packages are added only when hostlist is needed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from types import SimpleNamespace

RANK_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK",
             "MASTER_ADDR", "MASTER_PORT")
_SOURCES = {
    "RANK": ("SLURM_PROCID", "PMI_RANK", "PALS_RANKID", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"),
    "LOCAL_RANK": ("SLURM_LOCALID", "PMI_LOCAL_RANK", "PALS_LOCAL_RANKID", "OMPI_COMM_WORLD_LOCAL_RANK"),
    "WORLD_SIZE": ("SLURM_NTASKS", "SLURM_NPROCS", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE"),
    "LOCAL_WORLD_SIZE": ("PMI_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    "NODE_RANK": ("SLURM_NODEID",),
}
_TASK = _SOURCES["RANK"] + ("RANK",)  # names this rank's log and exit files


def _first(env: dict[str, str], names: tuple[str, ...]) -> str | None:
    return next((env[n] for n in names if env.get(n, "") != ""), None)


def tasks_on_node(tasks_per_node: str, node_id: int) -> int | None:
    """SLURM_TASKS_PER_NODE like `4(x2),3` → tasks on node `node_id`."""
    counts: list[int] = []
    for part in tasks_per_node.split(","):
        count, _, times = part.strip().partition("(x")
        times = times.rstrip(")") or "1"
        if not (count.isdigit() and times.isdigit()):
            return None
        counts += [int(count)] * int(times)
    return counts[node_id] if 0 <= node_id < len(counts) else None


def matches(name: str, pattern: str) -> bool:
    """`SLURM_*`-style patterns: a trailing `*` is a prefix match, anything else is exact."""
    return name.startswith(pattern[:-1]) if pattern.endswith("*") else name == pattern


def rank_env(env: dict[str, str], suffix: str = "", fixed_port: int = 0,
             per_gpu: bool = False, master: str = "") -> dict[str, str]:
    """The variables to add to `env` (values already present are left alone)."""
    hostnames = _hostnames()
    new: dict[str, str] = {}
    for var, sources in _SOURCES.items():
        value = _first(env, sources)
        if value is not None:
            new[var] = value
    if "LOCAL_WORLD_SIZE" not in new and env.get("SLURM_TASKS_PER_NODE"):
        n = tasks_on_node(env["SLURM_TASKS_PER_NODE"], int(env.get("SLURM_NODEID", "0") or 0))
        if n is not None:
            new["LOCAL_WORLD_SIZE"] = str(n)
    nodelist = _first(env, ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"))
    if master:  # the launcher knew it (first host of the allocation, suffix applied)
        new["MASTER_ADDR"] = master
    elif nodelist:
        if "[" in nodelist:
            _site_packages_for_hostlist()
        new["MASTER_ADDR"] = hostnames.master_addr(nodelist, suffix, _resolve)[0]
    elif env.get("PBS_NODEFILE") and os.path.isfile(env["PBS_NODEFILE"]):
        with open(env["PBS_NODEFILE"]) as fh:
            new["MASTER_ADDR"] = fh.readline().strip()
    job = env.get("SLURM_JOB_ID") or env.get("PBS_JOBID", "").split(".")[0]
    new["MASTER_PORT"] = str(hostnames.master_port(job, fixed_port))
    if per_gpu:  # each copy is a world of one; ports differ so copies on a node do not collide
        local = int(new.get("LOCAL_RANK", "0") or 0)
        new.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", NODE_RANK="0",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(int(new["MASTER_PORT"]) + local),
                   HPCAI_COPY=_first(env, _SOURCES["RANK"]) or "0")
        return new
    return {k: v for k, v in new.items() if env.get(k, "") == ""}


def _hostnames():
    """hpcai.hostnames, also when this file runs as a script under `python -S` (no site-packages)."""
    try:
        from hpcai import hostnames
    except ImportError:  # script mode: sys.path[0] is this file's folder, which holds hostnames.py
        import hostnames
    return hostnames


def _site_packages_for_hostlist() -> None:
    """Bracketed host lists need python-hostlist, which lives in site-packages that -S left out."""
    try:
        import hostlist  # noqa: F401
    except ImportError:
        import site

        site.main()


def _resolve(name: str) -> str | None:
    import socket

    try:
        return socket.gethostbyname(name)
    except OSError:
        return None


_VALUED = {"--kind": "kind", "--name": "name", "--suffix": "suffix", "--master-addr": "master_addr",
           "--port": "port", "--exit-dir": "exit_dir", "--log-dir": "log_dir", "--cleanup": "cleanup"}


def _parse(argv: list[str]) -> SimpleNamespace:
    """`[--kind K] [--name T] [--pass P]… [--suffix S] [--master-addr A] [--port N] [--per-gpu]
    [--exit-dir D] [--log-dir D] [--cleanup LABEL] -- CMD…` (written by hpcai.plan only)."""
    ns = SimpleNamespace(kind="none", name="", patterns=[], suffix="", master_addr="", port=0,
                         per_gpu=False, exit_dir="", log_dir="", cleanup="", cmd=[])
    i = 0
    while i < len(argv) and argv[i] != "--":
        flag = argv[i]
        if flag == "--per-gpu":
            ns.per_gpu, i = True, i + 1
            continue
        if i + 1 >= len(argv) or (flag not in _VALUED and flag != "--pass"):
            raise SystemExit(f"hpcai-shim: bad option {flag!r}")
        if flag == "--pass":
            ns.patterns.append(argv[i + 1])
        else:
            setattr(ns, _VALUED[flag], argv[i + 1])
        i += 2
    ns.port = int(ns.port or 0)
    ns.cmd = argv[i + 1:]
    if not ns.cmd:
        raise SystemExit("hpcai-shim: no command after --")
    return ns


def build(ns: SimpleNamespace, env: dict[str, str]) -> tuple[list[str], dict[str, str], str]:
    """(argv, child environment, container name) for this rank."""
    child = dict(env)
    child.update(rank_env(env, ns.suffix, ns.port, ns.per_gpu, ns.master_addr))
    names = sorted(k for k in child if k in RANK_VARS or k == "HPCAI_COPY"
                   or any(matches(k, pat) for pat in ns.patterns))
    argv, name = list(ns.cmd), ""
    task = _first(env, _TASK) or "0"
    if ns.kind in ("docker", "podman"):
        extra = []
        if ns.name:
            name = ns.name.replace("{rank}", task).replace("{jobid}", env.get("SLURM_JOB_ID", "nojob"))
            extra.append(f"--name={name}")
        for k in names:
            extra += ["-e", k]
        argv[2:2] = extra  # right after `docker run`
    elif ns.kind in ("apptainer", "singularity"):
        prefix = "APPTAINERENV_" if ns.kind == "apptainer" else "SINGULARITYENV_"
        for k in names:
            child.setdefault(prefix + k, child[k])
    return argv, child, name


def _write(path: str, text: str) -> None:
    try:
        with open(path + ".tmp", "w") as fh:
            fh.write(text + "\n")
        os.replace(path + ".tmp", path)
    except OSError:
        pass


def cleanup(engine: str, label: str) -> int:
    res = subprocess.run([engine, "ps", "-aq", "--filter", f"label={label}"],
                         capture_output=True, text=True, check=False)
    ids = res.stdout.split()
    if ids:
        subprocess.run([engine, "rm", "-f", *ids], capture_output=True, check=False)
    return 0


def main(argv: list[str] | None = None) -> int:
    ns = _parse(sys.argv[1:] if argv is None else argv)
    if ns.cleanup:
        return cleanup(ns.cmd[0], ns.cleanup)
    cmd, env, name = build(ns, dict(os.environ))
    task = _first(dict(os.environ), _TASK) or "0"
    out = err = None
    if ns.log_dir:
        os.makedirs(ns.log_dir, exist_ok=True)
        out = open(os.path.join(ns.log_dir, f"rank-{task}.out"), "ab")
        err = open(os.path.join(ns.log_dir, f"rank-{task}.err"), "ab")
    if ns.exit_dir and name:  # where this container runs, for cleanup after a hard kill
        _write(os.path.join(ns.exit_dir, f"rank-{task}.host"), os.uname().nodename.split(".")[0])
    try:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err)
    except OSError as exc:
        print(f"hpcai-shim: cannot start {cmd[0]}: {exc}", file=sys.stderr)
        code = 127
    else:
        def stop(signum, _frame):
            if name:  # the docker client may die before forwarding the signal: kill by name
                subprocess.run([cmd[0], "kill", name], capture_output=True, check=False)
            try:
                proc.send_signal(signum)
            except ProcessLookupError:
                pass

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, stop)
        code = proc.wait()
        code = 128 - code if code < 0 else code
    if ns.exit_dir:
        _write(os.path.join(ns.exit_dir, f"rank-{task}.exit"), str(code))
    return code


if __name__ == "__main__":
    sys.exit(main())
