"""Asy-OS in one process: the staleness simulator behind the estimator face.

``AsyncOnlineSubstitution`` splits the features into ``n_workers`` disjoint shards, gives each
worker its budget (``global``, the default: up to a cap, under a threshold shared through the
central node; ``split``: ``s/q`` as KDD'16, split as evenly as possible; ``asyos.learners.protocol.plan``),
and runs KDD'16 Alg. 2-3 in the simulator with bounded staleness (``asyos.learners.protocol.simulator``).
The MPI engine (``asyos.distributed``) runs the very same ``Worker`` and ``Central`` objects
across processes, and finishes the same way (``asyos.learners.substitution.asy_finish``).
"""
from __future__ import annotations

import dataclasses
import json
import time

import numpy as np

from .asy_finish import Candidates, conclude
from ..protocol.plan import AsyOSPlan
from ...data.columnar import is_column_matrix
from ...errors import InputError
from ..protocol.replay import DEFAULT_COSTS, DEFAULT_JITTER, Costs, Machine, SimulatedClock, replay
from ..protocol.simulator import check_simulation_args, simulate
from ...truncation import keep_top_k
from ..checks import check_positive_int
from .online_substitution import OnlineSubstitution
from .workers import _nothing, local_lipschitz, make_worker, quiet_float_errors
from ..params import StrOptions, count, unit
from ..protocol.plan import BUDGET_MODES
from ..protocol.simulator import POLICIES, SCHEDULES
from ..protocol.transports import TRANSPORT_NAMES as TRANSPORTS

CHECKPOINT_KIND = "asy-os-simulation"


def plan_shards(X, y, loss, plan, options):
    """``(shards, gains)``: the shards of ``plan`` (scaled as ``options`` say) and their features'
    marginal gains (the exchange variant's visit order; ``None`` for kdd16)."""
    columns = [plan.columns(w) for w in range(plan.n_workers)]
    # out of core (a ColumnMatrix) each shard reads its columns on demand; in memory it takes its slice
    shards = [options.shard(X if is_column_matrix(X) else X[:, cols], cols) for cols in columns]
    return shards, [options.gains(sh, y, loss) for sh in shards]


