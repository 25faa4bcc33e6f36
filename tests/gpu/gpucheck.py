"""Helpers of `make gpu-check`: the payload runner, the entrypoint and `hpcai results`, run from the
source tree on bare metal (no container), the way a user on a GPU machine would run them.

    payloads   python payloads/_runner/hpcai-bench [--profile P] NAME [var=value ...]
               with HPCAI_PAYLOADS_DIR=payloads; over several GPUs under torchrun
               (python -m torch.distributed.run --standalone --nproc_per_node=N ...), one rank per
               GPU, each rank's runner reading RANK / LOCAL_RANK / WORLD_SIZE from torchrun
    hooks      entrypoints/hpcai-entrypoint --check, and the entrypoint exec'ing a command
    results    python -m hpcai results parse LOG --payload NAME  (the logs the runner printed)

Figures (GPU, driver, torch, samples/s, ex/s) are printed and appended as JSON lines to
HPCAI_GPU_REPORT (default build/gpu-check.jsonl), ready to be copied into the README. Nothing
here needs a GPU by itself: tests/unit/test_gpu_check_helpers.py runs the same functions on a CPU
machine (sanity through the runner, `hpcai results parse`, the entrypoint, the report).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUNNER = REPO / "payloads" / "_runner" / "hpcai-bench"
PAYLOADS = REPO / "payloads"
ENTRYPOINT = REPO / "entrypoints" / "hpcai-entrypoint"
LAUNCHER = REPO / "launcher"
DEFAULT_REPORT = REPO / "build" / "gpu-check.jsonl"
DEFAULT_OUT = REPO / "build" / "gpu-check"
RESULT_TAG = "HPCAI_RESULT "
# What an outer launcher may have left in the environment; the runner and the payloads read them.
LAUNCHER_VARS = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT",
                 "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK",
                 "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"}

# What each payload's Python needs (payload.toml's requires.modules, plus accelerate, which the
# Hugging Face Trainer imports on PyTorch).
# megatron-lm: what Megatron-LM f7727433's pretrain_gpt.py and preprocess_data.py import (its
# vision modules, imported by training.py, need torchvision), CARAML's patch's jpwr, and pybind11
# for the data helpers it compiles.
NEEDS = {"sanity": (), "ddp-bench": ("torch",), "hf-clm": ("torch", "transformers", "accelerate"),
         "megatron-gpt": ("torch", "megatron.core"),
         "megatron-lm": ("torch", "torchvision", "einops", "nltk", "regex", "six", "jpwr", "pybind11"),
         "openclip": ("torch", "torchvision", "open_clip", "training"), "mila-training": ("torch",)}


# ------------------------------------------------------------------ where things go -----------

def report_path() -> Path:
    """HPCAI_GPU_REPORT, else build/gpu-check.jsonl in the repository."""
    return Path(os.environ.get("HPCAI_GPU_REPORT") or DEFAULT_REPORT)


def out_root() -> Path:
    """HPCAI_GPU_OUT, else build/gpu-check: the runner's logs and output folders, kept after the
    run so `hpcai results parse` can be run on them again by hand."""
    return Path(os.environ.get("HPCAI_GPU_OUT") or DEFAULT_OUT)


def new_session_dir(root: Path | None = None) -> Path:
    """A fresh folder <root>/<YYYYmmdd-HHMMSS>[.N] for one session's logs."""
    root = root or out_root()
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path, n = root / stamp, 1
    while True:
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            n += 1
            path = root / f"{stamp}.{n}"


# ------------------------------------------------------------------ the machine ---------------

def parse_gpu_csv(text: str) -> list[dict]:
    """Rows of `nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id
    --format=csv,noheader,nounits` as dicts (memory in MiB)."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5 or not parts[0].isdigit():
            continue
        index, name, driver, memory, bus = parts[:5]
        gpus.append({"index": int(index), "name": name, "driver": driver,
                     "memory_mib": int(memory) if memory.isdigit() else None, "pci_bus_id": bus})
    return gpus


def nvidia_gpus() -> list[dict]:
    """The NVIDIA GPUs nvidia-smi sees (all of them: it ignores CUDA_VISIBLE_DEVICES); [] without."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        res = subprocess.run(["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total,pci.bus_id",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=60,
                             check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_gpu_csv(res.stdout) if res.returncode == 0 else []


