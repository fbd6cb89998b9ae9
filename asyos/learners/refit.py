"""Refit on the selected features (KDD'16 Sec. 5: "we use the selected features to fit the
training data again"), the same for every method before evaluation.

* squared loss: least squares (minimum-norm when there are more features than samples);
* squared hinge: L-BFGS on the loss restricted to the selected columns (convex, smooth);
* logistic: L-BFGS with a tiny ridge ``1e-6 ||w||^2 / 2`` so that separable data stay bounded.

``refit`` fits ``u = X_S w`` (the KDD'16 model); ``refit_with_intercept`` fits ``u = X_S w + b``
with ``b`` unpenalised, on the columns centred and scaled to unit variance (so that L-BFGS sees
a well-conditioned problem whatever the units; the ridge, for the logistic loss, is on the
standardized weights), and returns the coefficients in the columns' own units.
"""
from __future__ import annotations

import numpy as np

LOGISTIC_RIDGE = 1e-6


def refit(X_S, y, loss, w0=None) -> np.ndarray:
    """Coefficients minimising ``loss(X_S w, y)`` over the columns of ``X_S`` (dense n x k)."""
    X_S = np.asarray(X_S, dtype=np.float64)
    k = X_S.shape[1]
    if k == 0:
        return np.zeros(0)
    if loss.name == "squared":
        coef, *_ = np.linalg.lstsq(X_S, y, rcond=None)
        return coef
    start = np.zeros(k) if w0 is None else np.asarray(w0, dtype=float)
    return _lbfgs(X_S, y, loss, start, k)


def refit_with_intercept(X_S, y, loss, w0=None, intercept0=0.0):
    """``(coef, intercept)`` minimising ``loss(X_S w + b, y)`` (``b`` unpenalised); ``X_S`` dense
    n x k, possibly with no column (then only ``b`` is fitted)."""
    X_S = np.asarray(X_S, dtype=np.float64)
    n, k = X_S.shape
    mean = X_S.mean(axis=0) if n else np.zeros(k)
    std = X_S.std(axis=0) if n else np.ones(k)
    scale = np.where(std > 0, 1.0 / np.where(std > 0, std, 1.0), 0.0)     # constant columns get weight 0
    Z = np.empty((n, k + 1))
    np.subtract(X_S, mean, out=Z[:, :k])
    Z[:, :k] *= scale
    Z[:, k] = 1.0
    if loss.name == "squared":
        theta, *_ = np.linalg.lstsq(Z, y, rcond=None)
    else:
        start = np.zeros(k + 1)
        if w0 is not None:                  # the same model in standardized units
            w0 = np.asarray(w0, dtype=float)
            start[:k] = np.where(scale > 0, w0 / np.where(scale > 0, scale, 1.0), 0.0)
            start[k] = float(intercept0) + float(w0 @ mean)
        theta = _lbfgs(Z, y, loss, start, k)
    coef = theta[:k] * scale
    return coef, float(theta[k] - coef @ mean)


def _lbfgs(Z, y, loss, start, n_penalised):
    """L-BFGS on ``loss(Z theta)``; the logistic ridge applies to the first ``n_penalised``
    coordinates."""
    ridge = LOGISTIC_RIDGE if loss.name == "logistic" else 0.0

    def objective(theta):
        u = Z @ theta
        w = theta[:n_penalised]
        value = loss.value(y, u) + 0.5 * ridge * float(w @ w)
        grad = Z.T @ loss.dloss(y, u)
        grad[:n_penalised] += ridge * w
        return value, grad

    from scipy.optimize import minimize      # 0.45 s to import: only the ranks that refit pay it
    result = minimize(objective, start, jac=True, method="L-BFGS-B",
                      options={"maxiter": 1000, "gtol": 1e-10, "ftol": 1e-14})
    return result.x


def refit_selection(X_S, y, loss, coef, intercept=None):
    """The refit every selector ends with: ``(coef, intercept)`` on the selected columns ``X_S``
    (dense n x k) from the selection's own ``coef`` and ``intercept`` (``None``: a model without
    one, which stays without; returned as 0)."""
    coef = np.asarray(coef, dtype=float)
    if intercept is not None:
        return refit_with_intercept(X_S, y, loss, w0=coef, intercept0=intercept)
    if coef.size == 0:
        return coef.copy(), 0.0
    return refit(X_S, y, loss, w0=coef), 0.0
