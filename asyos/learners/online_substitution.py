"""Online Substitution (OS), KDD'16 Alg. 1: the sequential learner.

Features arrive one at a time, in ``passes`` scans over the columns; at most ``budget`` are kept
(memory ``O(n * budget)``). Each arrival is one step of ``SubstitutionState`` (see
``asyos.learners.substitution`` for the update rule and its equation numbers), taken by one
``Worker`` that owns every column and whose gradient point is its own ``u = X_S w_S``: the
in-process loopback of the Asy-OS roles, so sequential OS and Asy-OS share one code path.

Step size: ``eta = 0.5 / L_F`` (Theorem 1) with ``L_F`` estimated from the data as described in
``asyos.learners.step_size``; pass ``step_size`` to override.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..data.shard import FeatureShard
from ..distributed.roles import Central, Worker
from ..errors import ConvergenceWarning, DivergenceError, InputError
from ..trace import ObjectiveTrace
from .base import BudgetedSelector, check_positive_float, check_positive_int
from .step_size import restricted_lipschitz, step_size_from_lipschitz

_LIPSCHITZ_STREAM = 0x4C46


@dataclass(frozen=True)
class SubstitutionOptions:
    """Settings shared by every OS worker (sequential, simulated or on MPI)."""

    passes: int = 2
    step_size: Optional[float] = None       # None: 0.5 / L_F estimated from the data
    step_divisor: float = 1.0               # the paper's m >= 1 (Alg. 1 line 6)
    decrease_check: bool = True             # Alg. 1 lines 12-16
    decrease_constant: float = 1.0          # the paper's c in [0, 1]
    log_selection: bool = True

    def validated(self):
        check_positive_int(self.passes, "passes")
        check_positive_float(self.step_size, "step_size", allow_none=True)
        if float(self.step_divisor) < 1.0:
            raise InputError(f"step_divisor (the paper's m) must be >= 1; got {self.step_divisor}")
        if not 0.0 <= float(self.decrease_constant) <= 1.0:
            raise InputError(f"decrease_constant (the paper's c) must be in [0, 1]; got {self.decrease_constant}")
        return self


def local_lipschitz(shard, total_budget, loss, seed, shard_index=0) -> float:
    """This shard's estimate of ``L_F`` on blocks of ``total_budget + 1`` columns."""
    return restricted_lipschitz(shard, total_budget + 1, loss.curvature,
                                seed=[int(seed), _LIPSCHITZ_STREAM, int(shard_index)])


def make_worker(shard, y, loss, local_budget, lipschitz, options: SubstitutionOptions, worker_id=0, slack=None):
    """A ``Worker`` with the step size the options and ``L_F`` give (``slack``: the global budget's)."""
    step = options.step_size if options.step_size is not None else step_size_from_lipschitz(lipschitz)
    return Worker(shard, y, loss, local_budget, step, passes=options.passes,
                  step_divisor=options.step_divisor, decrease_check=options.decrease_check,
                  decrease_constant=options.decrease_constant,
                  lipschitz=lipschitz if lipschitz > 0 else None, worker_id=worker_id,
                  log_selection=options.log_selection, slack=slack)


def run_loopback(worker, central):
    """Sequential OS: the worker's gradient point is the central ``u``, which only it changes."""
    with quiet_float_errors():
        while True:
            push = worker.propose(central.u, central.version)
            if push is None:
                return
            central.apply(push.delta, push.version_read)
            worker.commit()


def check_objective(loss, y, u, step_size, lipschitz) -> float:
    """The final objective ``L(u)``: a ``DivergenceError`` when it is not finite, a
    ``ConvergenceWarning`` when it is worse than the empty model's ``L(0)``."""
    value = loss.value(y, u)
    advice = (f"the step size {step_size:.4g} is too large for these data (L_F estimated {lipschitz:.4g}); "
              f"pass a smaller --step-size")
    if not np.isfinite(value):
        raise DivergenceError(f"the objective is not finite at the end of the run: {advice}")
    empty = loss.value(y, np.zeros_like(u))
    if value > empty:
        warnings.warn(f"the final objective {value:.4g} is worse than the empty model's {empty:.4g}: {advice}",
                      ConvergenceWarning, stacklevel=2)
    return value


