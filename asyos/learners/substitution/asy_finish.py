"""The end of an Asy-OS run, the same for every scheduler: the workers' candidates, the finish to
at most ``s`` features, the objectives and the refit.

The union of the workers' features at the end of the asynchronous phase (``Candidates``) is
finished (``finish``) by

* exchange variant, more candidates than the budget: one sequential exchange run (OS itself,
  ``passes="auto"``) over the candidates' columns, which the central node holds;
* otherwise (kdd16): the union cut to the ``s`` largest ``|w|`` under the global budget, as is
  under the split one.

Why the exchange round: 12 workers each see a twelfth of the features and the others' weights a
round trip late, so the union at the end of the asynchronous phase is a set of good candidates
rather than a good selection (the mission command on its default problem, before it: recall
0.79-0.83 after the cut against 0.96-0.99 for sequential OS; with it, and the rest of the exchange
variant, 0.98-1.00, equal to sequential OS on each of 5 seeds, ``benchmarks/bench_mpi.py``).
The candidates are at most ``q * cap`` columns (the global budget's cap is at most ``ceil(3 s / q)``,
so at most about ``3 s``), and OS over them costs a few passes of ``3 s`` steps of ``O(n s)``: the
central node's memory stays ``O(n s)``.

With one worker the union never exceeds the budget, so nothing is re-run and one worker with
``tau = 0`` is sequential OS bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...data.shard import FeatureShard, to_units
from .workers import check_objective, local_lipschitz, make_worker
from ..refit import refit_selection
from ...truncation import keep_top_k
from ..protocol.central import Central
from ..protocol.loopback import run_loopback


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


@dataclass
class Outcome:
    """What a run reports: the finished selection (``finish``), the loss at the final ``u_C``
    (every worker's features) and of the finished selection before the refit, and the refit
    model (``coef``, ``intercept``; the finished one when there is no refit)."""

    finished: Finish
    objective_candidates: float
    objective_selection: float
    coef: np.ndarray
    intercept: float


def conclude(candidates: Candidates, u_central, y, loss, plan, options, seed, step_size, lipschitz, *,
             refit=True, raw_columns=None) -> Outcome:
    """From the end of the asynchronous phase to the reported model: ``check_objective`` at the
    final ``u_C``, ``finish``, the loss of the finished selection, then the refit on the selected
    columns in the data's units (``raw_columns``, rows like ``candidates.columns``; default the
    candidates' own columns, which are those when nothing was scaled)."""
    objective_candidates = check_objective(loss, y, u_central, step_size, lipschitz)
    done = finish(candidates, y, loss, plan.budget, options, seed, cut=plan.cut)
    objective_selection = objective_candidates if done.u is None else loss.value(y, done.u)
    intercept = done.intercept if options.fit_intercept else None
    if refit:
        columns = (candidates.columns if raw_columns is None else raw_columns)[done.positions]
        coef, intercept = refit_selection(columns.T, y, loss, done.coef, intercept, ridge=options.ridge)
    else:
        coef, intercept = done.coef, intercept or 0.0
    return Outcome(done, objective_candidates, objective_selection, coef, float(intercept))