# ------------------------------------------------------------------ AMD GPUs ------------------

def parse_rocminfo(text: str) -> list[dict]:
    """The GPU agents of `rocminfo` (its `Agent N` blocks whose Device Type is GPU), in its order,
    which is how HIP and ROCR_VISIBLE_DEVICES count them: index, name (the marketing name; an
    MI250X lists each of its two GCDs), arch (the gfx processor name). The first `Name:` and
    `Marketing Name:` of a block are the agent's own (later ones belong to its ISA and pools)."""
    gpus = []
    for block in re.split(r"^\s*Agent \d+\s*$", text, flags=re.MULTILINE)[1:]:
        fields = {}
        for key in ("Name", "Marketing Name", "Device Type"):
            found = re.search(rf"^\s*{key}:[ \t]*(.*?)\s*$", block, re.MULTILINE)
            fields[key] = found.group(1) if found else ""
        if fields["Device Type"] == "GPU":
            gpus.append({"index": len(gpus), "name": fields["Marketing Name"] or fields["Name"],
                         "arch": fields["Name"], "driver": None, "memory_mib": None})
    return gpus


def amd_gpus() -> list[dict]:
    """The AMD GPUs rocminfo lists (all of them: it ignores ROCR_VISIBLE_DEVICES); [] without."""
    rocminfo = shutil.which("rocminfo") or shutil.which(str(Path(os.environ.get("ROCM_PATH", "/opt/rocm")) / "bin/rocminfo"))
    if not rocminfo:
        return []
    try:
        res = subprocess.run([rocminfo], capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_rocminfo(res.stdout) if res.returncode == 0 else []


# where each pinned component's archive sits in the repository's mirror copy
MIRRORED = {"rccl-tests": "ROCm/rccl-tests", "megatron-lm": "NVIDIA/Megatron-LM", "caraml": "FZJ-JSC/CARAML"}


def component_archive(name: str) -> tuple[Path, str]:
    """NAME at the commit components.toml pins, from the repository's mirror copy, and its sha256."""
    record = tomllib.loads((LAUNCHER / "hpcai/image/components.toml").read_text())["components"][name]
    return REPO / "tests/infra/mirror/github" / MIRRORED[name] / f"{record['version']}.tar.gz", record["sha256"]


def unpack_component(name: str, dest: Path) -> Path:
    """NAME's checksummed archive unpacked under DEST: its top folder."""
    archive, sha = component_archive(name)
    if hashlib.sha256(archive.read_bytes()).hexdigest() != sha:
        raise AssertionError(f"{archive}: sha256 differs from components.toml's {sha}")
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
        top = tar.getnames()[0].split("/")[0]
    return dest / top


def bake_megatron_lm(prefix: Path, workdir: Path) -> str:
    """payloads/megatron-gpt/install.sh's CUDA step without an image: Megatron-LM f7727433 with
    CARAML's NVIDIA patch and the torch port, CARAML's GPT-2 files and the data helper built and
    called (build_helpers.py), under PREFIX/share/megatron-lm (megatron_lm.py's tree). Returns what
    patch, the port and the helper's build printed."""
    caraml = unpack_component("caraml", workdir / "src")
    megatron = unpack_component("megatron-lm", workdir / "src")
    patch = caraml / "llm_training/aux/nvidia_energy_llm_fix.patch"
    done = subprocess.run(["patch", "-p1", "--forward", "-i", str(patch)], cwd=megatron, capture_output=True,
                          text=True, check=True)
    port = subprocess.run([sys.executable, str(PAYLOADS / "megatron-gpt/install/port_torch.py"), str(megatron)],
                          capture_output=True, text=True, check=True)
    share = prefix / "share" / "megatron-lm"
    share.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(megatron, share)
    shutil.copytree(caraml / "llm_training/aux/tokenizers", share / "caraml-tokenizers")
    helper = subprocess.run([sys.executable, str(PAYLOADS / "megatron-gpt/install/build_helpers.py"), str(share)],
                            capture_output=True, text=True, check=False)
    assert helper.returncode == 0, helper.stdout + helper.stderr
    return done.stdout + port.stdout + helper.stderr + helper.stdout


def build_rccl_tests(workdir: Path, archs: list[str]) -> tuple[Path | None, str]:
    """Build rccl-tests (MPI=0: one process drives every GPU, -g N) with the machine's hipcc for
    ARCHS, as the image's build.sh does; (its build folder, or None, and the build's output)."""
    rocm = Path(os.environ.get("ROCM_PATH", "/opt/rocm"))
    if not (rocm / "bin/hipcc").exists():
        return None, f"no hipcc in {rocm}/bin (set ROCM_PATH)"
    try:
        top = unpack_component("rccl-tests", workdir / "rccl-tests-src")
    except AssertionError as exc:
        return None, str(exc)
    hipcc = " ".join([str(rocm / "bin/hipcc"), *(f"--offload-arch={a}" for a in archs)])
    env = {**os.environ, "PATH": f"{rocm / 'bin'}:{os.environ.get('PATH', '')}"}
    res = subprocess.run(["make", f"-j{os.cpu_count() or 2}", f"ROCM_PATH={rocm}", f"HIPCC={hipcc}"], cwd=top,
                         env=env, capture_output=True, text=True, timeout=3600, check=False)
    build = top / "build"
    return (build if res.returncode == 0 and (build / "all_reduce_perf").exists() else None), res.stdout + res.stderr


TORCH_PROBE = r"""
import json, sys
out = {"python": sys.executable}
try:
    import torch
except Exception as exc:
    out["error"] = "%s: %s" % (type(exc).__name__, exc)
else:
    out["torch"] = torch.__version__
    out["cuda_build"] = torch.version.cuda
    out["hip"] = getattr(torch.version, "hip", None)  # a ROCm build: "cuda" devices are AMD GPUs, NCCL is RCCL
    out["cuda"] = bool(torch.cuda.is_available())
    out["devices"] = torch.cuda.device_count() if out["cuda"] else 0
    out["names"] = [torch.cuda.get_device_name(i) for i in range(out["devices"])]
    try:
        out["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if out["cuda"] else None
    except Exception:
        out["nccl"] = None
    out["distributed"] = torch.distributed.is_available()
import importlib.util as u
out["modules"] = {m: bool(u.find_spec(m)) for m in sys.argv[1:]}
print(json.dumps(out))
"""


def probe_python(python: str, modules=tuple(sorted({m for need in NEEDS.values() for m in need} - {"torch"}))) -> dict:
    """What PYTHON has: torch's version, CUDA, device names, NCCL, and which MODULES import."""
    try:
        res = subprocess.run([python, "-c", TORCH_PROBE, *modules], capture_output=True, text=True,
                             timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"python": python, "error": str(exc)}
    try:
        return json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"python": python, "error": (res.stderr.strip().splitlines() or ["no output"])[-1]}


