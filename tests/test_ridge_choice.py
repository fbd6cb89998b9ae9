"""``ridge="auto"``: when it engages, the pool it chooses on, and the choice against a cross-validation
written out here with scikit-learn's folds; the simulator and the command line choose the same."""
import json

import numpy as np
import pytest

from asyos import AsyncOnlineSubstitution, OnlineSubstitution, make_classification, make_regression
from asyos.learners.substitution import ridge_choice
from asyos.learners.substitution.ridge_choice import (FEATURE_RATIO, MARGIN, RIDGE_GRID, choose_ridge, engages,
                                                      inner_folds, pick, pool_size, scale_free_loss, top_features)
from asyos.learners.substitution.screening import marginal_gains
from asyos.learners.substitution.workers import SubstitutionOptions
from asyos.losses import get_loss
from tests.inprocess import run_asyos


def test_auto_engages_only_when_features_outnumber_samples_five_to_one_and_samples_are_few():
    assert engages(100, 500) and engages(100, 10_000)
    assert not engages(100, 499) and not engages(2000, 5000)
    assert not engages(100, 10_000, "kdd16")
    assert not engages(7, 10_000)                     # fewer rows than two a fold
    assert engages(1000, 100_000) and not engages(1001, 100_000)     # nor when rows are many
    assert FEATURE_RATIO == 5
    # every feature while n * p <= 3e7 values, else the larger of 2000, 20 k and 3e7 / n
    assert pool_size(100, 500, 10) == 500 and pool_size(280, 100_000, 10) == 100_000
    assert pool_size(1000, 100_000, 10) == 30_000 and pool_size(3314, 54_877, 50) == 9052
    assert pool_size(20_000, 100_000, 10) == 2000 and pool_size(20_000, 100_000, 500) == 10_000


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


def test_a_ridge_must_lower_the_unpenalised_held_out_loss_by_the_margin():
    assert MARGIN == 0.15
    assert pick({0.0: 1.0, 1.0: 0.86, 10.0: 0.9}) == 0.0            # 14% lower: not enough
    assert pick({0.0: 1.0, 1.0: 0.86, 10.0: 0.85}) == 10.0          # 15% lower
    assert pick({0.0: 1.0, 1.0: 0.5, 10.0: 0.5}) == 1.0             # ties: the smaller alpha
    assert pick({0.0: 1.0, 1.0: 0.99}, margin=0.0) == 1.0
    assert pick({1.0: 0.7, 10.0: 0.6}) == 10.0                      # 0 not tried: the lowest


def cross_validated(X, y, k, loss_name, seed=0):
    """``ridge="auto"`` written out: the pool by marginal gain, stratified folds, OS per alpha, each fold's
    held-out loss at the predictions' best scale on a grid of scales."""
    from sklearn.model_selection import StratifiedKFold
    loss = get_loss(loss_name)
    options = SubstitutionOptions()
    gains = marginal_gains(options.shard(X), y, loss, True)
    pool = np.sort(np.argsort(-gains, kind="stable")[:pool_size(*X.shape, k)])
    Z = X[:, pool]
    means = []
    for alpha in RIDGE_GRID:
        held_out = []
        for train, test in StratifiedKFold(4, shuffle=True, random_state=seed).split(Z, y):
            est = OnlineSubstitution(budget=k, ridge=alpha, random_state=seed).fit(Z[train], y[train])
            held_out.append(best_scale_by_grid(loss, y[test], est.decision_function(Z[test])))
        means.append(np.mean(held_out))
    allowed = [i for i, m in enumerate(means) if RIDGE_GRID[i] == 0.0 or m <= (1 - MARGIN) * means[0]]
    return RIDGE_GRID[min(allowed, key=lambda i: means[i])], means


def few_samples():
    d = make_classification(n_features=2500, n_informative=8, n_samples=60, seed=3)
    return d.X, d.y


