"""``ridge="auto"``: when it engages, the pool it chooses on, and the choice against a cross-validation
written out here with scikit-learn's folds; the simulator and the command line choose the same."""
import json

import numpy as np
import pytest

from asyos import AsyncOnlineSubstitution, OnlineSubstitution, make_classification, make_regression
from asyos.learners.substitution.ridge_choice import (FEATURE_RATIO, RIDGE_GRID, choose_ridge, engages,
                                                      inner_folds, pool_size, scale_free_loss, top_features)
from asyos.learners.substitution.screening import marginal_gains
from asyos.learners.substitution.workers import SubstitutionOptions
from asyos.losses import get_loss
from tests.inprocess import run_asyos


def test_auto_engages_only_when_features_outnumber_samples_five_to_one_under_the_exchange_variant():
    assert engages(100, 500) and engages(100, 10_000)
    assert not engages(100, 499) and not engages(2000, 5000)
    assert not engages(100, 10_000, "kdd16")
    assert not engages(7, 10_000)                     # fewer rows than two a fold
    assert FEATURE_RATIO == 5
    assert pool_size(500, 10) == 500 and pool_size(100_000, 10) == 2000 and pool_size(100_000, 500) == 10_000


def test_the_pool_is_the_largest_gains_with_ties_to_the_lower_index_whatever_the_shards():
    gains = np.array([3.0, 1.0, 3.0, 2.0, 0.0, 3.0])
    assert top_features(np.arange(6), gains, 3).tolist() == [0, 2, 5]
    assert top_features(np.arange(6), gains, 4).tolist() == [0, 2, 3, 5]
    # the union of each shard's own best is the pool of all the columns
    parts = [np.array([0, 3, 4]), np.array([1, 2, 5])]
    local = [(i, gains[i][np.lexsort((i, -gains[i]))[:3]]) for i in parts]
    merged = top_features(np.concatenate([i[np.lexsort((i, -gains[i]))[:3]] for i in parts]),
                          np.concatenate([g for _, g in local]), 3)
    assert merged.tolist() == [0, 2, 5]


def test_inner_folds_are_stratified_and_refuse_a_class_too_small_to_split():
    y = np.array([1.0] * 12 + [-1.0] * 4)
    splits = inner_folds(y, "classification", 4, 0)
    assert len(splits) == 4 and all((y[test] == -1).sum() == 1 for _, test in splits)
    assert inner_folds(np.array([1.0] * 12 + [-1.0] * 3), "classification", 4, 0) is None
    assert len(inner_folds(np.arange(10.0), "regression", 4, 0)) == 4


def best_scale_by_grid(loss, y, u):
    """``min_c loss(y, c u)`` over ``c = 0`` and 4000 scales of ``u / max |u|`` from 1e-9 to 1e5 (relative
    steps of 0.8%)."""
    v = u / np.max(np.abs(u))
    return min([loss.value(y, np.zeros_like(u))] + [loss.value(y, c * v) for c in np.logspace(-9, 5, 4000)])


@pytest.mark.parametrize("loss_name", ["squared_hinge", "logistic", "squared"])
def test_the_scale_free_loss_is_the_loss_at_the_predictions_best_scale(loss_name):
    loss = get_loss(loss_name)
    rng = np.random.default_rng(0)
    for size in (7, 40):
        y = np.where(rng.random(size) < 0.4, -1.0, 1.0) if loss.task == "classification" else rng.normal(size=size)
        for top in (1e-6, 1.0, 1e6):                  # tiny, plain and interpolating fits' predictions
            u = top * (0.7 * y + rng.normal(size=size))
            grid = best_scale_by_grid(loss, y, u)
            assert scale_free_loss(loss, y, u) == pytest.approx(grid, rel=1e-3, abs=1e-9)
            assert scale_free_loss(loss, y, 5.0 * u) == pytest.approx(scale_free_loss(loss, y, u), rel=1e-6)
    assert scale_free_loss(loss, y, np.zeros(size)) == loss.value(y, np.zeros(size))


def test_choose_ridge_scores_each_alpha_at_its_best_scale_and_takes_the_first_lowest():
    class Fixed:                                      # a model of one given weight
        def __init__(self, w):
            self.coef_, self.intercept_ = np.array([w]), 0.0
    rng = np.random.default_rng(0)
    y = np.where(rng.random(40) < 0.5, -1.0, 1.0)
    X = (y * rng.uniform(1.0, 2.0, 40))[:, None]      # separable by the sign of the one column
    weights = {0.0: -1.0, 1.0: 0.0, 2.0: 1.0, 3.0: 1000.0}
    loss = get_loss("squared_hinge")
    alpha, scores = choose_ridge(X, y, loss, lambda X, y, a: Fixed(weights[a]), 0, grid=(0.0, 1.0, 2.0, 3.0))
    # the wrong sign is worth no more than predicting 0; the right one separates at any scale: 2 and 3
    # tie (their weights differ 1000-fold) and the first of the grid is taken
    assert scores[0.0] == scores[1.0] == pytest.approx(loss.value(y, np.zeros(40)))
    assert scores[2.0] == scores[3.0] == pytest.approx(0.0, abs=1e-12)
    assert alpha == 2.0


