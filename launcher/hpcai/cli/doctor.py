"""CLI command: `doctor` — what this host has for launching, and what to do about what it lacks."""

from __future__ import annotations

import typer

PANEL = "Launch"

# (what, how to find it, hint when missing). Probes are cheap: PATH lookups and globs only. The
# launchers and container runtimes come from their registries (each declares its binary, probe
# and hint); these are the rest.
SUBMIT = [
    ("sbatch", "cmd:sbatch", "needed by `hpcai submit` on Slurm sites (or `--rest` through slurmrestd); "
                             "`hpcai launch` inside salloc works without it"),
    ("qsub", "cmd:qsub", "needed by `hpcai submit` on PBS Pro sites (mpiexec backend, e.g. alcf-polaris)"),
    ("qstat", "cmd:qstat", "needed by `hpcai submit --wait` on PBS Pro sites"),
]
HARDWARE = [
    ("nvidia-smi", "cmd:nvidia-smi", "no NVIDIA GPU/driver: GPU payloads will not run here"),
    ("rocm-smi", "cmd:rocm-smi", "no AMD GPU/ROCm: GPU payloads will not run here"),
    ("Cray libfabric", "glob:/opt/cray/libfabric/*/lib64", "not a Cray EX node: no Slingshot fabric swap"),
    ("libcxi", "glob:/usr/lib64/libcxi.so*", "no Slingshot CXI library: the cxi provider cannot load"),
    ("/dev/cxi*", "glob:/dev/cxi*", "no Slingshot NIC visible (login node, or not Cray EX)"),
    ("/dev/infiniband", "glob:/dev/infiniband", "no InfiniBand devices: NCCL falls back to sockets"),
    ("registry logins", "logins:", "no runtime holds registry credentials: `hpcai login REGISTRY -u USER` "
                                   "writes docker's, podman's, Apptainer's and enroot's"),
]


def checks() -> list[tuple[str, str, str]]:
    """Every row: the backends' launchers, sbatch, each runtime's binary (once: pyxis and ce are
    plugins of srun, podman-hpc has its own), then GPUs and the fabric."""
    from hpcai.run.backends import BACKENDS, get_backend
    from hpcai.run.runtimes import RUNTIMES, get_runtime

    launchers = [get_backend(name) for name in BACKENDS]
    rows = [(b.binary, f"cmd:{b.binary}", b.doctor_hint) for b in launchers if b.binary]
    rows += SUBMIT
    for runtime in map(get_runtime, RUNTIMES):
        if runtime.doctor_hint and runtime.binary not in {what for what, _, _ in rows}:
            rows.append((runtime.binary, runtime.doctor_probe(), runtime.doctor_hint))
    return rows + HARDWARE


def probe(how: str) -> str | None:
    import glob
    import shutil

    kind, _, arg = how.partition(":")
    if kind == "cmd":
        return shutil.which(arg)
    if kind == "apptainer":
        return apptainer_probe(arg)
    if kind == "logins":  # registry names per runtime, never a secret
        from hpcai.registry_login import logged_in

        held = {runtime: hosts for runtime, hosts in logged_in().items() if hosts}
        return "; ".join(f"{runtime}: {', '.join(hosts)}" for runtime, hosts in held.items()) or None
    found = sorted(glob.glob(arg), reverse=True)
    return ", ".join(found[:3]) if found else None


def apptainer_probe(binary: str) -> str | None:
    """Where Apptainer is, its version, and the modes it can run in on this host: setuid mode
    needs the setuid starter (or root with every capability), user-namespace mode (--userns, the
    site's apptainer_userns) needs user namespaces."""
    import os
    import shutil
    import subprocess

    from hpcai.run.runtimes.apptainer import root_caps_missing, userns_problem

    path = shutil.which(binary)
    if not path:
        return None
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20,
                                 check=False, stdin=subprocess.DEVNULL).stdout.strip() or "version unknown"
    except (OSError, subprocess.TimeoutExpired):
        version = "does not start"
    userns = userns_problem() or "yes"
    if os.geteuid() == 0:
        missing = root_caps_missing()
        setuid = f"no (root lacks {', '.join(missing)})" if missing else "yes (root)"
    else:
        setuid = "Apptainer's choice (a setuid starter if installed, else user namespaces)"
    return f"{path} ({version}; --userns: {userns}; without --userns: {setuid})"


def register(app: typer.Typer) -> None:
    """Add `doctor` to the top-level app."""

    @app.command("doctor", rich_help_panel=PANEL)
    def doctor(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
        """Check this host for launchers, container runtimes, GPUs and the Slingshot/IB fabric."""
        from hpcai.run.site import detect_site

        rows = [(what, probe(how), hint) for what, how, hint in checks()]
        site = detect_site()
        if as_json:
            from hpcai.output import emit_json

            emit_json({"site": site, "checks": [{"name": w, "found": f, "hint": h} for w, f, h in rows]})
            return
        from rich.markup import escape
        from rich.table import Table

        from hpcai.console import out, plain

        title = f"hpcai doctor — detected site: {escape(plain(site))}"
        table = Table("check", "found", "when missing", title=title)
        for what, found, hint in rows:  # FOUND: a tool's own version line, shown as text
            shown = f"[green]{escape(plain(found))}[/]" if found else "[red]missing[/]"
            table.add_row(what, shown, "" if found else hint)
        out.print(table)
