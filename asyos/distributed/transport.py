"""Waiting without spinning, and the small MPI helpers the driver uses.

An MPICH rank blocked in ``Recv``/``Wait`` polls at 100% CPU; with 13 ranks on 2 cores that
starves the ranks doing work (``design/mpi-experiments.md`` section 1.2: sleeping waits gave
1.6-7x more pushes/s at q = 12). Every wait here polls with ``Test`` and backs off: a short spin
when the ranks have a core each, then sleeps growing from 50 us to ``max_sleep``.
"""
from __future__ import annotations

from typing import NoReturn  # noqa: F401

import os
import sys
import time

from .supervisor import mark_finished, run_ended, shared_memory_segments, unlink_segments

ABORT_GRACE = 0.5   # seconds for the launcher to forward the message before MPI_Abort tears stdio down
ABORT_WAIT = 10.0   # seconds to wait for the launcher to kill this process after MPI_Abort


def ranks_oversubscribe_cores(comm) -> bool:
    """True when this node runs more ranks than this process may use cores."""
    from mpi4py import MPI
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        n_local = local.Get_size()
    finally:
        local.Free()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return n_local > cores


class Backoff:
    """Call ``pause()`` after every unsuccessful poll; ``reset()`` after a successful one."""

    def __init__(self, spin_seconds: float = 0.0, min_sleep: float = 50e-6, max_sleep: float = 1e-3):
        self.spin_seconds = spin_seconds
        self.min_sleep = min_sleep
        self.max_sleep = max_sleep
        self.reset()

    def reset(self):
        self._sleep = self.min_sleep
        self._spin_until = None

    def pause(self):
        if self.spin_seconds > 0:
            now = time.perf_counter()
            if self._spin_until is None:
                self._spin_until = now + self.spin_seconds
            if now < self._spin_until:
                return
        time.sleep(self._sleep)
        self._sleep = min(self._sleep * 2.0, self.max_sleep)


class Deadline(Exception):
    """A wait exceeded its time limit."""


def wait_all(requests, backoff: Backoff, timeout: float):
    """Wait for every request with back-off; raise ``Deadline`` after ``timeout`` seconds."""
    from mpi4py import MPI
    start = time.monotonic()
    backoff.reset()
    while not MPI.Request.Testall(requests):
        if time.monotonic() - start > timeout:
            raise Deadline(f"no answer within {timeout:g} s")
        backoff.pause()


def agree_after_setup(comm, error, values=(), backoff=None, timeout=float("inf")):
    """Every rank's set-up outcome, exchanged by one polled ``Iallgather``: ``error`` (this rank's
    input-error message, or ``None``) and ``values`` (numbers). Returns the ``size x len(values)``
    array of every rank's values; raises ``InputError`` with the first failed rank's message on every
    rank (their messages cross in a blocking ``allgather`` only then, when every rank is known to be
    there). Past ``timeout`` the job is aborted (``abort_job``: exit 18 from a worker rank, 17 from rank 0).

    Never a blocking collective while ranks may still be loading: MPICH spins in it (the ranks of
    ``mpiexec -n 4 --algorithm omcp`` made 2,000-3,000 ``sched_yield`` calls a second each, 2 s of system
    time apiece, while rank 0 loaded), and a rank that dies meanwhile leaves the others in C, where no
    deadline or stop signal reaches them."""
    import numpy as np
    from ..errors import EXIT_CENTRAL_LOST, EXIT_WORKER_LOST, InputError
    mine = np.array([error is not None, *values], dtype=np.float64)
    everyone = np.empty((comm.Get_size(), mine.size))
    try:
        wait_all([comm.Iallgather(mine, everyone)], backoff or Backoff(max_sleep=10e-3), timeout)
    except Deadline:
        rank = comm.Get_rank()
        abort_job(comm, EXIT_CENTRAL_LOST if rank else EXIT_WORKER_LOST,
                  f"asyos: rank {rank}: setup did not finish on every rank within {timeout:g} s; aborting the job")
    if everyone[:, 0].any():
        raise InputError(next(e for e in comm.allgather(error) if e))
    return everyone[:, 1:]


def wait_object(request, backoff: Backoff, timeout: float):
    """Wait for a pickled-message request (``isend``/``irecv``); returns its object."""
    start = time.monotonic()
    backoff.reset()
    while True:
        done, obj = request.test()
        if done:
            return obj
        if time.monotonic() - start > timeout:
            raise Deadline(f"no answer within {timeout:g} s")
        backoff.pause()


def _quiet_stderr():
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
    except OSError:
        pass


def abort_job(comm, code: int, message: str) -> "NoReturn":
    """Print ``message`` on stderr, let the launcher forward it, then abort every rank with ``code``.
    Never returns.

    hydra stops forwarding output as soon as it handles an abort: a message written just before
    ``MPI_Abort`` was lost in about one run out of six without the pause. ``MPI_Abort`` itself may
    return while the launcher gets round to killing the job, so this process then waits, and as a
    last resort leaves with ``code`` on its own.
    """
    sys.stderr.write(message.rstrip("\n") + "\n")
    sys.stderr.flush()
    time.sleep(ABORT_GRACE)
    unlink_segments(shared_memory_segments())      # an aborted job never unlinks them itself
    _quiet_stderr()                   # MPICH's own "Abort(code) on node ..." line would repeat the message
    comm.Abort(code)
    time.sleep(ABORT_WAIT)
    run_ended()
    mark_finished()
    os._exit(code)
