"""DFLS (Li & Gu): adding/removing features of a fitted group-lasso or l_p model by following the
solution path in theta, checked against computations that do not go through the path.

Objective (standardized X, centered y): ``1/(2n) ||X w - y||^2 + alpha R(w)``, with
``R = sum_g sqrt(d_g) ||w_g||`` (group lasso) or ``sum_j |w_j|^p`` (l_p).
"""
import pickle
import warnings

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
import scipy.optimize
from sklearn.linear_model import Lasso

from asyos.errors import ConvergenceWarning, InputError
from asyos.learners.path.batch_solvers import fista_group_lasso, kkt_residual, lbfgs_lp, solve_batch
from asyos.learners.path.dfls import DFLS
from asyos.learners.path.penalties import GroupLasso, LpNorm
from asyos.learners.path.solution_path import PathOptions, PathProblem, follow_path, newton_polish

N = 200
TIGHT = dict(ode_rtol=1e-8, ode_atol=1e-10)


@pytest.fixture(autouse=True)
def _no_convergence_warnings():
    """A path that had to be finished by FISTA warns; none of these problems may need that."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# -- data -----------------------------------------------------------------------------------------

def make_data(seed, n=N, m=20, rho=0.5):
    """Correlated columns of various means and scales, y with an offset."""
    rng = np.random.default_rng(seed)
    common = rng.standard_normal((n, 1))
    X = np.sqrt(rho) * common + np.sqrt(1 - rho) * rng.standard_normal((n, m))
    X = X * rng.uniform(0.5, 3.0, m) + rng.uniform(-2.0, 2.0, m)
    beta = rng.standard_normal(m) * (rng.random(m) < 0.6)
    y = X @ beta + rng.standard_normal(n) + 3.0
    return X, y


def transition_data(seed, n=N, mo=10, mn=8):
    """New columns are noisy copies of old ones and y follows the new ones: as theta grows the
    new columns enter and their old twins leave."""
    rng = np.random.default_rng(seed)
    Xo = rng.standard_normal((n, mo)) + 0.5 * rng.standard_normal((n, 1))
    Xn = Xo[:, :mn] + 0.5 * rng.standard_normal((n, mn))
    y = Xn[:, :5] @ np.array([1.0, -0.8, 0.6, 0.5, -0.4]) + 0.3 * Xo[:, 8] + 0.5 * rng.standard_normal(n)
    Xo = Xo * np.linspace(0.5, 2.0, mo) + 1.0
    Xn = Xn * np.linspace(3.0, 0.7, mn) - 2.0
    return Xo, Xn, y + 5.0


# 20 columns: 14 old (groups 0-5) and 6 new (groups 6-7); sizes 2-3, no group straddles the split
GROUPS20 = np.repeat(np.arange(8), [2, 3, 2, 2, 3, 2, 3, 3])
M_OLD = 14


def standardize(X):
    Z = X - X.mean(axis=0)
    return Z / np.sqrt(np.mean(Z * Z, axis=0))


def group_ids(labels):
    return np.unique(labels, return_inverse=True)


def group_norms(w, labels):
    uniq, inv = group_ids(labels)
    return np.sqrt(np.bincount(inv, weights=w * w, minlength=uniq.size))


def gl_violation(X, y, w, alpha, labels):
    """Group-lasso optimality conditions written out: active g: X_g^T r/n = alpha sqrt(d_g) w_g/||w_g||;
    inactive g: ||X_g^T r/n|| <= alpha sqrt(d_g). Returns the largest violation."""
    C = X.T @ (y - X @ w) / X.shape[0]
    worst = 0.0
    for g in np.unique(labels):
        idx = np.flatnonzero(labels == g)
        d = idx.size
        wg, Cg = w[idx], C[idx]
        nw = np.linalg.norm(wg)
        if nw > 0:
            worst = max(worst, np.linalg.norm(Cg - alpha * np.sqrt(d) * wg / nw))
        else:
            worst = max(worst, np.linalg.norm(Cg) - alpha * np.sqrt(d))
    return worst


def ista(X, y, alpha, labels, n_iter):
    """Plain proximal gradient (no momentum, no restart), written independently of the library."""
    n = X.shape[0]
    uniq, inv = group_ids(labels)
    weights = np.sqrt(np.bincount(inv))
    L = np.linalg.norm(X, 2) ** 2 / n
    w = np.zeros(X.shape[1])
    for _ in range(n_iter):
        v = w - (X.T @ (X @ w - y) / n) / L
        norms = np.sqrt(np.bincount(inv, weights=v * v, minlength=uniq.size))
        shrink = np.maximum(0.0, 1.0 - (alpha / L) * weights / np.maximum(norms, 1e-300))
        w = v * shrink[inv]
    return w


def lp_newton(X, y, alpha, p, n_iter=100, w0=None):
    """Damped Newton on the l_p objective (smooth away from w_j = 0), written independently."""
    n = X.shape[0]
    G, c = X.T @ X / n, X.T @ y / n

    def f(w):
        r = X @ w - y
        return 0.5 * r @ r / n + alpha * np.sum(np.abs(w) ** p)

    w = np.linalg.solve(G, c) if w0 is None else np.array(w0, dtype=float)
    for _ in range(n_iter):
        grad = G @ w - c + alpha * p * np.abs(w) ** (p - 1) * np.sign(w)
        if np.max(np.abs(grad)) < 1e-14:
            break
        H = G + np.diag(alpha * p * (p - 1) * np.abs(w) ** (p - 2))
        step = np.linalg.solve(H, -grad)
        t = 1.0
        while f(w + t * step) > f(w) + 1e-4 * t * grad @ step and t > 1e-12:
            t *= 0.5
        w = w + t * step
    return w


def lasso_sklearn(X, y, alpha):
    return Lasso(alpha=alpha, fit_intercept=False, tol=1e-13, max_iter=200_000).fit(X, y).coef_


def batch_opt(X, y, alpha, labels=None, exponent=None):
    """The optimum of the batch problem on X, independently of the path: sklearn's Lasso for
    singleton groups, FISTA (tested against ISTA/KKT below) for groups, L-BFGS for l_p."""
    if exponent is not None:
        res = lbfgs_lp(X, y, alpha, LpNorm(exponent, X.shape[1]), tol=1e-13)
        return res.coef
    if labels is None:
        return lasso_sklearn(X, y, alpha)
    res = fista_group_lasso(X, y, alpha, GroupLasso(labels), tol=1e-14, max_iter=500_000)
    assert gl_violation(X, y, res.coef, alpha, labels) < 1e-9
    return res.coef


# -- 1. batch solvers ---------------------------------------------------------------------------

@pytest.mark.parametrize("alpha", [0.01, 0.1])
def test_fista_singletons_equals_sklearn_lasso(alpha):
    X, y = make_data(2)
    Xs, yc = standardize(X), y - y.mean()
    res = fista_group_lasso(Xs, yc, alpha, GroupLasso(np.arange(20)), tol=1e-13)
    ref = lasso_sklearn(Xs, yc, alpha)
    assert res.converged
    np.testing.assert_allclose(res.coef, ref, atol=1e-7)
    np.testing.assert_array_equal(res.coef == 0, np.abs(ref) < 1e-9)
    assert 0 < np.count_nonzero(ref) < 20            # the problem is a real lasso problem
    assert res.kkt_residual < 1e-9
    assert kkt_residual(Xs, yc, ref, alpha, GroupLasso(np.arange(20))) < 1e-7


@pytest.mark.parametrize("alpha", [0.02, 0.15])
def test_fista_groups_satisfies_optimality_and_matches_ista(alpha):
    X, y = make_data(2)
    Xs, yc = standardize(X), y - y.mean()
    res = fista_group_lasso(Xs, yc, alpha, GroupLasso(GROUPS20), tol=1e-13)
    w = res.coef
    assert res.converged
    norms = group_norms(w, GROUPS20)
    assert 0 < np.count_nonzero(norms) < 8           # some groups active, some not
    assert gl_violation(Xs, yc, w, alpha, GROUPS20) < 1e-8
    # inactive groups strictly inside the threshold (a well-posed active set)
    C = Xs.T @ (yc - Xs @ w) / N
    for g in np.flatnonzero(norms == 0):
        idx = GROUPS20 == g
        assert np.linalg.norm(C[idx]) < alpha * np.sqrt(idx.sum())
    ref = ista(Xs, yc, alpha, GROUPS20, 6000)
    np.testing.assert_allclose(w, ref, atol=1e-8)
    # the library's own KKT residual agrees with the hand-written check
    assert abs(res.kkt_residual - max(gl_violation(Xs, yc, w, alpha, GROUPS20), 0.0)) < 1e-10
    # the objective of the group lasso, by hand, is minimal at w
    obj = lambda v: 0.5 * np.sum((Xs @ v - yc) ** 2) / N + alpha * np.sqrt(np.bincount(GROUPS20)) @ group_norms(v, GROUPS20)
    rng = np.random.default_rng(0)
    for _ in range(20):
        assert obj(w) <= obj(w + 1e-3 * rng.standard_normal(20)) + 1e-15


@pytest.mark.parametrize("p", [4.0, 1.5])
def test_lbfgs_lp_matches_independent_solver(p):
    X, y = make_data(3)
    Xs, yc = standardize(X), y - y.mean()
    alpha = 0.05
    res = lbfgs_lp(Xs, yc, alpha, LpNorm(p, 20), tol=1e-9)
    w = res.coef
    if p >= 2:
        ref = lp_newton(Xs, yc, alpha, p)
    else:
        def f(v):
            r = Xs @ v - yc
            return 0.5 * r @ r / N + alpha * np.sum(np.abs(v) ** p), \
                Xs.T @ r / N + alpha * p * np.abs(v) ** (p - 1) * np.sign(v)
        bfgs = scipy.optimize.minimize(f, np.linalg.lstsq(Xs, yc, rcond=None)[0], jac=True, method="BFGS",
                                       options=dict(gtol=1e-12, maxiter=10_000)).x
        np.testing.assert_allclose(w, bfgs, atol=1e-6)
        assert np.min(np.abs(bfgs)) > 1e-3            # away from the kink of |w|^1.5's Hessian
        ref = lp_newton(Xs, yc, alpha, p, w0=bfgs)     # finished by Newton
    grad = Xs.T @ (Xs @ w - yc) / N + alpha * p * np.abs(w) ** (p - 1) * np.sign(w)
    # L-BFGS-B stops at the rounding floor of the objective (gradient ~1e-8 here), not at 1e-9
    assert np.max(np.abs(grad)) < 1e-7
    np.testing.assert_allclose(w, ref, atol=1e-6)
    ref_grad = Xs.T @ (Xs @ ref - yc) / N + alpha * p * np.abs(ref) ** (p - 1) * np.sign(ref)
    assert np.max(np.abs(ref_grad)) < 1e-9
    assert res.kkt_residual == pytest.approx(np.max(np.abs(grad)), abs=1e-12)
    # whether L-BFGS-B calls a stop at that floor a success depends on the BLAS kernel (it did with
    # OpenBLAS's Haswell kernels, not with Sandybridge's): the flag is checked at a reachable tolerance
    reachable = lbfgs_lp(Xs, yc, alpha, LpNorm(p, 20), tol=1e-7)
    assert reachable.converged and reachable.kkt_residual <= 1e-7 * max(1.0, np.max(np.abs(Xs.T @ yc)) / N)
    assert not lbfgs_lp(Xs, yc, alpha, LpNorm(p, 20), tol=1e-9, max_iter=2).converged


def test_warm_start_gives_cold_start_point():
    X, y = make_data(4)
    Xs, yc = standardize(X), y - y.mean()
    rng = np.random.default_rng(1)
    pen = GroupLasso(GROUPS20)
    cold = fista_group_lasso(Xs, yc, 0.05, pen, tol=1e-13).coef
    other = fista_group_lasso(Xs, yc, 0.2, pen, tol=1e-13).coef            # a different alpha's optimum
    for w0 in (other, rng.standard_normal(20)):
        warm = fista_group_lasso(Xs, yc, 0.05, pen, w0=w0, tol=1e-13)
        np.testing.assert_allclose(warm.coef, cold, atol=1e-9)
    warm_from_opt = fista_group_lasso(Xs, yc, 0.05, pen, w0=cold, tol=1e-13)
    assert warm_from_opt.n_iter < 10
    assert not fista_group_lasso(Xs, yc, 0.05, pen, tol=1e-13, max_iter=3).converged
    lp = LpNorm(4.0, 20)
    cold = lbfgs_lp(Xs, yc, 0.05, lp, tol=1e-10).coef
    for w0 in (lbfgs_lp(Xs, yc, 0.5, lp, tol=1e-10).coef, rng.standard_normal(20)):
        np.testing.assert_allclose(lbfgs_lp(Xs, yc, 0.05, lp, w0=w0, tol=1e-10).coef, cold, atol=1e-6)
    # solve_batch dispatches on the penalty
    np.testing.assert_array_equal(solve_batch(Xs, yc, 0.05, lp, tol=1e-10).coef, cold)
    np.testing.assert_allclose(solve_batch(Xs, yc, 0.05, pen, tol=1e-13).coef,
                               fista_group_lasso(Xs, yc, 0.05, pen, tol=1e-13).coef, atol=1e-12)


# -- 2. end point equals retraining ---------------------------------------------------------------

CONFIGS = {
    "lasso": (dict(penalty="group_lasso"), None),
    "lasso-ode": (dict(penalty="group_lasso", follow="ode"), None),
    "group_lasso": (dict(penalty="group_lasso"), GROUPS20),
    "l4": (dict(penalty="lp", exponent=4), None),
    "l6": (dict(penalty="lp", exponent=6), None),
}


def _split_groups(labels):
    return (None, None) if labels is None else (labels[:M_OLD], labels[M_OLD:])


@pytest.mark.parametrize("alpha", [0.02, 0.2])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_add_features_equals_retraining(config, alpha):
    kw, labels = CONFIGS[config]
    X, y = make_data(5)
    Xo, Xn = X[:, :M_OLD], X[:, M_OLD:]
    g_old, g_new = _split_groups(labels)
    model = DFLS(alpha=alpha, groups=g_old, **kw).fit(Xo, y)
    before = model.w_.copy()
    model.add_features(Xn, groups=g_new)
    full = DFLS(alpha=alpha, groups=labels, **kw).fit(X, y)

    assert model.path_.direction == "add"
    assert not model.path_.fallback
    assert model.kkt_residual_ < 1e-8 and model.path_.kkt_residual < 1e-8
    assert full.kkt_residual_ < 1e-8
    np.testing.assert_allclose(model.w_, full.w_, atol=1e-6)
    assert not np.allclose(model.w_[:M_OLD], before, atol=1e-3)    # the change did move the old coefficients
    # the standardized problem is the one of the full fit
    np.testing.assert_allclose(model.X_, standardize(X), atol=1e-12)
    np.testing.assert_allclose(model.y_, y - y.mean(), atol=1e-12)
    np.testing.assert_allclose(full.X_, standardize(X), atol=1e-12)
    if labels is not None:
        np.testing.assert_array_equal(model.groups_, labels)
    # original units
    assert model.n_features_in_ == 20
    np.testing.assert_allclose(model.coef_, full.coef_, atol=1e-5)
    assert model.intercept_ == pytest.approx(full.intercept_, abs=1e-5)
    np.testing.assert_allclose(model.coef_, model.w_ / X.std(axis=0), rtol=1e-12)
    np.testing.assert_allclose(model.predict(X), standardize(X) @ model.w_ + y.mean(), atol=1e-9)
    np.testing.assert_allclose(model.predict(X), full.predict(X), atol=1e-5)
    Xt = make_data(50)[0]
    np.testing.assert_allclose(model.predict(Xt), full.predict(Xt), atol=1e-5)
    assert model.objective() == pytest.approx(full.objective(), abs=1e-12)
    # independent optimum of the final problem
    Xs, yc = standardize(X), y - y.mean()
    if kw["penalty"] == "lp":
        ref = lp_newton(Xs, yc, alpha, float(kw["exponent"]))
    elif labels is None:
        ref = lasso_sklearn(Xs, yc, alpha)
    else:
        ref = ista(Xs, yc, alpha, labels, 6000)
    np.testing.assert_allclose(model.w_, ref, atol=1e-6)


@pytest.mark.parametrize("alpha", [0.02, 0.2])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_remove_features_equals_retraining(config, alpha):
    kw, labels = CONFIGS[config]
    X, y = make_data(6)
    Xo = X[:, :M_OLD]
    g_old, _ = _split_groups(labels)
    model = DFLS(alpha=alpha, groups=labels, **kw).fit(X, y)
    model.remove_features(np.arange(M_OLD, 20))
    small = DFLS(alpha=alpha, groups=g_old, **kw).fit(Xo, y)

    assert model.path_.direction == "remove"
    assert not model.path_.fallback
    assert model.kkt_residual_ < 1e-8 and model.path_.kkt_residual < 1e-8
    assert model.w_.shape == (M_OLD,) and model.n_features_in_ == M_OLD
    np.testing.assert_allclose(model.w_, small.w_, atol=1e-6)
    np.testing.assert_allclose(model.X_, standardize(Xo), atol=1e-12)
    if labels is not None:
        np.testing.assert_array_equal(model.groups_, g_old)
    np.testing.assert_allclose(model.coef_, small.coef_, atol=1e-5)
    assert model.intercept_ == pytest.approx(small.intercept_, abs=1e-5)
    np.testing.assert_allclose(model.predict(Xo), small.predict(Xo), atol=1e-5)
    np.testing.assert_allclose(model.predict(Xo), standardize(Xo) @ model.w_ + y.mean(), atol=1e-9)
    with pytest.raises(InputError, match="features"):
        model.predict(X)


OPTION_VARIANTS = {
    "no_intercept": dict(fit_intercept=False),
    "raw_scale": dict(standardize=False),
    "eq8_verbatim": dict(correction=0.0),
    "radau": dict(ode_method="Radau"),
}


@pytest.mark.parametrize("variant", list(OPTION_VARIANTS))
@pytest.mark.parametrize("config", ["group_lasso", "l4"])
def test_options_keep_end_point_equal_to_retraining(config, variant):
    kw, labels = CONFIGS[config]
    options = OPTION_VARIANTS[variant]
    X, y = make_data(5)
    Xo, Xn = X[:, :M_OLD], X[:, M_OLD:]
    g_old, g_new = _split_groups(labels)
    model = DFLS(alpha=0.05, groups=g_old, **kw, **options).fit(Xo, y).add_features(Xn, groups=g_new)
    full = DFLS(alpha=0.05, groups=labels, **kw, **options).fit(X, y)
    assert not model.path_.fallback and model.kkt_residual_ < 1e-8
    np.testing.assert_allclose(model.w_, full.w_, atol=1e-6)
    np.testing.assert_allclose(model.predict(X), full.predict(X), atol=1e-5)
    # what the penalty sees
    center = options.get("fit_intercept", True)
    Z = X - X.mean(axis=0) if center else X
    if options.get("standardize", True):
        Z = Z / np.sqrt(np.mean(Z * Z, axis=0))
    np.testing.assert_allclose(model.X_, Z, atol=1e-12)
    np.testing.assert_allclose(model.y_, y - y.mean() if center else y, atol=1e-12)
    np.testing.assert_allclose(model.predict(X), Z @ model.w_ + (y.mean() if center else 0.0), atol=1e-9)
    if not center:
        assert model.intercept_ == 0.0
    model.remove_features(np.arange(M_OLD, 20))
    small = DFLS(alpha=0.05, groups=g_old, **kw, **options).fit(Xo, y)
    assert not model.path_.fallback
    np.testing.assert_allclose(model.w_, small.w_, atol=1e-6)


def test_path_machinery_on_gram_form():
    """PathProblem / Piece / newton_polish / follow_path used directly."""
    Xo, Xn, y = transition_data(1)
    labels = np.r_[np.repeat(np.arange(5), 2), [5, 5, 6, 6, 6, 7, 7, 7]]
    X = np.hstack([Xo, Xn])
    Xs, yc = standardize(X), y - y.mean()
    moving = np.arange(18) >= 10
    alpha, theta = 0.03, 0.5
    pen = GroupLasso(labels)
    problem = PathProblem(Xs.T @ Xs / N, Xs.T @ yc / N, moving, pen, alpha)
    Xt = _scaled(Xs, moving, theta)
    w = batch_opt(Xt, yc, alpha, labels)
    # the Gram-form objective and KKT residual are those of the scaled design
    hand = 0.5 * np.sum((Xt @ w - yc) ** 2) / N + alpha * np.sqrt(np.bincount(labels)) @ group_norms(w, labels)
    assert problem.objective(w, theta) + 0.5 * yc @ yc / N == pytest.approx(hand, rel=1e-12)
    assert problem.kkt_residual(w, theta) < 1e-9
    v = w + 1e-3 * np.random.default_rng(0).standard_normal(18)
    assert problem.kkt_residual(v, theta) == pytest.approx(max(gl_violation(Xt, yc, v, alpha, labels), 0), rel=1e-9)
    groups = problem.active_groups(w)
    assert {pen.group_labels[g] for g in groups} == _active_labels(w, labels)

    # Theorem 1/3: K is dF/dw on the active columns, symmetric and positive definite; dF is dF/dtheta
    piece = problem.piece(groups)
    cols = piece.columns
    F, dF, K = piece.system(theta, w[cols])
    assert np.max(np.abs(F)) < 1e-9
    np.testing.assert_allclose(K, K.T, atol=1e-14)
    assert np.min(np.linalg.eigvalsh(K)) > 0
    h = 1e-6
    jac = np.column_stack([(piece.system(theta, w[cols] + h * e)[0] - piece.system(theta, w[cols] - h * e)[0]) / (2 * h)
                           for e in np.eye(cols.size)])
    np.testing.assert_allclose(K, jac, atol=1e-6)
    fd_theta = (piece.system(theta + h, w[cols])[0] - piece.system(theta - h, w[cols])[0]) / (2 * h)
    np.testing.assert_allclose(dF, fd_theta, atol=1e-6)
    # eq. 8 gives the slope of the path: compare with batch optima at theta +- h
    slope = -np.linalg.solve(K, dF)
    fd_path = (batch_opt(_scaled(Xs, moving, theta + 1e-4), yc, alpha, labels)
               - batch_opt(_scaled(Xs, moving, theta - 1e-4), yc, alpha, labels)) / 2e-4
    np.testing.assert_allclose(slope, fd_path[cols], atol=1e-5)

    # Newton on the active set returns to the optimum from a perturbed start
    start = w.copy()
    start[cols] += 1e-3 * np.random.default_rng(1).standard_normal(cols.size)
    polished, steps, ok = newton_polish(problem, start, theta, groups, 1e-12)
    assert ok and steps <= 10
    np.testing.assert_allclose(polished, w, atol=1e-9)

    # follow_path on the Gram form: add the moving columns to the old optimum
    w_old = batch_opt(Xs[:, :10], yc, alpha, labels[:10])
    w_end, path = follow_path(problem, np.r_[w_old, np.zeros(8)], "add", PathOptions(rtol=1e-8, atol=1e-10))
    assert not path.fallback and path.kkt_residual < 1e-9
    np.testing.assert_allclose(w_end, batch_opt(Xs, yc, alpha, labels), atol=1e-6)
    np.testing.assert_allclose(path.coef_at(theta), w, atol=1e-5)
    model = DFLS(alpha=alpha, groups=labels[:10], **TIGHT).fit(Xo, y).add_features(Xn, groups=labels[10:])
    assert [(t["group"], t["event"]) for t in path.transitions] == \
        [(t["group"], t["event"]) for t in model.path_.transitions]
    np.testing.assert_allclose(path.transition_thetas, model.path_.transition_thetas, atol=1e-6)
    # and back: removing them again lands on the old optimum with the moving part exactly 0
    w_back, back = follow_path(problem, w_end, "remove", PathOptions(rtol=1e-8, atol=1e-10))
    assert not back.fallback
    np.testing.assert_array_equal(w_back[10:], 0.0)
    np.testing.assert_allclose(w_back[:10], w_old, atol=1e-6)
    # the same transition points, crossed the other way
    np.testing.assert_allclose(np.sort(back.transition_thetas), np.sort(path.transition_thetas), atol=1e-6)


# -- 3. the path agrees with batch solutions at intermediate theta --------------------------------

def _scaled(Xs, moving, theta):
    return Xs * np.where(moving, theta, 1.0)


@pytest.mark.parametrize("direction", ["add", "remove"])
@pytest.mark.parametrize("grouped,follow", [(False, "auto"), (False, "ode"), (True, "auto")],
                         ids=["lasso", "lasso-ode", "groups"])
def test_group_lasso_path_matches_batch_optima(grouped, follow, direction):
    # transition points at moderate theta (near theta = 0 the moving coefficients are ill-conditioned:
    # a KKT error e moves them by ~ e / theta^2)
    seed, alpha = (0, 0.05) if not grouped else (2, 0.05)
    Xo, Xn, y = transition_data(seed)
    mo, mn = Xo.shape[1], Xn.shape[1]
    g_old = None if not grouped else np.repeat(np.arange(5), 2)
    g_new = None if not grouped else np.array([5, 5, 6, 6, 6, 7, 7, 7])
    labels = None if not grouped else np.r_[g_old, g_new]
    X = np.hstack([Xo, Xn])
    Xs, yc = standardize(X), y - y.mean()
    moving = np.arange(mo + mn) >= mo
    if direction == "add":
        start = DFLS(alpha=alpha, groups=g_old, follow=follow, **TIGHT).fit(Xo, y)
        model = pickle.loads(pickle.dumps(start)).add_features(Xn, groups=g_new)
        end_ref = DFLS(alpha=alpha, groups=labels).fit(X, y).w_
    else:
        start = DFLS(alpha=alpha, groups=labels, follow=follow, **TIGHT).fit(X, y)
        model = pickle.loads(pickle.dumps(start)).remove_features(np.arange(mo, mo + mn))
        end_ref = np.r_[DFLS(alpha=alpha, groups=g_old).fit(Xo, y).w_, np.zeros(mn)]
    path = model.path_
    assert not path.fallback and len(path.transitions) >= 3
    assert (path.n_rhs == 0) == (follow == "auto" and not grouped)       # the lasso's exact walk: no ODE
    np.testing.assert_array_equal(path.moving, moving)
    trans = path.transition_thetas
    assert np.min(trans) > 0.1
    thetas = [0.05, 0.2, 0.45, 0.7, 0.95] + [t + d for t in trans for d in (-4e-3, 4e-3) if 0 < t + d < 1]
    errors = []
    for theta in thetas:
        ref = batch_opt(_scaled(Xs, moving, theta), yc, alpha, labels)
        errors.append(np.max(np.abs(path.coef_at(theta) - ref)))
    assert max(errors) < 1e-5, dict(zip(np.round(thetas, 4), errors))
    # the ends: the model before the change and the optimum after it
    w_before = start.w_ if direction == "remove" else np.r_[start.w_, np.zeros(mn)]
    theta_start, theta_end = (0.0, 1.0) if direction == "add" else (1.0, 0.0)
    np.testing.assert_allclose(path.coef_at(theta_start), w_before, atol=1e-12)
    np.testing.assert_allclose(path.coef_at(theta_end), end_ref, atol=1e-6)
    with pytest.raises(ValueError, match="outside the path"):
        path.coef_at(1.5)


@pytest.mark.parametrize("direction", ["add", "remove"])
def test_lp_path_matches_batch_optima(direction):
    X, y = make_data(8)
    alpha, p = 0.05, 4.0
    Xo, Xn = X[:, :M_OLD], X[:, M_OLD:]
    if direction == "add":
        model = DFLS("lp", alpha=alpha, exponent=p, **TIGHT).fit(Xo, y).add_features(Xn)
    else:
        model = DFLS("lp", alpha=alpha, exponent=p, **TIGHT).fit(X, y).remove_features(np.arange(M_OLD, 20))
    path = model.path_
    assert not path.fallback and path.transitions == []
    Xs, yc = standardize(X), y - y.mean()
    moving = np.arange(20) >= M_OLD
    worst = 0.0
    for theta in [0.02, 0.1, 0.3, 0.5, 0.75, 0.99]:
        ref = batch_opt(_scaled(Xs, moving, theta), yc, alpha, exponent=p)
        worst = max(worst, np.max(np.abs(path.coef_at(theta) - ref)))
    assert worst < 1e-5


# -- 4. transition points --------------------------------------------------------------------------

def _ratio(Xt, yc, w, alpha, idx):
    """||X_g^T (y - X w)/n|| / (alpha sqrt(d_g)) on the (theta-scaled) design: 1 at a transition."""
    C = Xt[:, idx].T @ (yc - Xt @ w) / Xt.shape[0]
    return np.linalg.norm(C) / (alpha * np.sqrt(idx.size))


def _active_labels(w, labels, tol=1e-9):
    return {lab for lab in np.unique(labels) if np.linalg.norm(w[labels == lab]) > tol}


@pytest.mark.parametrize("grouped,follow", [(False, "auto"), (False, "ode"), (True, "auto")],
                         ids=["lasso", "lasso-ode", "groups"])
@pytest.mark.parametrize("direction", ["add", "remove"])
def test_transition_points_are_found(direction, grouped, follow):
    seed, alpha = (0, 0.03) if not grouped else (1, 0.03)
    Xo, Xn, y = transition_data(seed)
    mo, mn = Xo.shape[1], Xn.shape[1]
    g_old = None if not grouped else np.repeat(np.arange(5), 2)
    g_new = None if not grouped else np.array([5, 5, 6, 6, 6, 7, 7, 7])
    labels = np.arange(mo + mn) if not grouped else np.r_[g_old, g_new]
    batch_labels = None if not grouped else labels
    X = np.hstack([Xo, Xn])
    Xs, yc = standardize(X), y - y.mean()
    moving = np.arange(mo + mn) >= mo

    if direction == "add":
        model = DFLS(alpha=alpha, groups=g_old, follow=follow, **TIGHT).fit(Xo, y)
        w_old = model.w_.copy()
        model.add_features(Xn, groups=g_new)
        # Phase I, eq. 7 by hand on the standardized data
        r = yc - standardize(Xo) @ w_old
        Zn = standardize(Xn)
        firsts = {lab: alpha * np.sqrt(np.sum(labels[mo:] == lab))
                  / np.linalg.norm(Zn[:, labels[mo:] == lab].T @ r / N) for lab in np.unique(labels[mo:])}
        closed = min(min(firsts.values()), 1.0)
        assert model.path_.phase1_theta == pytest.approx(closed, rel=1e-10)
        assert closed < 1
        first = model.path_.transitions[0]
        assert first["theta"] == pytest.approx(closed, rel=1e-10)
        assert first["event"] == "enter" and first["moving"]
        assert first["group"] == min(firsts, key=firsts.get)
        np.testing.assert_array_equal(model.path_.coef_at(0.99 * closed)[:mo], w_old)
    else:
        model = DFLS(alpha=alpha, groups=labels if grouped else None, follow=follow, **TIGHT).fit(X, y)
        model.remove_features(np.arange(mo, mo + mn))
    path = model.path_
    assert not path.fallback
    trans = path.transitions
    events = {t["event"] for t in trans}
    assert len(trans) >= 5 and events == {"enter", "leave"}
    assert any(not t["moving"] for t in trans) and any(t["moving"] for t in trans)
    thetas = np.array([t["theta"] for t in trans])
    sign = 1.0 if direction == "add" else -1.0
    assert np.all(np.diff(thetas) * sign >= 0)          # recorded in the order of travel
    assert np.all((thetas > 0) & (thetas < 1))

    solved = {}

    def batch(theta):
        if theta not in solved:
            solved[theta] = batch_opt(_scaled(Xs, moving, theta), yc, alpha, batch_labels)
        return solved[theta]

    distinct = np.unique(thetas)
    for t in trans:
        theta, lab = t["theta"], t["group"]
        idx = np.flatnonzero(labels == lab)
        assert t["moving"] == bool(moving[idx].all())
        # at the transition point the group sits on its threshold with w_g = 0 (eq. 16)
        w_at = batch(theta)
        assert np.linalg.norm(w_at[idx]) < 1e-5
        assert _ratio(_scaled(Xs, moving, theta), yc, w_at, alpha, idx) == pytest.approx(1.0, abs=1e-5)
        # just before / after (in the direction of travel) the group is inactive / active or vice versa
        others = distinct[distinct != theta]
        gap = np.min(np.abs(others - theta)) if others.size else 1.0
        delta = min(2e-3, gap / 3, theta / 3, (1 - theta) / 3)
        w_before, w_after = batch(theta - sign * delta), batch(theta + sign * delta)
        active_before = np.linalg.norm(w_before[idx]) > 1e-9
        active_after = np.linalg.norm(w_after[idx]) > 1e-9
        if t["event"] == "enter":
            assert not active_before and active_after, t
        else:
            assert active_before and not active_after, t
        inactive_w = w_before if t["event"] == "enter" else w_after
        inactive_theta = theta - sign * delta if t["event"] == "enter" else theta + sign * delta
        assert _ratio(_scaled(Xs, moving, inactive_theta), yc, inactive_w, alpha, idx) < 1

    # between consecutive transition points the active set does not change, and it is the path's
    bounds = np.unique(np.r_[0.0, thetas, 1.0])
    previous = None
    for a, b in zip(bounds[:-1], bounds[1:]):
        sets = []
        for frac in (0.15, 0.5, 0.85):
            theta = a + frac * (b - a)
            batch_set = _active_labels(batch(theta), labels)
            assert batch_set == _active_labels(path.coef_at(theta), labels), theta
            sets.append(batch_set)
        assert sets[0] == sets[1] == sets[2], (a, b, sets)
        if previous is not None:
            # crossing the point at `a` changes exactly the groups recorded there
            changed = {t["group"] for t in trans if t["theta"] == a}
            assert previous ^ sets[0] == changed
        previous = sets[0]


# -- 5. no transition ---------------------------------------------------------------------------

def _noise_problem():
    rng = np.random.default_rng(9)
    Xo = rng.standard_normal((N, 8)) * 2.0 + 1.0
    y = 2.0 * Xo[:, 0] - 1.5 * Xo[:, 1] + Xo[:, 2] + rng.standard_normal(N)
    Xn = rng.standard_normal((N, 6)) + 4.0              # unrelated to y
    return Xo, Xn, y


def test_add_with_no_transition_leaves_model_unchanged():
    Xo, Xn, y = _noise_problem()
    alpha = 0.4
    model = DFLS(alpha=alpha).fit(Xo, y)
    w_old, coef_old, b_old = model.w_.copy(), model.coef_.copy(), model.intercept_
    pred_old = model.predict(Xo)
    assert np.count_nonzero(w_old) >= 2
    # eq. 7 by hand says the first new feature would enter only beyond theta = 1
    r = (y - y.mean()) - standardize(Xo) @ w_old
    closed = np.min(alpha / np.abs(standardize(Xn).T @ r / N))
    assert closed > 1.0
    model.add_features(Xn)
    path = model.path_
    assert path.phase1_theta == 1.0
    assert path.transitions == [] and path.n_rhs == 0 and not path.fallback
    np.testing.assert_array_equal(model.w_[:8], w_old)
    np.testing.assert_array_equal(model.w_[8:], 0.0)
    np.testing.assert_array_equal(model.coef_[8:], 0.0)
    np.testing.assert_array_equal(model.coef_[:8], coef_old)
    assert model.intercept_ == pytest.approx(b_old, abs=1e-12)
    X = np.hstack([Xo, Xn])
    np.testing.assert_allclose(model.predict(X), pred_old, atol=1e-12)
    np.testing.assert_array_equal(model.support_, np.flatnonzero(w_old))
    np.testing.assert_allclose(model.w_, DFLS(alpha=alpha).fit(X, y).w_, atol=1e-9)
    np.testing.assert_array_equal(path.coef_at(0.5), np.r_[w_old, np.zeros(6)])
    # and taking them out again needs no ODE either
    model.remove_features(np.arange(8, 14))
    assert model.path_.n_rhs == 0 and model.path_.transitions == [] and not model.path_.fallback
    np.testing.assert_array_equal(model.w_, w_old)


def test_removing_an_inactive_group_needs_no_ode():
    Xo, Xn, y = _noise_problem()
    X = np.hstack([Xo, Xn])
    labels = np.array([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 4, 5, 5, 5])
    model = DFLS(alpha=0.3, groups=labels).fit(X, y)
    norms = group_norms(model.w_, labels)
    inactive = [g for g in range(6) if norms[g] == 0]
    assert 4 in inactive and any(norms > 0)
    w_before = model.w_.copy()
    drop = np.flatnonzero(labels == 4)
    model.remove_features(drop)
    assert model.path_.n_rhs == 0 and model.path_.transitions == [] and not model.path_.fallback
    keep = labels != 4
    np.testing.assert_array_equal(model.w_, w_before[keep])
    np.testing.assert_array_equal(model.groups_, labels[keep])
    ref = DFLS(alpha=0.3, groups=labels[keep]).fit(X[:, keep], y)
    np.testing.assert_allclose(model.w_, ref.w_, atol=1e-9)
    np.testing.assert_allclose(model.predict(X[:, keep]), ref.predict(X[:, keep]), atol=1e-8)


def test_removal_still_active_near_zero_falls_back_to_the_right_point():
    """Tiny alpha: integrating eq. 8, a removed column stays active below start_theta; the path says
    so (warning, ``fallback``) and FISTA finishes at the retrained optimum. The lasso's exact walk
    follows it all the way to theta = 0 and lands there without FISTA."""
    X, y = make_data(5)
    ref = DFLS(alpha=1e-3).fit(X[:, :M_OLD], y).w_
    model = DFLS(alpha=1e-3, follow="ode").fit(X, y)
    with pytest.warns(ConvergenceWarning, match="moving features were still active"):
        model.remove_features(np.arange(M_OLD, 20))
    assert model.path_.fallback
    assert model.kkt_residual_ < 1e-8
    np.testing.assert_allclose(model.w_, ref, atol=1e-6)
    exact = DFLS(alpha=1e-3).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        exact.remove_features(np.arange(M_OLD, 20))
    assert not exact.path_.fallback and exact.path_.n_rhs == 0
    assert min(t["theta"] for t in exact.path_.transitions) < 1e-3     # below where the ODE stops
    assert exact.kkt_residual_ < 1e-8
    np.testing.assert_allclose(exact.w_, ref, atol=1e-6)


@pytest.mark.parametrize("direction", ["add", "remove"])
@pytest.mark.parametrize("seed", [0, 3, 4])
def test_exact_lasso_walk_and_the_ode_cross_the_same_points(direction, seed):
    """The lasso's exact walk and eq. 8 integrated tightly see the same transitions (the same
    columns, in the same order, at the same theta) and the same path between them."""
    Xo, Xn, y = transition_data(seed)
    X = np.hstack([Xo, Xn])
    mo, mn = Xo.shape[1], Xn.shape[1]
    paths = {}
    for follow in ("auto", "ode"):
        if direction == "add":
            model = DFLS(alpha=0.03, follow=follow, ode_rtol=1e-10, ode_atol=1e-12).fit(Xo, y).add_features(Xn)
        else:
            model = DFLS(alpha=0.03, follow=follow, ode_rtol=1e-10, ode_atol=1e-12).fit(X, y)
            model.remove_features(np.arange(mo, mo + mn))
        assert not model.path_.fallback
        paths[follow] = model.path_
    exact, ode = paths["auto"], paths["ode"]
    assert len(exact.transitions) >= 3
    assert [(t["group"], t["event"]) for t in exact.transitions] == [(t["group"], t["event"]) for t in ode.transitions]
    np.testing.assert_allclose(exact.transition_thetas, ode.transition_thetas, rtol=1e-6)
    for theta in np.linspace(0.1, 0.95, 12):
        np.testing.assert_allclose(exact.coef_at(theta), ode.coef_at(theta), atol=1e-6)


# -- 6. bad input ---------------------------------------------------------------------------------

@pytest.fixture
def small():
    X, y = make_data(10, m=6)
    return X, y


def test_bad_parameters(small):
    X, y = small
    with pytest.raises(InputError, match="The 'penalty' parameter of DFLS must be a str among .* Got 'ridge'"):
        DFLS("ridge").fit(X, y)
    for alpha in (0.0, -1.0):
        with pytest.raises(InputError, match=r"'alpha' parameter of DFLS must be a float in the range \(0.0, inf\)"):
            DFLS(alpha=alpha).fit(X, y)
    with pytest.raises(InputError, match="The 'alpha' parameter of DFLS must be a float"):
        DFLS(alpha="big").fit(X, y)
    for p in (1.0, 0.5):
        with pytest.raises(InputError, match=r"'exponent' parameter of DFLS must be a float in the range \(1.0, inf\)"):
            DFLS("lp", exponent=p).fit(X, y)
    with pytest.raises(InputError, match="exponent applies to penalty='lp' only"):
        DFLS("group_lasso", exponent=4).fit(X, y)
    with pytest.raises(InputError, match="groups apply to penalty='group_lasso' only"):
        DFLS("lp", groups=np.arange(6)).fit(X, y)
    with pytest.raises(InputError, match="one label per column"):
        DFLS(groups=[0, 0, 1]).fit(X, y)
    with pytest.raises(InputError, match="start_theta"):
        DFLS("lp", start_theta=0.7).fit(X, y)
    with pytest.raises(InputError, match="groups apply to penalty='group_lasso' only"):
        DFLS("lp").fit(X, y).add_features(X[:, :2] ** 2, groups=[10, 11])


def test_bad_data(small):
    X, y = small
    model = DFLS(alpha=0.05).fit(X, y)
    w = model.w_.copy()
    rng = np.random.default_rng(0)
    with pytest.raises(InputError, match="X_new has 150 rows but the model was fitted on 200 samples"):
        model.add_features(rng.standard_normal((150, 2)))
    bad = rng.standard_normal((N, 3))
    bad[7, 1] = np.nan
    with pytest.raises(InputError, match="X_new contains 1 NaN or infinite value"):
        model.add_features(bad)
    const = rng.standard_normal((N, 3))
    const[:, 2] = 3.5
    with pytest.raises(InputError, match="column 2 of X_new is constant"):
        model.add_features(const)
    Xc = X.copy()
    Xc[:, 4] = -1.0
    with pytest.raises(InputError, match="column 4 of X is constant"):
        DFLS().fit(Xc, y)
    with pytest.raises(InputError, match="X_new has no columns"):
        model.add_features(np.zeros((N, 0)))
    # the failed calls left the model alone
    np.testing.assert_array_equal(model.w_, w)
    assert model.n_features_in_ == 6 and model.X_.shape == (N, 6)


def test_bad_removals(small):
    X, y = small
    model = DFLS(alpha=0.05).fit(X, y)
    with pytest.raises(InputError, match="feature index 6 is out of range: the model has 6 features"):
        model.remove_features([1, 6])
    with pytest.raises(InputError, match="feature index -1 is out of range"):
        model.remove_features([-1])
    with pytest.raises(InputError, match="indices name a feature more than once"):
        model.remove_features([2, 3, 2])
    with pytest.raises(InputError, match=r"cannot remove every feature \(6\)"):
        model.remove_features(np.arange(6))
    with pytest.raises(InputError, match="cannot remove every feature"):
        model.remove_features(np.ones(6, dtype=bool))
    with pytest.raises(InputError, match="no feature to remove"):
        model.remove_features([])
    with pytest.raises(InputError, match="integers"):
        model.remove_features([1.5])
    with pytest.raises(InputError, match="boolean mask .* length 6"):
        model.remove_features(np.ones(4, dtype=bool))
    assert model.n_features_in_ == 6


def test_removing_part_of_a_group_names_the_group(small):
    X, y = small
    model = DFLS(alpha=0.05, groups=np.array([0, 0, 1, 1, 2, 2])).fit(X, y)
    with pytest.raises(InputError, match=r"indices split group 1 \(features 2, 3\); remove whole groups"):
        model.remove_features([2])
    named = DFLS(alpha=0.05, groups=np.array(["a", "a", "b", "b", "c", "c"])).fit(X, y)
    with pytest.raises(InputError, match=r"indices split group 'c' \(features 4, 5\)"):
        named.remove_features([0, 1, 5])
    assert model.n_features_in_ == 6 and named.n_features_in_ == 6


def test_new_group_labels_must_be_new(small):
    X, y = small
    model = DFLS(alpha=0.05, groups=np.array([0, 0, 1, 1, 2, 2])).fit(X, y)
    rng = np.random.default_rng(1)
    with pytest.raises(InputError, match="group labels 1, 2 already belong to the model"):
        model.add_features(rng.standard_normal((N, 3)), groups=[1, 2, 7])
    with pytest.raises(InputError, match="group label 0 already belongs to the model"):
        model.add_features(rng.standard_normal((N, 2)), groups=[0, 0])
    with pytest.raises(InputError, match="one label per column"):
        model.add_features(rng.standard_normal((N, 2)), groups=[5])
    # default labels continue after the largest one
    model.add_features(rng.standard_normal((N, 2)))
    np.testing.assert_array_equal(model.groups_, [0, 0, 1, 1, 2, 2, 3, 4])


def test_not_fitted_and_wrong_width(small):
    X, y = small
    model = DFLS()
    for call in (lambda: model.add_features(X), lambda: model.remove_features([0]), lambda: model.predict(X)):
        with pytest.raises(NotFittedError, match="not fitted"):
            call()
    model.fit(X, y)
    with pytest.raises(InputError, match="X has 5 features, but DFLS is expecting 6"):
        model.predict(X[:, :5])
    with pytest.raises(InputError, match="X has 7 features, but DFLS is expecting 6"):
        model.predict(np.hstack([X, X[:, :1]]))


# -- 7. pickle, parameters, repr --------------------------------------------------------------------

def test_pickle_params_repr():
    X, y = make_data(11)
    model = DFLS(alpha=0.05, groups=GROUPS20[:M_OLD]).fit(X[:, :M_OLD], y)
    model.add_features(X[:, M_OLD:], groups=GROUPS20[M_OLD:])
    clone = pickle.loads(pickle.dumps(model))
    Xt = make_data(12)[0]
    np.testing.assert_array_equal(clone.predict(Xt), model.predict(Xt))
    np.testing.assert_array_equal(clone.w_, model.w_)
    np.testing.assert_array_equal(clone.path_.coef_at(0.5), model.path_.coef_at(0.5))
    # the unpickled model goes on changing like the original
    clone.remove_features(np.flatnonzero(GROUPS20 == 7))
    model.remove_features(np.flatnonzero(GROUPS20 == 7))
    np.testing.assert_array_equal(clone.w_, model.w_)

    params = model.get_params()
    assert params["alpha"] == 0.05 and params["penalty"] == "group_lasso"
    assert set(params) == {"penalty", "alpha", "exponent", "groups", "fit_intercept", "standardize", "tol",
                           "ode_method", "ode_rtol", "ode_atol", "correction", "entry_step", "start_theta", "follow"}
    again = DFLS(**params)
    assert again.get_params().keys() == params.keys()
    assert again.set_params(alpha=0.3, ode_rtol=1e-6) is again
    assert again.alpha == 0.3 and again.ode_rtol == 1e-6
    assert DFLS().set_params(**DFLS(penalty="lp", exponent=3.0, alpha=0.1).get_params()).get_params() \
        == DFLS(penalty="lp", exponent=3.0, alpha=0.1).get_params()
    with pytest.raises(InputError, match="no parameter 'lam'"):
        DFLS().set_params(lam=1.0)
    text = repr(DFLS(penalty="lp", alpha=0.5, exponent=4))
    assert text.startswith("DFLS(") and "penalty='lp'" in text and "alpha=0.5" in text and "exponent=4" in text
    assert "DFLS(" in repr(model)


# -- 8. a sequence of changes -------------------------------------------------------------------

@pytest.mark.parametrize("config", ["lasso", "group_lasso", "l4"])
def test_sequence_of_changes_equals_direct_fit(config):
    rng = np.random.default_rng(13)
    X, y = make_data(13, m=22)
    A, B, C = X[:, :10], X[:, 10:16], X[:, 16:]
    kw = dict(penalty="lp", exponent=4) if config == "l4" else dict(penalty="group_lasso")
    alpha = 0.03
    if config == "group_lasso":
        labels = np.array([0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 10, 10, 11, 11, 11, 12, 20, 20, 21, 21, 21, 22])
        drop = np.flatnonzero(np.isin(labels, [1, 4, 11, 21]))          # old and new groups
        gA, gB, gC = labels[:10], labels[10:16], labels[16:]
    else:
        labels = None
        drop = np.array([2, 5, 9, 11, 14, 17, 21])
        gA = gB = gC = None
    model = DFLS(alpha=alpha, groups=gA, **kw).fit(A, y)
    model.add_features(B, groups=gB)
    assert not model.path_.fallback
    model.add_features(C, groups=gC)
    assert not model.path_.fallback
    model.remove_features(drop)
    assert not model.path_.fallback
    keep = np.setdiff1d(np.arange(22), drop)
    direct = DFLS(alpha=alpha, groups=None if labels is None else labels[keep], **kw).fit(X[:, keep], y)
    if labels is not None:
        np.testing.assert_array_equal(model.groups_, labels[keep])
    assert model.kkt_residual_ < 1e-8
    np.testing.assert_allclose(model.w_, direct.w_, atol=1e-6)
    np.testing.assert_allclose(model.coef_, direct.coef_, atol=1e-5)
    assert model.intercept_ == pytest.approx(direct.intercept_, abs=1e-5)
    Xt = rng.standard_normal((30, keep.size)) + X[:, keep].mean(axis=0)
    np.testing.assert_allclose(model.predict(Xt), direct.predict(Xt), atol=1e-5)
    np.testing.assert_allclose(model.X_, standardize(X[:, keep]), atol=1e-12)


def test_a_degenerate_active_set_still_lands_on_the_optimum():
    """More columns than samples, the lasso's active set at the data's rank (39 of 40 rows, centred):
    the ODE cannot go on (K is singular), Newton must not be trusted, and the change is finished by
    FISTA from where the path stopped, with a warning. The result is still the optimum."""
    rng = np.random.default_rng(0)
    n, m = 40, 150
    X = rng.standard_normal((n, m))
    w = np.zeros(m)
    w[:10] = 100 * rng.random(10)
    y = X @ w + rng.standard_normal(n)
    moved = rng.choice(m, 30, replace=False)
    kept = np.setdiff1d(np.arange(m), moved)
    model = DFLS(alpha=0.2).fit(X[:, kept], y)
    assert np.count_nonzero(model.w_) == n - 1
    with pytest.warns(ConvergenceWarning, match="finished by FISTA"):
        model.add_features(X[:, moved])
    reference = DFLS(alpha=0.2).fit(X[:, np.r_[kept, moved]], y)
    assert model.path_.fallback
    assert np.max(np.abs(model.w_ - reference.w_)) < 1e-8
    assert model.kkt_residual_ < 1e-8
    # l_6 on the same data: the Woodbury solve meets a penalty curvature spanning many decades
    lp = DFLS(penalty="lp", alpha=0.2, exponent=6).fit(X, y).remove_features(moved)
    assert np.max(np.abs(lp.w_ - DFLS(penalty="lp", alpha=0.2, exponent=6).fit(X[:, kept], y).w_)) < 1e-8
