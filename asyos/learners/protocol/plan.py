"""``AsyOSPlan``: who owns which features and how many each may keep, computed once per run.

Every scheduler (loopback, simulators, replay, each MPI transport) and every rank builds the same
plan from the same settings, so shards, budgets, the global budget's cap and its threshold rank
have one definition. A plan is a pure function of its settings: an MPI rank computes its own
without communication.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ...data.sharding import SHARDING_SCHEMES, default_sharding, shard_columns, split_budget
from ...errors import InputError
from ..checks import check_positive_int
from .threshold import GlobalThreshold

BUDGET_MODES = ("split", "global")
DEFAULT_SLACK = 0.5
CANDIDATES_PER_FEATURE = 2


def check_slack(slack) -> float:
    slack = float(slack)
    if not 0.0 < slack <= 1.0:
        raise InputError(f"slack must be in (0, 1]; got {slack}")
    return slack


def check_worker_count(n_workers, n_features, budget, budget_mode="split"):
    check_positive_int(n_workers, "n_workers")
    if n_workers > n_features:
        raise InputError(f"{n_workers} workers but n_features = {n_features}: every worker needs "
                         f"at least one feature")
    if budget < n_workers and budget_mode == "split":
        raise InputError(f"budget {budget} is smaller than the number of workers ({n_workers}): with "
                         f"--budget-mode split each worker keeps budget/workers features and needs at "
                         f"least one (the global budget has no such limit)")


def default_cap(budget: int, n_workers: int) -> int:
    """The global budget's per-worker cap: ``min(s, ceil(3 s / q), ceil(s/q + 5 sd))``, ``sd =
    sqrt(s (1/q) (1 - 1/q))``: the spread of the number of a selection's ``s`` features that fall in
    one of ``q`` shards when they fall at random. ``3 s / q`` alone is ``s`` at ``q = 2``: each of the
    two workers of ``mpiexec -n 3`` then held ``s`` features where it needs about ``s / 2``, every
    step cost ``O(n s)`` as in one process, and the ``s / 2`` it held beyond its share fitted the noise
    against the other's (KDD'16 regression, p = 20000: 80-110k steps in 4-6 passes, the command 13-15 s
    against 14.4-15 s in one process; with a cap of 75: 80-90k steps in 4-5 passes, 11.8-12.5 s against
    14.5-16.5 s, the same recall and objective). Four spreads instead of five (a cap of 70 there) cost the
    12 simulated workers of ``benchmarks/bench_real_selection.py`` 0.015 of accuracy on arcene at k = 50
    (a cap of 12 instead of 13). The bound is below ``3 s / q`` from ``s / q > 6.25`` on (the default
    problem's 12 workers: 23 instead of 25)."""
    share = budget / n_workers
    spread = math.sqrt(budget * (1.0 / n_workers) * (1.0 - 1.0 / n_workers))
    return min(budget, -(-3 * budget // n_workers), math.ceil(share + 5.0 * spread - 1e-9))


def threshold_rank(budget: int, variant: str) -> int:
    """The rank of the global budget's threshold ``theta``: the ``s``-th largest ``|w|`` for kdd16,
    whose union is cut to ``s``; the ``2 s``-th for exchange, whose workers collect candidates for
    the final exchange run. With ``s``, the mission command's default problem lost 2-3 of its 100
    true features before the finish (5 seeds under ``mpiexec -n 13``: 100-102 candidates, recall
    0.97-0.98 against 0.99 sequentially)."""
    return CANDIDATES_PER_FEATURE * budget if variant == "exchange" else budget


def keeps_threshold(budget_mode, n_workers) -> bool:
    """Whether the global budget's threshold is kept: with one worker (cap = s) it is the split
    budget, and the bookkeeping would only cost time."""
    return budget_mode == "global" and n_workers > 1


def worker_budgets(budget, n_workers, budget_mode="split", cap=None) -> list:
    """``split``: ``s/q`` each (KDD'16); ``global``: each worker may hold up to ``cap``."""
    if budget_mode not in BUDGET_MODES:
        raise InputError(f"unknown budget mode {budget_mode!r}; choose one of: {', '.join(BUDGET_MODES)}")
    if budget_mode == "split":
        if cap is not None:
            raise InputError("cap applies to budget_mode='global'")
        return split_budget(budget, n_workers)
    cap = default_cap(budget, n_workers) if cap is None else check_positive_int(cap, "cap")
    if cap > budget:
        raise InputError(f"cap {cap} is larger than the budget ({budget})")
    return [cap] * n_workers


@dataclass(frozen=True)
class AsyOSPlan:
    """The settings every part of an Asy-OS run derives from.

    ``budgets[k]``: the most features worker ``k`` keeps; ``cap`` (> 0 only when the global
    budget's threshold is kept) sizes the weight sections of pushes, replies and the shared window;
    ``threshold_rank``: the rank of ``theta`` (``others`` values travel with every pull; 0 without
    a threshold); ``cut``: the union may exceed the budget and the finish must bring it down.
    """

    n_features: int
    n_workers: int
    budget: int
    budget_mode: str
    variant: str
    sharding: str
    budgets: tuple
    cap: int
    threshold_rank: int
    slack: Optional[float]

    @classmethod
    def build(cls, n_features, budget, n_workers, *, budget_mode="split", cap=None, variant="exchange",
              sharding=None, slack=None) -> "AsyOSPlan":
        """Validated: bad settings raise ``InputError`` before any work."""
        check_worker_count(n_workers, n_features, budget, budget_mode)
        sharding = default_sharding(variant) if sharding is None else sharding
        if sharding not in SHARDING_SCHEMES:
            raise InputError(f"unknown sharding {sharding!r}; choose one of: {', '.join(SHARDING_SCHEMES)}")
        budgets = worker_budgets(budget, n_workers, budget_mode, cap)
        if slack is not None and budget_mode != "global":
            raise InputError("slack applies to budget_mode='global'")
        keeps = keeps_threshold(budget_mode, n_workers)
        return cls(int(n_features), int(n_workers), int(budget), budget_mode, variant, sharding, tuple(budgets),
                   budgets[0] if keeps else 0, threshold_rank(budget, variant) if keeps else 0,
                   None if slack is None else check_slack(slack))

    @property
    def keeps_threshold(self) -> bool:
        return self.cap > 0

    @property
    def cut(self) -> bool:
        return self.budget_mode == "global"

    @property
    def others(self) -> int:
        """How many of the other workers' top ``|w|`` a pull carries (0: no global threshold)."""
        return self.threshold_rank

    @property
    def resolved_slack(self) -> Optional[float]:
        """The slack the workers drop with (global budget only)."""
        return (DEFAULT_SLACK if self.slack is None else self.slack) if self.budget_mode == "global" else None

    def columns(self, worker: int):
        """Sorted global column indices of worker ``worker`` (0-based)."""
        return shard_columns(self.n_features, self.n_workers, worker, self.sharding)

    def new_threshold(self):
        """The global budget's bookkeeping for a central node, or ``None``."""
        if not self.keeps_threshold:
            return None
        return GlobalThreshold(self.threshold_rank, self.n_workers, self.cap)
