"""Online Substitution (OS), KDD'16 Alg. 1: the sequential learner.

Features arrive one at a time, in passes over the columns; at most ``budget`` are kept (memory
``O(n * budget)``). Each arrival is one step of ``SubstitutionState`` (see
``asyos.learners.substitution.substitution`` for the update rules and their equation numbers), taken by one
``Worker`` that owns every column and whose gradient point is its own ``u = X_S w_S + b``: the
in-process loopback of the Asy-OS protocol (``asyos.protocol.loopback``), so sequential OS and Asy-OS share one code path.

Two variants. ``"kdd16"`` is Alg. 1 literally: no intercept, the columns as given, the features
in file order, KDD'16's step and substitution rule, a fixed number of passes. ``"exchange"`` (the
default) is what the real data sets asked for (``benchmarks/bench_real_selection.py``):

* an unpenalised intercept, stepped by Newton's method (``Loss.intercept_step``);
* every column centred and scaled to unit variance when it arrives (sparse columns stay sparse,
  centred where they are used; ``asyos.data.shard``), so that one ``eta`` suits every feature;
* the exchange rule (``asyos.learners.substitution.substitution``): a newcomer's Newton weight, and a
  substitution scored by the loss it saves against the loss the leaver cost;
* features visited by decreasing marginal gain (``asyos.learners.substitution.screening``);
* ``passes="auto"``: passes until one makes no entry and no substitution (2 to 10).

Coefficients and ``predict`` are in the data's own units either way.

Step size: ``eta = 0.5 / L_F`` (Theorem 1) with ``L_F`` estimated from the (scaled) data as
described in ``asyos.learners.substitution.step_size``; pass ``step_size`` to override.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from ...data.column_shard import ColumnShard
from ...data.columnar import is_column_matrix
from ...data.shard import FeatureShard
from ...errors import ConvergenceWarning, DivergenceError, InputError
from ...protocol.central import Central
from ...protocol.loopback import run_loopback
from ...protocol.worker import Worker
from ...trace import ObjectiveTrace
from ..base import BudgetedSelector, check_positive_float, check_positive_int
from .screening import screening_order
from .step_size import coupling, restricted_lipschitz, step_size_from_lipschitz
from .substitution import VARIANTS
from ..params import BOOLEAN, BUDGET, PASSES, SEED, Interval, Real, StrOptions, count, positive, unit

_LIPSCHITZ_STREAM = 0x4C46
CHECKPOINT_KIND = "online-substitution"
KDD16_PASSES = 3          # "auto" under the kdd16 variant: the passes the KDD'16 figures were reproduced with


@dataclass(frozen=True)
class SubstitutionOptions:
    """Settings shared by every OS worker (sequential, simulated or on MPI). ``None`` takes the
    variant's default: ``fit_intercept`` and ``scale`` on for ``exchange``, off for ``kdd16``;
    ``decrease_constant`` 1 (``kdd16`` only: ``exchange`` compares the losses themselves)."""

    passes: Union[int, str] = "auto"
    step_size: Optional[float] = None       # None: 0.5 / L_F estimated from the data
    step_divisor: float = 1.0               # the paper's m >= 1 (Alg. 1 line 6)
    decrease_check: bool = True             # Alg. 1 lines 12-16 (exchange: the loss must fall)
    decrease_constant: Optional[float] = None   # the paper's c in [0, 1]
    log_selection: bool = True
    variant: str = "exchange"
    fit_intercept: Optional[bool] = None
    scale: Optional[bool] = None

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise InputError(f"unknown variant {self.variant!r}; choose one of: {', '.join(VARIANTS)}")
        kdd16 = self.variant == "kdd16"
        if self.fit_intercept is None:
            object.__setattr__(self, "fit_intercept", not kdd16)
        if self.scale is None:
            object.__setattr__(self, "scale", not kdd16)
        if self.decrease_constant is None:
            object.__setattr__(self, "decrease_constant", 1.0)
        elif not kdd16:
            raise InputError("decrease_constant is KDD'16's c (variant='kdd16'); the exchange variant keeps a "
                             "substitution only if the loss falls")

    @property
    def worker_passes(self):
        """What a ``Worker`` takes: a number, or ``"auto"`` (kdd16: ``KDD16_PASSES``)."""
        if self.passes == "auto":
            return KDD16_PASSES if self.variant == "kdd16" else "auto"
        return self.passes

    def validated(self):
        if self.passes != "auto":
            check_positive_int(self.passes, "passes")
        check_positive_float(self.step_size, "step_size", allow_none=True)
        if float(self.step_divisor) < 1.0:
            raise InputError(f"step_divisor (the paper's m) must be >= 1; got {self.step_divisor}")
        if not 0.0 <= float(self.decrease_constant) <= 1.0:
            raise InputError(f"decrease_constant (the paper's c) must be in [0, 1]; got {self.decrease_constant}")
        return self

    def visit_order(self, shard, y, loss):
        """The order a worker offers its features in: by decreasing marginal gain (exchange,
        ``asyos.learners.substitution.screening``), or ``None``, the file's (kdd16)."""
        if self.variant != "exchange":
            return None
        return screening_order(shard, np.asarray(y, dtype=float), loss, self.fit_intercept)

    def shard(self, X, columns=None, hold=False):
        """The shard of ``X``'s columns a worker learns on, scaled as the options say (centred
        only with an intercept to absorb the offsets): a ``FeatureShard`` of an array, a
        ``ColumnShard`` of a ``ColumnMatrix`` (columns read on demand, or read once and held in
        the file's dtype with ``hold``; ``asyos.data.column_shard``)."""
        if is_column_matrix(X):
            return ColumnShard(X, columns, standardize=self.scale, center=self.fit_intercept, hold=hold)
        return FeatureShard(X, columns, standardize=self.scale, center=self.fit_intercept)


