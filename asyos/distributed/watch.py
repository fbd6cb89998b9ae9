"""What every MPI transport's central rank watches while the workers run, and how the run ends.

* ``Watch``: the workers' last signs of life (a push, a step counter that moved) and their
  reports: an error report aborts the job naming the rank, a final selection is kept; a worker
  silent for ``--watchdog-timeout`` seconds aborts the job naming it.
* ``end_run``: after the last final selection, the central rank releases the workers
  (``TAG_SHUTDOWN``) and every rank meets in one non-blocking barrier polled with a deadline,
  before anything collective (freeing a shared window, ``MPI_Finalize``) could block on a rank
  that froze or left: a rank missing from it ends the job within ``--watchdog-timeout``.
"""
from __future__ import annotations

import time

from ..errors import EXIT_CENTRAL_LOST, EXIT_OUTPUT, EXIT_USAGE, EXIT_WORKER_FAILED, EXIT_WORKER_LOST
from ..learners.protocol.wire import TAG_ALIVE, TAG_ERROR, TAG_FINAL, TAG_SHUTDOWN
from .transport import Backoff, Deadline, abort_job, wait_all

ALIVE_EVERY = 1.0          # seconds between the central rank's signs of life to a finished worker
STAGGER_S = 2.0            # see patience
CHECK_EVERY = 0.05         # seconds between two looks at the workers' silence


def patience(timeout: float, rank: int) -> float:
    """How long worker ``rank`` waits for the central rank before ending the job: rank 1 exactly
    ``--watchdog-timeout`` seconds, the others ``STAGGER_S`` more, so that a frozen central rank is
    reported by one worker (whose abort ends the others meanwhile) instead of by all at once."""
    return float(timeout) + (0.0 if rank <= 1 else STAGGER_S)


class Watch:
    """The central rank's view of the workers (``q`` of them, ranks ``1..q``)."""

    def __init__(self, comm, timeout: float, report_dir=None):
        from mpi4py import MPI
        self.comm = comm
        self.q = comm.Get_size() - 1
        self.timeout = float(timeout)
        self.finals = [None] * self.q
        self.last_seen = [time.monotonic()] * self.q
        self._status = MPI.Status()
        self._alive_sent = [0.0] * self.q
        self._alive = []                   # requests of the signs of life in flight
        self._checked = 0.0
        self.report_dir = report_dir           # where a failed worker's traceback is written
        self.watched = range(self.q)           # the workers whose silence counts (node-aggregated: the leaders)
        self.reporter = None                   # an asyos.utils.progress.Progress: check writes the job's progress lines
        self.objective = None                  # u_C -> the objective, for those lines

    @property
    def running(self) -> bool:
        return any(f is None for f in self.finals)

    def seen(self, worker: int, now=None) -> None:
        self.last_seen[worker] = time.monotonic() if now is None else now

    def take_report(self) -> bool:
        """Take one error report (aborts the job) or final selection if one has arrived."""
        from mpi4py import MPI
        comm = self.comm
        if not comm.Iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=self._status):
            return False
        source, tag = self._status.Get_source(), self._status.Get_tag()
        if tag == TAG_ERROR:
            report = comm.recv(source=source, tag=TAG_ERROR)
            if report["input_error"] is not None:
                abort_job(comm, EXIT_USAGE, f"asyos: error: worker rank {report['rank']}: {report['input_error']}")
            if report.get("output_error") is not None:        # a full disk: nothing to trace
                abort_job(comm, EXIT_OUTPUT, f"asyos: error: worker rank {report['rank']}: {report['output_error']}")
            where = write_traceback(self.report_dir, report["rank"], report["traceback"])
            abort_job(comm, EXIT_WORKER_FAILED, f"asyos: worker rank {report['rank']} failed: {report['error']}; "
                                                f"ending the job (traceback: {where})")
        if tag == TAG_FINAL:
            final = comm.recv(source=source, tag=TAG_FINAL)
            final["received_at"] = time.perf_counter()
            self.finals[source - 1] = final
            return True
        return False

    def check(self, progress, counts=None) -> None:
        """Abort if a running worker has been silent too long; tell the finished ones the central
        rank is alive (they wait for the others, ``wait_release``). Call it on every turn of the
        central rank's loop: it looks every ``CHECK_EVERY`` seconds. ``progress()``: a few words
        on how far the run got, for the message. ``counts()``: the transport's progress dict
        (``asyos.utils.progress``), asked for only when a progress line is due (``reporter``): one line
        for the whole job, from this rank, at no cost between lines."""
        now = time.monotonic()
        if now - self._checked < CHECK_EVERY:
            return
        self._checked = now
        if self.reporter is not None and counts is not None:
            self.reporter.poll(lambda: {"workers running": f"{sum(f is None for f in self.finals)} of {self.q}",
                                        **counts()})
        silent = [i + 1 for i in self.watched if self.finals[i] is None and now - self.last_seen[i] > self.timeout]
        if silent:
            abort_job(self.comm, EXIT_WORKER_LOST,
                      f"asyos: worker rank(s) {silent} sent nothing for more than {self.timeout:g} s "
                      f"(hung, or exited without finishing); {progress()}; aborting the job")
        for i in range(self.q):
            if self.finals[i] is not None and now - self._alive_sent[i] > ALIVE_EVERY:
                self._alive.append(self.comm.isend(None, dest=i + 1, tag=TAG_ALIVE))
                self._alive_sent[i] = now
        self._alive = [r for r in self._alive if not r.test()[0]]


