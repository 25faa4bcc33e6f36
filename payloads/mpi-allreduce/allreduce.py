"""All-reduce latency and bus bandwidth sweep through the image's MPI, with mpi4py.

Prints an OSU-style table so the MPI path is measurable in every image, CPU images included.
Buffers are float32 `array`s (no numpy needed). Bus bandwidth uses the all-reduce factor
2(n-1)/n, as nccl-tests does, so the figures compare with nccl-tests' busbw.
"""

import argparse
import array
import os
import sys

from mpi4py import MPI


def sizes(lo, hi, factor):
    size = max(4, lo)
    while size <= hi:
        yield size
        size *= factor


def measure(comm, nbytes, iters, warmup):
    count = nbytes // 4
    send = array.array("f", [1.0]) * count
    recv = array.array("f", [0.0]) * count
    for _ in range(warmup):
        comm.Allreduce(send, recv, op=MPI.SUM)
    comm.Barrier()
    start = MPI.Wtime()
    for _ in range(iters):
        comm.Allreduce(send, recv, op=MPI.SUM)
    elapsed = (MPI.Wtime() - start) / iters
    if recv[0] != float(comm.Get_size()):  # a wrong sum means a broken transport, not a slow one
        raise SystemExit("mpi-allreduce: wrong result %s at %d bytes" % (recv[0], nbytes))
    return elapsed


def check_world(n, env):
    """None, or why this MPI world is not the launch's: WORLD_SIZE (set by hpcai-entrypoint from
    the scheduler) counts the ranks started; without an MPI process manager (N independent
    containers) each rank is an MPI world of 1 and would report "1 ranks" as if all was well."""
    expected = env.get("WORLD_SIZE", "")
    if not expected.isdigit() or int(expected) == n or env.get("HPCAI_COPY"):  # --per-gpu: worlds of 1
        return None
    return ("mpi-allreduce: MPI sees %d rank(s) but WORLD_SIZE=%s: the ranks were not started by an MPI "
            "process manager; launch with srun --mpi=pmix (or mpirun)" % (n, expected))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-bytes", type=int, default=8)
    ap.add_argument("--max-bytes", type=int, default=1 << 24)
    ap.add_argument("--factor", type=int, default=2)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    why = check_world(n, os.environ)
    if why:
        raise SystemExit(why)
    if rank == 0:
        lib = MPI.Get_library_version().splitlines()[0].strip().rstrip(",")
        print("# hpcai mpi4py Allreduce Test (mpi4py %s, %s)" % (sys.modules["mpi4py"].__version__, lib))
        print("# ranks %d iters %d warmup %d dtype float32" % (n, args.iters, args.warmup))
        print("# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)   BusBW(MB/s)")
    for nbytes in sizes(args.min_bytes, args.max_bytes, args.factor):
        t = measure(comm, nbytes, args.iters, args.warmup)
        lo, hi, avg = (comm.reduce(t, op=o, root=0) for o in (MPI.MIN, MPI.MAX, MPI.SUM))
        if rank == 0:
            avg /= n
            busbw = nbytes * (2.0 * (n - 1) / n if n > 1 else 1.0) / hi / 1e6
            print("%-10d %17.2f %17.2f %17.2f %13.2f" % (nbytes, avg * 1e6, lo * 1e6, hi * 1e6, busbw),
                  flush=True)
    if rank == 0:
        print("# mpi-allreduce: done, %d ranks" % n)


if __name__ == "__main__":
    main()
