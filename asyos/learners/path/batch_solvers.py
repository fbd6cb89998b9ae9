"""Batch solvers of ``1/(2n) ||X w - y||^2 + alpha R(w)``: what DFLS is compared against, and
how a DFLS model is first fitted.

* ``fista_group_lasso``: FISTA (Beck & Teboulle 2009) with the gradient-based adaptive restart of
  O'Donoghue & Candes (2015), the baseline of the DFLS paper (Sec. 5.1) for group lasso (eq. 9).
* ``lbfgs_lp``: L-BFGS (scipy) for the smooth l_p objective, p > 1 (eq. 10).

Both take the data ``X`` (each iteration costs two products with ``X``), an optional starting
point ``w0`` (warm start; zeros otherwise: cold start) and a tolerance. FISTA stops when an
iteration moves ``w`` by less than ``tol * max(1, ||w||)``; L-BFGS when the largest entry of the
gradient is below ``tol * max(1, ||X^T y / n||_inf)``. Both report the KKT residual they reached.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.optimize

from .penalties import GroupLasso, LpNorm


@dataclass
class BatchResult:
    coef: np.ndarray
    n_iter: int
    converged: bool
    seconds: float
    kkt_residual: float


def lipschitz_constant(X) -> float:
    """``lambda_max(X^T X / n)``, from the smaller of ``X^T X`` and ``X X^T``."""
    n, m = X.shape
    small = X.T @ X if m <= n else X @ X.T
    return float(scipy.linalg.eigvalsh(small, subset_by_index=[small.shape[0] - 1, small.shape[0] - 1])[0]) / n


def kkt_residual(X, y, w, alpha, penalty) -> float:
    """Largest per-group violation of ``0 in X^T (X w - y) / n + alpha dR(w)``."""
    grad = X.T @ (X @ w - y) / X.shape[0]
    return float(np.max(penalty.stationarity(w, grad, alpha), initial=0.0))


def fista_group_lasso(X, y, alpha, penalty: GroupLasso, w0=None, tol=1e-7, max_iter=100_000,
                      lipschitz=None, state=None, between=None) -> BatchResult:
    """FISTA with adaptive restart for eq. 9; ``lipschitz`` may be passed to skip its computation.
    ``state``, ``between``: see ``fista`` (``seconds`` then counts from the resumed start)."""
    t0 = time.perf_counter()
    n = X.shape[0]
    L = lipschitz if lipschitz is not None else lipschitz_constant(X)
    x, k, converged = fista(lambda w: X.T @ (X @ w - y) / n, L, penalty, alpha,
                            np.zeros(X.shape[1]) if w0 is None else w0, tol, max_iter, state, between)
    return BatchResult(x, k, converged, time.perf_counter() - t0, kkt_residual(X, y, x, alpha, penalty))


def fista(gradient, lipschitz, penalty, alpha, w0, tol=1e-7, max_iter=100_000, state=None, between=None):
    """Proximal gradient with Nesterov momentum, restarted whenever the momentum points uphill
    (O'Donoghue & Candes 2015, gradient scheme). Returns ``(w, iterations, converged)``.

    ``between(state)``, when given, is called before each iteration with the iterate so far
    (``{"x", "z", "t", "k"}``: the point, the momentum point, the momentum weight and the
    iterations done): a checkpoint saves it, and ``state`` continues from one, bit for bit."""
    step = 1.0 / lipschitz
    if state is None:
        x = np.array(w0, dtype=float)
        z, t, done = x.copy(), 1.0, 0
    else:
        x, z, t, done = state["x"], state["z"], state["t"], state["k"]
    converged = False
    k = done
    for k in range(done + 1, max_iter + 1):
        if between is not None:
            between({"x": x, "z": z, "t": t, "k": k - 1})
        x_new = penalty.prox(z - step * gradient(z), step * alpha)
        move = x_new - x
        if np.dot(z - x_new, move) > 0:            # the momentum points uphill: restart it
            t = 1.0
            z = x_new
        else:
            t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
            z = x_new + ((t - 1.0) / t_new) * move
            t = t_new
        x = x_new
        if np.linalg.norm(move) <= tol * max(1.0, np.linalg.norm(x)):
            converged = True
            break
    return x, k, converged


def lbfgs_lp(X, y, alpha, penalty: LpNorm, w0=None, tol=1e-7, max_iter=100_000) -> BatchResult:
    """L-BFGS on eq. 10 (smooth for p > 1)."""
    t0 = time.perf_counter()
    n, m = X.shape
    p = penalty.exponent

    def objective(w):
        r = X @ w - y
        a = np.abs(w)
        value = 0.5 * (r @ r) / n + alpha * np.sum(a ** p)
        grad = X.T @ r / n + alpha * p * a ** (p - 1.0) * np.sign(w)
        return value, grad

    scale = max(1.0, float(np.max(np.abs(X.T @ y), initial=0.0)) / n)
    x0 = np.zeros(m) if w0 is None else np.array(w0, dtype=float)
    res = scipy.optimize.minimize(objective, x0, jac=True, method="L-BFGS-B",
                                  options=dict(gtol=tol * scale, ftol=0.0, maxiter=max_iter, maxfun=2 * max_iter,
                                               maxcor=20))
    x = res.x
    kkt = kkt_residual(X, y, x, alpha, penalty)
    return BatchResult(x, int(res.nit), kkt <= tol * scale * (1 + 1e-6) or bool(res.success),
                       time.perf_counter() - t0, kkt)


def solve_batch(X, y, alpha, penalty, w0=None, tol=1e-7, max_iter=100_000, state=None, between=None) -> BatchResult:
    """The batch solver that suits the penalty. ``state``/``between`` (``fista``) apply to FISTA only:
    scipy's L-BFGS keeps its state to itself, and ignores them."""
    if isinstance(penalty, GroupLasso):
        return fista_group_lasso(X, y, alpha, penalty, w0=w0, tol=tol, max_iter=max_iter, state=state,
                                 between=between)
    return lbfgs_lp(X, y, alpha, penalty, w0=w0, tol=tol, max_iter=max_iter)
