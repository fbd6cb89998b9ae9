"""Training objective and error of the model held in ``u_C``, recorded as a run goes.

``ObjectiveTrace`` is a ``Central`` monitor: after every applied push it records, once at least
``every`` worker steps have passed since the last row, the elapsed time, the version, the worker
steps applied, the objective ``L(u_C)`` and the training error (RMSE, or the misclassification rate
for +-1 labels) of the model as it stands (no refit). The same class traces sequential OS, the
simulator and the MPI central rank, so their curves compare directly; ``first_reaching`` gives the
time and the steps to reach an error threshold (KDD'16 Sec. 5.3 measures speedup that way).
"""
from __future__ import annotations

import time

import numpy as np

FIELDS = ("time_s", "version", "steps", "objective", "train_error")


class ObjectiveTrace:
    def __init__(self, every: int, loss, y, clock=time.perf_counter):
        self.every, self.loss, self.y, self.clock = int(every), loss, y, clock
        self.start = clock()
        self.rows = []
        self._next = 0

    def __getstate__(self):
        """The clock's origin is this process's: a checkpoint keeps the time elapsed instead."""
        state = dict(self.__dict__)
        state["start"] = self.clock() - self.start
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.start = self.clock() - state["start"]

    def __call__(self, central):
        if self.due(central.steps):
            self.record(central)

    def due(self, steps: int) -> bool:
        """Whether a row is due once ``steps`` worker steps have been applied."""
        return steps >= self._next

    def record(self, central):
        """One row now (also call at the start and at the end of a run)."""
        self.rows.append((self.clock() - self.start, central.version, central.steps,
                          self.loss.value(self.y, central.u), self.loss.error(self.y, central.u)))
        self._next = central.steps + self.every

    def as_dict(self) -> dict:
        columns = list(zip(*self.rows)) if self.rows else [[] for _ in FIELDS]
        return {"every": self.every, **{name: list(col) for name, col in zip(FIELDS, columns)}}


def first_reaching(trace: dict, threshold: float, key: str = "train_error"):
    """``(time_s, steps)`` of the first row with ``trace[key] <= threshold``, else ``None``."""
    values = np.asarray(trace[key], dtype=float)
    hit = np.flatnonzero(values <= threshold)
    if hit.size == 0:
        return None
    return float(trace["time_s"][hit[0]]), int(trace["steps"][hit[0]])