def python_candidates() -> list[str]:
    """HPCAI_GPU_PYTHON alone when set; else this interpreter, then python3 on PATH, /usr/bin/python3
    (the venv the tests run in may well have no torch, or a CPU build of it)."""
    if os.environ.get("HPCAI_GPU_PYTHON"):
        return [os.environ["HPCAI_GPU_PYTHON"]]
    seen, out = set(), []
    for cand in (sys.executable, shutil.which("python3"), "/usr/bin/python3"):
        if cand and cand not in seen and os.access(cand, os.X_OK):
            seen.add(cand)
            out.append(cand)
    return out


def find_python(need_cuda: bool = True) -> tuple[str | None, dict, list[str]]:
    """(python, its probe, why each other candidate was passed over) for the first candidate whose
    torch imports (and sees CUDA when NEED_CUDA)."""
    why = []
    for cand in python_candidates():
        info = probe_python(cand)
        if "error" in info:
            why.append(f"{cand}: no torch ({info['error']})")
        elif need_cuda and not info.get("cuda"):
            why.append(f"{cand}: torch {info['torch']} sees no CUDA device (CUDA build: {info.get('cuda_build')})")
        else:
            return cand, info, why
    return None, {}, why


# ------------------------------------------------------------------ the payload runner --------

@dataclass
class BenchRun:
    payload: str
    argv: list[str]
    returncode: int
    output: str
    log: Path
    out_dir: Path  # the runner's output folder for this payload (ddp-bench.json, hpcai_summary.json)
    result: dict | None = None  # rank 0's HPCAI_RESULT line
    nproc: int | None = None
    extra: dict = field(default_factory=dict)

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


