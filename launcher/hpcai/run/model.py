"""The launch's data model: what was asked (LaunchOptions), what runs (LaunchPlan: backend ∘
runtime ∘ entrypoint ∘ payload, each a token list), where and how many (Geometry), the payload's
part (PayloadCall), and the contract every backend keeps (Backend).

Only types live here, below every module that decides or runs a plan: planning (run/plan.py and
its deciders) fills them, the backends execute them, the record writes them.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from hpcai.run.runtimes import Runtime

TYPE_CHECKING = False  # types only
if TYPE_CHECKING:
    from hpcai.run.processes import Outcome, Signals

DATA_MOUNT = "/data"  # where --data appears inside the container (HPCAI_DATA)


@dataclass(frozen=True)
class Geometry:
    """Where and how many ranks run; the backend-independent half of a plan."""

    nodes: int = 1
    ntasks_per_node: int = 1
    cpus_per_task: int = 0       # 0: not passed
    gpus_per_node: int = 0
    per_gpu: bool = False        # independent single-GPU copies (--gpus-per-task=1)
    mpi: str = ""
    distribution: str = ""
    cpu_bind: str = ""
    partition: str = ""
    account: str = ""
    time: str = ""
    nodelist: str = ""
    in_allocation: bool = False  # inside salloc/sbatch: a step, no partition/account/time
    log_dir: str = ""            # per-rank logs: <log_dir>/rank-%t.out|err
    extra: tuple[str, ...] = ()  # site srun_options

    @property
    def ntasks(self) -> int:
        return self.nodes * self.ntasks_per_node


class Backend(Protocol):
    name: str
    per_rank: bool   # hpcai starts every rank itself, one argv each (no launcher process)
    slurm: bool      # a Slurm step: the job id, srun's options, --mpi and per-rank log files apply
    batch: str       # the scheduler `hpcai submit` writes a job for: "slurm", "pbs", "flux", or "" (none)
    allocation_var: str  # set inside that scheduler's allocation (SLURM_JOB_ID, …; "": none)
    shim_logs: bool  # the launcher writes no per-rank files: the rank shim writes logs/rank-N.*
    binary: str      # the launcher program `hpcai doctor` looks for ("": none, hpcai starts the ranks)
    doctor_hint: str  # what `hpcai doctor` says when the binary is missing

    def prefix(self, geom: Geometry) -> list[str]:
        """The tokens put in front of every rank's command ([] when hpcai starts the ranks)."""
        ...

    def execute(self, plan: LaunchPlan, logs: Path, sig: Signals, started: Callable[[], None]) -> Outcome:
        """Start the plan's ranks (their logs in `logs`), call `started` once they are, and wait
        for them; a signal in `sig` cancels them, and a failed rank ends the others."""
        ...



@dataclass
class LaunchOptions:
    """What `hpcai launch` was asked; also the Python API used by `hpcai sweep`."""

    image: str
    payload: str | None = None            # payload name; None with cmd
    payload_args: tuple[str, ...] = ()    # var=value overrides
    profiles: tuple[str, ...] = ()        # payload profiles (hpcai-bench --profile NAME), in order
    srun_args: tuple[str, ...] = ()       # extra srun options, verbatim (--srun-arg)
    cmd: tuple[str, ...] = ()             # raw command (--cmd … -- ARGS)
    nodes: int | None = 1                 # None (no -N): the payload profile's ([launch.<profile>]), else 1
    ntasks_per_node: int | None = None    # default: site GPUs per node, else 1
    gpus_per_node: int | None = None
    cpus_per_task: int | None = None
    time: str = ""
    partition: str = ""
    account: str = ""
    site: str | None = None               # default: $HPCAI_SITE, else autodetect
    runtime: str | None = None            # default: the site's
    backend: str | None = None            # default: the site's
    binds: tuple[str, ...] = ()           # SRC[:DST]
    data: str = ""                        # a dataset/model folder, mounted at DATA_MOUNT (--data)
    env: tuple[str, ...] = ()             # KEY=VALUE, or KEY to copy the host's value
    mpi: str | None = None
    per_gpu: bool = False
    nodelist: str = ""
    output_dir: str | None = None
    runs_root: str = "runs"
    energy: bool = False
    no_entrypoint: bool = False
    host_mpi: bool | None = None          # the site's mpi_swap: None = for MPICH images (run/mpi_swap.py)
    userns: bool | None = None            # apptainer --userns; None: the site's apptainer_userns
    done_file: str = ""                   # written once the run has ended (--done-file)
    stage: bool = False                   # --stage: by digest into the site cache and node-local storage first
    staged_from: str = ""                 # set by staging: the site copy, read here for labels (the
                                          # node-local `image` need not exist on this host)
    clusters: str = ""                    # submit --clusters: sbatch's -M list (checked by submit.check_clusters)
    rest: str = ""                        # submit --rest: slurmrestd's address (rest.check_url); else sbatch


