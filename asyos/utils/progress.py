"""Progress lines on stderr for long work: one reporter for every loop of the CLI.

A ``Progress`` counts what is done (``advance`` / ``update``, or a learner's ``progress()`` dict
given to ``report``) and writes at most one line every ``EVERY_S`` seconds, the first one only
after ``FIRST_S`` seconds (a short run stays silent), through the ``logging`` logger
``asyos.utils.progress`` (``asyos.utils.logs`` routes it to stderr)::

    asyos: os: pass 2 of 3, 61000 of 300000 features (20%), 5310 features/s, ETA 45 s, objective 0.0131, 11 s

Whether lines are written is ``asyos.utils.logs.progress_wanted()`` (``-q`` none; ``-v`` always; by
default only when stderr is a terminal; only rank 0 under ``mpiexec``); a disabled reporter's
``due()`` compares the clock with infinity and nothing else. Plain lines, no terminal redraws and
no progress-bar library: the lines have to read the same in a batch job's log file and when 13
ranks share one stderr, and ``logging`` already gives an embedding application the control.

A learner's loop polls ``checkpoint.poll(kind, capture, progress)`` at consistent points; the
``progress()`` dicts may carry, besides what a stopped run reports (``RunInterrupted.progress``),
entries for the line only, whose names start with ``_``: ``_done``, ``_total`` (``None``:
unknown), ``_pass_left`` (with no total: what is left of the current pass, for "pass ends in N s"),
``_unit`` and ``_objective``. ``progress()`` is called only when a line is written (or a
checkpoint saved), so an objective computed there costs nothing between lines.
``ProgressPoller`` is a poller with the ``Checkpointer``'s interface that only reports (runs
without ``--output``).

Work with no loop to poll (generating or loading the data, a learner's set-up before its first
poll, the final evaluation) is covered by ``phase(what)``, a context whose thread writes
``asyos: loading ...: 7 s`` at the same intervals while no reporter has written a line for longer than
``every`` (so a loop's own lines replace it). Measured before: sequential OS at p = 10^5 was silent
for its 11.6 s of data generation and 7 s of set-up.

``ASYOS_PROGRESS_EVERY=S`` sets both intervals to ``S`` seconds (tests use a small one).
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from typing import Optional

EVERY_S = 5.0           # seconds between two lines
FIRST_S = 2.0           # seconds before the first one: runs shorter than this print nothing
ENV = "ASYOS_PROGRESS_EVERY"

logger = logging.getLogger("asyos.utils.progress")
_last_line = [0.0]      # time.monotonic() of the last progress line, from any reporter (``phase``)


def intervals() -> tuple[float, float]:
    """``(first, every)`` in seconds: ``FIRST_S``, ``EVERY_S``, or both ``$ASYOS_PROGRESS_EVERY``."""
    value = os.environ.get(ENV)
    if value:
        try:
            every = max(0.0, float(value))
            return every, every
        except ValueError:
            pass
    return FIRST_S, EVERY_S


def wanted() -> bool:
    from .logs import progress_wanted
    return progress_wanted()


def _number(x) -> str:
    x = float(x)
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"


def _seconds(s: float) -> str:
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


class Progress:
    """Throttled progress lines for ``what`` (module docstring): ``total`` in ``unit`` when known.
    ``enabled=None``: ``asyos.utils.logs.progress_wanted()``."""

    def __init__(self, what: str = "", total: Optional[float] = None, unit: str = "rows",
                 enabled: Optional[bool] = None, done: float = 0):
        self.enabled = wanted() if enabled is None else bool(enabled)
        self.first, self.every = intervals()
        self.lines = 0
        self.phase(what, total, unit, done)

        self.created = self.start

    def phase(self, what: str, total: Optional[float], unit: str, done: float = 0) -> None:
        """Start counting another piece of work (its own rate and ETA)."""
        self.what, self.total, self.unit = what, total, unit
        self.pass_left = None             # work left in the current pass when the total is not known
        self.done = self._done0 = done
        self.start = time.monotonic()
        self._next = self.start + self.first if self.enabled else math.inf
        self._primed = True

    def polled(self) -> "Progress":
        """Count from a loop's first ``report`` (the work before it, and a resumed run's part, are
        not in the rate): that call only starts the clock."""
        self._primed = False
        self._next = -math.inf if self.enabled else math.inf
        return self

    def due(self) -> bool:
        """Whether a line is due (cheap: the clock against the next line's time)."""
        return time.monotonic() >= self._next

    def poll(self, progress) -> None:
        """A line from the dict ``progress()`` returns (``report``) when one is due; ``progress`` is
        called only then (a loop's poll costs a clock reading between two lines)."""
        if time.monotonic() >= self._next:
            self.report(progress())

    def advance(self, amount: float = 1, **fields) -> None:
        self.done += amount
        if time.monotonic() >= self._next:
            self.line(fields)

    def update(self, done: float, **fields) -> None:
        self.done = done
        if time.monotonic() >= self._next:
            self.line(fields)

    def report(self, state: dict) -> None:
        """A line from a loop's ``progress()`` dict (module docstring)."""
        if "_done" in state:
            self.done = state["_done"]
        if not self._primed:
            self._primed = True
            self._done0, self.start = self.done, time.monotonic()
            self._next = self.start + self.first
            return
        if "_total" in state:
            self.total = state["_total"]
        self.pass_left = state.get("_pass_left")
        if "_unit" in state:
            self.unit = state["_unit"]
        counted = f"{_number(self.done)} of {_number(self.total)}" if self.total else None
        fields = {k: v for k, v in state.items() if not k.startswith("_") and str(v) != counted}
        self.line(fields, state.get("_objective"), counted="_done" in state)

    def line(self, fields: Optional[dict] = None, objective=None, counted: bool = True) -> None:
        """Write one line now (and the next one ``every`` seconds later)."""
        now = time.monotonic()
        self._next = now + self.every if self.enabled else math.inf
        if not self.enabled:
            return
        parts = [f"{k} {v}" for k, v in (fields or {}).items()]
        elapsed = now - self.start
        if counted:
            if self.total:
                parts.append(f"{_number(self.done)} of {_number(self.total)} {self.unit} "
                             f"({100.0 * self.done / self.total:.0f}%)")
            else:
                parts.append(f"{_number(self.done)} {self.unit}")
            rate = (self.done - self._done0) / elapsed if elapsed > 0 else 0.0
            if rate > 0:
                parts.append(f"{rate:.3g} {self.unit}/s" if rate < 100 else f"{rate:.0f} {self.unit}/s")
                if self.total and self.total > self.done:
                    parts.append(f"ETA {_seconds((self.total - self.done) / rate)}")
                elif not self.total and self.pass_left:     # passes until the selection is stable: this one's end
                    left = self.pass_left / rate
                    parts.append(f"pass ends in {left:.1f} s" if left < 10 else f"pass ends in {_seconds(left)}")
        if objective is not None:
            parts.append(f"objective {float(objective):.6g}")
        parts.append(_seconds(now - self.created))
        self.lines += 1
        _last_line[0] = now
        logger.info("%s%s", f"{self.what}: " if self.what else "", ", ".join(parts))


@contextlib.contextmanager
def phase(what: str):
    """While the block runs: ``asyos: <what>: N s`` every ``every`` seconds (the first after ``first``),
    unless a reporter wrote a line within the last ``every`` seconds (module docstring)."""
    if not wanted():
        yield
        return
    first, every = intervals()
    stop, start = threading.Event(), time.monotonic()

    def beat():
        wait = first
        while not stop.wait(wait):
            now = time.monotonic()
            if not 0 <= now - _last_line[0] < every:  # a line stamped ahead (a patched clock) is stale
                _last_line[0] = now
                logger.info("%s: %s", what, _seconds(now - start))
            wait = every

    thread = threading.Thread(target=beat, name="asyos-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


class ProgressPoller:
    """The ``Checkpointer``'s loop-side interface (``take``, ``poll``, ``watching``) for a run that
    saves nothing: ``poll`` only reports progress. ``watching`` is a no-op, so a stop signal
    raises at once, as it does in a run without any poller."""

    resumed_kind = None
    resumed_progress: dict = {}

    def __init__(self, reporter: Progress):
        self.reporter = reporter
        self.polls = 0

    def take(self, kind: str, externals=None):
        return None

    def poll(self, kind: str, capture=None, progress=dict, externals=None) -> None:
        self.polls += 1
        self.reporter.poll(progress)

    def watching(self):
        return contextlib.nullcontext()


def poller(what: str) -> Optional[ProgressPoller]:
    """A ``ProgressPoller`` when progress lines are wanted, else ``None`` (no poll at all)."""
    return ProgressPoller(Progress(what).polled()) if wanted() else None
