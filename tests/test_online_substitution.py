"""Online Substitution against a literal reference of KDD'16 Alg. 1 and other oracles."""
import itertools
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from asyos import OnlineSubstitution, make_classification, make_regression
from asyos.data.shard import FeatureShard
from asyos.learners.protocol.central import Central
from asyos.errors import InputError
from asyos.learners.substitution.workers import SubstitutionOptions, local_lipschitz, make_worker
from asyos.learners.protocol.loopback import run_loopback
from asyos.losses import get_loss
from asyos.metrics import recall


def reference_os(X, y, loss, s, eta, passes, L_F, m=1.0, c=1.0, check=True):
    """KDD'16 Alg. 1 line by line: full-length w, u recomputed from scratch at every arrival.

    ``S`` is a list; a substitution puts the new feature in the place of the one it replaces, and
    ties in |w| reject the new feature (the same conventions as the engine).
    """
    n, p = X.shape
    w = np.zeros(p)
    S = []

    def f(v):
        return loss.value(y, X @ v)

    for _ in range(passes):
        for j in range(p):
            if j in S:
                continue                                    # the pool is the complement of S
            u = X[:, S] @ w[S] if S else np.zeros(n)        # line 4
            w_prev = w.copy()                               # line 5
            g = loss.dloss(y, u)
            if S:
                w[S] = w[S] - (eta / m) * (X[:, S].T @ g)   # line 6
            w[j] = -eta * (X[:, j] @ g)                     # line 7
            S_new = S + [j]                                 # line 8
            if len(S_new) > s:                              # line 9
                k_old = S[int(np.argmin(np.abs(w[S])))]
                k_star = j if abs(w[j]) <= abs(w[k_old]) else k_old      # line 11
                w_next = w.copy()
                w_next[k_star] = 0.0                        # line 10
                diff = w_next - w_prev
                if f(w_next) - f(w_prev) <= c * (L_F / 2 - 1 / (2 * eta)) * (diff @ diff) or not check:
                    w = w_next                              # line 14
                    S = [j if k == k_star else k for k in S] if k_star != j else S
                else:
                    w[j] = 0.0                              # line 16
            else:
                S = S_new
    return w, sorted(S)


PROBLEMS = {
    "squared": lambda seed: make_regression(n_features=80, n_informative=6, n_samples=60, seed=seed),
    "squared_hinge": lambda seed: make_classification(n_features=80, n_informative=6, n_samples=70, seed=seed),
    "logistic": lambda seed: make_classification(n_features=80, n_informative=6, n_samples=70, seed=seed),
}


