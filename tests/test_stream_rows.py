"""One sample at a time: learn_one / predict_one on arrays and dicts, growing widths, and the public
step API (start / prepare / step_rows / weights) that fit, partial_fit and the simulator share."""
import pickle

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
import scipy.sparse as sp

from asyos.errors import InputError
from asyos.learners.stream.budgeted import BudgetedARDA
from asyos.learners.stream.l1 import L1ARDA, OPG, RDA, AdaFOBOS
from asyos.learners.stream.sfsa import SFSA, TSGD
from asyos.learners.stream.stream_learners import all_stream_learners

LEARNERS = all_stream_learners()
MINI_BATCH = (SFSA, TSGD)


def make(cls, **kw):
    params = {"budget": 5, "passes": 1, "loss": "squared_hinge"}
    if cls in (L1ARDA, AdaFOBOS, OPG, RDA):
        params["lam"] = 0.01
    if cls in MINI_BATCH:
        params["batch_size"] = 4
    params.update(kw)
    return cls(**params)


@pytest.fixture(scope="module")
def stream():
    """150 features first met in column order (row r brings columns 10r..10r+9 for r < 15), so that
    dict rows name their columns in the arrays' order; then sparse random rows."""
    rng = np.random.default_rng(3)
    n, d = 120, 150
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.2)
    for r in range(15):
        X[r, 10 * (r + 1):] = 0.0
        X[r, 10 * r:10 * (r + 1)] = rng.normal(size=10)
    y = np.sign(X[:, :8].sum(1) + 0.01)
    y[y == 0] = 1
    return X, y


def as_dict(row):
    return {f"f{j}": float(row[j]) for j in np.flatnonzero(row)}


@pytest.mark.parametrize("scale", [None, "maxabs"])
@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.algorithm_name)
def test_dict_rows_equal_array_rows_and_grow_the_width(cls, scale, stream):
    X, y = stream
    arrays = make(cls, scale=scale)
    dicts = make(cls, scale=scale, **({"n_features": X.shape[1]} if cls in MINI_BATCH else {}))
    for i in range(X.shape[0]):
        arrays.learn_one(X[i], y[i])
        dicts.learn_one(as_dict(X[i]), y[i])
    assert dicts.feature_names_ == [f"f{j}" for j in range(X.shape[1])]
    assert dicts.n_features_in_ == X.shape[1]
    if cls not in MINI_BATCH:                          # grown from 64 columns by doubling
        assert dicts._absmax.shape[0] == 256
    np.testing.assert_array_equal(dicts.coef_, arrays.coef_)
    np.testing.assert_array_equal(dicts.support_, arrays.support_)
    assert dicts.online_accuracy_ == arrays.online_accuracy_
    for i in range(0, X.shape[0], 7):                  # predict_one == predict on the row, either way
        expected = arrays.predict(X[i:i + 1])[0]
        assert arrays.predict_one(X[i]) == expected
        assert dicts.predict_one(as_dict(X[i])) == expected
    assert dicts.predict_one({"f1": 1.0, "never seen": 5.0}) == arrays.predict(np.eye(X.shape[1])[1:2])[0]


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.algorithm_name)
def test_learn_one_is_partial_fit_row_by_row_is_fit(cls, stream):
    """learn_one over the rows == partial_fit of each row (both with the running max-abs scale);
    and, unscaled, == partial_fit of all rows == fit's one pass in its order (a mini-batch learner
    steps per call: there the last two are batches of 4)."""
    X, y = stream
    for scale in (None, "maxabs"):
        ones, rows = make(cls, scale=scale), make(cls, scale=scale)
        for i in range(X.shape[0]):
            ones.learn_one(X[i], y[i])
            rows.partial_fit(sp.csr_matrix(X[i:i + 1]), y[i:i + 1])
        same(ones.coef_, rows.coef_, cls)
        np.testing.assert_array_equal(ones.scale_, rows.scale_)
        assert ones.n_samples_seen_ == rows.n_samples_seen_ == X.shape[0]
    if cls in MINI_BATCH:
        return
    order = np.random.default_rng(0).permutation(X.shape[0])
    fitted = make(cls, scale=None, random_state=0).fit(X, y)
    batch = make(cls, scale=None).partial_fit(X[order], y[order])
    ones = make(cls, scale=None)
    for i in order:
        ones.learn_one(X[i], y[i])
    np.testing.assert_array_equal(batch.coef_, fitted.coef_)
    same(ones.coef_, fitted.coef_, cls)


