"""The same checks for every registered algorithm (``asyos.registry``)."""
import pickle

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
import scipy.sparse as sp

from asyos import make_classification, make_regression
from asyos.runs.config import RunConfig
from asyos.errors import InputError
from asyos.registry import all_algorithms

# DFLS has no budget: tests/test_dfls.py gives it the same checks in its own terms
SPECS = [spec for spec in all_algorithms() if spec.family != "path"]


def build(spec, loss, budget=6, seed=0):
    estimator = spec.build(RunConfig(algorithm=spec.name, seed=seed, passes=2), loss, budget)
    return estimator.set_params(**spec.test_params)


@pytest.fixture(scope="module")
def regression():
    return make_regression(n_features=120, n_informative=6, n_samples=80, seed=3)


@pytest.fixture(scope="module")
def classification():
    return make_classification(n_features=120, n_informative=6, n_samples=100, seed=3)


def test_registry_names():
    assert {s.name for s in SPECS} >= {"os", "asy-os", "proj-gd", "lasso"}
    assert all(s.name == s.name.lower() and " " not in s.name for s in SPECS)


def test_every_algorithm_has_a_family_and_every_family_a_runner():
    from asyos.registry import FAMILIES
    from asyos.runs.runners import RUNNERS, runner_for
    assert set(RUNNERS) == set(FAMILIES)
    for spec in all_algorithms():
        assert spec.family in FAMILIES and callable(runner_for(spec).local)
    assert {s.name for s in all_algorithms() if runner_for(s).mpi is not None} == \
        {"os", "asy-os", "ols-th", "ofsa", "olasso", "oelnet", "omcp"}


@pytest.mark.parametrize("algorithm, simulate, message", [
    ("lasso", False, "algorithm 'lasso' does not run under mpiexec; run it without mpiexec"),
    ("ofs", True, "--simulate runs in one process; start it without mpiexec"),
    ("dfls", True, "--algorithm dfls runs in one process; start it without mpiexec"),
])
def test_a_one_process_runner_refuses_mpi_with_the_cli_message(algorithm, simulate, message):
    from asyos.registry import get_algorithm
    from asyos.runs.runners import runner_for
    config = RunConfig(algorithm=algorithm, simulate=simulate)
    with pytest.raises(InputError) as caught:
        runner_for(get_algorithm(algorithm))(config, comm=object())   # any comm: refused before it is used
    assert str(caught.value) == message


CASES = [(spec, task) for spec in SPECS for task in spec.tasks]
OTHER_TASK = [(spec, task) for spec in SPECS for task in ("regression", "classification") if task not in spec.tasks]


def data_for(spec, regression, classification):
    """The data and loss of the spec's first task (regression where it can)."""
    if "regression" in spec.tasks:
        return regression, "squared"
    return classification, "squared_hinge"


@pytest.mark.parametrize("spec,task", CASES, ids=lambda v: getattr(v, "name", v))
def test_fit_respects_the_budget_and_the_face(spec, task, regression, classification):
    d, loss = (regression, "squared") if task == "regression" else (classification, "squared_hinge")
    X, y = d.X.copy(), d.y.copy()
    model = build(spec, loss).fit(d.X, d.y)
    np.testing.assert_array_equal(X, d.X)                        # inputs untouched
    np.testing.assert_array_equal(y, d.y)
    assert 0 < model.support_.size <= 6
    assert np.count_nonzero(model.coef_) <= 6
    assert model.get_support().sum() == model.support_.size
    assert model.transform(d.X_test).shape == (d.X_test.shape[0], model.support_.size)
    assert model.predict(d.X_test).shape == (d.X_test.shape[0],)
    if task == "classification":
        assert set(np.unique(model.predict(d.X_test))) <= {-1.0, 1.0}


@pytest.mark.parametrize("spec,task", OTHER_TASK, ids=lambda v: getattr(v, "name", v))
def test_unsupported_task_is_named(spec, task, regression, classification):
    d, loss = (regression, "squared") if task == "regression" else (classification, "squared_hinge")
    with pytest.raises(InputError, match=f"is a .* learner; the {loss} loss is for {task}"):
        build(spec, loss).fit(d.X, d.y)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_no_parameter_hides_a_method(spec):
    estimator = build(spec, "squared_hinge")
    methods = {name for name in dir(type(estimator)) if callable(getattr(type(estimator), name, None))}
    assert not set(estimator.get_params()) & methods


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_same_seed_same_result(spec, regression, classification):
    d, loss = data_for(spec, regression, classification)
    a = build(spec, loss).fit(d.X, d.y)
    b = build(spec, loss).fit(d.X, d.y)
    assert np.array_equal(a.coef_, b.coef_)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_dense_and_sparse_input_agree(spec, classification):
    X = classification.X * (np.abs(classification.X) > 0.5)
    dense = build(spec, "squared_hinge").fit(X, classification.y)
    sparse = build(spec, "squared_hinge").fit(sp.csr_matrix(X), classification.y)
    np.testing.assert_array_equal(dense.support_, sparse.support_)
    # the refit stops at a gradient tolerance, and dense and sparse products round differently: on
    # this separable problem (coefficients ~100) the two stopping points differed by 1.3e-6 relative,
    # and by 1.12e-5 for lasso in one run of the whole suite (the others: below 1e-5)
    np.testing.assert_allclose(dense.coef_, sparse.coef_, rtol=1e-4, atol=1e-8)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_fitted_model_pickles(spec, regression, classification):
    d, loss = data_for(spec, regression, classification)
    model = build(spec, loss).fit(d.X, d.y)
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(clone.predict(d.X_test), model.predict(d.X_test))


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_bad_input_is_named(spec, regression, classification):
    with pytest.raises(InputError, match="continuous values"):
        build(spec, "squared_hinge").fit(regression.X, regression.y)
    d, loss = data_for(spec, regression, classification)
    with pytest.warns(UserWarning, match="budget=500 is greater than n_features"):
        wide = build(spec, loss, budget=500).fit(d.X, d.y)
    assert wide.budget_ == d.X.shape[1] and wide.support_.size <= d.X.shape[1]
    model = build(spec, loss).fit(d.X, d.y)
    with pytest.raises(ValueError, match="X has 10 features"):
        model.predict(d.X[:, :10])
    with pytest.raises(NotFittedError):
        build(spec, loss).predict(d.X)