def build_workers(X, y, loss, plan, options, seed, shards=None):
    """The shards of ``plan`` (``shards``: ``plan_shards``'s, when already made), the common ``L_F``
    (maximum over the shards' estimates) and one worker per shard with its budget; worker 0 owns the
    intercept."""
    shards, gains = plan_shards(X, y, loss, plan, options) if shards is None else shards
    orders = [options.visit_order(sh, y, loss, g) for sh, g in zip(shards, gains)]
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

    Parameters
    ----------
    budget, loss, passes, variant, fit_intercept, scale, step_size, step_divisor
        As in :class:`OnlineSubstitution`, with the same defaults.
    decrease_constant, refit, ridge, random_state, trace_every
        As in :class:`OnlineSubstitution`, with the same defaults.
    n_workers : int, default=4
        Simulated workers ``q``, each owning a shard of the features.
    max_staleness : int or None, default=None
        Bound ``tau``; ``None`` means ``n_workers`` (the paper's simulation).
    policy : {"max", "uniform", "fresh"}, default="max"
        Which snapshot a worker reads within the bound: the oldest allowed, one drawn uniformly, or
        the current one (``asyos.learners.protocol.simulator.choose_version``).
    schedule : {"round-robin", "random"}, default="round-robin"
        Which worker takes the next step.
    sharding : {"contiguous", "strided", "blocked", "hashed"} or None, default=None
        ``None``: strided for exchange, contiguous for kdd16 (``data.sharding.default_sharding``).
    budget_mode : {"global", "split"}, default="global"
        ``split``: each worker keeps ``s/q`` features (KDD'16). ``global`` (default; the recall of
        ``split`` falls as ``q`` grows, see ``benchmarks/bench_global_budget*.py``): each worker may keep up
        to ``cap`` (default ``plan.default_cap``: ``min(s, ceil(3 s/q), ceil(s/q + 5 sd))``); the central
        node records every worker's retained ``|w|`` from its pushes and sends with every pull the top
        ``r`` of the other workers'; a worker drops its features below ``slack * theta``, ``theta`` being the r-th
        largest ``|w|`` over those and its own current weights (``r = threshold_rank``: ``s`` for
        kdd16, ``2 s`` for exchange); at the end the union is finished to ``s`` (``finish``: an
        exchange run over it, or for kdd16 the cut to the top ``s``), then refit.
    cap : int or None, default=None
        Global budget: the most features one worker keeps (``None``: ``plan.default_cap`` above).
    slack : float in (0, 1] or None, default=None
        Global budget: the hysteresis that keeps the workers' delayed drops from oscillating
        (``None``: 0.5; see ``asyos.learners.protocol.threshold.GlobalThreshold``).
    decrease_check : bool, default=True
        Alg. 3 omits it; on by default (as in OS), evaluated at the worker's snapshot.
    transport : {None, "shared-memory", "messages", "node-aggregated"}, default=None
        ``None`` (default): the bounded-staleness simulation above (KDD'16 Sec. 5.3). A transport:
        a discrete-event simulation of what ``mpiexec`` runs with it (``asyos.learners.protocol.replay``),
        the same worker and central objects moved in simulated time; ``max_staleness`` is then
        the engine's bound (``None``: unbounded, measured only), and ``policy`` and ``schedule``
        do not apply.
    push_mode : {"pipelined", "each-step"}, default="pipelined"
        ``transport="messages"``: as ``--push-mode`` under MPI.
    max_batch : int, default=16
        ``transport="messages"``: as ``--max-batch`` under MPI.
    nodes : int, default=1
        ``transport="node-aggregated"``: how many nodes the workers are spread over (round-robin,
        as MPICH's virtual nodes).
    costs : Costs, dict, JSON file name or None, default=None
        The simulated costs (step, messages, central service; ``asyos.learners.protocol.replay.Costs``);
        ``None``: ``DEFAULT_COSTS``, measured on the development machine.
    cores : int or None, default=None
        The cores the simulated ranks share (``None``: one each).

    Attributes
    ----------
    coef_, intercept_, raw_coef_, raw_intercept_, support_, loss_, ridge_, ridge_scores_
        As in :class:`OnlineSubstitution`.
    step_size_, lipschitz_, fit_time_, trace_
        As in :class:`OnlineSubstitution` (``lipschitz_``: the largest of the shards' estimates).
    selection_log_ : list of dict
        Every worker's entries and exits.
    n_steps_ : int
        Worker steps the central node applied.
    n_passes_ : int
        The most passes any worker made.
    n_pushes_ : int
        Pushes the central node accepted.
    refused_ : int
        Pushes refused as too stale (counted, not applied).
    staleness_ : dict
        ``mean``, ``median``, ``p95``, ``p99``, ``max`` and ``histogram`` of the steps' staleness.
    push_staleness_ : dict or None
        Node-aggregated: the central node's, per node push.
    simulated_time_, central_utilization_ : float
        With a transport: the simulated duration (seconds) and the central node's busy share.
    finish_ : str
        How the selection was reached from the workers' candidates: ``exchange``, ``cut`` or
        ``union`` (``asyos.learners.substitution.asy_finish``).
    threshold_ : float or None
        Global budget: the final ``theta`` over all reported weights.
    slack_ : float or None
        Global budget: the slack the workers dropped with.
    n_dropped_ : int
        Features dropped below ``slack * theta``.
    threshold_age_ : dict or None
        Global budget: ``mean`` and ``max`` of how many versions old the other workers' weights were
        when each worker reported.
    n_candidates_ : int
        Every worker's features at the end, before the finish.
    objective_candidates_ : float
        The loss at the final ``u_C``, every worker's features.
    objective_selection_ : float
        The loss of the finished selection before the refit.

    Examples
    --------
    >>> from asyos import AsyncOnlineSubstitution, make_regression
    >>> data = make_regression(n_features=50, n_informative=5, n_samples=200, seed=0)
    >>> model = AsyncOnlineSubstitution(budget=5, n_workers=2).fit(data.X, data.y)
    >>> model.support_.tolist()
    [7, 13, 24, 27, 49]
    >>> bool(model.score(data.X_test, data.y_test) > 0.95)
    True
    >>> model.staleness_["max"]
    1
    """

    _parameter_constraints = {
        **OnlineSubstitution._parameter_constraints, "n_workers": [count(1)], "max_staleness": [count(0), None],
        "policy": [StrOptions(set(POLICIES))], "schedule": [StrOptions(set(SCHEDULES))],
        "budget_mode": [StrOptions(set(BUDGET_MODES))], "cap": [count(1), None], "slack": [unit("right"), None],
        "transport": [StrOptions({"shared-memory", "messages", "node-aggregated"}), None],
        "push_mode": [StrOptions({"pipelined", "each-step"})], "max_batch": [count(1)], "nodes": [count(1)],
        "cores": [count(1), None], "sharding": "no_validation", "costs": "no_validation"}

    def __init__(self, budget=10, n_workers=4, max_staleness=None, policy="max", schedule="round-robin",
                 sharding=None, loss="auto", passes="auto", variant="exchange", fit_intercept=None,
                 scale=None, step_size=None, step_divisor=1.0, decrease_check=True, decrease_constant=None,
                 refit=True, random_state=0, trace_every=0, budget_mode="global", cap=None, slack=None,
                 transport=None, push_mode="pipelined", max_batch=16, nodes=1, costs=None, cores=None, ridge="auto"):
        super().__init__(budget=budget, loss=loss, passes=passes, variant=variant, fit_intercept=fit_intercept,
                         scale=scale, step_size=step_size, step_divisor=step_divisor,
                         decrease_check=decrease_check, decrease_constant=decrease_constant, refit=refit,
                         random_state=random_state, trace_every=trace_every, ridge=ridge)
        self.n_workers = n_workers
        self.max_staleness = max_staleness
        self.policy = policy
        self.schedule = schedule
        self.sharding = sharding
        self.budget_mode = budget_mode
        self.cap = cap
        self.slack = slack
        self.transport = transport
        self.push_mode = push_mode
        self.max_batch = max_batch
        self.nodes = nodes
        self.costs = costs
        self.cores = cores

    def _worker_count(self, n_features) -> int:
        """``n_workers``, or one worker a feature when there are fewer features (with a warning, as a budget
        above the features keeps them all)."""
        if self.n_workers > n_features:
            import warnings
            warnings.warn(f"n_workers={self.n_workers} is greater than n_features={n_features}: {n_features} "
                          f"workers, one feature each", UserWarning, stacklevel=3)
            return int(n_features)
        return int(self.n_workers)

    def fit(self, X, y, checkpoint=None):
        """Select ``budget`` features with ``n_workers`` simulated workers. ``checkpoint`` (an
        ``asyos.records.checkpoint.Checkpointer``) saves the bounded-staleness simulation between events
        and continues a saved one, bit for bit; the event simulation of a ``transport`` is not
        saved (a stop request ends it at once)."""
        X, y, loss = self._fit_data(X, y)
        options = self._options()
        self.n_workers_ = n_workers = self._worker_count(X.shape[1])
        plan = AsyOSPlan.build(X.shape[1], self.budget_, n_workers, budget_mode=self.budget_mode, cap=self.cap,
                               variant=options.variant, sharding=self.sharding, slack=self.slack)
        if self.transport is None:
            tau = n_workers if self.max_staleness is None else self.max_staleness
            check_simulation_args(tau, self.policy, self.schedule)
        else:
            mode = self._event_mode()
        start = time.perf_counter()
        saved = None
        if self.transport is None and checkpoint is not None and checkpoint.resumed_kind is not None:
            shards = {f"shard{w}": options.shard(X if is_column_matrix(X) else X[:, plan.columns(w)], plan.columns(w))
                      for w in range(plan.n_workers)}
            saved = checkpoint.take(CHECKPOINT_KIND, shards)
        scores = None
        if saved is None:
            shards = plan_shards(X, y, loss, plan, options)
            options, scores = self._resolve_ridge(X, y, loss, options, [
                (plan.columns(w), g) for w, g in enumerate(shards[1])])
            workers, lipschitz = build_workers(X, y, loss, plan, options, self.random_state, shards)
            central, trace = self._central(X.shape[0], loss, y)
            threshold = plan.new_threshold()
        else:
            sim, lipschitz = saved["simulation"], saved["lipschitz"]
            options, scores = options.with_ridge(saved["ridge"]), saved["ridge_scores"]
            workers, central, threshold, trace = sim.workers, sim.central, sim.threshold, sim.central.monitor
        if self.transport is None:
            shards = {f"shard{w}": worker.shard for w, worker in enumerate(workers)}
            between = None if checkpoint is None else (
                lambda simulation: checkpoint.poll(CHECKPOINT_KIND, lambda: {
                    "simulation": simulation, "lipschitz": lipschitz, "ridge": options.ridge, "ridge_scores": scores},
                                                   lambda: progress(simulation), shards))

            def progress(simulation):       # called only when a progress line or a checkpoint is due
                with quiet_float_errors():
                    return {**simulation.progress(), "_objective": loss.value(y, simulation.central.u)}
            with checkpoint.watching() if between is not None else _nothing():
                report = simulate(workers, central, tau, self.policy, self.schedule, seed=self.random_state,
                                  threshold=threshold, between=between,
                                  resume=saved["simulation"] if saved is not None else None)
        else:
            if mode in ("pipelined", "each-step"):      # the central node refuses; else the workers do
                central.max_staleness = self.max_staleness
            costs = self._costs()
            machine = Machine(cores=self.cores, quantum_s=costs.quantum_s, jitter=DEFAULT_JITTER)
            report = replay(workers, central, costs, SimulatedClock(), mode, self.max_batch, threshold,
                            machine=machine, seed=self.random_state,
                            max_staleness=self.max_staleness, nodes=self.nodes)
            self.simulated_time_ = report.time_s
            self.central_utilization_ = report.central_utilization
        self.refused_ = central.refused
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
        self._set_selection(X, y, loss, done.features, done.coef, done.intercept if options.fit_intercept else None,
                            ridge=options.ridge)
        self.ridge_, self.ridge_scores_ = options.ridge, scores
        self.lipschitz_ = lipschitz
        self.step_size_ = workers[0].state.step_size
        self.n_steps_ = central.steps
        self.n_passes_ = max(w.passes_run for w in workers)
        self.n_pushes_ = central.accepted
        self.staleness_ = report.staleness
        self.push_staleness_ = central.push_staleness
        self.selection_log_ = [row for w in workers for row in w.log.as_dicts()]
        self.fit_time_ = time.perf_counter() - start
        return self

    def _event_mode(self) -> str:
        """The ``replay`` mode of ``transport`` (and ``push_mode`` for messages), validated."""
        if self.transport not in TRANSPORTS:
            raise InputError(f"unknown transport {self.transport!r}; choose one of: {', '.join(TRANSPORTS)} "
                             f"(or None: the bounded-staleness simulation)")
        if self.transport == "messages":
            if self.push_mode not in ("pipelined", "each-step"):
                raise InputError(f"push_mode must be pipelined or each-step; got {self.push_mode!r}")
            if self.push_mode == "pipelined" and self.max_staleness is not None:
                raise InputError("max_staleness is enforced step by step: use it with push_mode='each-step'")
            check_positive_int(self.max_batch, "max_batch", minimum=0)
            return self.push_mode
        check_positive_int(self.nodes, "nodes")
        if self.nodes > 1 and self.transport != "node-aggregated":
            raise InputError("nodes applies to transport='node-aggregated'")
        if self.max_staleness is not None:
            check_positive_int(self.max_staleness, "max_staleness", minimum=0)
        if self.cores is not None:
            check_positive_int(self.cores, "cores")
        return self.transport

    def _costs(self) -> Costs:
        """``costs`` (a ``Costs``, a dict of its fields, or a JSON file of them), else the defaults."""
        if self.costs is None:
            return DEFAULT_COSTS
        if isinstance(self.costs, Costs):
            return self.costs
        values = self.costs
        if isinstance(values, str):
            try:
                with open(values) as fh:
                    values = json.load(fh)
            except (OSError, ValueError) as exc:
                raise InputError(f"costs file {self.costs}: {exc}") from None
        fields = set(Costs.__dataclass_fields__)
        unknown = set(values) - fields
        if unknown or not isinstance(values, dict):
            raise InputError(f"costs: unknown fields {sorted(unknown)}; expected some of {sorted(fields)}")
        return dataclasses.replace(DEFAULT_COSTS, **{k: float(v) for k, v in values.items()})