def bench_argv(python: str, payload: str, args=(), profile: str | None = None, nproc: int | None = None) -> list[str]:
    """The runner's command line: `python hpcai-bench [--profile P] NAME ARGS`, under torchrun
    (`python -m torch.distributed.run --standalone --nproc_per_node=N`, one rank per GPU) when NPROC."""
    bench = [str(RUNNER), *(["--profile", profile] if profile else []), payload, *args]
    if nproc:
        return [python, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *bench]
    return [python, *bench]


def bench_env(workdir: Path, extra: dict | None = None) -> dict[str, str]:
    """The environment for the runner from the source tree: payloads from payloads/, outputs under
    WORKDIR/out/<payload>, and an HPCAI_PREFIX that holds no venv, so the runner starts payloads
    with its own interpreter (the one given to bench_argv), never an /opt/hpcai left on the host.
    Rank variables of an outer launcher (a Slurm allocation, mpirun) are dropped: torchrun sets its own."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env.update(HPCAI_PAYLOADS_DIR=str(PAYLOADS), HPCAI_PREFIX=str(workdir / "prefix"),
               HPCAI_OUTPUT_DIR=str(workdir / "out"), PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
    env.pop("HPCAI_BENCH_PROFILE", None)
    env.pop("HPCAI_FAMILY", None)
    env.update(extra or {})
    return env


def result_line(text: str, payload: str) -> dict | None:
    """The last `HPCAI_RESULT {json}` line the runner printed for PAYLOAD (rank 0 prints it)."""
    found = None
    for line in text.splitlines():
        at = line.find(RESULT_TAG)
        if at < 0:
            continue
        try:
            doc = json.loads(line[at + len(RESULT_TAG):])
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get("payload") == payload:
            found = doc
    return found


def run_bench(python: str, payload: str, workdir: Path, args=(), profile: str | None = None,
              nproc: int | None = None, env: dict | None = None, timeout: float = 1200) -> BenchRun:
    """Run the payload runner; its output (stdout and stderr, all ranks) goes to WORKDIR/<payload>.log
    as it comes, so a run that hangs or is killed leaves what it printed. At TIMEOUT every process
    of the run gets SIGABRT first: with PYTHONFAULTHANDLER set, each Python prints where it was."""
    workdir.mkdir(parents=True, exist_ok=True)
    argv = bench_argv(python, payload, args, profile, nproc)
    log = workdir / f"{payload}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=bench_env(workdir, env),
                                cwd=str(workdir), start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = 124
            for sig, grace in ((signal.SIGABRT, 15), (signal.SIGKILL, 15)):
                try:
                    os.killpg(proc.pid, sig)
                    proc.wait(timeout=grace)
                    break
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue
    text = log.read_text(errors="replace")
    if code == 124:
        text += f"\ngpu-check: timed out after {timeout:.0f} s\n"
        log.write_text(text)
    return BenchRun(payload, argv, code, text, log, workdir / "out" / payload, result_line(text, payload), nproc)


def passed(run: BenchRun) -> dict:
    """Rank 0's HPCAI_RESULT line of a run that passed, else a failure with the log's tail."""
    assert run.returncode == 0 and run.result and run.result.get("status") == "PASS", (
        f"{' '.join(run.argv)} exited {run.returncode}, result {run.result and run.result.get('status')} "
        f"(log: {run.log}):\n{run.tail()}")
    return run.result


# ------------------------------------------------------------------ hpcai results -------------

@dataclass
class ParsedLog:
    returncode: int
    table: str  # what a user sees: `hpcai results parse LOG --payload NAME`
    doc: dict  # the same with --json
    stderr: str

    def metric(self, name: str) -> float | None:
        return next((m["value"] for m in self.doc.get("metrics", []) if m["name"] == name), None)

    @property
    def headline(self) -> str | None:
        return next((m["name"] for m in self.doc.get("metrics", []) if m.get("headline")), None)


def hpcai_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "hpcai", *args]


def hpcai_env() -> dict[str, str]:
    """hpcai from the source tree even where it is not installed (launcher/ on PYTHONPATH)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(LAUNCHER), env.get("PYTHONPATH")]))
    env.setdefault("COLUMNS", "200")
    return env