def same(a, b, cls):
    """Bit for bit, except the proximal learners: reading coef_ (which partial_fit does after every call)
    settles their lazy shrinkage, whose closed form rounds differently from the steps it stands for."""
    if cls in (AdaFOBOS, OPG):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    else:
        np.testing.assert_array_equal(a, b)


def test_the_width_is_declared_or_grows_and_overflow_is_named(stream):
    X, y = stream
    model = BudgetedARDA(budget=3, n_features=12)
    model.learn_one({"a": 1.0, "b": -2.0, "c": 0.5}, 1)
    model.learn_one({f"x{j}": 1.0 for j in range(9)}, -1)          # 12 names: the limit
    seen, coef = model.n_samples_seen_, model.coef_.copy()
    with pytest.raises(InputError, match="over n_features=12"):
        model.learn_one({"a": 1.0, "new": 2.0}, 1)
    assert model.n_samples_seen_ == seen and model.n_features_in_ == 12   # the row was not learned
    np.testing.assert_array_equal(model.coef_, coef)
    assert model.coef_.shape == (12,) and len(model.feature_names_) == 12
    with pytest.raises(InputError, match="n_features"):
        SFSA(budget=3).learn_one({"a": 1.0}, 1.0)
    with pytest.warns(UserWarning, match="budget=20 is greater than n_features=12: all the features are kept"):
        assert BudgetedARDA(budget=20, n_features=12).learn_one({"a": 1.0}, 1).budget_ == 12


def test_arrays_and_dicts_do_not_mix(stream):
    X, y = stream
    arrays = BudgetedARDA(budget=3).partial_fit(X, y)
    with pytest.raises(InputError, match="trained on arrays"):
        arrays.learn_one({"f0": 1.0}, 1)
    with pytest.raises(InputError, match="trained on arrays"):
        arrays.predict_one({"f0": 1.0})
    dicts = BudgetedARDA(budget=3).learn_one({"f0": 1.0}, 1)
    for call in (lambda: dicts.learn_one(X[0], y[0]), lambda: dicts.predict_one(X[0]),
                 lambda: dicts.partial_fit(X, y)):
        with pytest.raises(InputError, match="trained on dict rows"):
            call()
    refit = dicts.fit(X, y)                             # fit starts afresh: arrays from now on
    assert refit.feature_names_ is None and refit.learn_one(X[0], y[0]).n_features_in_ == X.shape[1]


def test_bad_rows_and_labels_are_named_and_change_nothing(stream):
    X, y = stream
    model = BudgetedARDA(budget=3).learn_one(X[0], y[0])
    seen = model.n_samples_seen_
    bad = X[1].copy()
    bad[5] = np.nan
    with pytest.raises(InputError, match="NaN"):
        model.learn_one(bad, 1)
    named = BudgetedARDA(budget=3).learn_one({"a": 1.0}, 1)
    with pytest.raises(InputError, match="NaN"):
        named.learn_one({"a": float("inf"), "b": 1.0}, 1)
    assert named.n_samples_seen_ == 1
    with pytest.raises(InputError, match="not among classes_ -1.0, 1.0"):
        model.learn_one(X[1], 0.0)
    with pytest.raises(InputError, match="features"):
        model.learn_one(X[1, :10], 1)
    with pytest.raises(InputError, match="numbers"):
        BudgetedARDA().learn_one({"a": "x"}, 1)
    assert model.n_samples_seen_ == seen
    assert BudgetedARDA().predict_one(X[0]) is None                 # River's convention: None before learning
    with pytest.raises(NotFittedError, match="not fitted"):
        BudgetedARDA().predict(X[:1])
    with pytest.raises(InputError, match="numeric lam"):
        L1ARDA().learn_one(X[0], 1)


