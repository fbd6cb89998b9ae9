"""Models with exactly ``k`` features extracted from running averages (thesis Sec. 3.2, Alg. 3-5).

Every extractor works on ``StandardizedStats`` (``asyos.learners.averages.stats``, eqs. 3.2-3.3), selects a support,
refits least squares on it (the last line of Alg. 3, 4 and 5) and maps the coefficients back to the
original units with an intercept. None of them sees the data again.

* ``ols``: least squares on every feature (eq. 3.6), ridge ``0.05`` when ``n <= p`` (``ridge="auto"``).
* ``ols_threshold`` (OLS-th, Alg. 3): the ``k`` largest ``|b_j|`` of that fit, refit.
* ``ofsa`` (OFSA, Alg. 4): gradient steps with momentum on ``1/2 b^T S_xx b - b^T S_xy`` (eq. 3.8),
  keeping the ``M_t`` largest ``|b_j|`` after each (annealing schedule ``M_t``), then a refit.
* ``penalized`` (OLasso, OElnet, OMCP, Alg. 5): the penalized problem (eq. 3.5, with ``y`` scaled to
  unit variance as glmnet does, so that selections do not depend on ``y``'s units; ``lambda`` is
  reported in ``y``'s units) solved by coordinate descent with the thresholding operators
  (eq. 3.10; ``_gram_kernels``), and ``lambda`` bisected in log scale (``budget_search``, up to
  ``max_steps`` solves, each warm-started from the solution at the nearest larger ``lambda``) until
  exactly ``k`` coefficients are non-zero. When no ``lambda`` gives exactly ``k`` (two features enter
  at once), the sparsest solution with more than ``k`` is cut to its ``k`` largest ``|b_j|``;
  ``exact=False`` instead keeps the densest solution with fewer than ``k`` (the thesis' protocol for
  its baselines).

Path helpers (``*_path``) extract several ``k`` from one set of statistics, sharing the work that
does not depend on ``k`` (the full least-squares fit; the solutions met while bisecting ``lambda``).
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import scipy.linalg

from ...errors import ConvergenceWarning, InputError
from .stats import StandardizedStats
from ...truncation import annealing_schedule, keep_top_k
from ._gram_kernels import ELNET, LASSO, MCP, coordinate_descent
from ..budget_search import search_l1_weight

PENALTIES = {"lasso": LASSO, "elnet": ELNET, "mcp": MCP}
DEFAULT_RIDGE = 0.05          # the authors' ridge for n <= p (a smaller one ruins detection at n = p)


@dataclass
class ExtractedModel:
    """A linear model taken from running averages: ``y ~ X[:, support] @ coef[support] + intercept``."""

    method: str
    k: int
    support: np.ndarray
    coef: np.ndarray
    intercept: float
    std_coef: np.ndarray                       # on the standardized data, after the refit
    selection_coef: np.ndarray                 # on the standardized data, before the refit
    raw_coef: Optional[np.ndarray] = None      # selection_coef in the data's units
    lam: Optional[float] = None
    n_iter: int = 0
    seconds: float = 0.0
    info: dict = field(default_factory=dict)

    @property
    def n_features(self) -> int:
        return self.coef.shape[0]

    def decision_function(self, X) -> np.ndarray:
        return np.asarray(X[:, self.support] @ self.coef[self.support]).ravel() + self.intercept


# ------------------------------------------------------------------------------ least squares
def resolve_ridge(ridge, weight: float, n_columns: int) -> float:
    """``"auto"``: ``DEFAULT_RIDGE`` when the (effective) sample count is at most the number of
    columns solved for, else 0; a number is used as given."""
    if ridge == "auto":
        return DEFAULT_RIDGE if weight <= n_columns else 0.0
    value = float(ridge)
    if not np.isfinite(value) or value < 0:
        raise InputError(f"ridge must be 'auto' or a number >= 0; got {ridge!r}")
    return value


def least_squares(std: StandardizedStats, columns, ridge="auto") -> np.ndarray:
    """Standardized coefficients (length ``p``, zero off ``columns``) of least squares on ``columns``:
    ``(S_SS + ridge I) b_S = S_yS`` (eq. 3.6). Singular systems get the minimum-norm solution."""
    columns = np.asarray(columns, dtype=np.intp)
    beta = np.zeros(std.n_features)
    if columns.size == 0:
        return beta
    G = std.xx[np.ix_(columns, columns)]
    r = std.xy[columns]
    lam = resolve_ridge(ridge, std.weight, columns.size)
    if lam:
        G = G + lam * np.eye(columns.size)
    try:
        factor = scipy.linalg.cho_factor(G, check_finite=False)
        diag = np.abs(np.diag(factor[0]))
        if not diag.min() > 1e-7 * diag.max():          # condition number above ~1e14: near-singular
            raise np.linalg.LinAlgError
        solution = scipy.linalg.cho_solve(factor, r, check_finite=False)
    except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):
        solution = scipy.linalg.lstsq(G, r, cond=1e-12, check_finite=False)[0]
    beta[columns] = solution
    return beta


def _finish(method, std, k, support, selection, ridge, start, lam=None, n_iter=0, refit=True, **info):
    support = np.sort(np.asarray(support, dtype=np.intp))
    beta = least_squares(std, support, ridge) if refit else np.where(np.isin(np.arange(std.n_features), support),
                                                                       selection, 0.0)
    coef, intercept = std.to_original(beta)
    selection = np.asarray(selection, dtype=float)
    return ExtractedModel(method=method, k=k, support=support, coef=coef, intercept=intercept, std_coef=beta,
                          selection_coef=selection, raw_coef=std.to_original(selection)[0], lam=lam, n_iter=n_iter,
                          seconds=time.perf_counter() - start, info=info)


def _live(std):
    return np.flatnonzero(~std.constant)


def _check_k(std, k):
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"the number of features k must be an integer >= 1; got {k!r}")
    if k > std.n_features:
        raise InputError(f"budget {k} is larger than the number of features ({std.n_features})")
    return int(k)


def ols(std: StandardizedStats, ridge="auto") -> ExtractedModel:
    """Least squares on every non-constant feature (eq. 3.6; ridge when ``n <= p``)."""
    start = time.perf_counter()
    live = _live(std)
    beta = least_squares(std, live, ridge)
    return _finish("ols", std, live.size, live, beta, ridge, start, refit=False)


# ------------------------------------------------------------------------------------ OLS-th
def ols_threshold_path(std: StandardizedStats, ks, ridge="auto", refit=True) -> list:
    """OLS-th (Alg. 3) for each ``k`` in ``ks``: one least-squares fit, then a top-``k`` and a refit each."""
    start = time.perf_counter()
    ks = [_check_k(std, k) for k in ks]
    live = _live(std)
    beta = least_squares(std, live, ridge)
    score = np.full(std.n_features, -1.0)
    score[live] = np.abs(beta[live])
    out = []
    for k in ks:
        support = keep_top_k(score, min(k, live.size))
        out.append(_finish("ols-th", std, k, support, beta, ridge, start, refit=refit))
        start = time.perf_counter()
    return out


def ols_threshold(std, k, ridge="auto", refit=True) -> ExtractedModel:
    return ols_threshold_path(std, [k], ridge, refit)[0]


# -------------------------------------------------------------------------------------- OFSA
def largest_eigenvalue(G) -> float:
    """Largest eigenvalue of a symmetric positive semi-definite matrix (0 for an empty one: no feature
    varies, e.g. one sample)."""
    if G.shape[0] == 0:
        return 0.0
    if G.shape[0] <= 300:
        return float(np.linalg.eigvalsh(G)[-1])
    from scipy.sparse.linalg import eigsh
    v0 = np.full(G.shape[0], 1.0 / np.sqrt(G.shape[0]))      # deterministic start
    return float(eigsh(G, k=1, which="LA", tol=1e-4, v0=v0, return_eigenvectors=False)[0])


def ofsa(std: StandardizedStats, k, n_iter=200, warm_up=15, mu=10.0, momentum=0.9, step="auto",
         ridge="auto", refit=True) -> ExtractedModel:
    """Online FSA (thesis Alg. 4) on the standardized averages.

    ``warm_up`` momentum steps on every feature, then ``n_iter`` steps ``t = 1..n_iter`` each followed
    by keeping the ``M_t = k + (p - k) max(0, (T - t)/(t mu + T))`` largest ``|b_j|`` (``T = n_iter``,
    so ``k`` remain at the end); the gradient is ``S_xx b - S_xy`` (eq. 3.8). ``step="auto"`` is
    ``1/lambda_max(S_xx)`` (the momentum-0.9 iteration is stable up to ``3.8/lambda_max``). The
    matrix is cut down to the kept features as they shrink, so late steps cost ``O(M_t^2)``.
    """
    start = time.perf_counter()
    k = _check_k(std, k)
    active = _live(std)
    G = std.xx[np.ix_(active, active)]
    r = std.xy[active].copy()
    eta = 1.0 / max(largest_eigenvalue(G), 1e-12) if step == "auto" else float(step)
    if not np.isfinite(eta) or eta <= 0:
        raise InputError(f"step must be 'auto' or a number > 0; got {step!r}")
    target = min(k, active.size)
    beta = np.zeros(active.size)
    velocity = np.zeros(active.size)
    p0 = active.size
    for it in range(warm_up + n_iter):
        with np.errstate(over="ignore", invalid="ignore"):
            grad = G @ beta - r
            velocity *= momentum
            velocity -= eta * grad
            beta += velocity
        if not np.isfinite(beta).all():
            break
        if it < warm_up:
            continue
        m = annealing_schedule(it - warm_up + 1, target, p0, n_iter, mu)
        if m < active.size:
            keep = keep_top_k(np.abs(beta), m)
            active, beta, velocity, r = active[keep], beta[keep], velocity[keep], r[keep]
            G = G[np.ix_(keep, keep)]
    if not np.isfinite(beta).all():
        raise InputError(f"OFSA diverged with step {eta:g}; use a smaller step (or step='auto')")
    selection = np.zeros(std.n_features)
    selection[active] = beta
    return _finish("ofsa", std, k, active, selection, ridge, start, n_iter=warm_up + n_iter, refit=refit,
                   step=eta)


def ofsa_path(std, ks, **params) -> list:
    return [ofsa(std, k, **params) for k in ks]


# ----------------------------------------------------------------------------- penalized (Alg. 5)
class _LambdaSearch:
    """Solutions of one penalized problem for the ``lambda`` values met so far (shared across ``k``)."""

    def __init__(self, std, penalty, l1_ratio, gamma, tol, max_sweeps):
        if penalty not in PENALTIES:
            raise InputError(f"unknown penalty {penalty!r}; choose one of: {', '.join(PENALTIES)}")
        if penalty == "elnet" and not 0.0 < l1_ratio <= 1.0:
            raise InputError(f"l1_ratio must be in (0, 1]; got {l1_ratio!r}")
        if penalty == "mcp" and not gamma > 1.0:
            raise InputError(f"gamma must be > 1 for MCP; got {gamma!r}")
        self.std, self.penalty = std, penalty
        self.code, self.l1_ratio, self.gamma = PENALTIES[penalty], float(l1_ratio), float(gamma)
        self.tol, self.max_sweeps = float(tol), int(max_sweeps)
        self.G = np.ascontiguousarray(std.xx)
        # y is scaled to unit variance too, so that tol, lambda and the elastic net's l2 part do not
        # depend on y's units (lambda is reported in y's units)
        self.y_scale = float(np.sqrt(std.yy)) if std.yy > 0 else 1.0
        self.r = np.ascontiguousarray(std.xy / self.y_scale)
        top = float(np.abs(self.r).max()) if self.r.size else 0.0
        self.lam_max = top / (self.l1_ratio if penalty == "elnet" else 1.0)
        self.solved = {}                      # lambda -> (beta, count), shared by every k
        if self.lam_max > 0.0:                # above lam_max every coefficient is zero
            self.solved[self.lam_max * 1.0001] = (np.zeros(self.r.size), 0)
        self.sweeps = 0
        self.unconverged = 0

    def solve(self, lam, warm=None):
        """``(beta, count)`` at ``lam``, from ``warm`` (else the solution at the nearest larger ``lambda``)."""
        if lam in self.solved:
            return self.solved[lam]
        if warm is None:
            above = [v for v in self.solved if v > lam]
            warm = self.solved[min(above)][0] if above else np.zeros(self.r.size)
        beta = warm.copy()
        Gb = self.G @ beta
        sweeps = coordinate_descent(self.G, self.r, beta, Gb, lam, self.l1_ratio, self.gamma, self.code,
                                    self.max_sweeps, self.tol)
        self.sweeps += min(sweeps, self.max_sweeps)
        self.unconverged += sweeps > self.max_sweeps
        result = (beta, int(np.count_nonzero(beta)))
        self.solved[lam] = result
        return result

    def for_k(self, k, exact, max_steps):
        """``(lambda, beta, steps)``: ``search_l1_weight`` from the solutions met so far, halving
        ``lambda`` (down to ``lam_max * 1e-8``) to a bracket, then bisecting to float resolution, at most
        ``max_steps`` solves; its ``at_least()`` (cut to the ``k`` largest ``|b_j|``) or, with
        ``exact=False``, its ``at_most()``. ``steps`` counts the solves run for this ``k``: the solutions
        met for an earlier ``k`` seed the bracket and are not walked again."""
        if self.lam_max <= 0.0:
            return 0.0, np.zeros(self.r.size), 0
        found = search_l1_weight(lambda lam, warm: self.solve(lam, warm), k, self.lam_max, factor=2.0,
                                 max_expand=max_steps, max_steps=max_steps, precision=0.0,
                                 lowest=self.lam_max * 1e-8, known=self.solved)
        steps = len(found.steps)
        best = found.at_least() if exact else found.at_most()
        if best.nnz <= k:
            return best.weight, best.model, steps
        cut = np.zeros_like(best.model)
        keep = keep_top_k(np.abs(best.model), k)
        cut[keep] = best.model[keep]
        return best.weight, cut, steps


def penalized_path(std: StandardizedStats, ks, penalty="lasso", l1_ratio=0.5, gamma=3.0, exact=True,
                   max_steps=100, tol=1e-7, max_sweeps=100_000, ridge="auto", refit=True) -> list:
    """OLasso / OElnet / OMCP (Alg. 5) for each ``k`` in ``ks``, sharing the ``lambda`` solutions."""
    ks = [_check_k(std, k) for k in ks]
    search = _LambdaSearch(std, penalty, l1_ratio, gamma, tol, max_sweeps)
    method = {"lasso": "olasso", "elnet": "oelnet", "mcp": "omcp"}[penalty]
    out = []
    for k in ks:
        start = time.perf_counter()
        lam, beta, steps = search.for_k(k, exact, max_steps)
        support = np.flatnonzero(beta)
        out.append(_finish(method, std, k, support, beta * search.y_scale, ridge, start, lam=lam * search.y_scale,
                           n_iter=steps, refit=refit, solves=len(search.solved)))
    if search.unconverged:
        warnings.warn(f"{method}: coordinate descent stopped at max_sweeps={max_sweeps} in {search.unconverged} "
                      f"of {len(search.solved)} solves; raise max_sweeps or tol", ConvergenceWarning, stacklevel=2)
    return out


def penalized(std, k, **params) -> ExtractedModel:
    return penalized_path(std, [k], **params)[0]