def local_lipschitz(shard, total_budget, loss, seed, shard_index=0, order=None) -> float:
    """This shard's estimate of ``L_F`` on blocks of ``total_budget + 1`` columns (``order``: the
    visit order, which ranks the columns for the blocks; ``step_size.restricted_lipschitz``)."""
    return restricted_lipschitz(shard, total_budget + 1, loss.curvature,
                                seed=[int(seed), _LIPSCHITZ_STREAM, int(shard_index)], ranking=order)


def make_worker(shard, y, loss, local_budget, lipschitz, options: SubstitutionOptions, worker_id=0, slack=None,
                owns_intercept=None, n_workers=1, total_budget=None, order=None):
    """A ``Worker`` with the step size the options and ``L_F`` give (``slack``: the global budget's).
    The intercept, when the options fit one, is owned by worker 0 unless ``owns_intercept`` says;
    one of ``n_workers`` > 1 moves by the share ``entry_scale`` gives (exchange); ``order``: the
    visit order (default ``options.visit_order``)."""
    step = options.step_size if options.step_size is not None else step_size_from_lipschitz(lipschitz)
    if owns_intercept is None:
        owns_intercept = options.fit_intercept and worker_id == 0
    total_budget = local_budget if total_budget is None else total_budget
    if order is None:
        order = options.visit_order(shard, y, loss)
    return Worker(shard, y, loss, local_budget, step, passes=options.worker_passes,
                  step_divisor=options.step_divisor, decrease_check=options.decrease_check,
                  decrease_constant=options.decrease_constant,
                  lipschitz=lipschitz if lipschitz > 0 else None, worker_id=worker_id,
                  log_selection=options.log_selection, slack=slack, variant=options.variant,
                  order=order, owns_intercept=owns_intercept, n_workers=n_workers,
                  entry_scale=entry_scale(shard, lipschitz, loss, total_budget, n_workers)
                  if options.variant == "exchange" else 1.0)


def entry_scale(shard, lipschitz, loss, total_budget, n_workers) -> float:
    """The share of its Newton weight a feature enters with, and of line 6's step the retained
    features take (``asyos.learners.substitution.substitution``): 1 for one worker; under Asy-OS
    ``1 / (1 + (q - 1) rho)``, ``rho`` the columns' correlation implied by ``L_F``
    (``step_size.coupling``). ``q`` workers moving at once from the same stale state move ``u_C``
    like one Jacobi step over their columns, whose curvature is ``1 + (q - 1) rho`` times one
    worker's: this share keeps it from overshooting (0.94 on the KDD'16 problems' independent
    columns at q = 12, 0.1 on satellite_image's)."""
    if n_workers <= 1 or not lipschitz > 0:
        return 1.0
    norms = shard.squared_norms() / max(shard.n_samples, 1)
    mean_diag = float(norms[norms > 0].mean()) if np.any(norms > 0) else 0.0
    rho = coupling(lipschitz, loss.curvature, mean_diag, total_budget + 1)
    return 1.0 / (1.0 + (n_workers - 1) * rho)


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


