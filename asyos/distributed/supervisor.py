"""Naming the rank when a process dies without a word (killed by a signal, or ``os._exit``).

MPICH's launcher (hydra) kills every other rank within milliseconds of one dying, with SIGKILL,
and its "BAD TERMINATION ... PID" line does not reliably name the process that died (measured:
it named rank 1 whichever rank was killed). No rank can report what it does not survive.

So under hydra, the process hydra starts stays a supervisor: it forks the rank proper (which inherits the
PMI socket and goes on with the command as if unsupervised: ``supervise()`` returns ``None`` in it), waits for it,
and when the child dies by a signal or exits before the run finished, writes ``asyos: rank R (pid P) was killed by
signal 9`` to stderr *before* exiting itself, and asks hydra to end the job (``ask_launcher_to_abort``: hydra
would not by itself if the rank went before ``MPI_Init``).
The child has ``PR_SET_PDEATHSIG = SIGKILL``, so it never outlives its supervisor (hydra's own
clean-up kills supervisors). The supervisor imports nothing heavy and sleeps in ``wait``; it forks before
numpy, MPI or any thread exists. Forking instead of starting the command again as a new interpreter (as
before) saves each rank an interpreter start and the imports up to ``asyos.run.main``: the default job,
``mpiexec -n 13 python -m asyos.run`` on 2 cores, used 6.5 s of CPU, 1 s of it in the second start of its
13 ranks (``ASYOS_SUPERVISE=0``: 5.55 s).

A stop signal the supervisor forwards (SIGTERM from a batch queue or ``timeout``, Ctrl-C) is
handled by the rank's Python handler (``asyos.records.checkpoint.StopSignals``), which tells the supervisor
it has it (``note_stopping``) and then saves and stops at its next poll. A rank blocked inside a C
call (an MPI collective waiting for a rank that died while the job was setting up) never runs that
handler: if no such note arrives within ``STOP_GRACE`` seconds, the supervisor kills the rank and
says so, so that a stop request always ends the job.

Supervision is used only where it is known to work: Linux, hydra's ``PMI_FD`` present, MPI not
yet initialised in this process (``python -m mpi4py -m asyos.run`` initialises it first and so
runs unsupervised), and ``ASYOS_SUPERVISE`` not set to ``0``.
"""
from __future__ import annotations

import os
import signal
import sys
import time

CHILD_ENV = "ASYOS_SUPERVISED_STATUS_FD"
FINISHED = b"finished"
SETTLED = b"settled"
SEGMENT = b"segment "
STOPPING = b"stopping"
STOP_GRACE = 10.0       # seconds a rank has to take up a forwarded stop signal (see the module docstring)
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def should_supervise() -> bool:
    from .._env import launched_by_mpi
    if not sys.platform.startswith("linux") or "PMI_FD" not in os.environ or not launched_by_mpi():
        return False
    if os.environ.get(CHILD_ENV) is not None or os.environ.get("ASYOS_SUPERVISE", "1") == "0":
        return False
    mpi = sys.modules.get("mpi4py.MPI")
    return mpi is None or not mpi.Is_initialized()


