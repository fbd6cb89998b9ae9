"""DFLS: add or remove features of a fitted group-lasso or l_p model without retraining
(Li & Gu, *An Accuracy Guaranteed Online Solver for Learning in Dynamic Feature Space*).

``DFLS(penalty="group_lasso" | "lp", alpha, exponent, groups)`` fits

    min_w  1/(2n) ||X w - y||^2 + alpha R(w)

with ``R`` the group lasso ``sum_g sqrt(d_g) ||w_g||`` (eq. 9) or ``sum_j |w_j|^p``, ``p > 1``
(eq. 10), by a batch solver (FISTA with adaptive restart, or L-BFGS) finished by Newton steps on
the active set. Then

* ``add_features(X_new, groups=None)`` moves the model to the optimum on the old and new columns
  by following the solution path in ``theta`` from 0 to 1 (Alg. 1-2; ``asyos.learners.path.solution_path``);
* ``remove_features(indices)`` follows it from 1 to 0 (Alg. 3-4) and drops the columns.

The result is the optimum a retraining would reach (to the solver's tolerance): ``kkt_residual_``
says how far the model is from the optimality conditions (eq. 3), and ``path_`` keeps the path
of the last change (its transition points, the ODE's work, ``coef_at(theta)``).

By default the columns are centered and scaled to unit variance and ``y`` is centered (an
unpenalized intercept, footnote 1 of the paper); each column's scale is its own, so adding or
removing columns leaves the others untouched. ``coef_`` and ``intercept_`` are in the data's
units; ``w_`` holds the coefficients of the standardized problem, which the penalty sees.
"""
from __future__ import annotations

import functools
import numbers

import numpy as np
import scipy.sparse as sp

from ...data.dataset import as_float_matrix
from ...errors import InputError
from ..base import Estimator
from .batch_solvers import BatchResult, solve_batch
from .penalties import GroupLasso, make_penalty
from .solution_path import PathOptions, PathProblem, follow_path, newton_polish
from ..params import BOOLEAN, Interval, Real, StrOptions, non_negative, positive

PENALTIES = ("group_lasso", "lp")
DEFAULT_EXPONENT = 4.0


