"""Refit on the selected features (KDD'16 Sec. 5: "we use the selected features to fit the
training data again"), the same for every method before evaluation.

* squared loss: least squares (minimum-norm when there are more features than samples);
* squared hinge: L-BFGS on the loss restricted to the selected columns (convex, smooth);
* logistic: L-BFGS with a tiny ridge ``1e-6 ||w||^2 / 2`` so that separable data stay bounded.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

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
    ridge = LOGISTIC_RIDGE if loss.name == "logistic" else 0.0

    def objective(w):
        u = X_S @ w
        value = loss.value(y, u) + 0.5 * ridge * float(w @ w)
        grad = X_S.T @ loss.dloss(y, u) + ridge * w
        return value, grad

    start = np.zeros(k) if w0 is None else np.asarray(w0, dtype=float)
    result = minimize(objective, start, jac=True, method="L-BFGS-B",
                      options={"maxiter": 1000, "gtol": 1e-10, "ftol": 1e-14})
    return result.x
