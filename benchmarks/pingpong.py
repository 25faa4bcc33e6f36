"""OSU-style point-to-point latency and bandwidth between ranks 0 and 1, with mpi4py.

The OSU micro-benchmarks have no reachable source here (not on PyPI, not in Debian's archive, not in
the mirror; docs/building.md), so benchmarks/container_parity.py measures with this instead: the
same loops as osu_latency (blocking ping-pong, half the round trip) and osu_bw (a window of 64
non-blocking sends, then a 4-byte acknowledgement), printed in OSU's table format so hpcai's `osu`
parser reads it (`latency_8B`, `bandwidth_4MiB`). It runs with the same Python and mpi4py as the
payloads, on the host and in the image, so both sides pay the same interpreter cost.

    srun -n 2 python pingpong.py latency|bw [--sizes 8,4194304] [--iters 1000] [--warmup 100]
"""

import argparse
import array

from mpi4py import MPI

WINDOW = 64


def latency(comm, buf, iters, warmup):
    rank = comm.Get_rank()
    for i in range(warmup + iters):
        if i == warmup:
            comm.Barrier()
            start = MPI.Wtime()
        if rank == 0:
            comm.Send(buf, dest=1, tag=1)
            comm.Recv(buf, source=1, tag=1)
        elif rank == 1:
            comm.Recv(buf, source=0, tag=1)
            comm.Send(buf, dest=0, tag=1)
    return (MPI.Wtime() - start) * 1e6 / (2 * iters)  # us, one way


def bandwidth(comm, buf, iters, warmup):
    rank, ack = comm.Get_rank(), array.array("b", [0]) * 4
    for i in range(warmup + iters):
        if i == warmup:
            comm.Barrier()
            start = MPI.Wtime()
        if rank == 0:
            MPI.Request.Waitall([comm.Isend(buf, dest=1, tag=100) for _ in range(WINDOW)])
            comm.Recv(ack, source=1, tag=101)
        elif rank == 1:
            MPI.Request.Waitall([comm.Irecv(buf, source=0, tag=100) for _ in range(WINDOW)])
            comm.Send(ack, dest=0, tag=101)
    elapsed = MPI.Wtime() - start
    return len(buf) * WINDOW * iters / elapsed / 1e6  # MB/s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("test", choices=["latency", "bw"])
    ap.add_argument("--sizes", default="8,4194304")
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=100)
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    if comm.Get_size() < 2:
        raise SystemExit("pingpong: needs 2 ranks")
    run, head = (latency, "Latency (us)") if args.test == "latency" else (bandwidth, "Bandwidth (MB/s)")
    if comm.Get_rank() == 0:
        print("# OSU MPI %s Test (hpcai pingpong.py, mpi4py %s)" % (
            "Latency" if args.test == "latency" else "Bandwidth", MPI.Get_library_version().split(",")[0]))
        print("# Size      %s" % head)
    for size in (int(s) for s in args.sizes.split(",")):
        buf = array.array("b", [1]) * size
        iters = args.iters if size <= 65536 else max(10, args.iters // 10)
        value = run(comm, buf, iters, min(args.warmup, iters))
        if comm.Get_rank() == 0:
            print("%-10d %18.2f" % (size, value), flush=True)


if __name__ == "__main__":
    main()
