"""One run per ``--output`` directory: a lock held for the run's life.

A run (fresh, ``--overwrite`` or ``--resume``) takes ``DIR/.asyos-lock`` before it touches anything in
``DIR``, and holds it until it ends, when it removes the file. The lock is an ``flock`` on that file: the
kernel releases it when the holding process ends, however it ends (a crash, ``kill -9``, a lost node's
rank), so the file a dead run leaves is never a stale lock; it holds the holder's description (pid, host,
command, start time) for the message a second run gets. A run that took the lock checks that the file is
still the one at the path (its last holder may have removed it in between) and tries again if not.
Before, a second run with ``--overwrite`` on a directory a running job wrote to exited 0 and replaced the
first run's results, and two ``--resume DIR`` at once both ran to the end. Under ``mpiexec`` the rank that
writes the outputs holds it.

The lock is advisory and local: on a file system without ``flock`` (some network mounts refuse it) the
run goes on without it and says so in one warning.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
import warnings

from ..errors import InputError

LOCK_FILE = ".asyos-lock"
_HELD: dict = {}           # realpath of a directory -> the open file holding its lock (this process)


def lock_output(directory: str) -> None:
    """Take ``directory``'s lock for this process (a no-op when it already holds it); ``InputError``
    naming the holder when another process does."""
    key = os.path.realpath(directory)
    if key in _HELD:
        return
    import fcntl
    path = os.path.join(directory, LOCK_FILE)
    for _ in range(10):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise InputError(f"cannot create the lock file {path!r}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(fd)
            os.close(fd)
            raise InputError(f"--output {directory!r} is in use by another run ({holder}); wait for it to end, "
                             f"or choose another directory") from None
        except OSError as exc:                      # no flock here (some network file systems)
            os.close(fd)
            warnings.warn(f"--output {directory!r}: cannot lock it ({exc.strerror}); two runs on it at once "
                          f"would not be refused", RuntimeWarning, stacklevel=2)
            return
        try:                                        # still the file at ``path``: not removed by its last
            if os.stat(path).st_ino == os.fstat(fd).st_ino:     # holder between our open and our lock
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    else:
        raise InputError(f"--output {directory!r}: its lock file keeps changing; is another run starting there?")
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
              "command": " ".join(sys.argv)[:300]}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
    _HELD[key] = fd


def release_outputs() -> None:
    """Release every lock this process holds (a run's end; the process's end releases them too)."""
    import fcntl
    while _HELD:
        directory, fd = _HELD.popitem()
        try:
            with contextlib.suppress(OSError):      # removed while held: a run that opens it now retries
                os.unlink(os.path.join(directory, LOCK_FILE))
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def holds(directory: str) -> bool:
    return os.path.realpath(directory) in _HELD


def _describe(fd) -> str:
    try:
        holder = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError, UnicodeDecodeError):
        holder = {}
    if not holder.get("pid"):
        return "its holder did not say who it is"
    return (f"pid {holder['pid']} on {holder.get('host', '?')}, started {holder.get('started', '?')}: "
            f"{holder.get('command', '?')}")