def _die_with_parent(parent_pid):
    """In the child: SIGKILL when the supervisor dies (Linux ``prctl``)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)      # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:              # the supervisor died before prctl
        os._exit(1)


class _Child:
    """The forked rank, as far as the supervisor handles it (``Popen``'s names)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode = None

    def send_signal(self, sig) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:          # exited meanwhile, not yet waited for
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def supervise():
    """Fork the rank proper and report how it ended. Returns the exit status in the supervisor, ``None``
    in the child, which goes on with the run (``CHILD_ENV`` names its end of the status pipe)."""
    rank = os.environ.get("PMI_RANK", "?")
    read_end, write_end = os.pipe()
    me = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:                                # the rank proper
        for sig in (signal.SIGINT, signal.SIGTERM):     # until main installs its handlers: noted, not raised
            signal.signal(sig, _note_early_stop)
        os.close(read_end)
        _die_with_parent(me)
        os.environ[CHILD_ENV] = str(write_end)
        return None
    child = _Child(pid)
    os.close(write_end)
    notes = _Notes(read_end)
    for sig in _FORWARDED:
        signal.signal(sig, notes.forward(child))
    status = _wait(child, rank, notes, launcher=os.getppid())
    notes.read_rest()
    if status is not None and status >= 0 and FINISHED in notes.lines:     # the run ended through main
        return status
    # the child could not clean up after itself
    unlink_segments(n[len(SEGMENT):].decode() for n in notes.lines if n.startswith(SEGMENT))
    unlink_segments(notes.mapped)
    if notes.orphaned:                          # its launcher is gone: no one to ask, no one to tell
        return LAUNCHER_LOST
    if status is None:                          # frozen or deaf to a stop signal, reported and killed
        code = 1
    elif notes.deaf:                            # killed for not taking up a stop: the stop's exit code
        code = 128 - status
    elif status < 0:
        name = signal.Signals(-status).name
        sys.stderr.write(f"asyos: rank {rank} (pid {child.pid}) was killed by signal {-status} ({name}); "
                         f"ending the job\n")
        code = 128 - status
    else:
        sys.stderr.write(f"asyos: rank {rank} (pid {child.pid}) exited with status {status} before the run "
                         f"finished; ending the job\n")
        code = status or 1
    sys.stderr.flush()
    time.sleep(OUTPUT_GRACE)
    unlink_segments(_siblings_segments())       # hydra's clean-up kills the other supervisors before they can
    ask_launcher_to_abort(code)
    return code


def _siblings_segments() -> set:
    """The ``/dev/shm`` files the processes our launcher started (the other ranks' supervisors and their
    ranks) map now. When this rank ends the job, hydra's clean-up SIGKILLs every other supervisor with its
    rank, so none of them unlinks what it saw: a rank that left before MPI was up left MPICH's segments of
    the ranks still in ``MPI_Init``."""
    def children(pid):
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as fh:
                return [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            return []
    return {path for supervisor in children(os.getppid()) for pid in (supervisor, *children(supervisor))
            for path in shared_memory_segments(pid)}


# Seconds between the supervisor's line and its abort request. hydra's proxy reads the supervisor's
# stderr and its PMI socket in one loop and forwards both to mpiexec; an abort read first can end the job
# before the line is forwarded: a clean clone's CI once saw a rank killed before MPI_Init end the job with
# the right status, 137, and no line (the test of that case had passed in every earlier run).
OUTPUT_GRACE = 0.2


def ask_launcher_to_abort(code: int) -> None:
    """Ask hydra to end the whole job with exit code ``code`` (PMI-1's ``abort`` command on the
    rank's PMI socket, which the supervisor shares with its dead child).

    Needed because hydra tears the job down by itself only when a rank that had opened its PMI
    connection (``MPI_Init``) goes: a rank that leaves while still importing, or is killed there,
    left the others waiting in ``MPI_Init`` for it until a stop signal came (measured: an
    ``exit0`` at 0.3 s under ``mpiexec -n 4`` hung until ``timeout``). The abort ends every rank
    within a fraction of a second, with this code and without hydra's "BAD TERMINATION" banner."""
    fd = os.environ.get("PMI_FD")
    if fd is None:
        return
    try:
        os.write(int(fd), b"cmd=abort exitcode=%d\n" % code)
    except OSError:                             # hydra already went
        pass


_ended = [False]


def run_ended():
    """``main`` returned (or a rank is ending the job with its own message): the exit that follows
    is the run's end, not a rank leaving early."""
    _ended[0] = True


FROZEN_AFTER = 8.0          # seconds a rank may stay stopped by SIGSTOP: past the other ranks' watchdogs



POLL_S = 0.1               # how often the supervisor looks at its child (it sleeps in between)
SCAN_LATE_S = 2.0          # how often it reads the child's mappings once MPI has started (``watch_segments``)
LAUNCHER_LOST = 1          # the supervisor's status when its launcher is gone (no one reads it)


class _Notes:
    """The child's notes on the status pipe (``finished``, ``segment PATH``, ``stopping``), read
    as they arrive, and the stop signals forwarded to the child that it has not yet taken up."""

    def __init__(self, fd: int):
        self.fd = fd
        os.set_blocking(fd, False)
        self._buffer = b""
        self.lines: list = []
        self.forwarded = None            # (signal, monotonic time) of the oldest stop not taken up
        self.deaf = False                # the child was killed for not taking one up
        self.orphaned = False            # the child was killed because the launcher is gone
        self.mapped: set = set()         # the /dev/shm files the child was seen mapping (``watch_segments``)
        self.settled = False             # the child's MPI has started (``note_settled``)
        self._scanned = -1e9

    def forward(self, child):
        def handler(sig, _frame):
            child.send_signal(sig)
            if sig in (signal.SIGTERM, signal.SIGINT) and self.forwarded is None:
                self.forwarded = (sig, time.monotonic())
        return handler

    def poll(self) -> None:
        """Take what the child has written so far (never blocks)."""
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:                 # BlockingIOError: nothing more for now
                break
            if not chunk:
                break
            self._take(chunk)

    def read_rest(self) -> None:
        """Everything left, up to the end of the pipe (every writer gone: the child exited)."""
        os.set_blocking(self.fd, True)
        with os.fdopen(self.fd, "rb") as fh:
            self._take(fh.read())
        if self._buffer:
            self.lines.append(self._buffer)
            self._buffer = b""

    def _take(self, chunk: bytes) -> None:
        *complete, self._buffer = (self._buffer + chunk).split(b"\n")
        self.lines.extend(complete)
        self.settled = self.settled or SETTLED in complete
        if STOPPING in complete:
            self.forwarded = None

    def watch_segments(self, pid: int, now: float) -> None:
        """Note the ``/dev/shm`` files ``pid`` maps: every poll until the child says its MPI start is behind
        it (``settled``: every rank of its node attached, the files unlinked), every ``SCAN_LATE_S`` after
        (a shared window made later). A rank killed while MPI starts, before it can note or unlink anything,
        left MPICH's segments in ``/dev/shm`` (8 after the fault tests beside two CPU-bound processes); the
        supervisor unlinks what it saw (``supervise``)."""
        if now - self._scanned < (SCAN_LATE_S if self.settled else 0.0):
            return
        self._scanned = now
        self.mapped.update(shared_memory_segments(pid))

    def deaf_for(self, now: float) -> float:
        """Seconds since a forwarded stop signal the child has not taken up (0 if none)."""
        return 0.0 if self.forwarded is None else now - self.forwarded[1]


def _kill(child, rank, why) -> None:
    try:
        sys.stderr.write(f"asyos: rank {rank} (pid {child.pid}) {why}; ending the job\n")
        sys.stderr.flush()
    except OSError:                 # the launcher that read it is gone (a broken pipe)
        pass
    child.kill()
    os.waitpid(child.pid, 0)
    child.returncode = -signal.SIGKILL


def _leave_note(rank, line) -> None:
    """``line`` in the run's ``--output`` directory (else the temporary directory), named as a failed rank's
    traceback is (``asyos.distributed.watch.write_traceback``): the launcher that would have carried it to
    the terminal is gone, and mpiexec says only that its proxy closed."""
    import tempfile
    args, directory = sys.argv[1:], None
    for i, arg in enumerate(args):
        if arg in ("--output", "--resume") and i + 1 < len(args):
            directory = args[i + 1]
        elif arg.startswith(("--output=", "--resume=")):
            directory = arg.split("=", 1)[1]
    for where in (directory, tempfile.gettempdir()):
        if where:
            try:
                with open(os.path.join(where, f"asyos-rank{rank}-traceback-{os.getpid()}.txt"), "w") as fh:
                    fh.write(line)
                return
            except OSError:
                continue


def _wait(child, rank, notes, launcher=None):
    """The child's exit status (negative: killed by that signal), like ``Popen.wait``; ``None``
    for a child reported and killed because
    * it was stopped by ``SIGSTOP`` for ``FROZEN_AFTER`` seconds (it could never answer the other
      ranks, and nothing else ends a job whose rank is stopped between two of their deadlines,
      e.g. while loading or after the workers were released); a stop by the terminal
      (``SIGTSTP``, Ctrl-Z) is the user's pause and is left alone;
    * or it did not take up a forwarded stop signal within ``STOP_GRACE`` seconds (``_Notes``);
    * or its ``launcher`` (hydra's proxy, the supervisor's parent) is gone: the proxy was killed or its
      node lost. The rank would run on, orphaned, keeping the job's other ranks waiting on it or running to
      an end no one collects (a SIGKILL of the proxy ended the job after 83-129 s, exit 255, no line of
      ours); killed, it falls silent and the ranks that remain end the job in seconds (the central rank's
      watchdog names it, or a worker's names the central rank).
    The supervisor polls every ``POLL_S`` seconds and sleeps in between."""
    stopped_at = None
    while True:
        pid, status = os.waitpid(child.pid, os.WNOHANG | os.WUNTRACED | os.WCONTINUED)
        now = time.monotonic()
        if pid:
            if os.WIFSTOPPED(status):
                if os.WSTOPSIG(status) == signal.SIGSTOP and stopped_at is None:
                    stopped_at = now
            elif os.WIFCONTINUED(status):
                stopped_at = None
            else:
                child.returncode = os.waitstatus_to_exitcode(status)
                return child.returncode
        if stopped_at is not None and now - stopped_at >= FROZEN_AFTER:
            _kill(child, rank, f"was stopped (SIGSTOP) for {FROZEN_AFTER:g} s")
            return None
        if launcher is not None and os.getppid() != launcher:
            notes.orphaned = True
            why = (f"lost its launcher (hydra's proxy, pid {launcher}, on {os.uname().nodename}): the proxy was "
                   f"killed or its node is gone")
            _kill(child, rank, why)
            _leave_note(rank, f"asyos: rank {rank} (pid {child.pid}) {why}; ending the job\n")
            return None
        notes.poll()
        notes.watch_segments(child.pid, now)
        if notes.deaf_for(now) >= STOP_GRACE and stopped_at is None:
            name = signal.Signals(notes.forwarded[0]).name
            notes.deaf = True
            _kill(child, rank, f"did not take up {name} within {STOP_GRACE:g} s (blocked in a call: "
                               f"an MPI call waiting for a rank that is gone, or a long read)")
            child.returncode = -notes.forwarded[0]
            return child.returncode
        time.sleep(POLL_S)


def mark_finished():
    """In a supervised child, at exit (after MPI is finalised): tell the supervisor the run ended
    through ``main`` (``run_ended``); any other exit, ``sys.exit(0)`` deep in the run included,
    is reported by the supervisor as a rank that left early."""
    fd = os.environ.get(CHILD_ENV)
    if fd is None or not _ended[0]:
        return
    try:
        os.write(int(fd), b"\n" + FINISHED + b"\n")
        os.close(int(fd))
    except OSError:
        pass


_early = [None]


def _note_early_stop(signum, _frame) -> None:
    """A stop signal before ``main`` installed its handlers (the rank was still starting): kept for
    ``early_stop``, instead of a ``KeyboardInterrupt`` raised inside whatever the rank was importing."""
    if _early[0] is None:
        _early[0] = signum


def note_early_stops() -> None:
    """Under ``mpiexec``, from the entry module's first lines: a stop signal while the rank imports is noted
    (``early_stop``) rather than raised as a ``KeyboardInterrupt`` inside an import (a traceback per rank,
    and a status hydra then replaced with 9 or 11 as it killed the others)."""
    from .._env import launched_by_mpi
    if launched_by_mpi():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, _note_early_stop)


def first_to_stop() -> bool:
    """Whether this rank is the first of its node's ranks to stop while the job starts: it creates a file
    named after the launcher's proxy on this node (its pid and start time, so that a reused pid names
    another file), which the others then find there."""
    import tempfile
    try:
        parent = os.getppid()
        if os.environ.get(CHILD_ENV) is not None:       # supervised: the proxy is the supervisor's parent
            with open(f"/proc/{parent}/stat") as fh:
                parent = int(fh.read().rsplit(")", 1)[1].split()[1])
        with open(f"/proc/{parent}/stat") as fh:
            started = fh.read().rsplit(")", 1)[1].split()[19]
        path = os.path.join(tempfile.gettempdir(), f"asyos-stopping-{parent}-{started}")
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return False
    except (OSError, ValueError, IndexError):       # no /proc: the rank hydra numbers 0 speaks
        return os.environ.get("PMI_RANK", "0") == "0"
    return True


def early_stop():
    """The stop signal that reached this rank while it started (``None``: none)."""
    return _early[0]


def note_stopping(_signum=None) -> None:
    """In a supervised child, from its stop-signal handler: the signal was taken up (the
    supervisor then waits for the rank to save and stop, however long that takes)."""
    fd = os.environ.get(CHILD_ENV)
    if fd is None:
        return
    try:
        os.write(int(fd), b"\n" + STOPPING + b"\n")
    except OSError:
        pass


def note_settled() -> None:
    """In a supervised child: MPI has started and its shared-memory files are unlinked (``_Notes.watch_segments``
    then reads the child's mappings less often)."""
    fd = os.environ.get(CHILD_ENV)
    if fd is not None:
        try:
            os.write(int(fd), SETTLED + b"\n")
        except OSError:
            pass


def note_segments(paths) -> None:
    """In a supervised child: tell the supervisor which shared-memory files to unlink should this
    process die without finalizing MPI (killed, frozen, or leaving early)."""
    fd = os.environ.get(CHILD_ENV)
    if fd is None:
        return
    try:
        os.write(int(fd), b"".join(SEGMENT + p.encode() + b"\n" for p in paths))
    except OSError:
        pass


def shared_memory_segments(pid="self") -> list:
    """The files under ``/dev/shm`` process ``pid`` has mapped and not yet unlinked (MPICH's segments for
    talking within the node, and the shared-memory windows): what an aborted job would leave behind, since
    only a clean ``MPI_Finalize`` unlinks them (4-5 MB each, measured)."""
    try:
        with open(f"/proc/{pid}/maps") as fh:
            paths = {line.split(None, 5)[5].strip() for line in fh if " /dev/shm/" in line}
    except (OSError, IndexError):
        return []
    return sorted(p for p in paths if not p.endswith("(deleted)"))


def unlink_segments(paths) -> None:
    """Unlink ``paths`` (the ranks that still map them keep their memory until they exit)."""
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            pass