class DFLS(Estimator):
    """Group-lasso or l_p-penalized least squares whose feature set can grow and shrink.

    Parameters
    ----------
    penalty : "group_lasso" (eq. 9) or "lp" (eq. 10).
    alpha : the regularization weight (> 0).
    exponent : ``p`` of the l_p penalty, > 1 (default 4, the paper's l_4); lp only.
    groups : one group label per column of ``X`` (group lasso only); default: one group per column
        (the lasso).
    fit_intercept, standardize : center ``X`` and ``y`` / scale each column to unit variance.
    tol : optimality tolerance of the initial fit, relative to ``max(1, ||X^T y / n||_inf)``.
    ode_method, ode_rtol, ode_atol : ``scipy.integrate.solve_ivp``'s method and tolerances. They set
        how closely the *path* is followed (``path_.coef_at``); the end point is brought to the
        optimality conditions by Newton steps whatever they are, so the default is loose (1e-4).
    correction : ``gamma`` of the path's drift correction ``-gamma K^{-1} F`` (0: eq. 8 verbatim).
    entry_step : ``eps`` of an entering group's start ``w_g = eps C_g / ||C_g||`` (Alg. 1, line 12),
        relative to ``max(1, ||w||_inf)``.
    start_theta : l_p only: where the path starts when adding, and where it stops when removing
        (near ``theta = 0`` the l_p path is not differentiable); also the lasso's under ``follow="ode"``.
    follow : "auto" (default) or "ode". With singleton groups (the lasso) the path is affine in
        ``1 / theta`` between transition points, and "auto" walks it exactly from one to the next
        (``solution_path._lasso_walk``): at n = 20,000, m = 20 + 5 it takes 0.7 ms where integrating
        eq. 8 took 44 ms for the same end point (``bench_dfls.py``). "ode" integrates eq. 8 for
        every penalty, as the paper does; other groups and l_p always do.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features_in_,)
        The coefficients, in the data's units.
    intercept_ : float
        The intercept (``mean(y) - mean(X) . coef_``; 0 without ``fit_intercept``).
    support_ : ndarray of int
        Indices of the non-zero coefficients, sorted.
    w_ : ndarray of shape (n_features_in_,)
        The coefficients of the standardized problem, which the penalty sees.
    kkt_residual_ : float
        How far ``w_`` is from the optimality conditions (eq. 3).
    path_ : SolutionPath or None
        The path of the last ``add_features`` / ``remove_features`` (its transition points, the ODE's
        work, ``coef_at(theta)``); ``None`` after ``fit``.
    fit_result_ : BatchResult
        The batch solve of ``fit`` (coefficients, iterations, convergence, seconds, KKT residual).
    groups_ : ndarray or None
        Group lasso: each column's group label; ``None`` for l_p.
    exponent_ : float
        The ``p`` of the l_p penalty (``exponent``, default 4).
    X_ : ndarray of shape (n_samples, n_features_in_)
        The standardized training columns (a view).
    y_ : ndarray of shape (n_samples,)
        The centred training targets.
    x_mean_, x_scale_ : ndarray of shape (n_features_in_,)
        Each column's mean (0 without ``fit_intercept``) and scale (1 without ``standardize``).
    y_mean_ : float
        The mean of ``y`` (0 without ``fit_intercept``).
    gram_, xty_ : ndarray
        ``X_^T X_ / n`` and ``X_^T y_ / n``.
    n_features_in_ : int
        The current number of features (it changes with ``add_features`` and ``remove_features``).

    Examples
    --------
    >>> import numpy as np
    >>> from asyos import DFLS
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((100, 6))
    >>> y = X[:, 0] - 2.0 * X[:, 4] + 0.1 * rng.standard_normal(100)
    >>> model = DFLS(alpha=0.1).fit(X[:, :4], y)
    >>> model.add_features(X[:, 4:]).support_.tolist()
    [0, 4]
    >>> retrained = DFLS(alpha=0.1).fit(X, y)
    >>> bool(np.allclose(model.coef_, retrained.coef_, atol=1e-6))
    True
    >>> model.remove_features([1, 2]).n_features_in_
    4
    """

    def __init__(self, penalty="group_lasso", alpha=0.2, exponent=None, groups=None, fit_intercept=True,
                 standardize=True, tol=1e-10, ode_method="RK45", ode_rtol=1e-4, ode_atol=1e-8, correction=10.0,
                 entry_step=1e-8, start_theta=1e-3, follow="auto"):
        self.penalty = penalty
        self.alpha = alpha
        self.exponent = exponent
        self.groups = groups
        self.fit_intercept = fit_intercept
        self.standardize = standardize
        self.tol = tol
        self.ode_method = ode_method
        self.ode_rtol = ode_rtol
        self.ode_atol = ode_atol
        self.correction = correction
        self.entry_step = entry_step
        self.start_theta = start_theta
        self.follow = follow

    # -- parameters -----------------------------------------------------------------------------
    _parameter_constraints = {
        "penalty": [StrOptions(set(PENALTIES))], "alpha": [positive()],
        "exponent": [Interval(Real, 1, None, closed="neither"), None], "groups": ["array-like", None],
        "fit_intercept": BOOLEAN, "standardize": BOOLEAN, "tol": [positive()], "ode_method": [str],
        "ode_rtol": [positive()], "ode_atol": [positive()], "correction": [non_negative()],
        "entry_step": [positive()], "start_theta": [Interval(Real, 0, 0.5, closed="neither")],
        "follow": [StrOptions({"auto", "ode"})]}

    def _check_params(self):
        self._validate_params()
        if self.penalty == "lp":
            if self.groups is not None:
                raise InputError("groups apply to penalty='group_lasso' only")
        elif self.exponent is not None:
            raise InputError("exponent applies to penalty='lp' only")
        return PathOptions(method=self.ode_method, rtol=self.ode_rtol, atol=self.ode_atol,
                           correction=float(self.correction), entry_step=float(self.entry_step),
                           start_theta=float(self.start_theta), follow=self.follow)

    @property
    def exponent_(self) -> float:
        return DEFAULT_EXPONENT if self.exponent is None else float(self.exponent)

    # -- data -----------------------------------------------------------------------------------
    def _columns(self, X, where, n_rows=None, into=None):
        """``X`` validated, dense, and standardized with its own columns' means and scales; written
        into ``into(n_columns)`` (an n x k Fortran-ordered block) when given."""
        X = as_float_matrix(X, where)
        if sp.issparse(X):
            X = X.toarray()
        if n_rows is not None and X.shape[0] != n_rows:
            raise InputError(f"{where} has {X.shape[0]} rows but the model was fitted on {n_rows} samples; "
                             f"new features must describe the same samples")
        if X.shape[1] == 0:
            raise InputError(f"{where} has no columns")
        if into is None:
            mean = X.mean(axis=0) if self.fit_intercept else np.zeros(X.shape[1])
            Z = np.subtract(X, mean, order="F")                        # the one copy of the new columns
        else:                                   # copied once (X may be a strided view), then worked in place
            Z = into(X.shape[1])
            np.copyto(Z, X)
            mean = Z.mean(axis=0) if self.fit_intercept else np.zeros(X.shape[1])
            Z -= mean
        spread = np.sqrt(np.einsum("ij,ij->j", Z, Z) / Z.shape[0])
        flat = np.flatnonzero(spread <= 1e-12 * max(1.0, np.max(np.abs(mean), initial=0.0), np.max(spread)))
        if flat.size:
            raise InputError(f"column{'s' if flat.size > 1 else ''} {', '.join(map(str, flat[:10]))} of {where} "
                             f"{'are' if flat.size > 1 else 'is'} constant"
                             f"{' (the intercept already covers a constant)' if self.fit_intercept else ''}; "
                             f"DFLS needs columns that vary")
        scale = spread if self.standardize else np.ones(X.shape[1])
        if self.standardize:
            Z /= scale
        return Z, mean, scale

    def _labels_for(self, groups, n_columns, where, existing=None):
        if self.penalty != "group_lasso":
            if groups is not None:
                raise InputError("groups apply to penalty='group_lasso' only")
            return None
        if groups is None:
            start = 0
            if existing is not None and existing.size:
                if not np.issubdtype(existing.dtype, np.integer):
                    raise InputError(f"the model's groups are labelled {existing.dtype} values; give {where} "
                                     f"labels for the new columns")
                start = int(existing.max()) + 1
            return np.arange(start, start + n_columns)
        labels = np.asarray(groups)
        if labels.ndim != 1 or labels.shape[0] != n_columns:
            raise InputError(f"{where} must give one label per column ({n_columns}); got shape {labels.shape}")
        if existing is not None:
            clash = np.intersect1d(labels, existing)
            if clash.size:
                raise InputError(f"group label{'s' if clash.size > 1 else ''} {', '.join(map(str, clash[:10]))} "
                                 f"already belong{'' if clash.size > 1 else 's'} to the model; new features must "
                                 f"form new groups (a group's size is part of its penalty)")
            if np.issubdtype(existing.dtype, np.number) != np.issubdtype(labels.dtype, np.number):
                raise InputError(f"{where} labels must be of the same kind as the model's ({existing.dtype})")
        return labels

    def _make_penalty(self, labels, n_columns):
        return make_penalty(self.penalty, labels=labels, exponent=self.exponent_, n_features=n_columns)

    # -- the stored design: columns in a buffer with room to grow ---------------------------------
    @property
    def X_(self):
        """The standardized training columns the model is fitted on (a view)."""
        return self._design[:, :self._n_columns]

    def _store_design(self, Z, spare=0):
        self._design = np.empty((Z.shape[0], Z.shape[1] + spare), order="F")
        self._design[:, :Z.shape[1]] = Z
        self._n_columns = Z.shape[1]

    def _spare(self, k):
        """The buffer's next ``k`` columns, past the model's (the buffer grown by doubling when full):
        new columns are standardized straight into them, so adding features writes only those."""
        n, m = self._design.shape[0], self._n_columns
        if m + k > self._design.shape[1]:
            grown = np.empty((n, max(m + k, 2 * self._design.shape[1])), order="F")
            grown[:, :m] = self._design[:, :m]
            self._design = grown
        return self._design[:, m:m + k]

    def __getstate__(self):
        state = dict(self.__dict__)
        if "_design" in state:
            state["_design"] = np.asfortranarray(self.X_)     # no spare columns in a pickle
        return state

    # -- fit ------------------------------------------------------------------------------------
    def fit(self, X, y, state=None, between=None):
        """Solve the batch problem on ``X`` (FISTA or L-BFGS, then Newton on the active set).
        ``between(state)``, when given, is called between FISTA iterations with the solve's state
        (a checkpoint saves it) and ``state`` continues from one: the fit is the uninterrupted one's
        bit for bit (group lasso; scipy's L-BFGS keeps its state to itself and is not polled)."""
        self._check_params()
        X, y = self._check_data(X, y, accept_sparse="csr")
        if X.shape[0] < 2:
            raise InputError(f"X has {X.shape[0]} sample; DFLS needs at least 2 samples")
        Z, mean, scale = self._columns(X, "X")
        n = Z.shape[0]
        self.y_mean_ = float(y.mean()) if self.fit_intercept else 0.0
        self.y_ = y - self.y_mean_
        self._store_design(Z, spare=max(8, -(-Z.shape[1] // 4)))     # room to add features without a copy
        self.x_mean_, self.x_scale_ = mean, scale
        self.groups_ = self._labels_for(self.groups, Z.shape[1], "groups")
        self.gram_ = Z.T @ Z / n
        self.xty_ = Z.T @ self.y_ / n
        penalty = self._make_penalty(self.groups_, Z.shape[1])
        self.fit_result_ = self._solve(penalty, w0=None, state=state, between=between)
        self.w_ = self.fit_result_.coef
        self.path_ = None
        self._finish(penalty)
        return self

    def _solve(self, penalty, w0, state=None, between=None) -> BatchResult:
        """Batch solve on the stored data, then Newton on the active set; tighten the batch
        tolerance if the active set it found is not the optimal one. ``state``/``between``: see ``fit``."""
        problem = PathProblem(self.gram_, self.xty_, np.zeros(self.gram_.shape[0], dtype=bool), penalty, self.alpha,
                              design=self.X_)
        target = self.tol * problem.scale_
        tol = 1e-6
        total_iter, seconds, inner = 0, 0.0, None
        if state is not None:
            w0, tol, total_iter, seconds, inner = (state[k] for k in ("w0", "tol", "iterations", "seconds", "fista"))
        while True:
            poll = None if between is None else functools.partial(
                lambda fista, outer: between({**outer, "fista": fista}),
                outer={"w0": w0, "tol": tol, "iterations": total_iter, "seconds": seconds})
            result = solve_batch(self.X_, self.y_, self.alpha, penalty, w0=w0, tol=tol, state=inner, between=poll)
            inner = None                    # (n_iter counts the iterations before a resume too)
            total_iter += result.n_iter
            seconds += result.seconds
            w, _, _ = newton_polish(problem, result.coef, 1.0, problem.active_groups(result.coef), 0.1 * target)
            kkt = problem.kkt_residual(w, 1.0)
            if kkt <= target or tol <= 1e-15:
                return BatchResult(w, total_iter, kkt <= target, seconds, kkt)
            w0, tol = result.coef, tol * 1e-3

    def _finish(self, penalty):
        problem = PathProblem(self.gram_, self.xty_, np.zeros(self.gram_.shape[0], dtype=bool), penalty, self.alpha)
        self.kkt_residual_ = problem.kkt_residual(self.w_, 1.0)
        self.n_features_in_ = self.w_.size
        if getattr(self, "feature_names_in_", np.empty(self.w_.size)).size != self.w_.size:
            del self.feature_names_in_          # features were added or removed: the names no longer apply
        self.coef_ = self.w_ / self.x_scale_
        self.intercept_ = self.y_mean_ - float(self.x_mean_ @ self.coef_)
        self.support_ = np.flatnonzero(self.w_)

    # -- the dynamic feature space --------------------------------------------------------------
    def add_features(self, X_new, groups=None):
        """Add the columns ``X_new`` (same rows as ``fit``'s ``X``) by following the path from
        ``theta = 0`` to 1; ``groups`` labels them (new labels; default one group per column)."""
        self._check_fitted()
        options = self._check_params()
        n, m = self.X_.shape
        Zn, mean, scale = self._columns(X_new, "X_new", n_rows=n, into=self._spare)
        k = Zn.shape[1]
        labels = self._labels_for(groups, k, "groups", existing=self.groups_)
        design = self._design[:, :m + k]
        products = design.T @ Zn / n                           # the new columns' Gram rows, in one product
        gram = np.empty((m + k, m + k))
        gram[:m, :m] = self.gram_
        gram[:, m:] = products
        gram[m:, :m] = products[:m].T
        gram[m:, m:] = 0.5 * (products[m:] + products[m:].T)      # exactly symmetric, as X^T X is
        xty = np.concatenate([self.xty_, Zn.T @ self.y_ / n])
        all_labels = None if labels is None else np.concatenate([self.groups_, labels])
        penalty = self._make_penalty(all_labels, m + k)
        moving = np.r_[np.zeros(m, dtype=bool), np.ones(k, dtype=bool)]
        problem = PathProblem(gram, xty, moving, penalty, self.alpha, design=design)
        w, self.path_ = follow_path(problem, np.r_[self.w_, np.zeros(k)], "add", options)
        self._n_columns = design.shape[1]
        self.gram_, self.xty_, self.w_ = gram, xty, w
        self.x_mean_ = np.r_[self.x_mean_, mean]
        self.x_scale_ = np.r_[self.x_scale_, scale]
        self.groups_ = all_labels
        self._finish(penalty)
        return self

    def remove_features(self, indices):
        """Remove the columns ``indices`` (of the current feature set; for group lasso whole
        groups) by following the path from ``theta = 1`` to 0."""
        self._check_fitted()
        options = self._check_params()
        m = self.w_.size
        moving = self._removal_mask(indices, m)
        penalty = self._make_penalty(self.groups_, m)
        if isinstance(penalty, GroupLasso):
            for g, members in enumerate(penalty.members):
                if 0 < moving[members].sum() < members.size:
                    raise InputError(f"indices split group {penalty.group_labels[g].item()!r} (features "
                                     f"{', '.join(map(str, members[:10]))}); remove whole groups")
        problem = PathProblem(self.gram_, self.xty_, moving, penalty, self.alpha, design=self.X_)
        w, self.path_ = follow_path(problem, self.w_, "remove", options)
        keep = ~moving
        self._store_design(self.X_[:, keep])
        self.gram_ = self.gram_[np.ix_(keep, keep)]
        self.xty_ = self.xty_[keep]
        self.w_ = w[keep]
        self.x_mean_, self.x_scale_ = self.x_mean_[keep], self.x_scale_[keep]
        if self.groups_ is not None:
            self.groups_ = self.groups_[keep]
        self._finish(self._make_penalty(self.groups_, int(keep.sum())))
        return self

    @staticmethod
    def _removal_mask(indices, m):
        idx = np.asarray(indices)
        if idx.dtype == bool:
            if idx.shape != (m,):
                raise InputError(f"a boolean mask of features to remove must have length {m}; got shape {idx.shape}")
            mask = idx.copy()
        else:
            if idx.ndim == 0:
                idx = idx.reshape(1)
            if idx.ndim != 1 or not all(isinstance(i, numbers.Integral) for i in idx.tolist()):
                raise InputError(f"indices must be a list of feature indices (integers); got {indices!r}")
            idx = idx.astype(np.intp)
            bad = idx[(idx < 0) | (idx >= m)]
            if bad.size:
                raise InputError(f"feature index {int(bad[0])} is out of range: the model has {m} features")
            if np.unique(idx).size != idx.size:
                raise InputError("indices name a feature more than once")
            mask = np.zeros(m, dtype=bool)
            mask[idx] = True
        if not mask.any():
            raise InputError("no feature to remove")
        if mask.all():
            raise InputError(f"cannot remove every feature ({m}); fit a new model instead")
        return mask

    # -- comparisons ----------------------------------------------------------------------------
    def batch_solve(self, w0=None, tol=1e-7, state=None, between=None) -> BatchResult:
        """Retrain on the current columns with the batch solver (cold start, or warm from
        ``w0``, coefficients of the standardized problem): the baseline DFLS replaces. ``state``,
        ``between``: FISTA's iterate saved and resumed (``batch_solvers.fista``; group lasso only)."""
        self._check_fitted()
        return solve_batch(self.X_, self.y_, self.alpha, self._make_penalty(self.groups_, self.w_.size),
                           w0=w0, tol=tol, state=state, between=between)

    # -- fitted face ----------------------------------------------------------------------------
    def _task(self):
        return "regression"

    def _decision(self, X):
        X = self._check_X(X)
        return np.asarray(X @ self.coef_, dtype=float).ravel() + self.intercept_

    def objective(self) -> float:
        """``1/(2n) ||X w - y||^2 + alpha R(w)`` of the standardized problem."""
        self._check_fitted()
        r = self.X_ @ self.w_ - self.y_
        return 0.5 * (r @ r) / r.size + self.alpha * self._make_penalty(self.groups_, self.w_.size).value(self.w_)
