"""Running-averages learners: OLS-th, OFSA, OLasso, OElnet, OMCP (thesis Ch. 3).

Each learner keeps a ``RunningAverages`` (``stats_``) of everything it was shown and extracts its
model from it only when asked (``coef_``, ``predict``, ... or ``extract(k)`` / ``path(ks)`` for other
sparsities). Fitting is therefore a sum over samples (``partial_fit`` and ``learn_one`` in any
order, ``fit_stats`` for averages accumulated elsewhere, e.g. merged across MPI ranks) and the
cost of a model does not depend on ``n``.

Regression and ±1 classification use the same least-squares criterion (thesis Sec. 3.2.6: for two
classes the least-squares direction is Fisher's discriminant); ``task="classification"`` checks the
labels and predicts ``sign(decision_function)``.

``fit`` and ``fit_stats`` extract the ``budget`` model once, for the check every budget learner's fit
ends with (``BudgetedSelector.check_selection``: fewer features than the budget, one class predicted,
an accuracy below the majority rate); ``partial_fit`` and ``learn_one`` stay lazy. The ``p x p`` averages
are refused with ``InputError`` before they are allocated when they cannot fit in the memory
available (``stats.check_gram_memory``).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...errors import InputError
from .stats import EXTRACT_MATRICES, GRAM_MATRICES, RunningAverages, check_gram_memory
from . import extractors
from ..base import TASKS, BudgetedSelector
from ..checks import effective_budget
from ..params import BOOLEAN, BUDGET, Interval, Real, StrOptions, count, non_negative, positive, unit


class RunningAveragesSelector(BudgetedSelector):
    """Shared face; subclasses name the extractor (``_extract_path``) and its parameters."""

    method = ""
    _parameter_constraints = {"budget": BUDGET, "task": [StrOptions(set(TASKS))],
                              "forgetting": [unit(closed="neither"), None],
                              "ridge": [non_negative(), StrOptions({"auto"})], "refit": BOOLEAN,
                              "forget_by": [StrOptions({"sample", "batch"})]}

    def __init__(self, budget=10, task="regression", forgetting=None, ridge="auto", refit=True, forget_by="sample"):
        self.budget = budget
        self.task = task
        self.forgetting = forgetting
        self.forget_by = forget_by
        self.ridge = ridge
        self.refit = refit

    # -- learning -----------------------------------------------------------------------------
    def fit(self, X, y):
        """Forget everything, then ``partial_fit(X, y)``."""
        self.stats_ = None
        return self.partial_fit(X, y)

    def partial_fit(self, X, y, classes=None):
        """Add the samples ``(X, y)`` (dense or CSR) to the running averages. A classifier's first
        call takes ``classes`` (the two labels) when its first batch may lack one of them."""
        self._check_params()
        reset = getattr(self, "stats_", None) is None
        self._row_kind(named=False, reset=reset)
        X, y = self._check_data(X, y, reset=reset, accept_sparse="csr")
        y = self._labels(y, reset, classes)
        self._stats_for(X.shape[1]).update(X, y)
        return self._touched()

    _supervised = True          # River's flag (river.evaluate, river.compose): learn_one takes a label

    def learn_one(self, x, y):
        """Add one sample: ``x`` a vector of ``n_features`` or, as River gives rows, a dict
        ``{name: value}`` (the first dict's names are the features, in its order: the ``p x p`` averages
        are sized by them; a later row may leave names out, as zeros, but not bring new ones);
        ``y`` a number (or a label)."""
        self._check_params()
        reset = getattr(self, "stats_", None) is None
        if isinstance(x, dict):
            x = self._dict_row(x, learn=True, reset=reset)
        else:
            self._row_kind(named=False, reset=reset)
            x = np.asarray(x.toarray() if sp.issparse(x) else x, dtype=float).ravel()
        label = self._labels(np.array([y]), reset)
        x = self._check_data(x[None, :], reset=reset)[0]
        self._stats_for(x.shape[0]).update(x, float(label[0]))
        return self._touched()

    def predict_one(self, x):
        """The prediction for one sample ``x`` (as ``learn_one`` takes it; dict names not learned count
        as zeros): a label for classification, a value for regression, from the model the averages give
        now (extracted again after new samples). Before any sample it answers as River's models do:
        ``None`` for a classifier, ``0.0`` for a regressor."""
        if getattr(self, "stats_", None) is None:
            return None if self._task() == "classification" else 0.0
        u = self._decision_one(x)
        return self.classes_[int(u >= 0.0)].item() if self._task() == "classification" else u

    def predict_proba_one(self, x):
        """``{class: probability}`` (River's ``predict_proba_one``): a least-squares decision estimates no
        probability, so the predicted class has 1 and the other 0; ``{}`` before any sample."""
        if self._task() != "classification":
            raise AttributeError(f"{type(self).__name__} with task={self.task!r} is a regressor: it has no "
                                 f"class probabilities")
        if getattr(self, "stats_", None) is None:
            return {}
        p = float(self._decision_one(x) >= 0.0)
        low, high = (c.item() for c in self.classes_)
        return {low: 1.0 - p, high: p}

    def _decision_one(self, x) -> float:
        if isinstance(x, dict):
            row = self._dict_row(x, learn=False, reset=False)
        else:
            self._row_kind(named=False, reset=False)
            row = self._check_X(np.asarray(x.toarray() if sp.issparse(x) else x, dtype=float).reshape(1, -1))[0]
        return float(self.model_.decision_function(row[None, :])[0])

    def _row_kind(self, named: bool, reset: bool) -> None:
        """Rows are all dicts or all vectors: a dict's names say nothing about a vector's positions."""
        if reset:
            self._named = named
            if not named:
                self.__dict__.pop("_names", None)
        elif getattr(self, "_named", False) != named:
            learned, kind = ("vector", "dict") if named else ("dict", "vector")
            raise InputError(f"{type(self).__name__} learned from {learned} rows; a {kind} row cannot be matched "
                             f"to its features")

    def _dict_row(self, x: dict, learn: bool, reset: bool) -> np.ndarray:
        """A dict row as a vector over the features named by the first dict learned."""
        self._row_kind(named=True, reset=reset)
        if reset:
            self._names = {name: j for j, name in enumerate(x)}
        names = self._names
        row = np.zeros(len(names))
        for name, value in x.items():
            j = names.get(name)
            if j is None:
                if learn:
                    raise InputError(f"{type(self).__name__} keeps p x p averages over the {len(names)} features "
                                     f"of the first row; {name!r} is not one of them")
                continue                                 # predicting: a name never learned weighs nothing
            try:
                row[j] = float(value)
            except (TypeError, ValueError):
                raise InputError("the values of a dict row must be numbers") from None
        return row

    def _touched(self):
        """New samples: the model is extracted again on first use (``model_``). The cache is a
        holder made once per fit, so that reading the model (``predict``) leaves the estimator's
        attributes as they were."""
        self._extracted = {}
        return self

    def fit_stats(self, stats: RunningAverages):
        """Use running averages accumulated elsewhere (merged, loaded, reduced over MPI ranks)."""
        self._check_params()
        if not isinstance(stats, RunningAverages):
            raise InputError(f"fit_stats needs a RunningAverages; got {type(stats).__name__}")
        self.budget_ = effective_budget(self.budget, stats.n_features)
        check_gram_memory(stats.n_features, EXTRACT_MATRICES, f"{type(self).__name__}.fit_stats")
        self._row_kind(named=False, reset=True)
        self.stats_ = stats
        self.n_features_in_ = stats.n_features
        if self.task == "classification":
            self.classes_ = np.array([-1.0, 1.0])
        self._touched()
        self.check_selection(None, None)           # no data here: the number of features only
        return self

    def _stats_for(self, p):
        stats = getattr(self, "stats_", None)
        if stats is None:
            self.budget_ = effective_budget(self.budget, p)
            check_gram_memory(p, GRAM_MATRICES, type(self).__name__)
            self.stats_ = stats = RunningAverages(p, self.forgetting, self.forget_by)
        elif p != stats.n_features:
            raise InputError(f"X has {p} features, but {type(self).__name__} was fitted with {stats.n_features}")
        return stats

    def _check_params(self):
        """The declared constraints, checked when a model starts (not on every ``learn_one``)."""
        if getattr(self, "stats_", None) is None:
            self._validate_params()

    def _task(self):
        return self.task if self.task in TASKS else None

    # -- extraction -----------------------------------------------------------------------------
    def _extract_path(self, std, ks):
        raise NotImplementedError

    def _standardized(self):
        self._check_fitted()
        return self.stats_.standardize()

    def path(self, ks):
        """Models (``ExtractedModel``) for each number of features in ``ks``, from one set of averages."""
        ks = [int(k) for k in ks] if not isinstance(ks, (int, np.integer)) else [int(ks)]
        return self._extract_path(self._standardized(), ks)

    def extract(self, k=None):
        """The model with ``k`` features (default: ``budget``); the learner itself is unchanged."""
        return self.path([self.budget_ if k is None else k])[0]

    @property
    def model_(self):
        self._check_fitted()
        if "model" not in self._extracted:
            self._extracted["model"] = self.extract()
        return self._extracted["model"]

    def __sklearn_is_fitted__(self):
        return getattr(self, "stats_", None) is not None

    # the fitted attributes are views of the extracted model
    coef_ = property(lambda self: self.model_.coef)
    intercept_ = property(lambda self: self.model_.intercept)
    support_ = property(lambda self: self.model_.support)
    raw_coef_ = property(lambda self: self.model_.raw_coef)
    n_samples_seen_ = property(lambda self: self._fitted_stats().n_seen)
    lam_ = property(lambda self: self.model_.lam)
    n_iter_ = property(lambda self: self.model_.n_iter)

    def _fitted_stats(self):
        self._check_fitted()
        return self.stats_

    def _decision(self, X):
        X = self._check_X(X)
        return self.model_.decision_function(X)


class OLSThreshold(RunningAveragesSelector):
    """OLS-th (thesis Alg. 3): least squares (ridge ``0.05`` when ``n <= p``), keep the ``k`` largest
    standardized ``|b_j|``, refit least squares on them.

    The model is extracted from the running averages (``stats_``, thesis Sec. 3.1, eqs. 3.2-3.3) when
    first read, so ``partial_fit`` and ``learn_one`` cost ``O(p^2)`` per sample whatever ``n`` is, and
    ``fit_stats`` takes averages accumulated elsewhere (module docstring).

    Parameters
    ----------
    budget : int, default=10
        ``k``: the features of the model.
    task : {"regression", "classification"}, default="regression"
        The same least-squares criterion for both (thesis Sec. 3.2.6); ``classification`` checks that
        ``y`` holds two classes and predicts them.
    forgetting : float or None, default=None
        A rate ``alpha`` in (0, 1): averages that forget (eq. 3.11, ``alpha_n = max(alpha, 1/(n+1))``);
        ``None``: plain averages.
    ridge : float or "auto", default="auto"
        The ridge (>= 0) of the least-squares fits (eq. 3.6), on the standardized data; ``"auto"``:
        0.05 when the (effective) number of samples is at most the number of columns solved for,
        else 0.
    refit : bool, default=True
        Refit least squares on the ``k`` features (Alg. 3's last line).
    forget_by : {"sample", "batch"}, default="sample"
        With ``forgetting``: each sample is one term of eq. 3.11, or each ``partial_fit`` batch is
        (``asyos.learners.averages.stats``).

    Attributes
    ----------
    stats_ : RunningAverages
        The running averages of everything learned from.
    model_ : ExtractedModel
        The model with ``budget`` features (``asyos.learners.averages.extractors``), extracted when
        first read after new samples.
    coef_ : ndarray of shape (n_features_in_,)
        The coefficients, in the data's units.
    intercept_ : float
        The intercept.
    support_ : ndarray of int
        Selected feature indices, sorted.
    raw_coef_ : ndarray of shape (n_features_in_,)
        The selection's coefficients (the full least-squares fit's), in the data's units.
    n_samples_seen_ : int
        Samples learned from.
    lam_ : None
        Penalized learners' weight; ``None`` here.
    n_iter_ : int
        0 (one least-squares fit).
    classes_ : ndarray of shape (2,)
        Classification: the two labels.
    n_features_in_ : int
        Number of features.

    Examples
    --------
    >>> from asyos import OLSThreshold, make_regression
    >>> data = make_regression(n_features=50, n_informative=5, n_samples=200, seed=0)
    >>> model = OLSThreshold(budget=5)
    >>> for start in range(0, 200, 50):
    ...     model = model.partial_fit(data.X[start:start + 50], data.y[start:start + 50])
    >>> model.support_.tolist()
    [7, 13, 24, 27, 49]
    >>> model.n_samples_seen_
    200
    >>> bool(model.score(data.X_test, data.y_test) > 0.95)
    True
    """

    method = "ols-th"

    def _extract_path(self, std, ks):
        return extractors.ols_threshold_path(std, ks, ridge=self.ridge, refit=self.refit)


class OFSA(RunningAveragesSelector):
    """Online FSA (thesis Alg. 4): momentum gradient steps on the averages with the annealing
    schedule ``M_t`` down to ``k`` features, then a least-squares refit.

    ``warm_up`` momentum steps on every feature on ``1/2 b^T S_xx b - b^T S_xy`` (eq. 3.8), then
    ``n_iter`` steps each followed by keeping the ``M_t = k + (p - k) max(0, (T - t)/(t mu + T))``
    largest ``|b_j|`` (``T = n_iter``), all from the running averages (``stats_``; module docstring).

    Parameters
    ----------
    budget : int, default=10
        ``k``: the features of the model.
    task : {"regression", "classification"}, default="regression"
        The same least-squares criterion for both (thesis Sec. 3.2.6); ``classification`` checks that
        ``y`` holds two classes and predicts them.
    forgetting : float or None, default=None
        A rate ``alpha`` in (0, 1): averages that forget, each sample one term (eq. 3.11,
        ``alpha_n = max(alpha, 1/(n+1))``); ``None``: plain averages.
    forget_by : {"sample", "batch"}, default="sample"
        With ``forgetting``: each sample is one term of eq. 3.11, or each ``partial_fit`` batch is.
    ridge : float or "auto", default="auto"
        The ridge (>= 0) of the refit (eq. 3.6), on the standardized data; ``"auto"``: 0.05 when the
        (effective) number of samples is at most ``k``, else 0.
    refit : bool, default=True
        Refit least squares on the ``k`` features (Alg. 4's last line).
    n_iter : int, default=200
        Annealing steps ``T``.
    warm_up : int, default=15
        Momentum steps on every feature before the annealing.
    mu : float, default=10.0
        The annealing parameter (>= 0).
    momentum : float, default=0.9
        The momentum (>= 0).
    step : float or "auto", default="auto"
        The step (> 0); ``"auto"``: ``1 / lambda_max(S_xx)``.

    Attributes
    ----------
    stats_ : RunningAverages
        The running averages of everything learned from.
    model_ : ExtractedModel
        The model with ``budget`` features (``asyos.learners.averages.extractors``), extracted when
        first read after new samples.
    coef_ : ndarray of shape (n_features_in_,)
        The coefficients, in the data's units.
    intercept_ : float
        The intercept.
    support_ : ndarray of int
        Selected feature indices, sorted.
    raw_coef_ : ndarray of shape (n_features_in_,)
        The annealing's coefficients before the refit, in the data's units.
    n_samples_seen_ : int
        Samples learned from.
    lam_ : None
        Penalized learners' weight; ``None`` here.
    n_iter_ : int
        Gradient steps run (``warm_up + n_iter``).
    classes_ : ndarray of shape (2,)
        Classification: the two labels.
    n_features_in_ : int
        Number of features.

    Examples
    --------
    >>> from asyos import OFSA, make_regression
    >>> data = make_regression(n_features=50, n_informative=5, n_samples=200, seed=0)
    >>> model = OFSA(budget=5).fit(data.X, data.y)
    >>> model.support_.tolist()
    [7, 13, 24, 27, 49]
    >>> model.n_iter_
    215
    >>> model.extract(3).support.size
    3
    """

    method = "ofsa"

    def __init__(self, budget=10, task="regression", forgetting=None, ridge="auto", refit=True, n_iter=200,
                 warm_up=15, mu=10.0, momentum=0.9, step="auto", forget_by="sample"):
        super().__init__(budget, task, forgetting, ridge, refit, forget_by=forget_by)
        self.n_iter = n_iter
        self.warm_up = warm_up
        self.mu = mu
        self.momentum = momentum
        self.step = step

    _parameter_constraints = {**RunningAveragesSelector._parameter_constraints, "n_iter": [count(1)],
                              "warm_up": [count(0)], "mu": [non_negative()], "momentum": [non_negative()],
                              "step": [positive(), StrOptions({"auto"})]}

    def _extract_path(self, std, ks):
        return extractors.ofsa_path(std, ks, n_iter=self.n_iter, warm_up=self.warm_up, mu=self.mu,
                                    momentum=self.momentum, step=self.step, ridge=self.ridge, refit=self.refit)


class _Penalized(RunningAveragesSelector):
    penalty = ""

    def __init__(self, budget=10, task="regression", forgetting=None, ridge="auto", refit=True, exact=True,
                 max_steps=100, tol=1e-7, max_sweeps=100_000, forget_by="sample"):
        super().__init__(budget, task, forgetting, ridge, refit, forget_by=forget_by)
        self.exact = exact
        self.max_steps = max_steps
        self.tol = tol
        self.max_sweeps = max_sweeps

    _parameter_constraints = {**RunningAveragesSelector._parameter_constraints, "exact": BOOLEAN,
                              "max_steps": [count(1)], "max_sweeps": [count(1)], "tol": [positive()],
                              "l1_ratio": [unit(closed="right")], "gamma": [Interval(Real, 1, None, closed="neither")]}

    def _penalty_params(self):
        return {}

    def _extract_path(self, std, ks):
        return extractors.penalized_path(std, ks, penalty=self.penalty, exact=self.exact, max_steps=self.max_steps,
                                         tol=self.tol, max_sweeps=self.max_sweeps, ridge=self.ridge,
                                         refit=self.refit, **self._penalty_params())


class OLasso(_Penalized):
    """Online Lasso (thesis Alg. 5, soft thresholding): ``lambda`` bisected for exactly ``k`` features.

    The penalized problem (eq. 3.5, ``y`` scaled to unit variance) is solved from the running
    averages (``stats_``) by coordinate descent with the soft-thresholding operator (eq. 3.10), and
    ``lambda`` bisected in log scale until ``k`` coefficients are non-zero, then least squares refit
    on them (``asyos.learners.averages.extractors``).

    Parameters
    ----------
    budget : int, default=10
        ``k``: the features of the model.
    task : {"regression", "classification"}, default="regression"
        The same least-squares criterion for both (thesis Sec. 3.2.6); ``classification`` checks that
        ``y`` holds two classes and predicts them.
    forgetting : float or None, default=None
        A rate ``alpha`` in (0, 1): averages that forget, each sample one term (eq. 3.11,
        ``alpha_n = max(alpha, 1/(n+1))``); ``None``: plain averages.
    forget_by : {"sample", "batch"}, default="sample"
        With ``forgetting``: each sample is one term of eq. 3.11, or each ``partial_fit`` batch is.
    ridge : float or "auto", default="auto"
        The ridge (>= 0) of the refit (eq. 3.6), on the standardized data; ``"auto"``: 0.05 when the
        (effective) number of samples is at most ``k``, else 0.
    refit : bool, default=True
        Refit least squares on the ``k`` features (Alg. 5's last line).
    exact : bool, default=True
        When no ``lambda`` gives exactly ``k`` features: cut the sparsest solution with more to its
        ``k`` largest ``|b_j|``; ``False``: keep the densest with fewer (the thesis' protocol for its
        baselines).
    max_steps : int, default=100
        Most solves of the ``lambda`` search for one ``k``.
    tol : float, default=1e-7
        Coordinate descent stops when a sweep moves no coefficient by more than this (> 0).
    max_sweeps : int, default=100000
        Most coordinate-descent sweeps per solve (a ``ConvergenceWarning`` says when reached).

    Attributes
    ----------
    stats_ : RunningAverages
        The running averages of everything learned from.
    model_ : ExtractedModel
        The model with ``budget`` features (``asyos.learners.averages.extractors``), extracted when
        first read after new samples.
    coef_ : ndarray of shape (n_features_in_,)
        The coefficients, in the data's units.
    intercept_ : float
        The intercept.
    support_ : ndarray of int
        Selected feature indices, sorted.
    raw_coef_ : ndarray of shape (n_features_in_,)
        The penalized solution's coefficients before the refit, in the data's units.
    n_samples_seen_ : int
        Samples learned from.
    lam_ : float
        The ``lambda`` found, in ``y``'s units.
    n_iter_ : int
        Solves run by the search for ``budget``.
    classes_ : ndarray of shape (2,)
        Classification: the two labels.
    n_features_in_ : int
        Number of features.

    Examples
    --------
    >>> from asyos import OLasso, make_regression
    >>> data = make_regression(n_features=50, n_informative=5, n_samples=200, seed=0)
    >>> model = OLasso(budget=5).fit(data.X, data.y)
    >>> model.support_.tolist()
    [7, 13, 24, 27, 49]
    >>> bool(model.lam_ > 0)
    True
    >>> [m.support.size for m in model.path([2, 5])]
    [2, 5]
    """

    method, penalty = "olasso", "lasso"


class OElasticNet(_Penalized):
    """Online elastic net (thesis Alg. 5): penalty ``lambda (l1_ratio |b| + (1 - l1_ratio)/2 b^2)``.

    As ``OLasso`` with the elastic net's thresholding operator (eq. 3.10): ``lambda`` bisected on the
    running averages (``stats_``) until ``k`` coefficients are non-zero, then least squares refit on
    them (``asyos.learners.averages.extractors``).

    Parameters
    ----------
    budget : int, default=10
        ``k``: the features of the model.
    task : {"regression", "classification"}, default="regression"
        The same least-squares criterion for both (thesis Sec. 3.2.6); ``classification`` checks that
        ``y`` holds two classes and predicts them.
    forgetting : float or None, default=None
        A rate ``alpha`` in (0, 1): averages that forget, each sample one term (eq. 3.11,
        ``alpha_n = max(alpha, 1/(n+1))``); ``None``: plain averages.
    forget_by : {"sample", "batch"}, default="sample"
        With ``forgetting``: each sample is one term of eq. 3.11, or each ``partial_fit`` batch is.
    ridge : float or "auto", default="auto"
        The ridge (>= 0) of the refit (eq. 3.6), on the standardized data; ``"auto"``: 0.05 when the
        (effective) number of samples is at most ``k``, else 0.
    refit : bool, default=True
        Refit least squares on the ``k`` features (Alg. 5's last line).
    exact : bool, default=True
        When no ``lambda`` gives exactly ``k`` features: cut the sparsest solution with more to its
        ``k`` largest ``|b_j|``; ``False``: keep the densest with fewer (the thesis' protocol for its
        baselines).
    max_steps : int, default=100
        Most solves of the ``lambda`` search for one ``k``.
    tol : float, default=1e-7
        Coordinate descent stops when a sweep moves no coefficient by more than this (> 0).
    max_sweeps : int, default=100000
        Most coordinate-descent sweeps per solve (a ``ConvergenceWarning`` says when reached).
    l1_ratio : float, default=0.5
        The l1 share of the penalty, in (0, 1] (0 passes the parameter check and fails at the
        extraction).

    Attributes
    ----------
    stats_ : RunningAverages
        The running averages of everything learned from.
    model_ : ExtractedModel
        The model with ``budget`` features (``asyos.learners.averages.extractors``), extracted when
        first read after new samples.
    coef_ : ndarray of shape (n_features_in_,)
        The coefficients, in the data's units.
    intercept_ : float
        The intercept.
    support_ : ndarray of int
        Selected feature indices, sorted.
    raw_coef_ : ndarray of shape (n_features_in_,)
        The penalized solution's coefficients before the refit, in the data's units.
    n_samples_seen_ : int
        Samples learned from.
    lam_ : float
        The ``lambda`` found, in ``y``'s units.
    n_iter_ : int
        Solves run by the search for ``budget``.
    classes_ : ndarray of shape (2,)
        Classification: the two labels.
    n_features_in_ : int
        Number of features.

    Examples
    --------
    >>> from asyos import OElasticNet, make_regression
    >>> data = make_regression(n_features=50, n_informative=5, n_samples=200, seed=0)
    >>> model = OElasticNet(budget=5, l1_ratio=0.5).fit(data.X, data.y)
    >>> model.support_.tolist()
    [7, 13, 24, 27, 49]
    >>> bool(model.score(data.X_test, data.y_test) > 0.95)
    True
    """

    method, penalty = "oelnet", "elnet"

    def __init__(self, budget=10, task="regression", forgetting=None, ridge="auto", refit=True, exact=True,
                 max_steps=100, tol=1e-7, max_sweeps=100_000, l1_ratio=0.5, forget_by="sample"):
        super().__init__(budget, task, forgetting, ridge, refit, exact, max_steps, tol, max_sweeps, forget_by)
        self.l1_ratio = l1_ratio

    def _penalty_params(self):
        return {"l1_ratio": self.l1_ratio}


class OMCP(_Penalized):
    """Online MCP (thesis Alg. 5 with the operator of eq. 3.10, ``b = gamma``).

    As ``OLasso`` with the minimax concave penalty's thresholding operator: ``lambda`` bisected on the
    running averages (``stats_``) until ``k`` coefficients are non-zero, then least squares refit on
    them (``asyos.learners.averages.extractors``).

    Parameters
    ----------
    budget : int, default=10
        ``k``: the features of the model.
    task : {"regression", "classification"}, default="regression"
        The same least-squares criterion for both (thesis Sec. 3.2.6); ``classification`` checks that
        ``y`` holds two classes and predicts them.
    forgetting : float or None, default=None
        A rate ``alpha`` in (0, 1): averages that forget, each sample one term (eq. 3.11,
        ``alpha_n = max(alpha, 1/(n+1))``); ``None``: plain averages.
    forget_by : {"sample", "batch"}, default="sample"
        With ``forgetting``: each sample is one term of eq. 3.11, or each ``partial_fit`` batch is.
    ridge : float or "auto", default="auto"
        The ridge (>= 0) of the refit (eq. 3.6), on the standardized data; ``"auto"``: 0.05 when the
        (effective) number of samples is at most ``k``, else 0.
    refit : bool, default=True
        Refit least squares on the ``k`` features (Alg. 5's last line).
    exact : bool, default=True
        When no ``lambda`` gives exactly ``k`` features: cut the sparsest solution with more to its
        ``k`` largest ``|b_j|``; ``False``: keep the densest with fewer (the thesis' protocol for its
        baselines).
    max_steps : int, default=100
        Most solves of the ``lambda`` search for one ``k``.
    tol : float, default=1e-7
        Coordinate descent stops when a sweep moves no coefficient by more than this (> 0).
    max_sweeps : int, default=100000
        Most coordinate-descent sweeps per solve (a ``ConvergenceWarning`` says when reached).
    gamma : float, default=3.0
        MCP's concavity ``b`` (> 1).

    Attributes
    ----------
    stats_ : RunningAverages
        The running averages of everything learned from.
    model_ : ExtractedModel
        The model with ``budget`` features (``asyos.learners.averages.extractors``), extracted when
        first read after new samples.
    coef_ : ndarray of shape (n_features_in_,)
        The coefficients, in the data's units.
    intercept_ : float
        The intercept.
    support_ : ndarray of int
        Selected feature indices, sorted.
    raw_coef_ : ndarray of shape (n_features_in_,)
        The penalized solution's coefficients before the refit, in the data's units.
    n_samples_seen_ : int
        Samples learned from.
    lam_ : float
        The ``lambda`` found, in ``y``'s units.
    n_iter_ : int
        Solves run by the search for ``budget``.
    classes_ : ndarray of shape (2,)
        Classification: the two labels.
    n_features_in_ : int
        Number of features.

    Examples
    --------
    >>> from asyos import OMCP, make_regression
    >>> data = make_regression(n_features=50, n_informative=5, n_samples=200, seed=0)
    >>> model = OMCP(budget=5, gamma=3.0).fit(data.X, data.y)
    >>> model.support_.tolist()
    [7, 13, 24, 27, 49]
    >>> bool(model.score(data.X_test, data.y_test) > 0.95)
    True
    """

    method, penalty = "omcp", "mcp"

    def __init__(self, budget=10, task="regression", forgetting=None, ridge="auto", refit=True, exact=True,
                 max_steps=100, tol=1e-7, max_sweeps=100_000, gamma=3.0, forget_by="sample"):
        super().__init__(budget, task, forgetting, ridge, refit, exact, max_steps, tol, max_sweeps, forget_by)
        self.gamma = gamma

    def _penalty_params(self):
        return {"gamma": self.gamma}

