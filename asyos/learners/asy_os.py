"""Asy-OS in one process: the staleness simulator behind the estimator face.

``AsyncOnlineSubstitution`` splits the features into ``n_workers`` disjoint shards, gives each
worker its budget (``global``, the default: up to a cap, under a threshold shared through the
central node; ``split``: ``s/q`` as KDD'16, split as evenly as possible; ``asyos.protocol.plan``),
and runs KDD'16 Alg. 2-3 in the simulator with bounded staleness (``asyos.protocol.simulator``).
The MPI engine (``asyos.distributed``) runs the very same ``Worker`` and ``Central`` objects
across processes, and finishes the same way (``asyos.protocol.finish``).
"""
from __future__ import annotations

import time

import numpy as np

from ..protocol.finish import Candidates, conclude
from ..protocol.plan import AsyOSPlan
from ..protocol.simulator import check_simulation_args, simulate
from ..truncation import keep_top_k
from .online_substitution import OnlineSubstitution, local_lipschitz, make_worker, quiet_float_errors


def build_workers(X, y, loss, plan, options, seed):
    """The shards of ``plan`` (scaled as ``options`` say), the common ``L_F`` (maximum over the
    shards' estimates) and one worker per shard with its budget; worker 0 owns the intercept."""
    columns = [plan.columns(w) for w in range(plan.n_workers)]
    shards = [options.shard(X[:, cols], cols) for cols in columns]
    orders = [options.visit_order(sh, y, loss) for sh in shards]
    lipschitz = max(local_lipschitz(sh, plan.budget, loss, seed, w, order)
                    for w, (sh, order) in enumerate(zip(shards, orders)))
    workers = [make_worker(sh, y, loss, b, lipschitz, options, worker_id=w, slack=plan.slack,
                           n_workers=plan.n_workers, total_budget=plan.budget, order=order)
               for w, (sh, b, order) in enumerate(zip(shards, plan.budgets, orders))]
    return workers, lipschitz


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
        plan = AsyOSPlan.build(X.shape[1], self.budget, self.n_workers, budget_mode=self.budget_mode, cap=self.cap,
                               variant=options.variant, sharding=self.sharding, slack=self.slack)
        tau = self.n_workers if self.max_staleness is None else self.max_staleness
        check_simulation_args(tau, self.policy, self.schedule)
        start = time.perf_counter()
        workers, lipschitz = build_workers(X, y, loss, plan, options, self.random_state)
        central, trace = self._central(X.shape[0], loss, y)
        threshold = plan.new_threshold()
        report = simulate(workers, central, tau, self.policy, self.schedule, seed=self.random_state,
                          threshold=threshold)
        self._finish_trace(trace, central)
        candidates = Candidates.from_workers(workers)
        with quiet_float_errors():
            outcome = conclude(candidates, central.u, y, loss, plan, options, self.random_state,
                               workers[0].state.step_size, lipschitz, refit=False)
        done = outcome.finished
        self.objective_candidates_ = outcome.objective_candidates
        self.objective_selection_ = outcome.objective_selection
        self.n_candidates_ = candidates.size
        self.finish_ = done.how
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
