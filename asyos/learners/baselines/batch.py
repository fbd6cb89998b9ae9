"""Batch baselines in the same harness (KDD'16 Sec. 5 "Baseline Methods").

* ``ProjectedGradient`` (``proj-gd``): projected gradient descent onto the L0 ball, i.e. iterative
  hard thresholding ``w <- P_s(w - eta grad f(w))`` (Yuan et al. 2014; Foucart 2011), from
  ``w = 0``, with a backtracking step: ``eta`` starts at ``1/L`` for a block of ``2s`` columns and is
  halved until the quadratic upper bound holds, so the objective never increases.
* ``LassoToBudget`` (``lasso``): the L1 path of scikit-learn, walked from the largest penalty down
  until at least ``s`` features are non-zero (the paper: "lambda is set to guarantee the batch
  methods selecting at least s features"); the ``s`` largest coefficients are kept. Squared loss
  uses ``Lasso``; squared hinge uses ``LinearSVC(penalty="l1")`` (the paper's LIBLINEAR L1 hinge
  classifier); logistic uses L1 ``LogisticRegression``. scikit-learn is imported only here.

Both are followed by the same refit as OS (``asyos.learners.refit``).
"""
from __future__ import annotations

import inspect
import time
import warnings

import numpy as np
import scipy.sparse as sp

from ...data.shard import FeatureShard
from ...truncation import keep_top_k, project_l0
from ..base import BudgetedSelector
from ..checks import check_positive_float, check_positive_int
from ..budget_search import search_l1_weight
from ..substitution.step_size import restricted_lipschitz
from ..params import BOOLEAN, BUDGET, SEED, Interval, Real, count, positive


class ProjectedGradient(BudgetedSelector):
    """Iterative hard thresholding onto ``||w||_0 <= budget`` with a monotone backtracking step.

    ``w <- P_s(w - eta grad f(w))`` from ``w = 0`` (Yuan et al. 2014; Foucart 2011); ``eta`` starts at
    ``1/L`` for a block of ``2 budget`` columns and is halved until the quadratic upper bound holds, so
    the objective never increases (module docstring). Stops when ``||w_new - w|| <= tol * max(||w||,
    1e-12)`` or after ``max_iter`` iterations. No intercept: centre ``y`` (and ``X``) first.

    Parameters
    ----------
    budget : int, default=10
        Number of features to keep (``s``).
    loss : {"squared", "squared_hinge", "logistic", "auto"}, default="squared"
        ``auto``: the squared hinge when ``y`` holds two classes, else the squared loss.
    max_iter : int, default=500
        Most iterations.
    tol : float, default=1e-7
        Relative change of ``w`` that stops the iterations (> 0).
    refit : bool, default=True
        Refit the loss on the selected features after selection (``asyos.learners.refit``).
    random_state : int or None, default=0
        Seeds the blocks sampled to estimate ``L``.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Refit coefficients (the IHT weights with ``refit=False``).
    raw_coef_ : ndarray of shape (n_features,)
        The IHT weights before the refit.
    intercept_, raw_intercept_ : float
        Always 0.0 (no intercept).
    support_ : ndarray of int
        Selected feature indices, sorted.
    n_iter_ : int
        Iterations run.
    step_size_ : float
        The final ``eta`` (after the halvings).
    objective_path_ : ndarray
        The objective before the first iteration and after each one (non-increasing).
    loss_ : str
        The loss used (``auto`` resolved).
    classes_ : ndarray of shape (2,)
        Classification: the two labels.
    n_features_in_ : int
        Number of features seen by ``fit``.
    fit_time_ : float
        Seconds of the fit.

    Examples
    --------
    >>> from asyos import ProjectedGradient, make_regression
    >>> data = make_regression(n_features=50, n_informative=5, n_samples=200, seed=0)
    >>> model = ProjectedGradient(budget=5).fit(data.X, data.y)
    >>> model.support_.tolist()
    [7, 13, 24, 27, 49]
    >>> bool(model.score(data.X_test, data.y_test) > 0.95)
    True
    >>> bool(all(model.objective_path_[1:] <= model.objective_path_[:-1]))
    True
    """

    _reported = ("step_size_", "n_iter_", "raw_intercept_")

    _parameter_constraints = {"budget": BUDGET, "loss": "no_validation",     # get_loss names the choices
                              "max_iter": [count(1)], "tol": [positive()], "refit": BOOLEAN, "random_state": SEED}

    def __init__(self, budget=10, loss="squared", max_iter=500, tol=1e-7, refit=True, random_state=0):
        self.budget = budget
        self.loss = loss
        self.max_iter = max_iter
        self.tol = tol
        self.refit = refit
        self.random_state = random_state

    def fit(self, X, y):
        X, y, loss = self._fit_data(X, y)
        check_positive_int(self.max_iter, "max_iter")
        check_positive_float(self.tol, "tol")
        start = time.perf_counter()
        n, p = X.shape
        lip = restricted_lipschitz(FeatureShard(X), 2 * self.budget_, loss.curvature,
                                   seed=[int(self.random_state), 0x1A7])
        eta = 1.0 / lip if lip > 0 else 1.0
        w = np.zeros(p)
        u = np.zeros(n)
        f = loss.value(y, u)
        path = [f]
        it = 0
        for it in range(1, self.max_iter + 1):
            grad = np.asarray(X.T @ loss.dloss(y, u)).ravel()
            while True:
                w_new = project_l0(w - eta * grad, self.budget_)
                step = w_new - w
                u_new = np.asarray(X @ w_new).ravel()
                f_new = loss.value(y, u_new)
                bound = f + float(grad @ step) + 0.5 / eta * float(step @ step)
                if f_new <= bound + 1e-12 * max(1.0, abs(f)) or eta < 1e-12:
                    break
                eta *= 0.5
            change = float(np.linalg.norm(step))
            w, u, f = w_new, u_new, f_new
            path.append(f)
            if change <= self.tol * max(float(np.linalg.norm(w)), 1e-12):
                break
        support = np.flatnonzero(w)
        self.n_iter_ = it
        self.step_size_ = eta
        self.objective_path_ = np.asarray(path)
        self._set_selection(X, y, loss, support, w[support])
        self.fit_time_ = time.perf_counter() - start
        return self


