"""srun: one step, inside an allocation or creating one.

Format: srun --nodes=2 --ntasks-per-node=4 --cpus-per-task=72 --gpus-per-node=4 --mpi=pmi2
             --kill-on-bad-exit=1 --distribution=*:block --cpu-bind=socket
             --output=RUN/logs/rank-%t.out --error=RUN/logs/rank-%t.err
`--kill-on-bad-exit=1` ends the whole step as soon as one rank fails, so a dead rank never
leaves the others waiting in a collective until the time limit. Failed ranks come from srun's
own stderr (`srun: error: nid002: task 1: Exited with exit code 3`) and from the exit files the
rank shim writes, because the test cluster (and many others) has no accounting database for
`sacct`.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from hpcai.run.model import Geometry
from hpcai.run.processes import GRACE_S, KILLED, Outcome, Signals, failed_by_code, read_exit_files

TYPE_CHECKING = False  # the plan's type only
if TYPE_CHECKING:
    from hpcai.run.model import LaunchPlan

_SRUN_TASK = re.compile(r"srun: error: (\S+): tasks? ([\d,\-]+): (.*)")


def argv(g: Geometry) -> list[str]:
    out = ["srun", f"--nodes={g.nodes}", f"--ntasks-per-node={g.ntasks_per_node}"]
    if g.nodelist:
        out.append(f"--nodelist={g.nodelist}")
    if g.cpus_per_task:
        out.append(f"--cpus-per-task={g.cpus_per_task}")
    if g.per_gpu and g.gpus_per_node:
        out.append("--gpus-per-task=1")  # each copy sees exactly one GPU
    elif g.gpus_per_node:
        out.append(f"--gpus-per-node={g.gpus_per_node}")
    if g.mpi:
        out.append(f"--mpi={g.mpi}")
    out.append("--kill-on-bad-exit=1")
    if g.distribution:
        out.append(f"--distribution={g.distribution}")
    if g.cpu_bind:
        out.append(f"--cpu-bind={g.cpu_bind}")
    if not g.in_allocation:
        out += [f"--{k}={v}" for k, v in (("partition", g.partition), ("account", g.account),
                                          ("time", g.time)) if v]
    if g.log_dir:
        out += [f"--output={g.log_dir}/rank-%t.out", f"--error={g.log_dir}/rank-%t.err"]
    return once(out + list(g.extra))


def once(argv: list[str]) -> list[str]:
    """ARGV (srun, then options) with each option once: where it first appears, with the value of
    its last mention. The sources come in the documented order (hpcai's geometry and the site's
    distribution/cpu_bind, the site's srun_options, the payload profile's srun_args, --srun-arg),
    so the later source wins; a profile repeating the site's `--distribution=*:block` no longer
    writes it twice. A token that is no option (`gpu` of ["--constraint", "gpu"]) is the previous
    option's value. Options are named as Slurm reads them (slurm_options.option_name: `-m` is --distribution)."""
    from hpcai.run.slurm_options import option_name

    groups: dict[str, list[str]] = {}  # option name -> its tokens (a dict keeps the first position)
    name = ""
    for token in argv[1:]:
        if token.startswith("-") or not name:
            name = option_name(token)
            groups[name] = [token]
        else:
            groups[name].append(token)
    return argv[:1] + [token for tokens in groups.values() for token in tokens]


class SrunBackend:
    name = "srun"
    binary = "srun"
    doctor_hint = "Slurm client missing: use --site local, or load the site's Slurm module"
    per_rank = False
    slurm = True
    batch = "slurm"
    allocation_var = "SLURM_JOB_ID"
    shim_logs = False  # srun --output/--error write logs/rank-%t.*

    def prefix(self, geom: Geometry) -> list[str]:
        return argv(geom)

    def execute(self, plan: LaunchPlan, logs: Path, sig: Signals, started: Callable[[], None]) -> Outcome:
        return run_step(plan, logs, sig, started)


