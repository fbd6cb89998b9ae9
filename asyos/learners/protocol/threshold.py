"""The global budget's threshold (``--budget-mode global``): the weights each worker reported and
the top ``|w|`` of the others that travels with every pull.
"""
from __future__ import annotations

from typing import Optional

import numpy as np


class GlobalThreshold:
    """The global budget's bookkeeping: on the central node (messages, simulator, replay), or over
    the shared window, one per worker (shared memory).

    It keeps the ``|w|`` each worker last reported (a pool of ``q`` slots of ``cap`` values). A
    worker is sent the ``budget`` largest values reported by the *other* workers
    (``others_top``) and computes its threshold itself, from those and its own current weights
    (``worker_threshold``): the ``budget``-th largest of the two. Its own weights are thus never
    stale in its threshold; only the others' are, exactly as stale as the ``u_C`` they come with.
    ``value`` is the threshold over everything reported (for the record); ``age`` how many versions
    of ``u_C`` old the other workers' reports were when each worker reported (mean over updates,
    max), when ``update`` is given versions. Each update and each ``others_top`` costs ``O(q cap)``.

    A worker drops only below ``slack * theta`` (``Worker``; default 0.5). Dropping exactly at
    ``theta`` makes a loop with delayed feedback: each worker sees the others' weights one or two
    round trips late, so all drop at once, the union falls below ``s``, all refill to their caps,
    and so on (the pipelined protocol replayed at q = 12, ``benchmarks/bench_global_budget.py``:
    the union swung between 44 and 192 features and recall was 0.48, against 66-87 features and
    0.87 with slack 0.5). The slack is a hysteresis band that damps it; the union stays below
    ``q cap`` and is cut to ``s`` at the end.
    """

    def __init__(self, budget: int, n_workers: int, cap: int):
        self.budget = int(budget)
        self.n_workers = int(n_workers)
        self.cap = int(cap)
        self.pool = np.zeros((self.n_workers, self.cap))   # row k: worker k's |w|, 0-padded
        self._scratch = np.empty_like(self.pool)
        self.updates = 0
        self.reported_at = [0] * self.n_workers            # the version of each row
        self._reported_sum, self._age_sum, self._age_max = 0, 0.0, 0

    def update(self, worker: int, weights, version: Optional[int] = None) -> None:
        """Worker ``worker`` now retains ``weights`` (signed or not; at most ``cap`` of them), as of
        ``version`` of ``u_C``."""
        k = len(weights)
        if k > self.cap:
            raise ValueError(f"worker {worker} reported {k} weights, more than the cap {self.cap}")
        write_abs(self.pool[worker], weights)
        self.updates += 1
        if version is not None and self.n_workers > 1:
            self._reported_sum += version - self.reported_at[worker]
            self.reported_at[worker] = version
            self._age_sum += version - (self._reported_sum - version) / (self.n_workers - 1)
            self._age_max = max(self._age_max, version - min(self.reported_at))

    @property
    def age(self) -> dict:
        """Age of the other workers' reports at each update: ``mean`` and ``max``, in versions."""
        return {"mean": self._age_sum / max(1, self.updates), "max": int(self._age_max)}

    def others_top(self, worker: int, out: Optional[np.ndarray] = None, pool: Optional[np.ndarray] = None):
        """The ``budget`` largest ``|w|`` the other workers reported (in no order, 0-padded), from
        ``pool`` (a ``(q, cap)`` snapshot or shared window; default the current one)."""
        pool = self.pool if pool is None else pool
        self._scratch[:] = pool
        self._scratch[worker] = 0.0
        others = self._scratch.reshape(-1)
        out = np.empty(self.budget) if out is None else out
        k = others.size - self.budget
        if k > 0:
            others.partition(k)
            out[:] = others[k:]
        else:
            out[:others.size] = others
            out[others.size:] = 0.0
        return out

    @property
    def value(self) -> float:
        """The ``budget``-th largest ``|w|`` over everything reported (0 while fewer are)."""
        return kth_largest(self.pool.reshape(-1), self.budget)


def write_abs(row: np.ndarray, weights) -> None:
    """``|weights|`` into the front of ``row``, the rest zeroed."""
    k = len(weights)
    np.abs(weights, out=row[:k])
    row[k:] = 0.0


def kth_largest(values, k: int) -> float:
    """The ``k``-th largest of ``values`` (0 when there are fewer than ``k``)."""
    values = np.asarray(values)
    i = values.size - int(k)
    return float(np.partition(values, i)[i]) if i >= 0 else 0.0


def worker_threshold(own_weights, others_top, budget: int) -> float:
    """A worker's global-budget threshold: the ``budget``-th largest ``|w|`` over its own current
    weights and the others' top ``budget`` (the top ``budget`` of the union is within those)."""
    return kth_largest(np.concatenate((np.abs(own_weights), others_top)), budget)
