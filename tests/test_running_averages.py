"""Running averages (``asyos.learners.averages.stats``) and the models extracted from them (thesis Ch. 3).

Oracles: numpy's covariance and least squares on the data itself, scikit-learn's Lasso and
ElasticNet on the standardized data, the eq. 3.11 recursion written out sample by sample, and the
coordinate-wise optimality of MCP (eq. 3.10).
"""
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from asyos.errors import InputError
from asyos.registry import algorithms_of
from asyos.learners.averages import extractors as E
from asyos.learners.averages.running_averages import OFSA, OLSThreshold, OMCP, OElasticNet, OLasso
from asyos.learners.averages.stats import RunningAverages


def thesis_data(n, p=200, k=20, seed=0, signal=1.0):
    """Sec. 4.1: x = z 1_p + u (pairwise correlation 0.5), beta* = signal at every 10th feature."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 1)) + rng.normal(size=(n, p))
    beta = np.zeros(p)
    beta[9::10][:k] = signal
    return X, X @ beta + rng.normal(size=n), np.flatnonzero(beta)


@pytest.fixture(scope="module")
def offset_data():
    """Columns on very different scales, some with means far larger than their spread."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 6)) * [1, 10, 0.01, 1e3, 1, 5] + [0, 1e5, -3, 7, 1e6, 2]
    y = X @ np.array([1.0, 0, 2e2, 0, -3, 0.5]) + rng.normal(size=300)
    return X, y


def standardized(X, y):
    Z = (X - X.mean(0)) / X.std(0)
    return Z, y - y.mean()


