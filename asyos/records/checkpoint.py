"""Checkpoints: a run's state saved at a consistent point, and the run resumed from it.

A learner's loop calls ``Checkpointer.poll(capture)`` between two steps. When ``every`` seconds
have passed since the last save, or a stop was requested (SIGTERM / SIGINT, see ``StopSignals``),
``capture()`` returns the loop's state and it is written to ``path``; after a stop request the
loop is then left with ``RunInterrupted``, which the CLI turns into the partial results and the
exit status ``128 + signal`` (143 for SIGTERM, 130 for SIGINT). ``fit(X, y, checkpoint=...)``
given a checkpointer whose ``resumed`` holds a state continues from it instead of starting over.

File format (``FORMAT``), written under a temporary name and renamed into place (a kill never leaves
half a checkpoint):

    ASYOS-CHECKPOINT              the magic line
    <sha256 of the header line>
    <the header, one line of JSON>
    <the state: a cloudpickle>

The header holds the format, the asyos version, the ``kind`` of state (which loop wrote it), the run's
``identity`` (the settings and the data's size and modification time), the run's ``run_id`` (the token
``run_config.json`` holds, so that a checkpoint of another run in another directory is refused even for
the same settings), its progress, and the state's length and sha256. ``check_header`` verifies all of it
(the header's digest, then the state's length and digest) before anything is unpickled: a damaged, a
truncated or a foreign checkpoint is refused with one line naming the file (``InputError``, exit 2).
Before, of 6 damaged checkpoints 1 was refused, two resumed to a different result (one flipped byte: an
objective 2e5 instead of 0.005) and two crashed inside the unpickling. Large inputs the state refers to
(the data's columns held by a worker's shard) are not written: they are ``externals``, stored as a
reference (pickle's persistent id) and given back on load, rebuilt from the data exactly as the first run
built them.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import signal
import time
from typing import Callable, Optional

from ..errors import InputError, OutputError

FORMAT = 2
MAGIC = b"ASYOS-CHECKPOINT\n"
HEADER_LIMIT = 1 << 20      # bytes: a header line longer than this is damage, not a header
CHECKPOINT_FILE = "checkpoint.pkl"
DEFAULT_EVERY_S = 60.0
REPEAT_S = 1.0          # a signal repeated within this time is the same request (StopSignals)
LATE_REPEAT_S = 5.0     # ... and, once the run has ended for it, a repeat this late is still ignored


class RunInterrupted(Exception):
    """A stop was requested (``signum``) and the state was saved to ``path`` (``None``: there was
    nothing to save yet). ``progress`` says how far the run got."""

    def __init__(self, signum: int, path: Optional[str] = None, progress: Optional[dict] = None):
        self.signum = int(signum)
        self.path = path
        self.progress = dict(progress or {})
        super().__init__(f"interrupted by {signal_name(self.signum)}")

    @property
    def exit_status(self) -> int:
        """``128 + signal``, as shells report a process ended by it (143 SIGTERM, 130 SIGINT)."""
        return 128 + self.signum


TIME_LIMIT = signal.SIGALRM     # the stop reason of --time-limit: exit 128 + 14, as a timer's signal would give


def signal_name(signum: int) -> str:
    if signum == TIME_LIMIT:
        return "the time limit (--time-limit)"
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _late_repeat(signum, default, first_at):
    """The handler of ``signum`` after a stop it requested: ignore it until ``LATE_REPEAT_S`` after the
    request, then act as ``default`` (the default action: the handler is reset and the signal sent again)."""
    def handler(sig, frame):
        if time.monotonic() - first_at < LATE_REPEAT_S:
            return
        signal.signal(sig, default)
        if callable(default):
            default(sig, frame)
        else:
            os.kill(os.getpid(), sig)
    return handler


class StopSignals:
    """SIGTERM and SIGINT as stop requests. While a loop polls (``polling`` is set by
    ``Checkpointer.watching``), a signal only records the request and the loop saves and leaves
    at its next step; outside it (loading the data, the final refit) the signal raises
    ``RunInterrupted`` at once, as there is no state worth saving. A second signal while a request
    is pending raises at once too: a stuck loop can still be stopped."""

    requested: Optional[int] = None
    raised = False          # the handler raised RunInterrupted (wherever the process was: see run._main)
    polling = 0
    _installed = False
    _taken_up: Optional[Callable] = None

    @classmethod
    def install(cls, taken_up: Optional[Callable] = None) -> None:
        """Route SIGTERM and SIGINT here (main thread only; idempotent). ``taken_up(signum)`` is
        called first thing in the handler (under mpiexec: ``supervisor.note_stopping``, which
        tells the supervisor the rank is not stuck in a C call)."""
        cls._taken_up = taken_up
        if cls._installed:
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, cls._handle)
        cls._installed = True

    @classmethod
    def take(cls, signum: int) -> None:
        """Record ``signum`` as the stop request, as the handler would have (a signal noted before the
        handler was installed: ``asyos.distributed.supervisor.early_stop``); a copy of it arriving next is
        then ignored as the same request."""
        cls.requested, cls._first_at = signum, time.monotonic()

    @classmethod
    def uninstall(cls) -> None:
        """Back to the default handlers; except that after a stop request, the same signal arriving
        within ``LATE_REPEAT_S`` of it is a copy of that request still on its way (under ``mpiexec`` a rank
        may get one from the launcher and one forwarded by its supervisor) and is ignored, so that it
        cannot kill the rank while it exits with its state saved (a clean clone's suite once saw
        "stopped by SIGTERM ..." and then "rank 0 was killed by signal 15")."""
        if cls._installed:
            for sig, default in ((signal.SIGTERM, signal.SIG_DFL), (signal.SIGINT, signal.default_int_handler)):
                signal.signal(sig, _late_repeat(sig, default, cls._first_at) if sig == cls.requested else default)
        cls._installed = False
        cls._taken_up = None
        cls.requested = None
        cls.raised = False
        cls.polling = 0
        cls._deferred = None
        cls._arming = False

    _first_at = 0.0
    _deferred: Optional[int] = None
    _arming = False

    @classmethod
    def _handle(cls, signum, frame):
        if cls._arming:         # inside _defer's Thread.start: its delivery is on its way and will raise; one
            return              # raised here would leave the timer thread half started ("KeyError" in _limbo)
        deferred, cls._deferred = cls._deferred == signum, None
        if cls._taken_up is not None and not deferred:
            cls._taken_up(signum)
        now = time.monotonic()
        if not deferred and cls.requested == signum and now - cls._first_at < REPEAT_S:
            return              # the same Ctrl-C twice: from the terminal and forwarded (asyos.distributed.supervisor)
        if cls.polling and cls.requested is None:
            cls.requested, cls._first_at = signum, now
            return
        if not deferred:
            cls.requested, cls._first_at = signum, now
        if in_foreign_callback(frame):
            cls._defer(signum)
            return
        cls.raised = True
        raise RunInterrupted(signum)

    @classmethod
    def _defer(cls, signum) -> None:
        """Deliver ``signum`` again in ``DEFER_S``: the handler ran inside a callback from C, which
        would print ``RunInterrupted`` as "Exception ignored" and drop it."""
        import _thread
        import threading
        cls._deferred = signum
        timer = threading.Timer(DEFER_S, _thread.interrupt_main, args=(signum,))
        timer.daemon = True
        cls._arming = True      # a copy of the signal arriving while the thread starts (from the supervisor,
        try:                    # under mpiexec) once raised inside Thread.start: "Exception ignored in thread
            timer.start()       # started by ... KeyError" besides the job's one line, in a clean clone's suite
        finally:
            cls._arming = False


# Code that calls Python back from C and drops what it raises: numba's object cache, which llvmlite
# calls through ctypes whenever a process compiles a module (even with every kernel in the cache it
# compiles two small ones as it loads them). A Ctrl-C 4 s into `mpiexec -n 4` caught two ranks there:
# each printed its RunInterrupted as "Exception ignored on calling ctypes callback function".
FOREIGN_CALLBACKS = (f"{os.sep}llvmlite{os.sep}",)
DEFER_S = 0.02


# An import that C code started (an extension module importing another as it initialises): the Python
# stack starts in importlib, and what the handler raises there is printed by that C code as a traceback
# and dropped (a Ctrl-C 1.5 s into `mpiexec -n 4`, under CI load: one rank printed
# `File "<frozen importlib._bootstrap>", line 1165, in _find_and_load` and the RunInterrupted below it).
IMPORT_FRAMES = "<frozen importlib"


def in_foreign_callback(frame) -> bool:
    """Whether ``frame`` (the one a signal interrupted) runs inside a callback from C that drops
    exceptions: a frame of ``FOREIGN_CALLBACKS``, a stack whose outermost frame is importlib's, or an
    interrupted frame of importlib itself (a weakref callback of its module locks, called from C inside any
    code: "Exception ignored in: <function _get_module_lock.<locals>.cb>" and the RunInterrupted, seen once
    in the suite). Deferred by ``DEFER_S``, the request is raised where the run can take it."""
    if frame is not None and frame.f_code.co_filename.startswith(IMPORT_FRAMES):
        return True
    while frame is not None:
        if any(part in frame.f_code.co_filename for part in FOREIGN_CALLBACKS):
            return True
        if frame.f_back is None:
            return frame.f_code.co_filename.startswith(IMPORT_FRAMES)
        frame = frame.f_back
    return False


class Checkpointer:
    """Writes a loop's state to ``path`` every ``every`` seconds (``None``: only when stopped)
    and when a stop is requested.

    ``identity``: what the state is valid for (``run_identity``). ``resume``: continue from the
    checkpoint at ``path`` (its header is checked against ``identity`` here; the loop unpickles the
    state with ``take``). ``stop_after``: stop as if signalled at the ``stop_after``-th poll (tests
    interrupt a run at a chosen step this way). ``time_limit``: stop, as if signalled, at the first poll
    ``time_limit`` seconds after the loop started (``watching``; ``--time-limit``, for batch queues'
    wall-clock limits). It is a deadline checked at the polls, not a timer signal, so SIGALRM stays
    the application's.
    """

    def __init__(self, path: str, every: Optional[float] = DEFAULT_EVERY_S, identity: Optional[dict] = None,
                 resume: bool = False, stop_after: Optional[int] = None, signum: int = signal.SIGTERM,
                 time_limit: Optional[float] = None, run_id: Callable[[], Optional[str]] = lambda: None):
        self.path = path
        self.every = every
        self.identity = dict(identity or {})
        self.run_id = run_id            # read at each save and on resume: the run's token (records.resume)
        self.resumed_kind = None
        self.resumed_progress = {}
        if resume and os.path.exists(path):
            header = check_header(path, self.identity, run_id())
            self.resumed_kind, self.resumed_progress = header["kind"], header.get("progress", {})
        self.stop_after = stop_after
        self.signum = signum
        self.time_limit = time_limit
        self._deadline = None
        self.polls = 0
        self.saves = 0
        self.save_seconds = 0.0
        self._last = time.monotonic()
        self.reporter = None            # an asyos.utils.progress.Progress: poll writes its lines too

    # -- the loop's side --------------------------------------------------------------------
    def take(self, kind: str, externals: Optional[dict] = None):
        """The state to continue from, if resuming (``None`` when starting afresh, and after the
        first call): it must have been written by a loop of ``kind``; ``externals`` gives back the
        objects it was saved with by reference."""
        if self.resumed_kind is None:
            return None
        if self.resumed_kind != kind:
            raise InputError(f"checkpoint {self.path} holds a {self.resumed_kind!r} state; this run needs {kind!r}")
        self.resumed_kind = None
        return load_state(self.path, externals)

    def due(self) -> bool:
        """Whether ``poll`` would save now (cheap: a counter, a flag and the clock)."""
        self.polls += 1
        if self._stop_reason() is not None:
            return True
        return self.every is not None and time.monotonic() - self._last >= self.every

    def _stop_reason(self) -> Optional[int]:
        """Why the loop must stop now (a signal, ``stop_after``, the ``time_limit``), else ``None``."""
        if StopSignals.requested is not None:
            return StopSignals.requested
        if self.stop_after is not None and self.polls >= self.stop_after:
            return self.signum
        if self._deadline is not None and time.monotonic() >= self._deadline:
            return TIME_LIMIT
        return None

    def poll(self, kind: str, capture: Callable[[], object], progress: Callable[[], dict] = dict,
             externals: Optional[dict] = None) -> None:
        """At a consistent point of loop ``kind``: save ``capture()`` if it is time, and leave the
        loop with ``RunInterrupted`` if a stop was requested (and write a progress line when one
        is due, ``reporter``)."""
        if self.reporter is not None:
            self.reporter.poll(progress)
        if not self.due():
            return
        stop = self._stop_reason()
        state = progress()
        self.save(kind, capture(), state, externals)
        if stop is not None:
            raise RunInterrupted(stop, self.path, state)

    def watching(self):
        """Context: signals inside it are stop requests the loop answers at its next poll (the
        ``time_limit`` clock starts at the first one)."""
        if self.time_limit and self._deadline is None:
            self._deadline = time.monotonic() + self.time_limit
        return _Watching()

    # -- files ------------------------------------------------------------------------------
    def save(self, kind: str, state, progress: Optional[dict] = None, externals: Optional[dict] = None) -> None:
        """Write ``state`` atomically (``externals``: objects stored by reference, see ``load``)."""
        started = time.monotonic()
        import cloudpickle
        refs = {id(obj): name for name, obj in (externals or {}).items()}

        class _Pickler(cloudpickle.CloudPickler):
            def persistent_id(self, obj):
                return refs.get(id(obj)) if refs else None

        body = io.BytesIO()
        _Pickler(body, protocol=pickle.HIGHEST_PROTOCOL).dump(state)
        body = body.getbuffer()
        header = {"format": FORMAT, "asyos": _version(), "kind": kind, "identity": _as_json(self.identity),
                  "run_id": self.run_id(), "progress": _as_json(dict(progress or {})), "written": time.time(),
                  "state_bytes": body.nbytes, "state_sha256": hashlib.sha256(body).hexdigest()}
        line = json.dumps(header, sort_keys=True).encode() + b"\n"

        def write(fh):
            fh.write(MAGIC)
            fh.write(hashlib.sha256(line).hexdigest().encode() + b"\n")
            fh.write(line)
            fh.write(body)

        try:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)    # made at the first save
            write_atomic(self.path, write)
        except OSError as exc:              # a full disk: the previous checkpoint stays as it was
            raise OutputError(f"cannot write checkpoint {self.path}: {exc.strerror or exc}; the run stops here "
                              f"(its previous checkpoint, if any, is kept)") from None
        self.saves += 1
        self._last = time.monotonic()
        self.save_seconds += self._last - started


class _Watching:
    def __enter__(self):
        StopSignals.polling += 1
        return self

    def __exit__(self, *exc):
        StopSignals.polling -= 1
        return False


def _as_json(value):
    """``value`` as its JSON form reads back (tuples as lists, numpy numbers as Python's): what a header
    holds, and what the current identity is compared in."""
    from .results import to_jsonable
    return json.loads(json.dumps(to_jsonable(value)))


def _open_checkpoint(path: str):
    """``(file, header)``: the file positioned at the state, after its magic line and its header's digest
    are checked (``InputError`` naming ``path`` otherwise)."""
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise InputError(f"cannot read checkpoint {path}: {exc.strerror}") from None
    try:
        if fh.read(len(MAGIC)) != MAGIC:
            raise InputError(f"{path} is not an asyos checkpoint of this format (format {FORMAT}): rerun without "
                             f"--resume")
        digest = fh.readline(80).strip()
        line = fh.readline(HEADER_LIMIT)
        if not line.endswith(b"\n") or hashlib.sha256(line).hexdigest().encode() != digest:
            raise InputError(f"checkpoint {path} is damaged (its header does not match its checksum)")
        try:
            header = json.loads(line)
        except ValueError:
            raise InputError(f"checkpoint {path} is damaged (its header is not JSON)") from None
        if not isinstance(header, dict) or "format" not in header:
            raise InputError(f"{path} is not an asyos checkpoint")
        return fh, header
    except BaseException:
        fh.close()
        raise


def read_header(path: str) -> dict:
    """The header of the checkpoint at ``path`` (``InputError`` if it is not one, or damaged)."""
    fh, header = _open_checkpoint(path)
    fh.close()
    return header


def _read_state(fh, path: str, header: dict) -> bytes:
    """The state's bytes, after their length and sha256 are checked against the header."""
    expected = header.get("state_bytes")
    if not isinstance(expected, int) or expected < 0:
        raise InputError(f"checkpoint {path} is damaged (no state length in its header)")
    body = fh.read(expected + 1)
    if len(body) != expected:
        raise InputError(f"checkpoint {path} is damaged (its state is {len(body)} bytes, the header says "
                         f"{expected}{': truncated' if len(body) < expected else ''})")
    if hashlib.sha256(body).hexdigest() != header.get("state_sha256"):
        raise InputError(f"checkpoint {path} is damaged (its state does not match its checksum)")
    return body


def check_header(path: str, identity: dict, run_id: Optional[str] = None) -> dict:
    """The header of the checkpoint at ``path``, after checking the whole file against its checksums, and
    that its format, asyos version, run and identity are this run's (``InputError`` naming the first
    difference)."""
    fh, header = _open_checkpoint(path)
    with fh:
        if header["format"] != FORMAT or header.get("asyos") != _version():
            raise InputError(f"checkpoint {path} was written by asyos {header.get('asyos')} (checkpoint format "
                             f"{header['format']}); this is asyos {_version()} (format {FORMAT}): rerun without "
                             f"--resume")
        _read_state(fh, path, header)
    if run_id is not None and header.get("run_id") != run_id:
        raise InputError(f"checkpoint {path} belongs to another run (run {header.get('run_id')}; this directory's "
                         f"is {run_id}): rerun without --resume")
    difference = _first_difference(header.get("identity", {}), _as_json(identity))
    if difference is not None:
        raise InputError(f"checkpoint {path} was written for another problem ({difference}); rerun without --resume")
    return header


def load_state(path: str, externals: Optional[dict] = None):
    """The state saved at ``path`` (checked against its checksum first; ``check_header`` checks the rest)."""
    refs = dict(externals or {})

    class _Unpickler(pickle.Unpickler):
        def persistent_load(self, pid):
            if pid not in refs:
                raise InputError(f"checkpoint {path} refers to {pid!r}, which this run does not have")
            return refs[pid]

    fh, header = _open_checkpoint(path)
    with fh:
        body = _read_state(fh, path, header)
    try:
        return _Unpickler(io.BytesIO(body)).load()
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - a state that passed its checksum but does not load here
        raise InputError(f"checkpoint {path} is damaged ({type(exc).__name__}: {exc})") from None


def _first_difference(saved: dict, current: dict) -> Optional[str]:
    for key in sorted(set(saved) | set(current)):
        if saved.get(key) != current.get(key):
            return f"{key}: {saved.get(key)!r} then, {current.get(key)!r} now"
    return None


def _version() -> str:
    from .results import package_version            # no ImportError when asyos is a namespace import
    return package_version()


def write_atomic(path: str, write: Callable[[io.BufferedWriter], None]) -> None:
    """``write(fh)`` into a temporary file next to ``path``, flushed to disk, then renamed onto
    ``path`` with the permissions a plain ``open`` would give (``asyos.records.results.atomic_file``)."""
    from .results import atomic_file
    with atomic_file(path, "wb") as fh:
        write(fh)
