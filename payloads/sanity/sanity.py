"""Print what this rank sees: host, ranks, GPU, the libfabric file mapped and the MPI library.

The first thing to run on a new system: one line per rank, standard library only, so it works in
every image before anything else is known to work. The libraries are loaded with ctypes and their
real paths read from /proc/self/maps, which shows which copy the dynamic linker picked (the image's
or the host's, after the fabric swap hook).
"""

import ctypes
import ctypes.util
import os
import socket
import subprocess


def env_int(*names, default=0):
    for name in names:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return default


def mapped(fragment):
    """Path of the first mapped file whose name contains fragment, or ''."""
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if fragment in os.path.basename(path):
                    return os.path.realpath(path)
    except OSError:
        pass
    return ""


def libfabric():
    try:
        lib = ctypes.CDLL("libfabric.so.1")
    except OSError:
        return "none", ""
    lib.fi_version.restype = ctypes.c_uint32
    v = lib.fi_version()
    return mapped("libfabric") or "libfabric.so.1", "%d.%d" % (v >> 16, v & 0xFFFF)


def mpi_library():
    """MPI_Get_library_version may be called before MPI_Init (MPI-3), so no launcher is needed."""
    name = ctypes.util.find_library("mpi")
    for candidate in filter(None, [name, "libmpi.so.40", "libmpi.so.12", "libmpi.so"]):
        try:
            lib = ctypes.CDLL(candidate, mode=ctypes.RTLD_GLOBAL)
            break
        except OSError:
            continue
    else:
        return "none", ""
    buf = ctypes.create_string_buffer(8192)
    length = ctypes.c_int(0)
    try:
        lib.MPI_Get_library_version(buf, ctypes.byref(length))
        version = buf.value.decode(errors="replace").splitlines()[0].strip().rstrip(",")
    except (AttributeError, IndexError):
        version = "unknown"
    return mapped("libmpi") or candidate, version


def gpu():
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("ROCR_VISIBLE_DEVICES") \
        or os.environ.get("HIP_VISIBLE_DEVICES")
    for cmd in (["nvidia-smi", "--query-gpu=index,name,pci.bus_id", "--format=csv,noheader"],
                ["rocm-smi", "--showproductname", "--csv"]):
        try:
            res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 universal_newlines=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            continue
        lines = [l.strip() for l in res.stdout.splitlines() if l.strip()]
        if res.returncode == 0 and lines:
            return "%s visible=%s" % ("; ".join(lines[:8]), visible or "all")
    return "none" if not visible else "visible=" + visible


def main():
    rank = env_int("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
    local = env_int("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")
    world = env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", default=1)
    fabric, fabric_version = libfabric()
    mpi, mpi_version = mpi_library()
    print("hpcai-sanity: rank=%d local_rank=%d world_size=%d host=%s node=%s master=%s:%s"
          % (rank, local, world, socket.gethostname(), os.environ.get("SLURMD_NODENAME", "-"),
             os.environ.get("MASTER_ADDR", "-"), os.environ.get("MASTER_PORT", "-")), flush=True)
    print("hpcai-sanity: rank=%d gpu=%s" % (rank, gpu()))
    print("hpcai-sanity: rank=%d libfabric=%s fabric_version=%s provider=%s"
          % (rank, fabric, fabric_version or "-", os.environ.get("FI_PROVIDER", "auto")))
    print("hpcai-sanity: rank=%d mpi=%s mpi_version=%s" % (rank, mpi, mpi_version or "-"), flush=True)


if __name__ == "__main__":
    main()