@pytest.mark.parametrize("cells", [None, 60_000])
def test_auto_chooses_as_a_cross_validation_written_out_and_then_fits_with_that_alpha(cells, monkeypatch):
    X, y = few_samples()
    if cells is not None:                               # a pool of a part of the columns
        monkeypatch.setattr(ridge_choice, "POOL_CELLS", cells)
    assert (pool_size(*X.shape, 10) < X.shape[1]) == (cells is not None)
    auto = OnlineSubstitution(budget=10, ridge="auto").fit(X, y)
    alpha, means = cross_validated(X, y, 10, "squared_hinge")
    assert auto.ridge_ == alpha
    np.testing.assert_allclose([auto.ridge_scores_[a] for a in RIDGE_GRID], means, rtol=1e-3)
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


def weak_fingerprints(n=60, p=2000, informative=10, seed=2):
    """Sparse binary features, 30% positives; the first ``informative`` features are 3 times as likely
    set in a positive row: a weak signal among many features that fit a few rows by chance."""
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.3, 1.0, -1.0)
    rate = np.full((n, p), 0.05)
    rate[:, :informative] = np.where(y[:, None] > 0, 0.15, 0.05)
    return (rng.random((n, p)) < rate).astype(float), y


def test_a_ridge_is_chosen_where_it_lowers_the_held_out_loss_and_not_where_it_raises_it():
    """The choice is not a constant: weak binary features with few rows take a ridge, a near-noiseless
    regression none."""
    X, y = weak_fingerprints()
    est = OnlineSubstitution(budget=10, ridge="auto").fit(X, y)
    assert est.ridge_ > 0 and est.ridge_scores_[est.ridge_] <= (1 - MARGIN) * est.ridge_scores_[0.0]
    d = make_regression(n_features=400, n_informative=5, n_samples=60, noise=0.01, seed=0)
    reg = OnlineSubstitution(budget=5, ridge="auto").fit(d.X, d.y)
    assert reg.ridge_ == 0.0 and reg.ridge_scores_[0.0] < min(reg.ridge_scores_[a] for a in RIDGE_GRID[1:])


@pytest.mark.parametrize("transport,cells", [(None, None), ("messages", None), (None, 60_000)])
def test_the_simulator_chooses_on_its_shards_what_sequential_os_chooses_on_all_columns(transport, cells, monkeypatch):
    X, y = weak_fingerprints()
    if cells is not None:                               # the pool: the best of the shards' best
        monkeypatch.setattr(ridge_choice, "POOL_CELLS", cells)
        monkeypatch.setattr(ridge_choice, "MIN_POOL", 500)
        assert pool_size(*X.shape, 10) == 1000
    seq = OnlineSubstitution(budget=10, ridge="auto").fit(X, y)
    sim = AsyncOnlineSubstitution(budget=10, n_workers=4, transport=transport, ridge="auto").fit(X, y)
    assert sim.ridge_ == seq.ridge_ and sim.ridge_scores_ == seq.ridge_scores_
    assert sim.step_size_ == pytest.approx(0.5 / (sim.lipschitz_ + sim.ridge_))


def test_the_command_line_chooses_by_default_records_the_choice_and_takes_auto_or_a_number(tmp_path):
    X, y = weak_fingerprints()
    path = tmp_path / "few.npz"
    np.savez(path, X=X, y=y)
    seq = OnlineSubstitution(budget=10, ridge="auto").fit(X, y)
    assert seq.ridge_ > 0
    for n, (extra, ridge) in enumerate((([], seq.ridge_), (["--ridge", "auto"], seq.ridge_), (["--ridge", "0"], 0.0))):
        out = tmp_path / f"out{n}"
        rc, printed, err = run_asyos("--data", path, "--budget", "10", "--output", out, *extra)
        assert rc == 0, err
        assert (f"ridge {ridge:g}, chosen by cross-validation" in printed) == (ridge > 0)
        record = json.loads((out / "results.json").read_text())
        assert record["ridge"] == ridge
        assert (record["ridge_scores"] is None) == (extra == ["--ridge", "0"])
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