@pytest.mark.parametrize("loss_name", sorted(PROBLEMS))
@pytest.mark.parametrize("settings", [dict(), dict(step_divisor=3.0, decrease_constant=0.5),
                                      dict(decrease_check=False)])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_literal_algorithm_1(loss_name, settings, seed, kernels):
    d = PROBLEMS[loss_name](seed)
    model = OnlineSubstitution(budget=6, loss=loss_name, passes=3, refit=False, random_state=seed, variant="kdd16",
                               **settings)
    model.fit(d.X, d.y)
    w_ref, S_ref = reference_os(d.X, d.y, get_loss(loss_name), 6, model.step_size_, 3, model.lipschitz_,
                                m=settings.get("step_divisor", 1.0), c=settings.get("decrease_constant", 1.0),
                                check=settings.get("decrease_check", True))
    assert model.support_.tolist() == S_ref
    np.testing.assert_allclose(model.raw_coef_, w_ref, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("variant", ["kdd16", "exchange"])
@pytest.mark.parametrize("task, loss_name", [("regression", "squared"), ("classification", "squared_hinge"),
                                             ("classification", "logistic")])
def test_the_compiled_step_equals_the_numpy_step_on_the_kdd_setting(task, loss_name, variant, monkeypatch):
    """Thousands of steps with every action and many decrease checks: same decisions, same counters,
    weights equal to rounding (the exchange variant with its intercept, stepped by the compiled
    Newton step too)."""
    make = make_regression if task == "regression" else make_classification
    d = make(n_features=3000, n_informative=40, n_samples=500, seed=3)
    fits = {}
    options = SubstitutionOptions(passes=2, variant=variant)
    for kernels in ("numpy", "numba"):
        monkeypatch.setenv("ASYOS_KERNELS", kernels)
        shard, loss = options.shard(d.X), get_loss(loss_name)
        worker = make_worker(shard, d.y, loss, 40, local_lipschitz(shard, 40, loss, 0), options)
        assert worker.state.kernels == kernels
        run_loopback(worker, Central(d.X.shape[0]))
        fits[kernels] = worker
    a, b = fits["numpy"], fits["numba"]
    assert a.state.checks > 10 and a.state.checks == b.state.checks
    assert a.state.check_rejections == b.state.check_rejections
    assert a.log.rows[-1][:5] == b.log.rows[-1][:5] and len(a.log.rows) == len(b.log.rows)
    np.testing.assert_array_equal(a.state.retained, b.state.retained)
    np.testing.assert_allclose(b.state.weights, a.state.weights, rtol=1e-9, atol=1e-13)
    assert b.intercept == pytest.approx(a.intercept, rel=1e-9, abs=1e-13)
    assert (a.intercept != 0.0) == (variant == "exchange")


def test_an_unknown_kernel_backend_is_named(monkeypatch):
    monkeypatch.setenv("ASYOS_KERNELS", "fortran")
    d = make_regression(n_features=30, n_informative=3, n_samples=20, seed=0)
    with pytest.raises(ValueError, match="unknown kernel backend 'fortran'"):
        OnlineSubstitution(budget=3).fit(d.X, d.y)


def test_the_decrease_check_rejects_when_L_F_is_underestimated():
    """With m = 1, c <= 1 and a true bound L_F, line 12 always holds (the appendix's projection
    argument); it guards against an L_F that is too small. Here L_F is a quarter of the truth."""
    d = make_regression(n_features=60, n_informative=5, n_samples=50, seed=3)
    loss = get_loss("squared")
    low = 0.6
    substitutions = {}
    for check in (True, False):
        worker = make_worker(FeatureShard(d.X), d.y, loss, 5, low,
                             SubstitutionOptions(passes=2, decrease_check=check, variant="kdd16"))
        central = Central(d.n_samples)
        run_loopback(worker, central)
        support, weights = worker.selection()
        w_ref, S_ref = reference_os(d.X, d.y, loss, 5, 0.5 / low, 2, low, check=check)
        assert support.tolist() == S_ref
        np.testing.assert_allclose(weights, w_ref[support], rtol=1e-8)
        substitutions[check] = sum(row[4] == "leave" for row in worker.log.rows)
    assert substitutions[True] < substitutions[False]


@pytest.mark.parametrize("variant", ["kdd16", "exchange"])
def test_finds_the_best_subset_found_by_brute_force(variant):
    """The exchange variant's model has an intercept (and the data an offset it must absorb)."""
    rng = np.random.default_rng(4)
    X = rng.standard_normal((40, 9)) + (3.0 if variant == "exchange" else 0.0)
    y = X[:, 2] * 2.0 - X[:, 7] * 1.5 + 0.05 * rng.standard_normal(40)
    design = (lambda S: np.column_stack([X[:, S], np.ones(40)])) if variant == "exchange" else (lambda S: X[:, S])
    best = min(itertools.combinations(range(9), 2), key=lambda S: np.linalg.lstsq(design(S), y, rcond=None)[1][0])
    model = OnlineSubstitution(budget=2, passes=3, variant=variant).fit(X, y)
    assert tuple(model.support_) == best
    exact = np.linalg.lstsq(design(best), y, rcond=None)[0]
    np.testing.assert_allclose(model.coef_[list(best)], exact[:2])
    assert model.intercept_ == (pytest.approx(exact[2]) if variant == "exchange" else 0.0)


@pytest.mark.parametrize("variant", ["kdd16", "exchange"])
def test_objective_never_increases_with_a_global_lipschitz_step(variant):
    """Theorem 1: with eta < 1/L_F every committed step decreases f (L_F bounded by lambda_max). The
    exchange variant's Newton entries, checked substitutions and intercept steps keep that."""
    d = make_regression(n_features=120, n_informative=8, n_samples=90, seed=2)
    loss = get_loss("squared")
    options = SubstitutionOptions(passes=2, variant=variant)
    shard = options.shard(d.X)
    Z = shard.XT.T
    L = np.linalg.eigvalsh(Z.T @ Z / d.n_samples)[-1]
    worker = make_worker(shard, d.y, loss, 8, L, SubstitutionOptions(passes=2, step_size=0.5 / L, variant=variant))
    values = []
    central = Central(d.n_samples, monitor=lambda c: values.append(loss.value(d.y, c.u)))
    run_loopback(worker, central)
    assert len(values) > 200
    assert np.all(np.diff(values) <= 1e-12 * values[0])


@pytest.mark.parametrize("seed", [0, 1])
def test_close_to_proj_gd_in_the_kdd_regression_setting(seed):
    """KDD'16 Sec. 5.1: in regression OS performs almost like the batch L0 method Proj-GD."""
    from asyos import ProjectedGradient
    d = make_regression(n_features=2000, n_informative=100, seed=seed)       # n = 1316
    os_recall = recall(OnlineSubstitution(budget=100, passes=3).fit(d.X, d.y).support_, d.true_support)
    pgd_recall = recall(ProjectedGradient(budget=100).fit(d.X, d.y).support_, d.true_support)
    assert os_recall >= 0.95
    assert os_recall >= pgd_recall - 0.05


def test_refit_is_least_squares_on_the_support():
    d = make_regression(n_features=200, n_informative=10, n_samples=80, seed=1)
    model = OnlineSubstitution(budget=10, variant="kdd16").fit(d.X, d.y)
    S = model.support_
    np.testing.assert_allclose(model.coef_[S], np.linalg.lstsq(d.X[:, S], d.y, rcond=None)[0], rtol=1e-10)
    assert np.count_nonzero(model.coef_) <= 10 and model.intercept_ == 0.0
    model = OnlineSubstitution(budget=10).fit(d.X + 5.0, d.y)                  # with its intercept
    S = model.support_
    exact = np.linalg.lstsq(np.column_stack([d.X[:, S] + 5.0, np.ones(80)]), d.y, rcond=None)[0]
    np.testing.assert_allclose(model.coef_[S], exact[:-1], rtol=1e-9)
    assert model.intercept_ == pytest.approx(exact[-1], rel=1e-9)
    np.testing.assert_allclose(model.predict(d.X + 5.0), (d.X[:, S] + 5.0) @ exact[:-1] + exact[-1], rtol=1e-9)


def test_selection_log_replays_to_the_support():
    d = make_regression(n_features=300, n_informative=10, n_samples=80, seed=5)
    model = OnlineSubstitution(budget=10, passes=3).fit(d.X, d.y)
    held = set()
    for row in model.selection_log_:
        if row["event"] == "enter":
            held.add(row["feature"])
        else:
            held.remove(row["feature"])
        assert len(held) <= 10
    assert sorted(held) == model.support_.tolist()
    assert {r["pass"] for r in model.selection_log_} <= {0, 1, 2}


@pytest.mark.parametrize("variant", ["kdd16", "exchange"])
def test_sparse_input_gives_the_same_model(variant):
    """Sparse columns are centred where they are used, never densified in the shard, so the model
    is the dense one's."""
    d = make_classification(n_features=150, n_informative=8, n_samples=120, seed=7)
    X = d.X * (np.abs(d.X) > 0.8) + (np.abs(d.X) > 0.8)          # sparse, with offsets to centre
    dense = OnlineSubstitution(budget=8, loss="squared_hinge", variant=variant).fit(X, d.y)
    sparse = OnlineSubstitution(budget=8, loss="squared_hinge", variant=variant).fit(sp.csr_matrix(X), d.y)
    np.testing.assert_array_equal(dense.support_, sparse.support_)
    np.testing.assert_allclose(dense.raw_coef_, sparse.raw_coef_, rtol=1e-9, atol=1e-12)
    assert sparse.raw_intercept_ == pytest.approx(dense.raw_intercept_, rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(dense.decision_function(X), sparse.decision_function(sp.csr_matrix(X)), rtol=1e-8)


def test_worker_state_pickles_mid_run_and_continues_identically():
    d = make_regression(n_features=100, n_informative=5, n_samples=60, seed=9)
    loss = get_loss("squared")
    opts = SubstitutionOptions(passes=2, step_size=0.2)

    def fresh():
        return make_worker(FeatureShard(d.X), d.y, loss, 5, 2.5, opts), Central(d.n_samples)

    worker, central = fresh()
    for _ in range(70):
        push = worker.propose(central.u, central.version)
        central.apply(push.delta, push.version_read)
        worker.commit()
    worker2, central2 = pickle.loads(pickle.dumps((worker, central)))
    assert np.shares_memory(worker2.delta, worker2.buffer) and np.shares_memory(central2.u, central2.u_ext)
    assert np.shares_memory(worker2.state._wm, worker2.state.w)
    run_loopback(worker, central)
    run_loopback(worker2, central2)
    np.testing.assert_array_equal(central.u, central2.u)
    np.testing.assert_array_equal(worker.selection()[1], worker2.selection()[1])


@pytest.mark.parametrize("kwargs, message", [
    (dict(budget=0), r"'budget' parameter of OnlineSubstitution must be an int in the range \[1, inf\)"),
    (dict(budget=2.5), "The 'budget' parameter .* Got 2.5 instead"), (dict(passes=0), "passes"),
    (dict(loss="hinge"), "hinge loss is not smooth"),
    (dict(step_divisor=0.5), "step_divisor"), (dict(decrease_constant=2.0), "decrease_constant"),
    (dict(step_size=-1.0), "step_size")])
def test_bad_parameters_are_named(kwargs, message):
    d = make_regression(n_features=100, n_informative=5, n_samples=30, seed=0)
    with pytest.raises(InputError, match=message):
        OnlineSubstitution(**{"budget": 5, **kwargs}).fit(d.X, d.y)


def test_a_budget_above_the_features_keeps_them_all_with_a_warning():
    """As scikit-learn's SelectKBest with k > n_features: a warning, and the fit of budget = n_features."""
    d = make_regression(n_features=8, n_informative=3, n_samples=40, seed=0)
    with pytest.warns(UserWarning, match="budget=20 is greater than n_features=8: all the features are kept"):
        wide = OnlineSubstitution(budget=20, random_state=0).fit(d.X, d.y)
    exact = OnlineSubstitution(budget=8, random_state=0).fit(d.X, d.y)
    assert wide.budget == 20 and wide.budget_ == 8                # the parameter is left as given
    np.testing.assert_array_equal(wide.coef_, exact.coef_)


def test_bad_data_is_named():
    d = make_regression(n_features=20, n_informative=3, n_samples=30, seed=0)
    with pytest.raises(InputError, match="continuous values"):
        OnlineSubstitution(budget=3, loss="squared_hinge").fit(d.X, d.y)
    X = d.X.copy()
    X[0, 0] = np.inf
    with pytest.raises(InputError, match="Input X contains infinity"):
        OnlineSubstitution(budget=3).fit(X, d.y)
    with pytest.raises(InputError, match="inconsistent numbers of samples: \\[30, 29\\]"):
        OnlineSubstitution(budget=3).fit(d.X, d.y[:-1])
    with pytest.raises(InputError, match="Expected 2D array"):
        OnlineSubstitution(budget=3).fit(d.X[0], d.y)
    model = OnlineSubstitution(budget=3).fit(d.X, d.y)
    with pytest.raises(InputError, match="X has 19 features, but OnlineSubstitution is expecting 20"):
        model.predict(d.X[:, :19])


def test_a_diverging_step_is_an_error_not_a_silent_nan(kernels):
    from asyos.errors import DivergenceError
    d = make_classification(n_features=300, n_informative=20, n_samples=200, seed=0)
    with pytest.raises(DivergenceError, match="step size 50 is too large.*pass a smaller --step-size"):
        OnlineSubstitution(budget=20, loss="squared_hinge", step_size=50.0).fit(d.X, d.y)


def test_a_result_worse_than_the_empty_model_warns():
    from asyos import AsyncOnlineSubstitution
    from asyos.errors import ConvergenceWarning
    d = make_classification(n_features=1000, n_informative=100, seed=0)
    with pytest.warns(ConvergenceWarning, match="worse than the empty model"):
        AsyncOnlineSubstitution(budget=100, n_workers=8, loss="squared_hinge", step_size=4.5, passes=3,
                                variant="kdd16").fit(d.X, d.y)


def test_auto_takes_the_compiled_step_only_for_runs_long_enough_to_repay_loading_it(monkeypatch):
    from asyos.learners.substitution import kernels
    monkeypatch.delenv("ASYOS_KERNELS", raising=False)
    assert kernels.backend(None, kernels.AUTO_MIN_STEPS - 1) == "numpy"
    assert kernels.backend(None, kernels.AUTO_MIN_STEPS) == "numba"
    assert kernels.backend("numba", 10) == "numba" and kernels.backend("numpy", 10 ** 9) == "numpy"
    d = make_regression(n_features=30, n_informative=3, n_samples=20, seed=0)
    worker = make_worker(FeatureShard(d.X), d.y, get_loss("squared"), 3, 1.0, SubstitutionOptions(passes=2))
    assert worker.state.kernels == "numpy"          # 60 steps


@pytest.mark.parametrize("loss_name", ["squared", "squared_hinge", "logistic"])
def test_refit_with_an_intercept_reaches_the_optimum_on_the_raw_columns(loss_name):
    """``refit_with_intercept`` works on standardized columns; its (coef, b) minimise the loss on
    the raw ones: the gradient there vanishes (logistic: but for its small ridge)."""
    from asyos.learners.refit import LOGISTIC_RIDGE, refit_with_intercept
    rng = np.random.default_rng(5)
    X = rng.standard_normal((80, 4)) * [0.01, 1.0, 100.0, 3.0] + [5.0, -2.0, 300.0, 0.0]
    loss = get_loss(loss_name)
    y = X @ [50.0, 1.0, 0.01, -0.5] + rng.standard_normal(80)
    if loss.task == "classification":
        y = np.where(y > np.median(y) + 0.3 * rng.standard_normal(80), 1.0, -1.0)
    coef, b = refit_with_intercept(X, y, loss)
    g = loss.dloss(y, X @ coef + b)
    std = X.std(axis=0)
    ridge = LOGISTIC_RIDGE * coef * std ** 2 if loss_name == "logistic" else 0.0     # the ridge is on scaled w
    np.testing.assert_allclose((X.T @ g + ridge) * std, 0.0, atol=1e-6)
    assert abs(g.sum()) < 1e-7


@pytest.mark.parametrize("loss_name", ["squared", "squared_hinge", "logistic"])
@pytest.mark.parametrize("alpha", [0.01, 1.0])
def test_a_ridge_refit_reaches_the_optimum_of_the_penalised_loss(loss_name, alpha):
    """``refit_with_intercept(..., ridge=alpha)`` minimises ``loss + (alpha / 2) ||w_std||^2``, ``w_std``
    the weights of the columns scaled to unit variance, ``b`` free: the gradient vanishes there; for
    the squared loss it is scikit-learn's ``Ridge`` with ``alpha n`` on the standardized columns."""
    from asyos.learners.refit import refit_with_intercept
    rng = np.random.default_rng(6)
    X = rng.standard_normal((70, 5)) * [0.01, 1.0, 100.0, 3.0, 1.0] + [5.0, -2.0, 300.0, 0.0, 1.0]
    loss = get_loss(loss_name)
    y = X @ [50.0, 1.0, 0.01, -0.5, 0.0] + rng.standard_normal(70)
    if loss.task == "classification":
        y = np.where(y > np.median(y), 1.0, -1.0)
    coef, b = refit_with_intercept(X, y, loss, ridge=alpha)
    std = X.std(axis=0)
    g = loss.dloss(y, X @ coef + b)
    # the objective's gradient in the standardized weights (L-BFGS stops at about 1e-6 of it)
    np.testing.assert_allclose((X.T @ g + alpha * coef * std ** 2) / std, 0.0, atol=1e-5)
    assert abs(g.sum()) < 1e-7
    plain, _ = refit_with_intercept(X, y, loss)
    assert np.linalg.norm(coef * std) < np.linalg.norm(plain * std)                     # shrunk
    if loss_name == "squared":
        from sklearn.linear_model import Ridge
        Z = (X - X.mean(axis=0)) / std
        ridge = Ridge(alpha=alpha * X.shape[0]).fit(Z, y)
        np.testing.assert_allclose(coef * std, ridge.coef_, rtol=1e-8)


def test_a_ridge_shrinks_the_selection_and_its_refit_and_is_refused_by_kdd16():
    d = make_classification(n_features=300, n_informative=10, n_samples=60, seed=2)
    plain = OnlineSubstitution(budget=10).fit(d.X, d.y)
    ridged = OnlineSubstitution(budget=10, ridge=1.0).fit(d.X, d.y)
    assert np.abs(plain.decision_function(d.X) * d.y).min() >= 0.99      # 10 of 300 features fit 60 rows
    assert np.abs(ridged.decision_function(d.X)).max() < np.abs(plain.decision_function(d.X)).max()
    assert ridged.step_size_ == pytest.approx(0.5 / (ridged.lipschitz_ + 1.0))
    with pytest.raises(InputError, match="ridge"):
        OnlineSubstitution(budget=10, variant="kdd16", ridge=0.5).fit(d.X, d.y)
    with pytest.raises(ValueError, match="ridge"):
        OnlineSubstitution(budget=10, ridge=-1.0).fit(d.X, d.y)
