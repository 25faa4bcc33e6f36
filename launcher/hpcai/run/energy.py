"""The per-rank energy wrapper of `hpcai launch --energy` (jpwr), the launch side of energy.

`wrap_argv` wraps the payload's argv; the wrapped command runs `python -m hpcai.run.energy` on
each task: only the node's local rank 0 measures (NVML sees every GPU of the node, so one measurer
per node), the other ranks `exec` the payload unchanged. jpwr's CLI drops its child's exit code,
so the measured child is this module again in `--record-exit` mode: it runs the payload, writes
its exit code to `energy/exit-code-<host>.txt`, and the outer wrapper returns that code.

jpwr writes `power<suffix>.csv` into `--df-out`; hpcai.results.energy reads them after the run.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from hpcai import files
from hpcai.output import say

_LOCAL_RANK_VARS = ("SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "LOCAL_RANK")


def wrap_argv(argv: list[str], energy_dir: str, methods: list[str] | None = None) -> list[str]:
    """The payload argv wrapped so that one process per node measures power with jpwr.

    methods: jpwr methods (default: detected on the node at run time).
    """
    chosen = ",".join(methods) if methods else "auto"
    return [sys.executable, "-m", "hpcai.run.energy", "--dir", energy_dir,
            "--methods", chosen, "--", *argv]


def detect_power_source() -> list[str]:
    """jpwr methods usable on this node ([] when there is nothing to measure)."""
    found = []
    if shutil.which("nvidia-smi") or Path("/dev/nvidiactl").exists():
        found.append("pynvml")
    if shutil.which("rocm-smi") or Path("/dev/kfd").exists():
        found.append("rocm")
    if glob.glob("/sys/class/hwmon/hwmon*/device/power1_oem_info"):  # GH200 module sensors
        found.append("gh")
    if shutil.which("gc-monitor"):
        found.append("gc")
    return found


def jpwr_command() -> list[str] | None:
    exe = shutil.which("jpwr")
    return [exe] if exe else None


def preflight(methods: list[str] | None = None) -> tuple[list[str], str | None]:
    """(methods, None) when energy can be measured on this host, else ([], reason to print).

    The run goes on either way: each node's wrapper checks again and runs the payload unmeasured
    when it finds no power source or no jpwr (a login node often has no GPU while compute nodes do).
    """
    found = methods or detect_power_source()
    if not found:
        return [], ("--energy: no power source on this host (no NVIDIA/AMD GPU, GH200 sensors or Graphcore "
                    "IPU); the run continues, and a node without one runs unmeasured")
    if jpwr_command() is None:
        return [], ("--energy: jpwr is not installed (pip install 'hpcai[energy]'); the run continues, "
                    "and a node without jpwr runs unmeasured")
    return found, None


def _is_measurer(energy_dir: Path, host: str) -> bool:
    """Local rank 0 measures; without a local-rank variable (e.g. the local backend, where the
    rank environment only reaches the container) the first task to claim the node's lock does."""
    for var in _LOCAL_RANK_VARS:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var]) == 0
    energy_dir.mkdir(parents=True, exist_ok=True)
    try:
        os.close(files.create_new(energy_dir / f".measurer-{host}"))  # O_EXCL: one winner, no link followed
        return True
    except FileExistsError:
        return False


def _run_and_record(exit_file: Path, argv: list[str]) -> int:
    code = subprocess.run(argv, check=False).returncode
    exit_file.parent.mkdir(parents=True, exist_ok=True)
    files.write_atomic(exit_file, f"{code}\n", over_link=True)  # the record's own name: a link there is replaced
    return code


def _host() -> str:
    """The node's name: Slurm's when set (several slurmd may share one machine's hostname)."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def _measure(energy_dir: Path, methods: str, argv: list[str]) -> int:
    chosen = detect_power_source() if methods == "auto" else methods.split(",")
    jpwr = jpwr_command()
    host = _host()
    exit_file = energy_dir / f"exit-code-{host}.txt"
    if not chosen or jpwr is None:
        say(f"hpcai-energy: no power source or jpwr on {host}; not measuring")
        return _run_and_record(exit_file, argv)
    child = [sys.executable, "-m", "hpcai.run.energy", "--record-exit", str(exit_file), "--", *argv]
    cmd = [*jpwr, "--methods", *chosen, "--df-out", str(energy_dir / host), "--df-filetype", "csv", "--", *child]
    jpwr_rc = subprocess.run(cmd, check=False).returncode
    try:
        return int(files.read_text(exit_file, 64).strip())
    except (OSError, ValueError, files.BadFile):
        return jpwr_rc or 1


def main(args: list[str]) -> int:
    """`python -m hpcai.run.energy (--dir D --methods M | --record-exit F) -- cmd...`"""
    if "--" not in args:
        say("usage: python -m hpcai.run.energy --dir DIR --methods M -- cmd ...")
        return 2
    split = args.index("--")
    opts, argv = args[:split], args[split + 1:]
    named = dict(zip(opts[::2], opts[1::2]))
    if "--record-exit" in named:
        return _run_and_record(Path(named["--record-exit"]), argv)
    energy_dir = Path(named.get("--dir", "energy"))
    if not _is_measurer(energy_dir, _host()):
        os.execvp(argv[0], argv)  # not the node's measurer: become the payload
    return _measure(energy_dir, named.get("--methods", "auto"), argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
