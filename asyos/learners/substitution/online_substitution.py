"""Online Substitution (OS), KDD'16 Alg. 1: the sequential learner.

Features arrive one at a time, in passes over the columns; at most ``budget`` are kept (memory
``O(n * budget)``). Each arrival is one step of ``SubstitutionState`` (see
``asyos.learners.substitution.substitution`` for the update rules and their equation numbers), taken by one
``Worker`` that owns every column and whose gradient point is its own ``u = X_S w_S + b``: the
in-process loopback of the Asy-OS protocol (``asyos.learners.protocol.loopback``), so sequential OS and Asy-OS
share one code path.

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

import numpy as np

from ...errors import InputError
from ..protocol.central import Central
from ..protocol.loopback import run_loopback
from ..trace import ObjectiveTrace
from ..base import BudgetedSelector
from ..checks import check_positive_int, columns_block
from ..params import BOOLEAN, BUDGET, PASSES, SEED, Interval, Real, StrOptions, count, non_negative, positive, unit
from .kernels import many_runs
from .ridge_choice import choose_ridge, cross_validation_steps, engages, pool_size, top_features
from .workers import (SubstitutionOptions, _nothing, check_objective, local_lipschitz, make_worker,
                      quiet_float_errors)

CHECKPOINT_KIND = "online-substitution"


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
    ridge : float or "auto"
        ``alpha >= 0`` (exchange variant): select and refit under ``loss + (alpha / 2) ||w||^2`` on the
        scaled columns (the newcomers' Newton weights, the substitution scores, the decrease check,
        the retained features' step and the refit all include it), so that features which fit a few
        rows exactly are not worth their weight when samples are few. ``"auto"`` (default): 0 unless
        samples are few (``p >= 5 n`` and ``n <= 1000``), where ``alpha`` is chosen between 0 and 10
        by cross-validation on the training rows, a ridge only where it lowers the held-out loss by 15%
        (``asyos.learners.substitution.ridge_choice``); 0: none, OS as before the ridge.
    random_state : int
        Seeds the blocks sampled to estimate ``L_F``.
    trace_every : int
        When > 0, record the training objective and error every ``trace_every`` steps in ``trace_``;
        ``"auto"``: rows by wall time, at a negligible cost (``asyos.learners.trace``); 0 records nothing.

    Attributes
    ----------
    coef_ : ndarray (n_features,)   refit coefficients (or the raw OS weights if ``refit=False``), in
                                    the data's units
    intercept_ : float              (0 without an intercept)
    raw_coef_, raw_intercept_       the OS model before the refit
    support_ : ndarray              selected feature indices, sorted
    loss_ : str                     the loss used (``auto`` resolved)
    selection_log_ : list of dict   every entry/exit: worker, step, pass, feature, event, weight
    ridge_ : float                  the ``alpha`` selected and refit under (``ridge="auto"``: the chosen one)
    ridge_scores_ : dict or None    ``ridge="auto"`` when it chose: each alpha's mean held-out loss (at the
                                    predictions' best scale, ``ridge_choice.scale_free_loss``)
    step_size_, lipschitz_, n_steps_, n_passes_, fit_time_

    Examples
    --------
    >>> from asyos import OnlineSubstitution, make_regression
    >>> data = make_regression(n_features=50, n_informative=5, n_samples=200, seed=0)
    >>> model = OnlineSubstitution(budget=5).fit(data.X, data.y)
    >>> model.support_.tolist()
    [7, 13, 24, 27, 49]
    >>> data.true_support.tolist()
    [7, 13, 24, 27, 49]
    >>> bool(model.score(data.X_test, data.y_test) > 0.95)
    True
    >>> model.transform(data.X_test).shape
    (200, 5)
    """

    # fitted figures of a run's record; the asynchronous ones (threshold_ ...) are AsyncOnlineSubstitution's
    _reported = ("step_size_", "lipschitz_", "n_steps_", "threshold_", "n_dropped_", "slack_", "threshold_age_",
                 "n_candidates_", "raw_intercept_", "n_passes_", "finish_", "ridge_", "ridge_scores_")

    _parameter_constraints = {    # loss: get_loss names the choices (and why hinge is refused)
        "budget": BUDGET, "loss": "no_validation", "passes": PASSES,
        "variant": [StrOptions({"exchange", "kdd16"})], "fit_intercept": ["boolean", None],
        "scale": ["boolean", None], "step_size": [positive(), None],
        "step_divisor": [Interval(Real, 1, None, closed="left")], "decrease_check": BOOLEAN,
        "decrease_constant": [unit(), None], "refit": BOOLEAN,
        "ridge": [non_negative(), StrOptions({"auto"})], "random_state": SEED,
        "trace_every": [count(0), StrOptions({"auto"})]}

    def __init__(self, budget=10, loss="auto", passes="auto", variant="exchange", fit_intercept=None, scale=None,
                 step_size=None, step_divisor=1.0, decrease_check=True, decrease_constant=None, refit=True,
                 random_state=0, trace_every=0, ridge="auto"):
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
        self.ridge = ridge

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

    @property
    def _auto_ridge(self) -> bool:
        return isinstance(self.ridge, str) and self.ridge == "auto"

    def _options(self):
        """The run's ``SubstitutionOptions`` (the ridge 0 for ``"auto"`` until ``_resolve_ridge`` has chosen)."""
        for name in ("fit_intercept", "scale"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, (bool, np.bool_)):
                raise InputError(f"{name} must be True, False or None; got {value!r}")
        if isinstance(self.passes, str) and self.passes != "auto":
            raise InputError(f"passes must be an integer >= 1 or 'auto'; got {self.passes!r}")
        return SubstitutionOptions(self.passes, self.step_size, self.step_divisor, bool(self.decrease_check),
                                   self.decrease_constant, variant=self.variant, fit_intercept=self.fit_intercept,
                                   scale=self.scale, ridge=0.0 if self._auto_ridge else self.ridge).validated()

    def _resolve_ridge(self, X, y, loss, options, parts):
        """``(options with the ridge to run under, scores)``: ``ridge="auto"`` chooses on the pool of the
        features of largest gain (``parts``: ``(feature indices, gains)`` of each shard; ``ridge_choice``)."""
        if not self._auto_ridge:
            return options, None
        alpha, scores = choose_on_pool(X, y, loss, parts, self.budget_, options, self.random_state)
        return options.with_ridge(alpha), scores

    def fit(self, X, y, checkpoint=None):
        """Select ``budget`` features of ``X`` for ``y``. ``checkpoint`` (an
        ``asyos.records.checkpoint.Checkpointer``) saves the run between steps and, holding a saved state,
        continues from it: the result is the uninterrupted run's, bit for bit."""
        X, y, loss = self._fit_data(X, y)
        options = self._options()
        start = time.perf_counter()
        shard = options.shard(X)
        saved = checkpoint.take(CHECKPOINT_KIND, {"shard": shard}) if checkpoint is not None else None
        scores = None
        if saved is None:
            gains = options.gains(shard, y, loss)
            options, scores = self._resolve_ridge(X, y, loss, options, [(np.arange(shard.n_local), gains)])
            order = options.visit_order(shard, y, loss, gains)
            lipschitz = local_lipschitz(shard, self.budget_, loss, self.random_state, order=order)
            worker = make_worker(shard, y, loss, self.budget_, lipschitz, options, order=order)
            central, trace = self._central(shard.n_samples, loss, y)
        else:
            worker, central, lipschitz = saved["worker"], saved["central"], saved["lipschitz"]
            trace = central.monitor
            options, scores = options.with_ridge(saved["ridge"]), saved["ridge_scores"]
        state = {"worker": worker, "central": central, "lipschitz": lipschitz, "ridge": options.ridge,
                 "ridge_scores": scores}
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
        self._set_selection(X, y, loss, support, weights, intercept if options.fit_intercept else None,
                            ridge=options.ridge)
        self.ridge_, self.ridge_scores_ = options.ridge, scores
        self.lipschitz_ = lipschitz
        self.step_size_ = worker.state.step_size
        self.n_steps_ = worker.steps
        self.n_passes_ = worker.passes_run
        self.selection_log_ = worker.log.as_dicts()
        self.fit_time_ = time.perf_counter() - start
        return self