def _ranges(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def failed_ranks(srun_stderr: list[str], exit_codes: dict[int, int]) -> dict[int, int]:
    """{rank: exit code} of ranks that failed by themselves (not the ones killed after them).

    srun reports the failing task, then `_step_signal: Terminating StepId=…` when
    --kill-on-bad-exit ends the step; tasks reported after that were ended by Slurm, whatever
    their code (ch-run exits 1 when its child is killed). Exit codes 130/137/143 from the rank
    shim's files mean the same.
    """
    before: dict[int, int] = {}
    after: dict[int, int] = {}
    seen_kill = False
    for line in srun_stderr:
        seen_kill = seen_kill or "Terminating StepId" in line or "forcing job termination" in line
        m = _SRUN_TASK.search(line)
        if m and "Exited with exit code" in m.group(3):
            code = int(m.group(3).rsplit(" ", 1)[-1])
            (after if seen_kill else before).update({r: code for r in _ranges(m.group(2)) if code})
    failed = {r: c for r, c in before.items() if c not in KILLED}
    return dict(sorted(failed.items())) if failed else failed_by_code({**after, **exit_codes})


def run_step(plan: LaunchPlan, logs: Path, sig: Signals, started: Callable[[], None]) -> Outcome:
    """Run plan.argv, the one launcher process that starts every rank; its stderr is shown and
    kept to name failed ranks, the rank shim's exit files give every rank's code."""
    lines: list[str] = []
    _write_files(plan)
    failed = _prepare(plan)
    if failed:
        return Outcome(state="failed", codes={}, lines=[failed], returncode=1, failed={})
    proc = subprocess.Popen(plan.argv, env={**os.environ, **plan.secret_env},
                            stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            errors="replace", start_new_session=True)

    def pump() -> None:  # show srun's own messages and keep them to find failed ranks
        assert proc.stderr is not None
        shown = True
        for line in proc.stderr:
            lines.append(line)
            if shown:
                try:
                    sys.stderr.write(line)
                except OSError:  # stderr on a full device or a closed pipe: srun's lines are kept
                    shown = False

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    started()

    def cancel() -> None:
        # Two SIGINTs within a second make srun pass SIGINT to every task (the shims stop their
        # containers); a SIGTERM would make srun SIGKILL the tasks at once.
        proc.send_signal(signal.SIGINT)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        timer = threading.Timer(3 * GRACE_S, proc.kill)  # srun itself stuck: end it
        timer.daemon = True
        timer.start()

    sig.on_signal = cancel
    if sig.received:  # arrived before the handler knew about srun
        cancel()
    proc.wait()  # no polling: a signal runs `cancel` from the handler, then the wait resumes
    state = "cancelled" if sig.received else "completed"
    reader.join(timeout=5)
    codes = read_exit_files(logs)
    if state == "completed" and (proc.returncode or any(codes.values())):
        state = "failed"
    runtime = plan.runtime
    if state != "completed" and (runtime.engine or "--start" in plan.argv):  # containers, or peer groups
        _cleanup_containers(plan, logs, runtime)
    return Outcome(state=state, codes=codes, lines=lines, returncode=proc.returncode,
                   failed=failed_ranks(lines, codes) if state == "failed" else {})


def _write_files(plan: LaunchPlan) -> None:
    """The files a plugin runtime's options name (ce: its EDF), new and private in the record."""
    for name, text in plan.files.items():
        fd = os.open(Path(plan.run_dir) / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)


def _prepare(plan: LaunchPlan) -> str:
    """The runtime's commands before the step (`sarus pull`, `podman-hpc migrate`); the first
    failure as one line, else ""."""
    for command in plan.prepare:
        res = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, errors="replace", check=False)
        if res.returncode:
            last = (res.stderr.strip().splitlines() or [""])[-1]
            return f"error: {' '.join(command)} failed (exit code {res.returncode}){': ' + last if last else ''}"
    return ""


def _cleanup_containers(plan: LaunchPlan, logs: Path, runtime) -> None:
    """Slurm may SIGKILL the shims; remove their containers (an engine's, by the run's label) or
    stop their peer groups' instances (apptainer's, by name) on every node that ran one."""
    from hpcai.labels import RUN
    from hpcai.run.shim import group_word
    from hpcai.run.host import Host

    what = (f"{RUN}={Path(plan.run_dir).name}" if runtime.engine
            else f"hpcai-*-{group_word(Path(plan.run_dir))}-*")
    how = "--cleanup" if runtime.engine else "--stop-instances"
    cleanup = [*Host().shim(), how, what, "--", runtime.binary]
    hosts = sorted({p.read_text().strip() for p in logs.glob("rank-*.host")} - {""})
    srun = ["srun", f"--nodes={len(hosts)}", "--ntasks-per-node=1", f"--nodelist={','.join(hosts)}"]
    # on the nodes, and here for engines shared with this host
    for command in ([*srun, *cleanup], cleanup) if hosts else (cleanup,):
        try:
            subprocess.run(command, capture_output=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired):
            pass
