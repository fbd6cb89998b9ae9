"""Training objective and error of the model held in ``u_C``, recorded as a run goes.

``ObjectiveTrace`` is a ``Central`` monitor: after every applied push it records, once at least
``every`` worker steps have passed since the last row, the elapsed time, the version, the worker
steps applied, the objective ``L(u_C)`` and the training error (RMSE, or the misclassification rate
for +-1 labels) of the model as it stands (no refit). The same class traces sequential OS, the
simulator and the MPI central rank, so their curves compare directly; ``first_reaching`` gives the
time and the steps to reach an error threshold (KDD'16 Sec. 5.3 measures speedup that way).

**The automatic trace** (``every="auto"``: what every ``--output`` run records without
``--trace-every``, for ``run.png``, ``asyos.report``) takes rows by wall time instead of steps: one
row at most every ``AUTO_INTERVAL_S`` at first, and never sooner than ``AUTO_COST_FACTOR`` times what
the last row cost (a row evaluates the loss over the ``n`` samples), so tracing takes at most about
``1 / AUTO_COST_FACTOR`` of the run whatever ``n`` and the speed of a step. When ``AUTO_MAX_ROWS`` rows
are held, every other one is dropped and the interval doubled, so a run of any length keeps at
most that many, evenly spread in time (a snapshot per row, so dropping rows loses no totals). The
first ``AUTO_FREE_S`` of rows are taken at the interval whatever they cost, so a fit of 0.1 s still
gets tens of rows. ``spent_s`` in the trace is what its rows took. Measured (2 shared cores, loaded):
sequential OS at p = 20000 (n = 1715), 0.071 s of 9.18 s of fit (0.8%); Asy-OS on dexter under
``mpiexec -n 5``, 0.064 s of the central rank's 8.17 s (0.8%); the whole runs timed with and without
the trace (``benchmarks/bench_auto_trace.py``) differ by less than the machine's noise. Between rows a step costs
one read of the clock. A row only reads ``u_C``: the fit is the untraced one, bit for bit
(``tests/test_report.py``).

``StreamTrace`` does the same for the sample-stream learners, between chunks of rows: rows seen,
time, the mistakes made so far before learning each sample (classification; the learner's own
counter, so free), the support size, and the features that entered and left the support since the
previous row (as ``selection_log.csv`` rows, at most ``MAX_STREAM_EVENTS``).
"""
from __future__ import annotations

import time

import numpy as np

FIELDS = ("time_s", "version", "steps", "objective", "train_error")
STREAM_FIELDS = ("time_s", "rows", "pass", "mistakes", "support", "entered", "left")
AUTO = "auto"
AUTO_INTERVAL_S = 0.002         # the first wall time between two rows of an automatic trace (then doubled)
AUTO_MAX_ROWS = 500             # rows kept by an automatic trace (then every other one dropped)
AUTO_COST_FACTOR = 50           # a row waits at least this many times what the last one cost
AUTO_FREE_S = 0.005             # ... once the rows have taken this long (a fit of 0.1 s gets its rows)
MAX_STREAM_EVENTS = 50000       # features entering / leaving recorded by a StreamTrace


class _ElapsedClock:
    """Pickling of a trace: the clock's origin is this process's, so a checkpoint keeps the time
    elapsed instead (``start`` is rebuilt against the new process's clock on load)."""

    def __getstate__(self):
        state = dict(self.__dict__)
        state["start"] = self.clock() - self.start
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.start = self.clock() - state["start"]


class _Pacing:
    """When the next row of an automatic trace is due (module docstring), in seconds since the start."""

    def __init__(self):
        self.interval = AUTO_INTERVAL_S
        self.next_at = 0.0
        self.spent_s = 0.0          # the time the rows took (the trace's own cost, in ``as_dict``)

    def after(self, now: float, cost: float, rows: list) -> None:
        """A row was recorded at ``now`` (elapsed) and took ``cost`` seconds; thin ``rows`` when full."""
        self.spent_s += cost
        if len(rows) >= AUTO_MAX_ROWS:
            del rows[1::2]
            self.interval *= 2
        free = self.spent_s <= AUTO_FREE_S                  # a short fit: its first rows at the interval
        self.next_at = now + (self.interval if free else max(self.interval, AUTO_COST_FACTOR * cost))