def choose_on_pool(X, y, loss, parts, budget, options, seed):
    """``ridge="auto"`` (``ridge_choice``): ``(alpha, scores)``, chosen by cross-validation on the
    ``pool_size`` features of largest gain (``parts``: each shard's ``(feature indices, gains)``), or
    ``(0, None)`` where it does not engage."""
    n, p = X.shape
    if not engages(n, p, options.variant):
        return 0.0, None
    pool = top_features(np.concatenate([i for i, _ in parts]), np.concatenate([g for _, g in parts]),
                        pool_size(n, p, budget))
    return choose_on_columns(columns_block(X, pool), y, loss, budget, options, seed)


def choose_on_columns(columns, y, loss, budget, options, seed):
    """``(alpha, scores)`` of ``ridge_choice.choose_ridge`` on the pool's raw ``columns`` (n x d, dense or
    sparse), each fit sequential OS with ``options`` and the ridge tried (its refit included); every way
    of running chooses through here."""
    def fit(X, y, alpha):
        return OnlineSubstitution(budget=budget, loss=loss.name, passes=options.passes, variant=options.variant,
                                  fit_intercept=options.fit_intercept, scale=options.scale,
                                  step_size=options.step_size, step_divisor=options.step_divisor,
                                  decrease_check=options.decrease_check, random_state=seed, ridge=alpha).fit(X, y)
    with many_runs(cross_validation_steps(columns.shape[1])):   # the short fits: the compiled step repays its load
        return choose_ridge(columns, y, loss, fit, seed)


