"""Refit on the selected features (KDD'16 Sec. 5: "we use the selected features to fit the
training data again"), the same for every method before evaluation.

* squared loss: least squares (minimum-norm when there are more features than samples);
* squared hinge: L-BFGS on the loss restricted to the selected columns (convex, smooth);
* logistic: L-BFGS with a tiny ridge ``1e-6 ||w||^2 / 2`` so that separable data stay bounded.

``ridge`` (``alpha``): the refit minimises ``loss + (alpha / 2) ||w||^2`` on the columns scaled to unit
variance, the objective of Online Substitution with the same ``ridge`` (the model on the selected
features regularised as the selection was; unregularised, ``k`` features of ``n <= k`` rows
interpolate whatever was selected). For the squared loss it is solved in closed form.

``refit`` fits ``u = X_S w`` (the KDD'16 model); ``refit_with_intercept`` fits ``u = X_S w + b``
with ``b`` unpenalised, on the columns centred and scaled to unit variance (so that L-BFGS sees
a well-conditioned problem whatever the units; the ridge, for the logistic loss, is on the
standardized weights), and returns the coefficients in the columns' own units.
"""
from __future__ import annotations

import numpy as np

LOGISTIC_RIDGE = 1e-6


def refit(X_S, y, loss, w0=None, ridge=0.0) -> np.ndarray:
    """Coefficients minimising ``loss(X_S w, y)`` over the columns of ``X_S`` (dense n x k), plus the
    ridge on the weights of the columns scaled to unit variance when ``ridge`` > 0."""
    X_S = np.asarray(X_S, dtype=np.float64)
    k = X_S.shape[1]
    if k == 0:
        return np.zeros(0)
    if ridge > 0:
        scale = _unit_scale(X_S)
        start = None if w0 is None else _scaled_weights(w0, scale)
        return _penalised(X_S * scale, y, loss, start, k, ridge) * scale
    if loss.name == "squared":
        coef, *_ = np.linalg.lstsq(X_S, y, rcond=None)
        return coef
    start = np.zeros(k) if w0 is None else np.asarray(w0, dtype=float)
    return _lbfgs(X_S, y, loss, start, k)


def _unit_scale(X_S):
    """``1 / std`` of each column (0 for a constant column, which then gets weight 0)."""
    std = X_S.std(axis=0) if X_S.shape[0] else np.ones(X_S.shape[1])
    return np.where(std > 0, 1.0 / np.where(std > 0, std, 1.0), 0.0)


def _scaled_weights(w, scale):
    """Weights ``w`` of the raw columns as weights of the columns times ``scale`` (0 where it is 0)."""
    return np.where(scale > 0, np.asarray(w, dtype=float) / np.where(scale > 0, scale, 1.0), 0.0)


def refit_with_intercept(X_S, y, loss, w0=None, intercept0=0.0, ridge=0.0):
    """``(coef, intercept)`` minimising ``loss(X_S w + b, y)`` (``b`` unpenalised), plus
    ``(ridge / 2) ||w||^2`` on the standardized weights; ``X_S`` dense n x k, possibly with no column
    (then only ``b`` is fitted)."""
    X_S = np.asarray(X_S, dtype=np.float64)
    n, k = X_S.shape
    mean = X_S.mean(axis=0) if n else np.zeros(k)
    scale = _unit_scale(X_S)
    Z = np.empty((n, k + 1))
    np.subtract(X_S, mean, out=Z[:, :k])
    Z[:, :k] *= scale
    Z[:, k] = 1.0
    start = np.zeros(k + 1)
    if w0 is not None:                      # the same model in standardized units
        start[:k] = _scaled_weights(w0, scale)
        start[k] = float(intercept0) + float(np.asarray(w0, dtype=float) @ mean)
    if ridge > 0:
        theta = _penalised(Z, y, loss, start, k, ridge)
    elif loss.name == "squared":
        theta, *_ = np.linalg.lstsq(Z, y, rcond=None)
    else:
        theta = _lbfgs(Z, y, loss, start, k)
    coef = theta[:k] * scale
    return coef, float(theta[k] - coef @ mean)


def _penalised(Z, y, loss, start, n_penalised, ridge):
    """``theta`` minimising ``loss(Z theta) + (ridge / 2) ||theta[:n_penalised]||^2``: for the squared
    loss, least squares on ``Z`` stacked over ``sqrt(n ridge)`` times the penalised coordinates (the
    normal equations' solution without forming ``Z^T Z``), else L-BFGS."""
    n, d = Z.shape
    if loss.name == "squared":
        # (1/(2n)) |Z theta - y|^2 + (ridge/2) |theta_p|^2  <=>  least squares on [Z; sqrt(n ridge) I_p]
        penalty = np.zeros((n_penalised, d))
        penalty[:, :n_penalised] = np.sqrt(n * ridge) * np.eye(n_penalised)
        theta, *_ = np.linalg.lstsq(np.vstack([Z, penalty]), np.concatenate([y, np.zeros(n_penalised)]),
                                    rcond=None)
        return theta
    return _lbfgs(Z, y, loss, np.zeros(d) if start is None else start, n_penalised, ridge)


def _lbfgs(Z, y, loss, start, n_penalised, ridge=0.0):
    """L-BFGS on ``loss(Z theta) + (ridge / 2) ||theta[:n_penalised]||^2``; without a ridge, the
    logistic loss gets ``LOGISTIC_RIDGE`` there."""
    ridge = max(ridge, LOGISTIC_RIDGE if loss.name == "logistic" else 0.0)

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


def refit_selection(X_S, y, loss, coef, intercept=None, ridge=0.0):
    """The refit every selector ends with: ``(coef, intercept)`` on the selected columns ``X_S``
    (dense n x k) from the selection's own ``coef`` and ``intercept`` (``None``: a model without
    one, which stays without; returned as 0); ``ridge``: the selection's."""
    coef = np.asarray(coef, dtype=float)
    if intercept is not None:
        return refit_with_intercept(X_S, y, loss, w0=coef, intercept0=intercept, ridge=ridge)
    if coef.size == 0:
        return coef.copy(), 0.0
    return refit(X_S, y, loss, w0=coef, ridge=ridge), 0.0