class ObjectiveTrace(_ElapsedClock):
    def __init__(self, every, loss, y, clock=time.perf_counter):
        self.auto = every == AUTO
        self.every = AUTO if self.auto else int(every)
        self.loss, self.y, self.clock = loss, y, clock
        self.start = clock()
        self.rows = []
        self._next = 0
        self._pacing = _Pacing() if self.auto else None

    def __setstate__(self, state):
        state.setdefault("auto", False)                 # a checkpoint written before the automatic trace
        state.setdefault("_pacing", None)
        super().__setstate__(state)

    def __call__(self, central):
        if self.due(central.steps):
            self.record(central)

    def due(self, steps: int) -> bool:
        """Whether a row is due once ``steps`` worker steps have been applied."""
        if self.auto:
            return self.clock() - self.start >= self._pacing.next_at
        return steps >= self._next

    def steps_until_due(self, steps: int):
        """Steps until a row is due after ``steps`` (``None`` when rows are paced by the clock)."""
        return None if self.auto else self._next - steps

    def record(self, central):
        """One row now (also call at the start and at the end of a run)."""
        began = self.clock()
        self.rows.append((began - self.start, central.version, central.steps,
                          self.loss.value(self.y, central.u), self.loss.error(self.y, central.u)))
        if self.auto:
            self._pacing.after(began - self.start, self.clock() - began, self.rows)
        self._next = central.steps + (0 if self.auto else self.every)

    def as_dict(self) -> dict:
        columns = list(zip(*self.rows)) if self.rows else [[] for _ in FIELDS]
        out = {"every": self.every, **{name: list(col) for name, col in zip(FIELDS, columns)}}
        if self.auto:
            out["spent_s"] = self._pacing.spent_s
        return out


class StreamTrace(_ElapsedClock):
    """The automatic trace of a sample-stream learner (module docstring). ``after_chunk(learner,
    pass_index)`` between chunks records a row when one is due; ``finish`` records the last."""

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.start = clock()
        self.rows = []
        self.events = []                # (worker, rows seen, pass, feature, "enter" | "leave", weight)
        self.events_dropped = 0
        self._support = {}              # feature: weight, at the last row
        self._entered = self._left = 0
        self._pacing = _Pacing()

    def after_chunk(self, learner, pass_index: int) -> None:
        if self.clock() - self.start >= self._pacing.next_at:
            self.record(learner, pass_index)

    def record(self, learner, pass_index: int) -> None:
        began = self.clock()
        state = getattr(learner, "_state", None)
        if state is None:
            return
        kept = learner._kept(state)
        if kept is None:
            weights = learner.weights()
            support = np.flatnonzero(weights)
            values = weights[support]
        else:
            index, values = kept
            nonzero = values != 0
            support, values = index[nonzero], values[nonzero]
        seen = int(state.counts[0])
        now = dict(zip(support.tolist(), values.tolist()))      # sets: 0.16 -> 0.065 ms a row (B-ARDA, B = 100)
        entered = sorted(now.keys() - self._support.keys())
        left = sorted(self._support.keys() - now.keys())
        self._entered += len(entered)
        self._left += len(left)
        if len(left) + len(entered) > MAX_STREAM_EVENTS - len(self.events):
            self.events_dropped += len(left) + len(entered)
        else:
            self.events.extend((0, seen, pass_index, j, "leave", 0.0) for j in left)
            self.events.extend((0, seen, pass_index, j, "enter", now[j]) for j in entered)
        self._support = now
        mistakes = int(state.counts[-1]) if _classifies(learner) else None
        self.rows.append((began - self.start, seen, pass_index, mistakes, len(now), self._entered,
                          self._left))
        self._pacing.after(began - self.start, self.clock() - began, self.rows)

    def finish(self, learner, pass_index: int) -> dict:
        """The last row, then the trace as a dict (``entered`` / ``left``: running totals)."""
        self.record(learner, pass_index)
        columns = list(zip(*self.rows)) if self.rows else [[] for _ in STREAM_FIELDS]
        out = {"every": AUTO, "kind": "stream", **{name: list(col) for name, col in zip(STREAM_FIELDS, columns)}}
        out["events_dropped"] = self.events_dropped
        out["spent_s"] = self._pacing.spent_s
        return out

    def log(self) -> list:
        """The features that entered and left, as ``selection_log_`` rows (``SelectionLog.FIELDS``)."""
        from .substitution.asy_worker import SelectionLog
        return [dict(zip(SelectionLog.FIELDS, row)) for row in self.events]


def _classifies(learner) -> bool:
    """Whether the learner counts mistakes (``online_accuracy_`` is defined for classification only)."""
    try:
        learner.online_accuracy_
    except AttributeError:
        return False
    return True


def first_reaching(trace: dict, threshold: float, key: str = "train_error"):
    """``(time_s, steps)`` of the first row with ``trace[key] <= threshold``, else ``None``."""
    values = np.asarray(trace[key], dtype=float)
    hit = np.flatnonzero(values <= threshold)
    if hit.size == 0:
        return None
    return float(trace["time_s"][hit[0]]), int(trace["steps"][hit[0]])
