"""Proj-GD / IHT and the L1 path tuned to the budget, against independent computations."""
import numpy as np
import pytest

from asyos import LassoToBudget, ProjectedGradient, make_classification, make_regression
from asyos.metrics import recall
from asyos.truncation import project_l0


def reference_iht(X, y, s, n_iter=3000):
    """Plain IHT with the global step 1/lambda_max(X^T X / n): slow but obviously correct."""
    n = X.shape[0]
    step = n / np.linalg.eigvalsh(X.T @ X)[-1]
    w = np.zeros(X.shape[1])
    for _ in range(n_iter):
        w = project_l0(w - step * X.T @ (X @ w - y) / n, s)
    return w


def test_proj_gd_agrees_with_plain_iht():
    d = make_regression(n_features=300, n_informative=8, n_samples=120, seed=4)
    model = ProjectedGradient(budget=8, refit=False, tol=1e-12, max_iter=3000).fit(d.X, d.y)
    w = reference_iht(d.X, d.y, 8)
    np.testing.assert_array_equal(model.support_, np.flatnonzero(w))
    np.testing.assert_allclose(model.raw_coef_, w, rtol=1e-6, atol=1e-9)


def test_proj_gd_objective_never_increases():
    d = make_classification(n_features=200, n_informative=10, n_samples=150, seed=1)
    model = ProjectedGradient(budget=10, loss="squared_hinge").fit(d.X, d.y)
    assert np.all(np.diff(model.objective_path_) <= 1e-12)
    assert model.support_.size == 10


def test_proj_gd_recovers_a_noiseless_support():
    d = make_regression(n_features=500, n_informative=10, n_samples=150, noise=0.0, seed=2)
    model = ProjectedGradient(budget=10).fit(d.X, d.y)
    assert recall(model.support_, d.true_support) == 1.0
    np.testing.assert_allclose(model.coef_, d.true_coef, atol=1e-8)


def test_lasso_to_budget_keeps_exactly_budget_features_and_refits():
    d = make_regression(n_features=400, n_informative=12, n_samples=200, seed=3)
    model = LassoToBudget(budget=12).fit(d.X, d.y)
    assert model.support_.size == 12
    assert recall(model.support_, d.true_support) == 1.0
    S = model.support_
    np.testing.assert_allclose(model.coef_[S], np.linalg.lstsq(d.X[:, S], d.y, rcond=None)[0], rtol=1e-10)
    from sklearn.linear_model import Lasso
    at_alpha = Lasso(alpha=model.alpha_, fit_intercept=False, tol=1e-8, max_iter=10000).fit(d.X, d.y)
    assert np.count_nonzero(at_alpha.coef_) >= 12


@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
def test_l1_classifier_tuned_to_budget(loss):
    from asyos.learners.baselines.batch import _l1_classifier
    from asyos.truncation import keep_top_k
    d = make_classification(n_features=300, n_informative=10, n_samples=300, seed=5)
    model = LassoToBudget(budget=10, loss=loss).fit(d.X, d.y)
    assert model.support_.size == 10
    independent = _l1_classifier(loss, model.C_).fit(d.X, d.y).coef_.ravel()
    assert np.count_nonzero(independent) >= 10
    np.testing.assert_array_equal(model.support_, keep_top_k(np.abs(independent), 10))
    assert recall(model.support_, d.true_support) >= 0.6
    assert np.mean(model.predict(d.X_test) != d.y_test) < 0.2
