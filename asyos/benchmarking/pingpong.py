"""Message costs between two ranks, with the primitives the Asy-OS engine uses.

    mpiexec -n 2 python -m asyos.benchmarking.pingpong N [N ...]

For each message length N (float64 values) rank 0 sends with ``Isend``/``Irecv`` and polls ``Test``,
rank 1 echoes; prints one JSON line: per length the median one-way time (round trip / 2), and the
worker-side costs of posting a push (``Irecv`` + ``Isend``) and of one ``Test`` poll.
"""
from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np


def main(argv=None):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    lengths = [int(a) for a in (sys.argv[1:] if argv is None else argv)] or [1, 1000]
    rank = comm.Get_rank()
    if comm.Get_size() != 2:
        raise SystemExit("run with mpiexec -n 2")
    result = {"one_way_s": {}}
    repeats = 2000
    for n in lengths:
        out, back = np.zeros(n + 3), np.zeros(n + 3)
        times = []
        for i in range(repeats + 100):
            if rank == 0:
                t0 = time.perf_counter()
                recv = comm.Irecv(back, source=1, tag=1)
                send = comm.Isend(out, dest=1, tag=0)
                while not MPI.Request.Testall([send, recv]):
                    pass
                if i >= 100:
                    times.append(time.perf_counter() - t0)
            else:
                comm.Recv(back, source=0, tag=0)
                comm.Send(back, dest=0, tag=1)
        if rank == 0:
            result["one_way_s"][str(n)] = statistics.median(times) / 2
    if rank == 0:
        n = lengths[-1]
        out, back = np.zeros(n + 3), np.zeros(n + 3)
        post = []
        for _ in range(200):
            t0 = time.perf_counter()
            recv = comm.Irecv(back, source=1, tag=3)
            send = comm.Isend(out, dest=1, tag=2)
            post.append(time.perf_counter() - t0)
            MPI.Request.Waitall([send, recv])
        result["post_s"] = statistics.median(post)
        request = comm.Irecv(back, source=1, tag=4)
        t0 = time.perf_counter()
        for _ in range(10000):
            request.Test()
        result["test_s"] = (time.perf_counter() - t0) / 10000
        comm.Send(out, dest=1, tag=5)
        request.Wait()
        print(json.dumps(result), flush=True)
    else:
        for _ in range(200):
            comm.Recv(back, source=0, tag=2)
            comm.Send(back, dest=0, tag=3)
        comm.Recv(back, source=0, tag=5)
        comm.Send(back, dest=0, tag=4)


if __name__ == "__main__":
    main()