@dataclass
class LaunchPlan:
    site: str
    site_source: str
    backend: Backend                      # resolved once, by planning: nothing looks a name up again
    runtime: Runtime
    image: str
    payload: str                          # payload name, or "cmd"
    payload_vars: dict[str, str]
    command: list[str]                    # in-container argv after the entrypoint
    geometry: Geometry
    binds: list[tuple[str, str]]
    container_env: dict[str, str]        # public variables, passed as runtime flags
    argv: list[str]                       # srun/mpiexec: the command; local: rank 0's
    rank_argvs: list[list[str]] = field(default_factory=list)   # local backend only
    rank_envs: list[dict[str, str]] = field(default_factory=list)
    container_names: list[str] = field(default_factory=list)
    run_dir: str = ""
    job_id: str | None = None
    cluster: str | None = None            # Slurm's SLURM_CLUSTER_NAME inside a job (multi-cluster sites)
    master_addr: str | None = None        # None: computed per step by the rank shim
    master_port: int | None = None
    energy: bool = False
    image_labels: dict[str, str] = field(default_factory=dict)
    secret_env: dict[str, str] = field(default_factory=dict, repr=False)  # process env only (secrets, pyxis values)
    warnings: list[str] = field(default_factory=list)
    profiles: list[str] = field(default_factory=list)  # payload profiles, as given
    staged_from: str = ""                 # launch --stage: the site copy the node-local image came from
    payload_values: dict[str, str] = field(default_factory=dict)  # every variable, resolved
    files: dict[str, str] = field(default_factory=dict)  # name in the run record -> text (ce: its EDF)
    prepare: list[list[str]] = field(default_factory=list)  # run once before the step (sarus pull)
    done_file: str = ""                   # absolute; written with the final state once the record is final

    @property
    def commands(self) -> list[list[str]]:
        return self.rank_argvs or [self.argv]

    def display(self) -> str:
        """Every command, shell-quoted with secrets redacted: one line per rank for local."""
        from hpcai.redact import redact_argv

        return "\n".join(shlex.join(redact_argv(a)) for a in self.commands)

    def to_json(self) -> dict[str, Any]:
        """plan.json (argv and environment redacted)."""
        from hpcai import __version__
        from hpcai.redact import redact_argv, redact_env
        from hpcai.resources import git_sha

        g = self.geometry
        return {
            "hpcai_version": __version__, "git_sha": git_sha(),
            "site": self.site, "site_source": self.site_source,
            "backend": self.backend.name, "runtime": self.runtime.name, "image": self.image,
            "payload": self.payload, "payload_vars": self.payload_vars, "profiles": self.profiles,
            "payload_values": self.payload_values,
            "command": redact_argv(self.command),
            "argv": redact_argv(self.argv),
            "rank_argvs": [redact_argv(a) for a in self.rank_argvs],
            "env": redact_env({**self.container_env, **self.secret_env}),
            "binds": [f"{s}:{d}" for s, d in self.binds],
            "nodes": g.nodes, "ntasks_per_node": g.ntasks_per_node, "ntasks": g.ntasks,
            "gpus_per_node": g.gpus_per_node, "cpus_per_task": g.cpus_per_task,
            "per_gpu": g.per_gpu, "mpi": g.mpi, "partition": g.partition, "account": g.account,
            "time": g.time, "in_allocation": g.in_allocation, "geometry": asdict(g),
            "job_id": self.job_id, "cluster": self.cluster, "master_addr": self.master_addr,
            "master_port": self.master_port, "energy": self.energy,
            "image_labels": self.image_labels, "run_dir": self.run_dir, "warnings": self.warnings,
            **({"staged_from": self.staged_from} if self.staged_from else {}),
        }


class PayloadCall(NamedTuple):
    label: str                 # payload name, or "cmd"
    overrides: dict[str, str]  # var=value as given
    command: list[str]         # in-container argv after the entrypoint
    values: dict[str, str]     # every variable as the image's runner resolves it
    needs_mpi: bool            # the manifest's requires.mpi
    srun_args: tuple[str, ...] = ()  # the chosen profiles' workflow scheduler options ([launch.*])
    launch: dict[str, Any] = {}      # and their nodes, time, cpus_per_node/_task ([launch.*])