def cross_validated(X, y, k, loss_name, seed=0):
    """``ridge="auto"`` written out: the pool by marginal gain, stratified folds, OS per alpha, each fold's
    held-out loss at the predictions' best scale on a grid of scales."""
    from sklearn.model_selection import StratifiedKFold
    loss = get_loss(loss_name)
    options = SubstitutionOptions()
    gains = marginal_gains(options.shard(X), y, loss, True)
    pool = np.sort(np.argsort(-gains, kind="stable")[:pool_size(X.shape[1], k)])
    Z = X[:, pool]
    means = []
    for alpha in RIDGE_GRID:
        held_out = []
        for train, test in StratifiedKFold(4, shuffle=True, random_state=seed).split(Z, y):
            est = OnlineSubstitution(budget=k, ridge=alpha, random_state=seed).fit(Z[train], y[train])
            held_out.append(best_scale_by_grid(loss, y[test], est.decision_function(Z[test])))
        means.append(np.mean(held_out))
    return RIDGE_GRID[int(np.argmin(means))], means


def few_samples():
    d = make_classification(n_features=2500, n_informative=8, n_samples=60, seed=3)
    return d.X, d.y


def test_auto_chooses_as_a_cross_validation_written_out_and_then_fits_with_that_alpha():
    X, y = few_samples()
    auto = OnlineSubstitution(budget=10, ridge="auto").fit(X, y)
    alpha, means = cross_validated(X, y, 10, "squared_hinge")
    assert auto.ridge_ == alpha
    np.testing.assert_allclose([auto.ridge_scores_[a] for a in RIDGE_GRID], means, rtol=1e-3)
    assert X.shape[1] > pool_size(X.shape[1], 10)      # the pool is a part of the columns
    fixed = OnlineSubstitution(budget=10, ridge=alpha).fit(X, y)
    assert np.array_equal(auto.support_, fixed.support_) and np.array_equal(auto.coef_, fixed.coef_)


def test_auto_is_zero_where_samples_are_not_few_and_the_run_is_the_unpenalised_one():
    d = make_regression(n_features=200, n_informative=5, n_samples=300, seed=1)
    auto = OnlineSubstitution(budget=5, ridge="auto").fit(d.X, d.y)
    plain = OnlineSubstitution(budget=5, ridge=0.0).fit(d.X, d.y)
    assert auto.ridge_ == 0.0 and auto.ridge_scores_ is None
    assert np.array_equal(auto.coef_, plain.coef_) and auto.intercept_ == plain.intercept_
    kdd16 = OnlineSubstitution(budget=5, variant="kdd16", ridge="auto").fit(*few_samples())
    assert kdd16.ridge_ == 0.0 and kdd16.ridge_scores_ is None


def test_a_ridge_is_chosen_where_it_lowers_the_held_out_loss_and_not_where_it_raises_it():
    """The choice is not a constant: a noisy classification with few rows takes a ridge, a near-noiseless
    regression none."""
    X, y = few_samples()
    assert OnlineSubstitution(budget=10, ridge="auto").fit(X, y).ridge_ > 0
    d = make_regression(n_features=400, n_informative=5, n_samples=60, noise=0.01, seed=0)
    reg = OnlineSubstitution(budget=5, ridge="auto").fit(d.X, d.y)
    assert reg.ridge_ == 0.0 and reg.ridge_scores_[0.0] < min(reg.ridge_scores_[1.0], reg.ridge_scores_[10.0])


@pytest.mark.parametrize("transport", [None, "messages"])
def test_the_simulator_chooses_on_its_shards_what_sequential_os_chooses_on_all_columns(transport):
    X, y = few_samples()
    seq = OnlineSubstitution(budget=10, ridge="auto").fit(X, y)
    sim = AsyncOnlineSubstitution(budget=10, n_workers=4, transport=transport, ridge="auto").fit(X, y)
    assert sim.ridge_ == seq.ridge_ and sim.ridge_scores_ == seq.ridge_scores_
    assert sim.step_size_ == pytest.approx(0.5 / (sim.lipschitz_ + sim.ridge_))


def test_the_command_line_records_the_choice_and_takes_auto_or_a_number(tmp_path):
    X, y = few_samples()
    path = tmp_path / "few.npz"
    np.savez(path, X=X, y=y)
    seq = OnlineSubstitution(budget=10, ridge="auto").fit(X, y)
    for extra, ridge in (([], 0.0), (["--ridge", "auto"], seq.ridge_), (["--ridge", "0"], 0.0)):
        out = tmp_path / f"out{len(extra)}{ridge}"
        rc, printed, err = run_asyos("--data", path, "--budget", "10", "--output", out, *extra)
        assert rc == 0, err
        assert (f"ridge {ridge:g}, chosen by cross-validation" in printed) == (extra == ["--ridge", "auto"])
        record = json.loads((out / "results.json").read_text())
        assert record["ridge"] == ridge
        assert (record["ridge_scores"] is None) == (extra != ["--ridge", "auto"])
    settings = tmp_path / "run.toml"
    settings.write_text(f'data = "{path}"\nbudget = 10\nridge = "auto"\n')
    rc, _, err = run_asyos("--config", settings, "--output", tmp_path / "toml", "--quiet")
    assert rc == 0, err
    assert json.loads((tmp_path / "toml" / "results.json").read_text())["ridge"] == seq.ridge_
    rc, _, err = run_asyos("--data", path, "--budget", "10", "--ridge", "lots")
    assert rc == 2 and "--ridge" in err and "auto" in err and err.count("\n") <= 3


def test_the_choice_runs_its_short_fits_on_the_compiled_step_when_together_they_are_long():
    from asyos.learners.substitution import kernels
    assert kernels.backend("auto", 4000) == "numpy"
    with kernels.many_runs(kernels.AUTO_MIN_STEPS):
        assert kernels.backend("auto", 4000) == "numba" and kernels.backend("numpy", 4000) == "numpy"
        with kernels.many_runs(10):
            assert kernels.backend("auto", 4000) == "numba"
    with kernels.many_runs(kernels.AUTO_MIN_STEPS - 1):
        assert kernels.backend("auto", 4000) == "numpy"
    assert kernels.backend("auto", 4000) == "numpy"
