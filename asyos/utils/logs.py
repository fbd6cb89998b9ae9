"""The CLI's messages on stderr, through the ``logging`` module (logger ``asyos``).

``configure(quiet, verbose)`` is called once by each command (``asyos.run``, ``asyos.convert``,
``asyos.report``, ``predict``):

* ``-q``: warnings and errors only (no progress lines; the summary on stdout is dropped by the
  command itself);
* default: progress lines when stderr is a terminal (``progress_wanted``), warnings always;
* ``-v``: progress lines also when stderr is a file or a pipe (a batch job's log), ``-vv`` debug
  messages too.

Under ``mpiexec`` only rank 0 speaks: the other ranks keep warnings and errors (``rank``).
Library code logs to ``logging.getLogger("asyos.<module>")`` and never configures handlers, so an
application embedding the estimators keeps control of its own logging.
"""
from __future__ import annotations

import logging
import sys

LOGGER = "asyos"
_state = {"progress": False}


class _Format(logging.Formatter):
    def format(self, record):
        text = record.getMessage()
        if record.levelno >= logging.WARNING:
            return f"asyos: {record.levelname.lower()}: {text}"
        return f"asyos: {text}"


def configure(quiet: bool = False, verbose: int = 0, rank: int = 0, stream=None) -> logging.Logger:
    """Route the ``asyos`` logger to ``stream`` (default: stderr at the time of the call)."""
    stream = sys.stderr if stream is None else stream
    logger = logging.getLogger(LOGGER)
    for handler in list(logger.handlers):
        if getattr(handler, "_asyos", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(stream)
    handler._asyos = True
    handler.setFormatter(_Format())
    logger.addHandler(handler)
    logger.propagate = False
    if quiet or rank != 0:
        level = logging.WARNING
    else:
        level = logging.DEBUG if verbose >= 2 else logging.INFO
    logger.setLevel(level)
    interactive = bool(getattr(stream, "isatty", lambda: False)())
    _state["progress"] = not quiet and rank == 0 and (verbose >= 1 or interactive)
    _state["interactive"] = interactive
    return logger


def progress_wanted() -> bool:
    """Whether progress lines are shown (see ``configure``)."""
    return _state["progress"]


def interactive() -> bool:
    """Whether stderr is a terminal (progress may redraw one line there)."""
    return _state.get("interactive", False)