def write_traceback(directory, rank, text) -> str:
    """A failed rank's traceback into ``directory`` (the run's ``--output``, else the temporary
    directory), so the job's own message stays one line; returns the file's path."""
    import os
    import tempfile
    from ..records.results import write_text_atomic
    directory = directory or tempfile.gettempdir()
    path = os.path.join(directory, f"asyos-rank{rank}-traceback-{os.getpid()}.txt")
    try:
        write_text_atomic(path, text)
    except OSError:
        return "not written"
    return path


def wait_release(comm, rank: int, timeout: float, central_alive=None) -> None:
    """A worker that has sent its final selection: wait for the central rank's release, aborting
    the job if the central rank shows no sign of life for ``timeout`` seconds (its ``TAG_ALIVE``
    messages, or ``central_alive()`` returning True: a heartbeat it can read locally)."""
    from mpi4py import MPI
    backoff = Backoff(max_sleep=20e-3)
    last = time.monotonic()
    status = MPI.Status()
    while True:
        if comm.Iprobe(source=0, tag=MPI.ANY_TAG, status=status):
            tag = status.Get_tag()
            comm.recv(source=0, tag=tag)
            if tag == TAG_SHUTDOWN:
                return
            last = time.monotonic()
            backoff.reset()
            continue
        now = time.monotonic()
        if central_alive is not None and central_alive():
            last = now
        if now - last > timeout:
            abort_job(comm, EXIT_CENTRAL_LOST, f"asyos: worker rank {rank}: the central rank 0 showed no sign of "
                                               f"life for {timeout:g} s (frozen, or exited); aborting the job")
        backoff.pause()


def end_run(comm, timeout: float) -> None:
    """Every rank: meet the others in a barrier polled with a deadline (see the module docstring).
    The central rank calls it after releasing the workers."""
    rank = comm.Get_rank()
    try:
        wait_all([comm.Ibarrier()], Backoff(max_sleep=10e-3), timeout)
    except Deadline:
        who = "a worker rank" if rank == 0 else "the central rank 0 or another worker"
        abort_job(comm, EXIT_WORKER_LOST if rank == 0 else EXIT_CENTRAL_LOST,
                  f"asyos: rank {rank}: {who} did not reach the end of the run within {timeout:g} s "
                  f"(frozen, or exited); aborting the job")


def release_workers(comm, backoff) -> None:
    """The central rank: every worker may stop (small eager messages, completed at once)."""
    from mpi4py import MPI
    requests = [comm.isend(None, dest=w, tag=TAG_SHUTDOWN) for w in range(1, comm.Get_size())]
    deadline = time.monotonic() + 10.0
    while not MPI.Request.Testall(requests):
        if time.monotonic() > deadline:
            break                          # a worker that never takes it is caught by end_run
        backoff.pause()