def _nothing():
    import contextlib
    return contextlib.nullcontext()


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
    loss : {"auto", "squared", "squared_hinge", "logistic"}
        ``auto``: the squared hinge when every label is -1 or +1, else the squared loss.
    passes : int or "auto"
        Scans over the features. ``auto``: until a pass changes nothing (2 to 10) for the
        exchange variant, 3 for kdd16.
    variant : {"exchange", "kdd16"}
        ``exchange`` (default): intercept, scaling, the exchange rule and the screening order
        (module docstring); ``kdd16``: Alg. 1 literally, for reproducing the paper.
    fit_intercept : bool or None
        An unpenalised intercept (``None``: on for ``exchange``, off for ``kdd16``).
    scale : bool or None
        Scale each column as it arrives (``None``: on for ``exchange``, off for ``kdd16``).
    step_size : float or None
        ``eta``; ``None`` uses ``0.5 / L_F`` estimated from the data.
    step_divisor : float
        The paper's ``m >= 1``: retained features step by ``eta / m``.
    decrease_check : bool
        Keep a substitution only if the objective decreases (enough: Alg. 1 line 12 for kdd16).
    decrease_constant : float or None
        The paper's ``c`` in ``[0, 1]`` (kdd16 only; default 1).
    refit : bool
        Refit the loss on the selected features after selection (the paper evaluates so).
    random_state : int
        Seeds the blocks sampled to estimate ``L_F``.
    trace_every : int
        When > 0, record the training objective and error every ``trace_every`` steps in ``trace_``
        (``asyos.trace``); ``"auto"``: rows by wall time, at a negligible cost (``asyos.trace``); 0 records
        nothing.

    Attributes
    ----------
    coef_ : ndarray (n_features,)   refit coefficients (or the raw OS weights if ``refit=False``), in
                                    the data's units
    intercept_ : float              (0 without an intercept)
    raw_coef_, raw_intercept_       the OS model before the refit
    support_ : ndarray              selected feature indices, sorted
    loss_ : str                     the loss used (``auto`` resolved)
    selection_log_ : list of dict   every entry/exit: worker, step, pass, feature, event, weight
    step_size_, lipschitz_, n_steps_, n_passes_, fit_time_
    """

    _parameter_constraints = {    # loss: get_loss names the choices (and why hinge is refused)
        "budget": BUDGET, "loss": "no_validation", "passes": PASSES,
        "variant": [StrOptions({"exchange", "kdd16"})], "fit_intercept": ["boolean", None],
        "scale": ["boolean", None], "step_size": [positive(), None],
        "step_divisor": [Interval(Real, 1, None, closed="left")], "decrease_check": BOOLEAN,
        "decrease_constant": [unit(), None], "refit": BOOLEAN, "random_state": SEED,
        "trace_every": [count(0), StrOptions({"auto"})]}

    def __init__(self, budget=10, loss="auto", passes="auto", variant="exchange", fit_intercept=None, scale=None,
                 step_size=None, step_divisor=1.0, decrease_check=True, decrease_constant=None, refit=True,
                 random_state=0, trace_every=0):
        self.budget = budget
        self.loss = loss
        self.passes = passes
        self.variant = variant
        self.fit_intercept = fit_intercept
        self.scale = scale
        self.step_size = step_size
        self.step_divisor = step_divisor
        self.decrease_check = decrease_check
        self.decrease_constant = decrease_constant
        self.refit = refit
        self.random_state = random_state
        self.trace_every = trace_every

    _reads_columns = True        # fit(X) with X a ColumnMatrix or a memmap learns out of core

    def _central(self, n, loss, y):
        """The central node of the run, with an ``ObjectiveTrace`` when ``trace_every`` > 0."""
        if self.trace_every != "auto":
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
        for name in ("fit_intercept", "scale"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, (bool, np.bool_)):
                raise InputError(f"{name} must be True, False or None; got {value!r}")
        if isinstance(self.passes, str) and self.passes != "auto":
            raise InputError(f"passes must be an integer >= 1 or 'auto'; got {self.passes!r}")
        return SubstitutionOptions(self.passes, self.step_size, self.step_divisor, bool(self.decrease_check),
                                   self.decrease_constant, variant=self.variant, fit_intercept=self.fit_intercept,
                                   scale=self.scale).validated()

    def fit(self, X, y, checkpoint=None):
        """Select ``budget`` features of ``X`` for ``y``. ``checkpoint`` (an
        ``asyos.checkpoint.Checkpointer``) saves the run between steps and, holding a saved state,
        continues from it: the result is the uninterrupted run's, bit for bit."""
        X, y, loss = self._fit_data(X, y)
        options = self._options()
        start = time.perf_counter()
        shard = options.shard(X)
        saved = checkpoint.take(CHECKPOINT_KIND, {"shard": shard}) if checkpoint is not None else None
        if saved is None:
            order = options.visit_order(shard, y, loss)
            lipschitz = local_lipschitz(shard, self.budget, loss, self.random_state, order=order)
            worker = make_worker(shard, y, loss, self.budget, lipschitz, options, order=order)
            central, trace = self._central(shard.n_samples, loss, y)
        else:
            worker, central, lipschitz = saved["worker"], saved["central"], saved["lipschitz"]
            trace = central.monitor
        state = {"worker": worker, "central": central, "lipschitz": lipschitz}
        between = None if checkpoint is None else \
            (lambda: checkpoint.poll(CHECKPOINT_KIND, lambda: state, progress, {"shard": shard}))

        def progress():             # called only when a progress line or a checkpoint is due
            with quiet_float_errors():
                return {**worker.progress(), "_objective": loss.value(y, central.u)}
        with checkpoint.watching() if checkpoint is not None else _nothing():
            run_loopback(worker, central, between=between)
        self._finish_trace(trace, central)
        with quiet_float_errors():
            self.objective_selection_ = check_objective(loss, y, central.u, worker.state.step_size, lipschitz)
        support, weights, intercept = worker.selection_in_units()
        self._set_selection(X, y, loss, support, weights, intercept if options.fit_intercept else None)
        self.lipschitz_ = lipschitz
        self.step_size_ = worker.state.step_size
        self.n_steps_ = worker.steps
        self.n_passes_ = worker.passes_run
        self.selection_log_ = worker.log.as_dicts()
        self.fit_time_ = time.perf_counter() - start
        return self