def test_key_order_and_strided_rows_do_not_matter(stream):
    X, y = stream
    straight, shuffled, strided = BudgetedARDA(budget=4), BudgetedARDA(budget=4), BudgetedARDA(budget=4)
    Xf = np.asfortranarray(X)                           # rows are strided views
    for i in range(X.shape[0]):
        straight.learn_one(as_dict(X[i]), y[i])
        shuffled.learn_one(dict(reversed(as_dict(X[i]).items())) if i >= 15 else as_dict(X[i]), y[i])
        strided.learn_one(Xf[i], y[i])
    np.testing.assert_array_equal(shuffled.coef_, straight.coef_)
    np.testing.assert_array_equal(strided.coef_, straight.coef_)


def test_pickle_a_dict_model_mid_stream(stream):
    X, y = stream
    straight, half = BudgetedARDA(budget=4), BudgetedARDA(budget=4)
    for i in range(60):
        straight.learn_one(as_dict(X[i]), y[i])
        half.learn_one(as_dict(X[i]), y[i])
    resumed = pickle.loads(pickle.dumps(half))
    for i in range(60, X.shape[0]):
        straight.learn_one(as_dict(X[i]), y[i])
        resumed.learn_one(as_dict(X[i]), y[i])
    np.testing.assert_array_equal(resumed.coef_, straight.coef_)
    assert resumed.feature_names_ == straight.feature_names_


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.algorithm_name)
def test_the_step_api_is_what_fit_runs(cls, stream):
    """start + step_rows over fit's orders == fit; weights() is coef_ times the scale."""
    X, y = stream
    fitted = make(cls, passes=2).fit(X, y)
    model = make(cls, passes=2)
    rows = model.start(X, y)
    assert rows.passes == 2 and rows.n_rows == X.shape[0]
    rng = np.random.default_rng(model.random_state)
    for _ in range(rows.passes):
        model.step_rows(rows, rng.permutation(rows.n_rows).astype(np.int64))
    np.testing.assert_array_equal(model.coef_, fitted.raw_coef_)     # fit's online model (coef_: its refit)
    if cls not in MINI_BATCH:                           # their coef_ is the iterate cut to the top k
        np.testing.assert_allclose(model.weights() / model.scale_, model.coef_, rtol=1e-15, atol=0)
    more = model.prepare(X[:10], y[:10])
    model.step_rows(more)
    assert model.n_samples_seen_ == 2 * X.shape[0] + 10


def test_any_two_labels_one_at_a_time(stream):
    X, y = stream
    words = np.where(y > 0, "spam", "ham")
    batch = BudgetedARDA(budget=3).partial_fit(X[:1], words[:1], classes=["ham", "spam"])
    for row, label in zip(X[1:80], words[1:80]):
        batch.learn_one(row, label)
    signs = BudgetedARDA(budget=3)
    for row, label in zip(X[:80], y[:80]):
        signs.learn_one(row, label)
    np.testing.assert_array_equal(batch.coef_, signs.coef_)           # the same model, other names
    assert list(batch.classes_) == ["ham", "spam"]
    assert [batch.predict_one(x) for x in X[80:]] == ["spam" if signs.predict_one(x) == 1.0 else "ham" for x in X[80:]]
    assert list(batch.predict(X[80:])) == [batch.predict_one(x) for x in X[80:]]
    flags = BudgetedARDA(budget=3).learn_one(X[0], bool(y[0] > 0))      # booleans name both classes
    assert list(flags.classes_) == [False, True]
    with pytest.raises(InputError, match="classes=\\[a, b\\]"):
        BudgetedARDA(budget=3).learn_one(X[0], "spam")                   # one word cannot say the other