# ----------------------------------------------------------------------------- statistics
def test_averages_match_numpy(offset_data):
    X, y = offset_data
    stats = RunningAverages(6).update(X, y)
    n = X.shape[0]
    np.testing.assert_allclose(stats.mean_x, X.mean(0), rtol=1e-13)
    np.testing.assert_allclose(stats.comoment_xx(), np.cov(X.T, bias=True) * n, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(stats.comoment_xy(), (X - X.mean(0)).T @ (y - y.mean()), rtol=1e-9)
    np.testing.assert_allclose(stats.S_xx, X.T @ X / n, rtol=1e-9)
    np.testing.assert_allclose(stats.S_xy, X.T @ y / n, rtol=1e-9)
    assert stats.S_yy == pytest.approx(y @ y / n, rel=1e-12)
    assert stats.n == n and stats.n_seen == n


def test_merge_is_the_statistics_of_the_concatenation(offset_data):
    X, y = offset_data
    whole = RunningAverages(6).update(X, y)
    a = RunningAverages(6).update(X[:37], y[:37])
    b = RunningAverages(6).update(X[37:200], y[37:200])
    c = RunningAverages(6)
    for i in range(200, 300):
        c.update(X[i], y[i])                        # single samples, another shift
    for merged in (a + b + c, c + (b + a), a.merge(b).merge(c)):
        np.testing.assert_allclose(merged.comoment_xx(), whole.comoment_xx(), rtol=1e-9, atol=1e-6)
        np.testing.assert_allclose(merged.comoment_xy(), whole.comoment_xy(), rtol=1e-9, atol=1e-6)
        assert merged.comoment_yy() == pytest.approx(whole.comoment_yy(), rel=1e-10)
        np.testing.assert_allclose(merged.mean_x, whole.mean_x, rtol=1e-13, atol=1e-12)
        assert merged.n_seen == 300 and merged.weight == 300
    assert a.n_seen == 37                                     # merge leaves its inputs alone
    assert (RunningAverages(6) + a).n_seen == 37 and (a + RunningAverages(6)).n_seen == 37


def test_single_samples_batches_and_sparse_rows_agree(offset_data):
    X, y = offset_data
    batch = RunningAverages(6).update(X, y)
    one = RunningAverages(6)
    for xi, yi in zip(X, y):
        one.update(xi, yi)
    Xs = X[:, [0, 2, 5]] * (np.abs(X[:, [0, 2, 5]]) > 0.5)
    dense = RunningAverages(3).update(Xs, y)
    sparse = RunningAverages(3).update(sp.csr_matrix(Xs[:100]), y[:100]).update(sp.csr_matrix(Xs[100:]), y[100:])
    np.testing.assert_allclose(one.comoment_xx(), batch.comoment_xx(), rtol=1e-9, atol=1e-6)
    np.testing.assert_allclose(sparse.comoment_xx(), dense.comoment_xx(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(sparse.comoment_xy(), dense.comoment_xy(), rtol=1e-9, atol=1e-9)


def test_large_offsets_keep_their_digits():
    rng = np.random.default_rng(1)
    X = 1e8 + rng.normal(size=(2000, 3))
    stats = RunningAverages(3)
    for lo in range(0, 2000, 128):
        stats.update(X[lo:lo + 128], X[lo:lo + 128, 0])
    exact = np.cov((X - 1e8).T, bias=True) * 2000
    np.testing.assert_allclose(stats.comoment_xx(), exact, rtol=1e-7)


def recursion(X, y, alpha, batches=None):
    """Eq. 3.11 written out: every average moves by alpha_n = max(alpha, 1/(n+1)) towards the new term."""
    terms = [(X[i:i + 1], y[i:i + 1]) for i in range(len(y))] if batches is None else batches
    mu = sxx = sxy = None
    for m, (Xb, yb) in enumerate(terms):
        new = (Xb.mean(0), Xb.T @ Xb / len(yb), Xb.T @ yb / len(yb))
        if mu is None:
            mu, sxx, sxy = new
            continue
        a = max(alpha, 1.0 / (m + 1)) if batches is not None else max(alpha, 1.0 / (m + 1))
        mu, sxx, sxy = ((1 - a) * old + a * cur for old, cur in zip((mu, sxx, sxy), new))
    return mu, sxx, sxy


@pytest.mark.parametrize("alpha", [0.05, 0.3])
def test_forgetting_follows_eq_3_11(offset_data, alpha):
    X, y = offset_data
    X, y = X[:, :3] / [1, 10, 0.01] - [0, 1e4, -300], y / 100
    mu, sxx, sxy = recursion(X, y, alpha)
    for cuts in ([], [1, 2, 19, 20, 21, 150], [7]):
        stats = RunningAverages(3, forgetting=alpha)
        for Xb, yb in zip(np.split(X, cuts), np.split(y, cuts)):
            stats.update(Xb, yb)
        np.testing.assert_allclose(stats.mean_x, mu, rtol=1e-10)
        np.testing.assert_allclose(stats.S_xx, sxx, rtol=1e-9)
        np.testing.assert_allclose(stats.S_xy, sxy, rtol=1e-9)
        assert stats.weight == pytest.approx(1 / alpha)


def test_forgetting_by_batch_treats_a_batch_as_one_term(offset_data):
    X, y = offset_data
    X, y = X[:, :3] / [1, 10, 0.01] - [0, 1e4, -300], y / 100
    cuts = list(range(25, 300, 25))
    batches = list(zip(np.split(X, cuts), np.split(y, cuts)))
    mu, sxx, sxy = recursion(X, y, 0.2, batches)
    stats = RunningAverages(3, forgetting=0.2, forget_by="batch")
    for Xb, yb in batches:
        stats.update(Xb, yb)
    np.testing.assert_allclose(stats.mean_x, mu, rtol=1e-10)
    np.testing.assert_allclose(stats.S_xx, sxx, rtol=1e-9)
    np.testing.assert_allclose(stats.S_xy, sxy, rtol=1e-9)


def test_standardization_is_eqs_3_2_and_3_3(offset_data):
    X, y = offset_data
    X = np.column_stack([X, np.full(300, 4.0)])                  # a constant feature
    std = RunningAverages(7).update(X, y).standardize()
    Z, yc = standardized(X[:, :6], y)
    np.testing.assert_allclose(std.xx[:6, :6], Z.T @ Z / 300, atol=1e-10)
    np.testing.assert_allclose(std.xy[:6], Z.T @ yc / 300, rtol=1e-9)
    assert std.scale[6] == 0 and not std.xx[6].any() and std.xy[6] == 0
    beta = np.arange(7.0)
    assert std.objective(beta) == pytest.approx(np.mean((yc - Z @ beta[:6]) ** 2) / 2, rel=1e-9)


def test_save_load_and_pickle_round_trip(tmp_path, offset_data):
    X, y = offset_data
    stats = RunningAverages(6, forgetting=0.1, forget_by="batch").update(X, y)
    stats.save(tmp_path / "ra.npz")
    back = RunningAverages.load(tmp_path / "ra.npz")
    for other in (back, pickle.loads(pickle.dumps(stats))):
        np.testing.assert_array_equal(other.comoment_xx(), stats.comoment_xx())
        assert (other.n_seen, other.weight, other.forgetting, other.forget_by) == (300, stats.weight, 0.1, "batch")
    back.update(X[:5], y[:5])                                     # and it goes on learning
    assert back.n_seen == 305


def test_bad_input_is_named(tmp_path):
    stats = RunningAverages(3)
    with pytest.raises(InputError, match="4 features, but these running averages have 3"):
        stats.update(np.ones((2, 4)), np.ones(2))
    with pytest.raises(InputError, match="NaN"):
        stats.update(np.array([[1.0, np.nan, 0]]), [1.0])
    with pytest.raises(InputError, match="NaN"):
        stats.update(np.array([1.0, 2, 3]), np.nan)
    with pytest.raises(InputError, match="seen no samples"):
        stats.standardize()
    with pytest.raises(InputError, match="forgetting must be"):
        RunningAverages(3, forgetting=1.5)
    with pytest.raises(InputError, match="forget_by"):
        RunningAverages(3, forgetting=0.1, forget_by="day")
    (tmp_path / "junk.npz").write_bytes(b"not an archive")
    with pytest.raises(InputError, match="cannot read running averages"):
        RunningAverages.load(tmp_path / "junk.npz")
    np.savez(tmp_path / "other.npz", a=np.ones(2))
    with pytest.raises(InputError, match="not a running-averages file"):
        RunningAverages.load(tmp_path / "other.npz")


# ----------------------------------------------------------------------------- extractors
def lstsq_with_intercept(X, y):
    A = np.column_stack([X, np.ones(len(y))])
    sol = np.linalg.lstsq(A, y, rcond=None)[0]
    return sol[:-1], sol[-1]


def test_ols_and_ols_th_are_least_squares_on_the_data(offset_data):
    X, y = offset_data
    std = RunningAverages(6).update(X, y).standardize()
    model = E.ols(std, ridge=0.0)
    coef, intercept = lstsq_with_intercept(X, y)
    np.testing.assert_allclose(model.coef, coef, rtol=1e-6, atol=1e-10)
    assert model.intercept == pytest.approx(intercept, rel=1e-6)
    # OLS-th: the k largest standardized |b_j| of that fit, refit on them
    scores = np.abs(coef * X.std(0))
    for k in (1, 2, 4):
        th = E.ols_threshold(std, k)
        expected = np.sort(np.argsort(-scores)[:k])
        np.testing.assert_array_equal(th.support, expected)
        sub, b0 = lstsq_with_intercept(X[:, expected], y)
        np.testing.assert_allclose(th.coef[expected], sub, rtol=1e-6)
        assert th.intercept == pytest.approx(b0, rel=1e-6)
        np.testing.assert_allclose(th.decision_function(X), X[:, expected] @ sub + b0, rtol=1e-8, atol=1e-6)


def test_ridge_is_used_when_samples_do_not_exceed_features():
    X, y, _ = thesis_data(60, p=80, k=5)
    std = RunningAverages(80).update(X, y).standardize()
    Z, yc = standardized(X, y)
    expected = np.linalg.solve(Z.T @ Z / 60 + E.DEFAULT_RIDGE * np.eye(80), Z.T @ yc / 60)
    np.testing.assert_allclose(E.ols(std).std_coef, expected, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("penalty", ["lasso", "elnet"])
def test_penalized_solution_matches_scikit_learn(penalty):
    from sklearn.linear_model import ElasticNet, Lasso
    X, y, _ = thesis_data(300, p=60, k=6, seed=2)
    std = RunningAverages(60).update(X, y).standardize()
    Z, yc = standardized(X, y)
    yc = yc / yc.std()                                            # the search works on unit-variance y
    search = E._LambdaSearch(std, penalty, 0.5, 3.0, 1e-12, 100_000)
    for lam in (0.5, 0.1, 0.02):
        beta, count = search.solve(lam)
        ref = (Lasso(alpha=lam, fit_intercept=False, tol=1e-14, max_iter=100_000) if penalty == "lasso" else
               ElasticNet(alpha=lam, l1_ratio=0.5, fit_intercept=False, tol=1e-14, max_iter=100_000)).fit(Z, yc)
        np.testing.assert_allclose(beta, ref.coef_, atol=1e-8)
        assert count == np.count_nonzero(ref.coef_)


def test_mcp_solution_is_a_coordinatewise_minimum():
    """Every coordinate of the MCP solution minimizes its own one-dimensional problem (eq. 3.10)."""
    X, y, _ = thesis_data(300, p=40, k=4, seed=3)
    std = RunningAverages(40).update(X, y).standardize()
    gamma, lam = 3.0, 0.1
    search = E._LambdaSearch(std, "mcp", 0.5, gamma, 1e-13, 100_000)
    beta, count = search.solve(lam)
    assert 0 < count < 40
    grid = np.linspace(-3, 3, 120_001)
    pen = np.where(np.abs(grid) <= gamma * lam, lam * np.abs(grid) - grid ** 2 / (2 * gamma), gamma * lam ** 2 / 2)
    for j in range(40):
        z = search.r[j] - std.xx[j] @ beta + beta[j]
        best = grid[np.argmin(0.5 * grid ** 2 - z * grid + pen)]
        assert abs(best - beta[j]) < 1e-4


@pytest.mark.parametrize("penalty", ["lasso", "elnet", "mcp"])
def test_lambda_search_gives_exactly_k_and_paths_agree(penalty):
    X, y, _ = thesis_data(500, p=100, k=10, seed=4)
    std = RunningAverages(100).update(X, y).standardize()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path = E.penalized_path(std, [3, 10, 25], penalty=penalty)
    for k, model in zip([3, 10, 25], path):
        assert model.support.size == k and model.lam > 0
        single = E.penalized(std, k, penalty=penalty)
        np.testing.assert_array_equal(single.support, model.support)
    fewer = E.penalized(std, 10, penalty=penalty, exact=False)
    assert fewer.support.size <= 10


def test_ofsa_and_ols_th_recover_the_thesis_signal():
    """Thesis Table 5.1's setting, smaller: correlated features, strong signal, n = 3p/2."""
    X, y, truth = thesis_data(300, p=200, k=20, seed=5)
    std = RunningAverages(200).update(X, y).standardize()
    for model in (E.ofsa(std, 20), E.ols_threshold(std, 20), E.penalized(std, 20, penalty="mcp")):
        np.testing.assert_array_equal(model.support, truth)
        # the refit is least squares on the support
        sub, b0 = lstsq_with_intercept(X[:, truth], y)
        np.testing.assert_allclose(model.coef[truth], sub, rtol=1e-6)
    # the Lasso, biased by the correlation, does not (the thesis' point)
    assert np.intersect1d(E.penalized(std, 20, penalty="lasso").support, truth).size < 20


def test_ofsa_keeps_the_schedule_and_names_divergence():
    X, y, _ = thesis_data(300, p=50, k=5, seed=6)
    std = RunningAverages(50).update(X, y).standardize()
    assert E.ofsa(std, 7, n_iter=30, warm_up=0).support.size == 7
    with pytest.raises(InputError, match="diverged"):
        E.ofsa(std, 5, step=10.0, momentum=0.0)


def test_k_is_checked():
    X, y, _ = thesis_data(100, p=20, k=2)
    std = RunningAverages(20).update(X, y).standardize()
    for bad in (0, 21, 2.5, True):
        with pytest.raises(InputError, match="k must be|larger than"):
            E.ols_threshold(std, bad)
    with pytest.raises(InputError, match="unknown penalty"):
        E.penalized(std, 3, penalty="scad")


# ----------------------------------------------------------------------------- learners
LEARNERS = [spec.estimator_class for spec in algorithms_of("averages")]


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.method)
def test_any_order_of_arrival_gives_the_same_model(cls):
    X, y, _ = thesis_data(400, p=60, k=6, seed=8)
    whole = cls(budget=6).fit(X, y)
    pieces = cls(budget=6)
    for Xb, yb in zip(np.array_split(X, 7), np.array_split(y, 7)):
        pieces.partial_fit(Xb, yb)
    ones = cls(budget=6)
    for xi, yi in zip(X[::-1], y[::-1]):
        ones.learn_one(xi, yi)
    split = RunningAverages(60).update(X[200:], y[200:]) + RunningAverages(60).update(X[:200], y[:200])
    for other in (pieces, ones, cls(budget=6).fit_stats(split)):
        np.testing.assert_array_equal(other.support_, whole.support_)
        np.testing.assert_allclose(other.coef_, whole.coef_, rtol=1e-6, atol=1e-9)
    assert whole.n_samples_seen_ == 400 and whole.n_features_in_ == 60


def test_extract_and_path_give_other_sparsities_without_refitting():
    X, y, truth = thesis_data(400, p=60, k=6, seed=9)
    model = OFSA(budget=6).fit(X, y)
    before = model.coef_.copy()
    path = model.path([2, 6, 12])
    assert [m.support.size for m in path] == [2, 6, 12]
    assert set(path[1].support) == set(truth)
    assert model.extract(12).support.size == 12
    np.testing.assert_array_equal(model.coef_, before)


def test_classification_predicts_signs_and_checks_labels():
    X, y, _ = thesis_data(600, p=40, k=4, seed=10)
    labels = np.where(y >= np.median(y), 1.0, -1.0)
    model = OLSThreshold(budget=4, task="classification").fit(X[:400], labels[:400])
    assert set(np.unique(model.predict(X[400:]))) <= {-1.0, 1.0}
    assert model.score(X[400:], labels[400:]) > 0.85
    with pytest.raises(InputError, match="continuous values"):
        OLSThreshold(budget=4, task="classification").fit(X, y)
    with pytest.raises(InputError, match="The 'task' parameter of OLSThreshold must be a str among"):
        OLSThreshold(budget=4, task="ranking").fit(X, labels)


def test_forgetting_tracks_a_drifting_model():
    """Thesis Sec. 5.4 in small: the coefficients change sign half-way; with forgetting the
    model follows, without it the average of both regimes predicts poorly."""
    rng = np.random.default_rng(11)
    adapted = OLSThreshold(budget=3, forgetting=0.05, forget_by="batch")
    plain = OLSThreshold(budget=3)
    coef = np.zeros(10)
    coef[:3] = 2.0
    for t in range(200):
        if t == 100:
            coef[:3] = -2.0
        X = rng.normal(size=(50, 10))
        y = X @ coef + rng.normal(size=50)
        adapted.partial_fit(X, y)
        plain.partial_fit(X, y)
    X = rng.normal(size=(500, 10))
    y = X @ coef + rng.normal(size=500)
    rmse = lambda m: np.sqrt(np.mean((m.predict(X) - y) ** 2))  # noqa: E731
    assert rmse(adapted) < 1.2 < 2.0 < rmse(plain)


def test_streamed_cli_run_reports_progress_and_saves_the_averages(tmp_path, monkeypatch):
    import io
    import json
    from asyos.utils.logs import configure
    from asyos.utils.progress import Progress
    from asyos.cli.run import main
    X, y, truth = thesis_data(900, p=50, k=5, seed=12)
    path = tmp_path / "d.npz"
    np.savez(path, X=X, y=y)
    assert main(["--algorithm", "ols-th", "--data", str(path), "--budget", "5", "--chunk-rows", "64",
                 "--output", str(tmp_path / "out"), "--quiet"]) == 0
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert record["selected"] == truth.tolist() and record["n_samples_seen"] == 900
    saved = RunningAverages.load(tmp_path / "out" / "running_averages.npz")
    np.testing.assert_allclose(saved.comoment_xx(), RunningAverages(50).update(X, y).comoment_xx(), rtol=1e-10)
    stream = io.StringIO()
    configure(verbose=1, stream=stream)
    monkeypatch.setenv("ASYOS_PROGRESS_EVERY", "0")
    progress = Progress("ofsa: read", 900, "rows")
    progress.advance(300)
    configure()
    assert "asyos: ofsa: read: 300 of 900 rows (33%)" in stream.getvalue()


def test_cli_refuses_what_running_averages_do_not_have(capsys):
    from asyos.cli.run import main
    assert main(["--algorithm", "ofsa", "--simulate"]) == 2
    assert "--simulate applies to parallel execution" in capsys.readouterr().err
    assert main(["--algorithm", "ofsa", "--tune"]) == 2
    assert "--tune does not apply" in capsys.readouterr().err


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.method)
def test_units_of_y_do_not_change_the_selection(cls):
    X, y, _ = thesis_data(300, p=40, k=4, seed=13)
    base = cls(budget=4).fit(X, y)
    for factor in (1e-2, 1e3):
        scaled = cls(budget=4).fit(X, y * factor)
        np.testing.assert_array_equal(scaled.support_, base.support_)
        np.testing.assert_allclose(scaled.coef_, base.coef_ * factor, rtol=1e-6, atol=1e-9)


def test_flat_buffers_round_trip_and_add():
    rng = np.random.default_rng(11)
    X, y = rng.standard_normal((60, 5)) + 3.0, rng.standard_normal(60)
    a = RunningAverages(5).update(X[:25], y[:25])
    b = RunningAverages(5).update(X[25:], y[25:])
    both = RunningAverages(5).update(X, y)
    again = RunningAverages.from_buffers(*a.to_buffers(), a.shift_x, a.shift_y)
    assert np.allclose(again.standardize().xx, a.standardize().xx)
    b_moved = b.shifted_to(a.shift_x, a.shift_y)
    va, ma = a.to_buffers()
    vb, mb = b_moved.to_buffers()
    summed = RunningAverages.from_buffers(va + vb, ma + mb, a.shift_x, a.shift_y)
    assert summed.n_seen == 60
    for name in ("xx", "xy", "mean_x"):
        assert np.allclose(getattr(summed.standardize(), name), getattr(both.standardize(), name), rtol=1e-12)


@pytest.mark.parametrize("cls", [OLSThreshold, OFSA, OLasso, OElasticNet, OMCP], ids=lambda c: c.__name__)
def test_every_running_averages_learner_forgets_by_batch_when_asked(cls):
    """forget_by is every learner's parameter (it was OLSThreshold's alone, so --param forget_by=batch failed for
    the others): batches forget as RunningAverages(..., forget_by="batch") does."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 6))
    y = X[:, 0] + 0.1 * rng.standard_normal(60)
    model = cls(budget=2, forgetting=0.2, forget_by="batch")
    for part in (slice(0, 20), slice(20, 40), slice(40, 60)):
        model.partial_fit(X[part], y[part])
    expected = RunningAverages(6, 0.2, "batch")
    for part in (slice(0, 20), slice(20, 40), slice(40, 60)):
        expected.update(X[part], y[part])
    np.testing.assert_array_equal(model.stats_.mean_x, expected.mean_x)
    assert cls(budget=2).get_params()["forget_by"] == "sample"


@pytest.mark.parametrize("make, message", [
    (lambda: OFSA(budget=2, forgetting=1.0),
     "'forgetting' parameter of OFSA must be a float in the range \\(0.0, 1.0\\)"),
    (lambda: OElasticNet(budget=2, l1_ratio=0.0), "'l1_ratio' parameter of OElasticNet must be a float in the range "
                                                  "\\(0.0, 1.0\\]"),
])
def test_parameters_that_would_fail_inside_the_fit_are_refused_first(make, message):
    X = np.random.default_rng(0).standard_normal((30, 4))
    with pytest.raises(InputError, match=message):
        make().fit(X, X[:, 0])
