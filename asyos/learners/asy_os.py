"""Asy-OS in one process: the staleness simulator behind the estimator face.

``AsyncOnlineSubstitution`` splits the features into ``n_workers`` disjoint shards, gives each
worker its budget (``global``, the default: up to a cap, under a threshold shared through the
central node; ``split``: ``s/q`` as KDD'16, split as evenly as possible), and runs KDD'16 Alg. 2-3
in the simulator with bounded staleness. The MPI engine (``asyos.distributed.driver``) runs the
very same ``Worker`` and ``Central`` objects across processes, and finishes the same way
(``Candidates``, ``finish``): the union of the workers' features, then

* exchange variant, more candidates than the budget: one sequential exchange run (OS itself,
  ``passes="auto"``) over the candidates' columns, which the central node holds;
* otherwise (kdd16): the union cut to the ``s`` largest ``|w|`` under the global budget, as is
  under the split one.

Why the exchange round: 12 workers each see a twelfth of the features and the others' weights a
round trip late, so the union at the end of the asynchronous phase is a set of good candidates
rather than a good selection (the mission command on its default problem, before it: recall
0.79-0.83 after the cut against 0.96-0.99 for sequential OS; with it, and the rest of the exchange
variant, 0.98-1.00, equal to sequential OS on each of 5 seeds, ``benchmarks/bench_mpi.py``).
The candidates are at most ``q * cap`` columns (the global budget's cap is ``ceil(3 s / q)``, so
about ``3 s``), and OS over them costs a few passes of ``3 s`` steps of ``O(n s)``: the central
node's memory stays ``O(n s)``.

With one worker the union never exceeds the budget, so nothing is re-run and one worker with
``tau = 0`` is sequential OS bit for bit.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..data.shard import FeatureShard, to_units
from ..data.sharding import SHARDING_SCHEMES, default_sharding, shard_columns, split_budget
from ..distributed.roles import Central, GlobalThreshold
from ..distributed.simulator import check_simulation_args, simulate
from ..truncation import keep_top_k
from ..errors import InputError
from .base import check_positive_int
from .online_substitution import (OnlineSubstitution, check_objective, local_lipschitz, make_worker,
                                  quiet_float_errors, run_loopback)


def check_worker_count(n_workers, n_features, budget, budget_mode="split"):
    check_positive_int(n_workers, "n_workers")
    if n_workers > n_features:
        raise InputError(f"{n_workers} workers but only {n_features} features: every worker needs "
                         f"at least one feature")
    if budget < n_workers and budget_mode == "split":
        raise InputError(f"budget {budget} is smaller than the number of workers ({n_workers}): with "
                         f"--budget-mode split each worker keeps budget/workers features and needs at "
                         f"least one (the global budget has no such limit)")


BUDGET_MODES = ("split", "global")


def default_cap(budget: int, n_workers: int) -> int:
    """The global budget's per-worker cap: ``min(s, ceil(3 s / q))``."""
    return min(budget, -(-3 * budget // n_workers))


CANDIDATES_PER_FEATURE = 2


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


def build_workers(X, y, loss, budget, n_workers, options, seed, sharding=None, budgets=None, slack=None):
    """Shards (``sharding``, default the variant's; scaled as ``options`` say), the common ``L_F``
    (maximum over the shards' estimates) and one worker per shard (budgets ``s/q`` unless
    ``budgets`` says otherwise; ``slack``: the global budget's; worker 0 owns the intercept)."""
    p = X.shape[1]
    sharding = default_sharding(options.variant) if sharding is None else sharding
    columns = [shard_columns(p, n_workers, w, sharding) for w in range(n_workers)]
    shards = [options.shard(X[:, cols], cols) for cols in columns]
    orders = [options.visit_order(sh, y, loss) for sh in shards]
    lipschitz = max(local_lipschitz(sh, budget, loss, seed, w, order)
                    for w, (sh, order) in enumerate(zip(shards, orders)))
    budgets = split_budget(budget, n_workers) if budgets is None else budgets
    workers = [make_worker(sh, y, loss, b, lipschitz, options, worker_id=w, slack=slack, n_workers=n_workers,
                           total_budget=budget, order=order)
               for w, (sh, b, order) in enumerate(zip(shards, budgets, orders))]
    return workers, lipschitz


@dataclass
class Candidates:
    """Every worker's retained features at the end of the asynchronous phase, sorted by feature:
    their weights on the scaled columns, the scaled training columns (rows), and the scaling of
    each (``FeatureShard.offsets``, ``scales``); ``intercept`` is the owner's ``b``."""

    features: np.ndarray
    weights: np.ndarray
    columns: np.ndarray
    offsets: np.ndarray
    scales: np.ndarray
    intercept: float = 0.0
    order: np.ndarray = None         # the workers' parts, concatenated, put in feature order

    @classmethod
    def from_parts(cls, parts, n_samples):
        """From ``(features, weights, columns, offsets, scales, intercept)`` per worker."""
        features, weights, columns, offsets, scales, intercepts = zip(*parts)
        order = np.argsort(np.concatenate(features), kind="stable")
        return cls(np.concatenate(features)[order].astype(np.intp), np.concatenate(weights)[order],
                   cls.gather(columns, order, n_samples), np.concatenate(offsets)[order],
                   np.concatenate(scales)[order], float(sum(intercepts)), order)

    @staticmethod
    def gather(rows_per_worker, order, n_samples):
        """Per-worker blocks of rows (one per feature) stacked in feature order."""
        return np.concatenate(rows_per_worker)[order] if order.size else np.zeros((0, n_samples))

    @classmethod
    def from_workers(cls, workers):
        parts = []
        for w in workers:
            local = w.state.retained
            order = np.argsort(w.shard.columns[local], kind="stable")
            local = local[order]
            parts.append((w.shard.columns[local], w.state.weights[order], w.selected_columns(),
                          w.shard.offsets[local], w.shard.scales[local], w.intercept))
        return cls.from_parts(parts, workers[0].n)

    @property
    def size(self) -> int:
        return int(self.features.size)

    def in_units(self):
        """``(coef, intercept)`` of the candidates' model (the final ``u_C``) in the data's units."""
        return to_units(self.weights, self.intercept, self.offsets, self.scales)


@dataclass
class Finish:
    """The selection after ``finish``: its positions among the candidates, features, coefficients
    and intercept in the data's units, the training ``u`` of that model (before any refit;
    ``None``: the asynchronous phase's ``u_C``), and how it was reached (``"exchange"``, ``"cut"``
    or ``"union"``)."""

    positions: np.ndarray
    features: np.ndarray
    coef: np.ndarray
    intercept: float
    u: object
    how: str


def finish(candidates: Candidates, y, loss, budget, options, seed, cut: bool) -> Finish:
    """From the candidates to at most ``budget`` features (module docstring). ``cut``: the global
    budget (the union may exceed the budget)."""
    c = candidates
    keep = np.arange(c.size)
    weights, intercept, u, how = c.weights, c.intercept, None, "union"
    if c.size > budget and options.variant == "exchange":
        shard = FeatureShard(c.columns.T)                     # already scaled
        order = options.visit_order(shard, y, loss)
        worker = make_worker(shard, y, loss, budget, local_lipschitz(shard, budget, loss, seed, order=order),
                             options, owns_intercept=options.fit_intercept, order=order)
        central = Central(shard.n_samples)
        run_loopback(worker, central)
        local = worker.state.retained
        order = np.argsort(local, kind="stable")
        keep, weights, intercept, u, how = local[order], worker.state.weights[order], worker.intercept, \
            central.u.copy(), "exchange"
    elif c.size > budget and cut:
        keep = keep_top_k(np.abs(c.weights), budget)
        weights, how = c.weights[keep], "cut"
        u = weights @ c.columns[keep] + intercept
    coef, intercept = to_units(weights, intercept, c.offsets[keep], c.scales[keep])
    return Finish(keep, c.features[keep], coef, intercept, u, how)


def gather_selection(workers, budget=None):
    """Union of the workers' selections, sorted by feature index; with ``budget`` (the global
    budget) cut to the ``budget`` largest ``|w|`` (ties to the lower feature index). Weights on
    the workers' (possibly scaled) columns."""
    parts = [w.selection() for w in workers]
    support = np.concatenate([s for s, _ in parts]) if parts else np.empty(0, dtype=np.intp)
    weights = np.concatenate([v for _, v in parts]) if parts else np.empty(0)
    order = np.argsort(support, kind="stable")
    support, weights = support[order], weights[order]
    if budget is not None and support.size > budget:
        keep = keep_top_k(np.abs(weights), budget)
        support, weights = support[keep], weights[keep]
    return support, weights


class AsyncOnlineSubstitution(OnlineSubstitution):
    """Asy-OS (KDD'16 Alg. 2-3) simulated with ``n_workers`` workers and bounded staleness.

    Extra parameters (see ``OnlineSubstitution`` for the others)
    ----------------------------------------------------------------
    n_workers : int
    max_staleness : int or None
        Bound ``tau``; ``None`` means ``n_workers`` (the paper's simulation).
    policy : {"max", "uniform", "fresh"}
        Which snapshot a worker reads within the bound (see ``asyos.distributed.simulator``).
    schedule : {"round-robin", "random"}
    sharding : {"contiguous", "strided", "hashed"} or None
        ``None``: strided for exchange, contiguous for kdd16 (``data.sharding.default_sharding``).
    budget_mode : {"global", "split"}
        ``split``: each worker keeps ``s/q`` features (KDD'16). ``global`` (default; the recall of
        ``split`` falls as ``q`` grows, see ``benchmarks/bench_global_budget*.py``): each worker may keep up
        to ``cap`` (default ``min(s, ceil(3 s/q))``); the central node records every worker's
        retained ``|w|`` from its pushes and sends with every pull the top ``r`` of the other
        workers'; a worker drops its features below ``slack * theta``, ``theta`` being the r-th
        largest ``|w|`` over those and its own current weights (``r = threshold_rank``: ``s`` for
        kdd16, ``2 s`` for exchange); at the end the union is finished to ``s`` (``finish``: an
        exchange run over it, or for kdd16 the cut to the top ``s``), then refit.
    cap : int or None
    slack : float in (0, 1] or None
        Global budget: the hysteresis that keeps the workers' delayed drops from oscillating
        (default 0.5; see ``asyos.distributed.roles.GlobalThreshold``).
    decrease_check : bool
        Alg. 3 omits it; on by default (as in OS), evaluated at the worker's snapshot.

    Extra attributes: ``staleness_`` (mean, max, p95, histogram), ``n_pushes_``, ``finish_`` (how the
    selection was reached from the workers' candidates: ``exchange``, ``cut`` or ``union``, see
    ``finish``); global budget:
    ``threshold_`` (the final ``theta`` over all reported weights), ``slack_``, ``n_dropped_``
    (features dropped below ``slack * theta``), ``threshold_age_`` (how many versions old the other
    workers' weights were when each worker reported), ``n_candidates_`` (every worker's features at
    the end, before the finish), ``objective_candidates_`` (the loss at the final ``u_C``, every
    worker's features; ``objective_selection_`` is the loss of the finished selection before the
    refit).
    """

    def __init__(self, budget=10, n_workers=4, max_staleness=None, policy="max", schedule="round-robin",
                 sharding=None, loss="auto", passes="auto", variant="exchange", fit_intercept=None,
                 scale=None, step_size=None, step_divisor=1.0, decrease_check=True, decrease_constant=None,
                 refit=True, random_state=0, trace_every=0, budget_mode="global", cap=None, slack=None):
        super().__init__(budget=budget, loss=loss, passes=passes, variant=variant, fit_intercept=fit_intercept,
                         scale=scale, step_size=step_size, step_divisor=step_divisor,
                         decrease_check=decrease_check, decrease_constant=decrease_constant, refit=refit,
                         random_state=random_state, trace_every=trace_every)
        self.n_workers = n_workers
        self.max_staleness = max_staleness
        self.policy = policy
        self.schedule = schedule
        self.sharding = sharding
        self.budget_mode = budget_mode
        self.cap = cap
        self.slack = slack

    def fit(self, X, y):
        X, y, loss = self._validate_data(X, y)
        options = self._options()
        check_worker_count(self.n_workers, X.shape[1], self.budget, self.budget_mode)
        tau = self.n_workers if self.max_staleness is None else self.max_staleness
        check_simulation_args(tau, self.policy, self.schedule)
        sharding = default_sharding(options.variant) if self.sharding is None else self.sharding
        if sharding not in SHARDING_SCHEMES:
            raise InputError(f"unknown sharding {sharding!r}; choose one of: {', '.join(SHARDING_SCHEMES)}")
        budgets = worker_budgets(self.budget, self.n_workers, self.budget_mode, self.cap)
        start = time.perf_counter()
        if self.slack is not None and self.budget_mode != "global":
            raise InputError("slack applies to budget_mode='global'")
        workers, lipschitz = build_workers(X, y, loss, self.budget, self.n_workers, options,
                                           self.random_state, sharding, budgets, self.slack)
        central, trace = self._central(X.shape[0], loss, y)
        threshold = (GlobalThreshold(threshold_rank(self.budget, options.variant), self.n_workers, budgets[0])
                     if keeps_threshold(self.budget_mode, self.n_workers) else None)
        report = simulate(workers, central, tau, self.policy, self.schedule, seed=self.random_state,
                          threshold=threshold)
        self._finish_trace(trace, central)
        with quiet_float_errors():
            self.objective_candidates_ = check_objective(loss, y, central.u, workers[0].state.step_size, lipschitz)
        candidates = Candidates.from_workers(workers)
        with quiet_float_errors():
            done = finish(candidates, y, loss, self.budget, options, self.random_state, cut=threshold is not None)
        self.n_candidates_ = candidates.size
        self.finish_ = done.how
        self.objective_selection_ = self.objective_candidates_ if done.u is None else loss.value(y, done.u)
        self.threshold_ = threshold.value if threshold is not None else None
        self.n_dropped_ = sum(w.dropped for w in workers)
        self.slack_ = workers[0].slack if threshold is not None else None
        self.threshold_age_ = threshold.age if threshold is not None else None
        self._set_selection(X, y, loss, done.features, done.coef, done.intercept if options.fit_intercept else None)
        self.lipschitz_ = lipschitz
        self.step_size_ = workers[0].state.step_size
        self.n_steps_ = report.steps
        self.n_passes_ = max(w.passes_run for w in workers)
        self.n_pushes_ = central.accepted
        self.staleness_ = report.staleness
        self.selection_log_ = [row for w in workers for row in w.log.as_dicts()]
        self.fit_time_ = time.perf_counter() - start
        return self