def _l1_classifier(loss_name, C):
    if loss_name == "squared_hinge":
        from sklearn.svm import LinearSVC
        return LinearSVC(penalty="l1", loss="squared_hinge", dual=False, C=C, fit_intercept=False,
                         tol=1e-6, max_iter=5000)
    from sklearn.linear_model import LogisticRegression
    params = inspect.signature(LogisticRegression.__init__).parameters
    if params["penalty"].default == "deprecated":   # scikit-learn >= 1.8
        return LogisticRegression(l1_ratio=1.0, C=C, solver="liblinear", fit_intercept=False, tol=1e-6)
    return LogisticRegression(penalty="l1", C=C, solver="liblinear", fit_intercept=False, tol=1e-6)


class LassoToBudget(BudgetedSelector):
    """L1-regularised fit whose penalty is lowered until at least ``budget`` features are non-zero,
    then the ``budget`` largest coefficients are kept and refit.

    The KDD'16 baseline ("lambda is set to guarantee the batch methods selecting at least s
    features"): scikit-learn's ``Lasso`` for the squared loss, ``LinearSVC(penalty="l1")`` for the
    squared hinge, L1 ``LogisticRegression`` for the logistic loss (module docstring). No intercept:
    centre ``y`` (and ``X``) first.

    Parameters
    ----------
    budget : int, default=10
        Number of features to keep (``s``).
    loss : {"squared", "squared_hinge", "logistic", "auto"}, default="squared"
        ``auto``: the squared hinge when ``y`` holds two classes, else the squared loss.
    n_alphas : int, default=100
        Squared loss: the grid of the path, ``n_alphas`` values from ``alpha_max`` down to
        ``eps alpha_max`` (>= 2).
    eps : float, default=1e-3
        Squared loss: the end of the grid relative to ``alpha_max``, in (0, 1).
    refit : bool, default=True
        Refit the loss on the selected features after selection (``asyos.learners.refit``).
    random_state : int or None, default=0
        Not passed to the fits (kept for the common interface): liblinear's classifiers seed their
        coordinate order from numpy's global generator, so a classification fit may differ slightly
        between runs (by about 1e-7 in the coefficients).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Refit coefficients (the L1 fit's with ``refit=False``).
    raw_coef_ : ndarray of shape (n_features,)
        The L1 fit's coefficients of the selected features.
    intercept_, raw_intercept_ : float
        Always 0.0 (no intercept).
    support_ : ndarray of int
        Selected feature indices, sorted.
    alpha_ : float
        Squared loss: the ``Lasso`` penalty of the fit kept.
    C_ : float
        Classification: the ``C`` of the fit kept.
    n_fits_ : int
        L1 fits run.
    search_path_ : list of (float, int)
        Every ``(alpha or C, non-zeros)`` fitted.
    loss_ : str
        The loss used (``auto`` resolved).
    classes_ : ndarray of shape (2,)
        Classification: the two labels.
    n_features_in_ : int
        Number of features seen by ``fit``.
    fit_time_ : float
        Seconds of the fit.

    Examples
    --------
    >>> from asyos import LassoToBudget, make_regression
    >>> data = make_regression(n_features=50, n_informative=5, n_samples=200, seed=0)
    >>> model = LassoToBudget(budget=5).fit(data.X, data.y)
    >>> model.support_.tolist()
    [7, 13, 24, 27, 49]
    >>> bool(model.score(data.X_test, data.y_test) > 0.95)
    True
    >>> bool(model.alpha_ > 0)
    True
    """

    _reported = ("raw_intercept_",)

    _parameter_constraints = {"budget": BUDGET, "loss": "no_validation",     # get_loss names the choices
                              "n_alphas": [count(2)], "eps": [Interval(Real, 0, 1, closed="neither")],
                              "refit": BOOLEAN, "random_state": SEED}

    def __init__(self, budget=10, loss="squared", n_alphas=100, eps=1e-3, refit=True, random_state=0):
        self.budget = budget
        self.loss = loss
        self.n_alphas = n_alphas
        self.eps = eps
        self.refit = refit
        self.random_state = random_state

    def fit(self, X, y):
        X, y, loss = self._fit_data(X, y)
        start = time.perf_counter()
        if loss.name == "squared":
            coef = self._lasso_path(X, y)
        else:
            coef = self._l1_classifier_search(X, y, loss.name)
        nonzero = np.flatnonzero(coef)
        keep = nonzero[keep_top_k(np.abs(coef[nonzero]), self.budget_)]
        self._set_selection(X, y, loss, keep, coef[keep])
        self.fit_time_ = time.perf_counter() - start
        return self

    def _lasso_path(self, X, y):
        """The grid walk of scikit-learn's path (``n_alphas`` values from ``alpha_max`` down to
        ``eps alpha_max``, warm-started) as ``search_l1_weight`` with the grid's ratio as its factor
        and no step left for a bisection: the first ``alpha`` with at least ``budget`` non-zeros."""
        from sklearn.linear_model import Lasso
        check_positive_int(self.n_alphas, "n_alphas", minimum=2)
        n = X.shape[0]
        alpha_max = float(np.max(np.abs(X.T @ y))) / n
        self.n_fits_ = 0
        if alpha_max == 0:
            return np.zeros(X.shape[1])
        model = Lasso(alpha=alpha_max, fit_intercept=False, warm_start=True, max_iter=5000, tol=1e-6,
                      selection="cyclic")
        Xf = X.tocsc() if sp.issparse(X) else np.asfortranarray(X)

        def fit(alpha, warm):
            model.set_params(alpha=alpha)
            model.coef_ = np.zeros(X.shape[1]) if warm is None else warm.copy()
            model.fit(Xf, y)
            coef = np.asarray(model.coef_, dtype=float).ravel()
            return coef, int(np.count_nonzero(coef))

        steps = self.n_alphas - 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=Warning)
            found = search_l1_weight(fit, self.budget_, alpha_max, factor=self.eps ** (-1.0 / steps),
                                     max_expand=steps, max_bisect=0, max_steps=steps, known={alpha_max: (None, 0)})
        return self._found(found, X.shape[1], "alpha_", lambda alpha: alpha)

    def _l1_classifier_search(self, X, y, loss_name):
        """The C of the L1 classifier as the l1 weight ``1/C`` of ``search_l1_weight``: C doubled from
        ``2 l1_min_c`` (below ``l1_min_c`` every coefficient is zero) to at least ``budget`` non-zeros
        (at most 40 times), then 8 bisection steps in ``log C`` for the smallest such C, stopping early
        at exactly ``budget`` (it always ran the 8: the early stop gave the same supports with about half
        the fits, 128 -> 67 and 130 -> 69, on ``make_classification`` p = 300, s in {5, 10, 20}, 4 seeds)."""
        from sklearn.svm import l1_min_c
        loss_kind = "squared_hinge" if loss_name == "squared_hinge" else "log"
        c_min = float(l1_min_c(X, y, loss=loss_kind, fit_intercept=False))

        def fit(weight, warm):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", category=Warning)
                model = _l1_classifier(loss_name, 1.0 / weight).fit(X, y)
            coef = np.asarray(model.coef_, dtype=float).ravel()
            return coef, int(np.count_nonzero(coef))

        found = search_l1_weight(fit, self.budget_, 1.0 / c_min, factor=2.0, max_expand=40, max_bisect=8,
                                 max_steps=48, precision=0.0, known={1.0 / c_min: (None, 0)}, warm=False)
        return self._found(found, X.shape[1], "C_", lambda weight: 1.0 / weight)

    def _found(self, found, p, name, value):
        """The coefficients of the search's ``at_least()`` model; its weight as ``name``."""
        self.n_fits_ = len(found.steps)
        self.search_path_ = [(value(weight), nnz) for weight, nnz in found.path]
        best = found.at_least()
        setattr(self, name, value(best.weight))
        return np.zeros(p) if best.model is None else best.model