def results_parse(log: Path, payload: str) -> ParsedLog:
    """`hpcai results parse LOG --payload PAYLOAD`, as a table and as --json."""
    table = subprocess.run(hpcai_argv("results", "parse", str(log), "--payload", payload), capture_output=True,
                           text=True, env=hpcai_env(), timeout=300, check=False)
    as_json = subprocess.run(hpcai_argv("results", "parse", str(log), "--payload", payload, "--json"),
                             capture_output=True, text=True, env=hpcai_env(), timeout=300, check=False)
    try:
        doc = json.loads(as_json.stdout) if as_json.returncode == 0 else {}
    except ValueError:
        doc = {}
    code = table.returncode or as_json.returncode
    return ParsedLog(code, table.stdout, doc, table.stderr + as_json.stderr)


def table_rows(table: str) -> dict[str, list[str]]:
    """The metric rows of a Rich table (box-drawn or plain): {metric: [value, unit, better, …]}."""
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.replace("┃", "│").split("│")]
        cells = [c for c in cells if c != ""]
        if len(cells) >= 3:
            name = cells[0].lstrip("* ").strip()
            if name and name != "metric":
                rows[name] = cells[1:]
    return rows


# ------------------------------------------------------------------ the entrypoint ------------

@dataclass
class EntrypointRun:
    returncode: int
    stdout: str
    stderr: str

    def fields(self) -> dict[str, str]:
        """`--check`'s report, `name:   value` per line, as {name: value} (the first of each name)."""
        out: dict[str, str] = {}
        for line in self.stdout.splitlines():
            name, sep, value = line.partition(":")
            if sep and name and not name.startswith(" ") and name not in out:
                out[name.strip()] = value.strip()
        return out

    def hook_set(self, var: str) -> tuple[str, str] | None:
        """(value, hook) of `HPCAI_DEBUG=1`'s `set   VAR=value  [hook]` line, if a hook set VAR."""
        prefix = f"hpcai-entrypoint: set   {var}="
        for line in self.stderr.splitlines():
            if line.startswith(prefix):
                value, _, hook = line[len(prefix):].rpartition("  [")
                return value, hook.rstrip("]")
        return None


def run_entrypoint(args: list[str], env: dict[str, str], timeout: float = 300) -> EntrypointRun:
    """entrypoints/hpcai-entrypoint ARGS from the repository (its hooks: entrypoints/hooks.d)."""
    res = subprocess.run([str(ENTRYPOINT), *args], capture_output=True, text=True, env=env, timeout=timeout,
                         check=False)
    return EntrypointRun(res.returncode, res.stdout, res.stderr)


# ------------------------------------------------------------------ the report ----------------

def machine_facts(info: dict | None = None, gpus: list[dict] | None = None) -> dict:
    """Host, GPU model and count, driver, torch/CUDA/NCCL versions: the columns every figure carries."""
    gpus = nvidia_gpus() if gpus is None else gpus
    info = info or {}
    names = sorted({g["name"] for g in gpus})
    return {"host": socket.gethostname(), "gpu": ", ".join(names) or "none", "gpus": len(gpus),
            "driver": gpus[0]["driver"] if gpus else None,
            "gpu_memory_mib": gpus[0]["memory_mib"] if gpus else None,
            "torch": info.get("torch"), "cuda": info.get("cuda_build"), "hip": info.get("hip"),
            "nccl": info.get("nccl"), "python": info.get("python")}


def summary_line(record: dict) -> str:
    """One line for the terminal and the README: what ran, on what, and its figure."""
    keys = ("check", "gpu", "gpus", "driver", "torch", "cuda", "hip", "nccl", "ranks", "backend", "model",
            "ex_per_sec_total", "samples_per_second", "tflops_per_gpu", "precision", "synthetic", "metric", "value")
    parts = [f"{k}={record[k]:.6g}" if isinstance(record.get(k), float) else f"{k}={record[k]}"
             for k in keys if record.get(k) is not None]
    return "gpu-check: " + " ".join(parts)


def append_report(record: dict, path: Path | None = None) -> Path:
    """Print RECORD's summary line and append it, with a timestamp, as one JSON line to PATH
    (default report_path())."""
    path = path or report_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"time": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), **record}
    with path.open("a") as fh:
        fh.write(json.dumps(record, sort_keys=True) + "\n")
    print(summary_line(record))
    print(f"gpu-check: figures appended to {path}")
    return path