def quiet_float_errors():
    """Overflow in a diverging run is detected by the kernel (``DivergenceError``); numpy's own
    warnings would only bury that message."""
    return np.errstate(over="ignore", invalid="ignore")


class OnlineSubstitution(BudgetedSelector):
    """Online Substitution feature selection under ``||w||_0 <= budget`` (KDD'16 Alg. 1).

    Parameters
    ----------
    budget : int
        Number of features to keep (``s``).
    loss : {"squared", "squared_hinge", "logistic"}
    passes : int
        Scans over the features (the paper finds 2-3 enough).
    step_size : float or None
        ``eta``; ``None`` uses ``0.5 / L_F`` estimated from the data.
    step_divisor : float
        The paper's ``m >= 1``: retained features step by ``eta / m``.
    decrease_check : bool
        Keep a substitution only if the objective decreases enough (Alg. 1 line 12).
    decrease_constant : float
        The paper's ``c`` in ``[0, 1]``.
    refit : bool
        Refit the loss on the selected features after selection (the paper evaluates so).
    random_state : int
        Seeds the blocks sampled to estimate ``L_F``.
    trace_every : int
        When > 0, record the training objective and error every ``trace_every`` steps in ``trace_``
        (``asyos.trace``); 0 records nothing.

    Attributes
    ----------
    coef_ : ndarray (n_features,)   refit coefficients (or the raw OS weights if ``refit=False``)
    raw_coef_ : ndarray             the OS weights before the refit
    support_ : ndarray              selected feature indices, sorted
    selection_log_ : list of dict   every entry/exit: worker, step, pass, feature, event, weight
    step_size_, lipschitz_, n_steps_, fit_time_
    """

    def __init__(self, budget=10, loss="squared", passes=2, step_size=None, step_divisor=1.0,
                 decrease_check=True, decrease_constant=1.0, refit=True, random_state=0, trace_every=0):
        self.budget = budget
        self.loss = loss
        self.passes = passes
        self.step_size = step_size
        self.step_divisor = step_divisor
        self.decrease_check = decrease_check
        self.decrease_constant = decrease_constant
        self.refit = refit
        self.random_state = random_state
        self.trace_every = trace_every

    def _central(self, n, loss, y):
        """The central node of the run, with an ``ObjectiveTrace`` when ``trace_every`` > 0."""
        check_positive_int(self.trace_every, "trace_every", minimum=0)
        trace = ObjectiveTrace(self.trace_every, loss, y) if self.trace_every else None
        central = Central(n, monitor=trace)
        if trace is not None:
            trace.record(central)
        return central, trace

    def _finish_trace(self, trace, central):
        if trace is not None:
            trace.record(central)
        self.trace_ = trace.as_dict() if trace is not None else None

    def _options(self):
        return SubstitutionOptions(self.passes, self.step_size, self.step_divisor, bool(self.decrease_check),
                                   self.decrease_constant).validated()

    def fit(self, X, y):
        X, y, loss = self._validate_data(X, y)
        options = self._options()
        start = time.perf_counter()
        shard = FeatureShard(X)
        lipschitz = local_lipschitz(shard, self.budget, loss, self.random_state)
        worker = make_worker(shard, y, loss, self.budget, lipschitz, options)
        central, trace = self._central(shard.n_samples, loss, y)
        run_loopback(worker, central)
        self._finish_trace(trace, central)
        with quiet_float_errors():
            self.objective_selection_ = check_objective(loss, y, central.u, worker.state.step_size, lipschitz)
        support, weights = worker.selection()
        self._set_selection(X, y, loss, support, weights)
        self.lipschitz_ = lipschitz
        self.step_size_ = worker.state.step_size
        self.n_steps_ = worker.steps
        self.selection_log_ = worker.log.as_dicts()
        self.fit_time_ = time.perf_counter() - start
        return self