class OnlineSubstitutionClassifier(OnlineSubstitution):
    """Online Substitution as a classifier, whatever the labels look like: ``loss="squared_hinge"`` (or
    ``"logistic"``), so scikit-learn's tools (``is_classifier``, stratified cross-validation, classifier
    scorers) know it before ``fit``; ``OnlineSubstitution`` with ``loss="auto"`` learns its task from the labels.

    Parameters
    ----------
    budget : int, default=10
        As in :class:`OnlineSubstitution`.
    loss : {"squared_hinge", "logistic"}, default="squared_hinge"
        The classification loss.
    passes, variant, fit_intercept, scale, step_size, step_divisor, decrease_check, decrease_constant, refit, \
random_state, trace_every, ridge
        As in :class:`OnlineSubstitution`.

    Attributes
    ----------
    coef_, intercept_, support_, classes_, budget_
        As in :class:`OnlineSubstitution`.

    Examples
    --------
    >>> from sklearn.base import is_classifier
    >>> from asyos import OnlineSubstitutionClassifier, make_classification
    >>> data = make_classification(n_features=50, n_informative=5, n_samples=200, seed=0)
    >>> model = OnlineSubstitutionClassifier(budget=5).fit(data.X, data.y)
    >>> is_classifier(model), model.support_.size
    (True, 5)
    """
    _parameter_constraints = {**OnlineSubstitution._parameter_constraints,
                              "loss": [StrOptions({"squared_hinge", "logistic"})]}

    def __init__(self, budget=10, loss="squared_hinge", passes="auto", variant="exchange", fit_intercept=None,
                 scale=None, step_size=None, step_divisor=1.0, decrease_check=True, decrease_constant=None, refit=True,
                 random_state=0, trace_every=0, ridge="auto"):
        super().__init__(budget=budget, loss=loss, passes=passes, variant=variant, fit_intercept=fit_intercept,
                         scale=scale, step_size=step_size, step_divisor=step_divisor, decrease_check=decrease_check,
                         decrease_constant=decrease_constant, refit=refit, random_state=random_state,
                         trace_every=trace_every, ridge=ridge)


class OnlineSubstitutionRegressor(OnlineSubstitution):
    """Online Substitution as a regressor (``loss="squared"``), so scikit-learn's tools (``is_regressor``,
    regression scorers) know it before ``fit``.

    Parameters
    ----------
    budget : int, default=10
        As in :class:`OnlineSubstitution`.
    loss : {"squared"}, default="squared"
        The regression loss.
    passes, variant, fit_intercept, scale, step_size, step_divisor, decrease_check, decrease_constant, refit, \
random_state, trace_every, ridge
        As in :class:`OnlineSubstitution`.

    Attributes
    ----------
    coef_, intercept_, support_, budget_
        As in :class:`OnlineSubstitution`.

    Examples
    --------
    >>> from sklearn.base import is_regressor
    >>> from asyos import OnlineSubstitutionRegressor, make_regression
    >>> data = make_regression(n_features=50, n_informative=5, n_samples=200, seed=0)
    >>> model = OnlineSubstitutionRegressor(budget=5).fit(data.X, data.y)
    >>> is_regressor(model), sorted(model.support_.tolist()) == sorted(data.true_support.tolist())
    (True, True)
    """
    _parameter_constraints = {**OnlineSubstitution._parameter_constraints, "loss": [StrOptions({"squared"})]}

    def __init__(self, budget=10, loss="squared", passes="auto", variant="exchange", fit_intercept=None, scale=None,
                 step_size=None, step_divisor=1.0, decrease_check=True, decrease_constant=None, refit=True,
                 random_state=0, trace_every=0, ridge="auto"):
        super().__init__(budget=budget, loss=loss, passes=passes, variant=variant, fit_intercept=fit_intercept,
                         scale=scale, step_size=step_size, step_divisor=step_divisor, decrease_check=decrease_check,
                         decrease_constant=decrease_constant, refit=refit, random_state=random_state,
                         trace_every=trace_every, ridge=ridge)
