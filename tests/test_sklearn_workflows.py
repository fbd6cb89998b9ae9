"""The learners in scikit-learn's tools, as a user would put them there (the README's examples)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.feature_selection import SelectFromModel
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from asyos import (DFLS, OFSA, AsyncSampleStream, BudgetedARDA, OnlineSubstitution, make_classification)


def test_pipeline_in_grid_search_over_the_budget():
    X, y = load_breast_cancer(return_X_y=True)          # labels 0/1, 30 features
    pipe = Pipeline([("scale", StandardScaler()), ("select", OnlineSubstitution(budget=10)),
                     ("model", LogisticRegression())])
    grid = GridSearchCV(pipe, {"select__budget": [1, 3, 10]}, cv=3).fit(X, y)
    scores = grid.cv_results_["mean_test_score"]
    assert scores[0] < scores[2]                       # one feature is worse than ten
    assert grid.best_score_ > 0.93
    best = grid.best_estimator_
    assert best.named_steps["select"].get_support().sum() == grid.best_params_["select__budget"]
    assert set(best.predict(X)) == {0, 1}
    np.testing.assert_array_equal(best.named_steps["select"].classes_, [0, 1])


def test_select_from_model_keeps_the_budgeted_features():
    d = make_classification(n_samples=400, n_features=2000, n_informative=20, seed=1)
    X = sp.csr_matrix(np.where(np.abs(d.X) > 1.0, d.X, 0.0))   # sparse, as text data is
    selector = SelectFromModel(BudgetedARDA(budget=50)).fit(X, d.y)
    kept = selector.get_support(indices=True)
    model = selector.estimator_
    assert 0 < kept.size <= 50
    assert set(kept) <= set(model.support_)
    exact = SelectFromModel(BudgetedARDA(budget=50), max_features=50, threshold=-np.inf).fit(X, d.y)
    np.testing.assert_array_equal(np.sort(exact.get_support(indices=True)), model.support_)
    assert selector.transform(X).shape == (400, kept.size)


def test_cross_val_score_and_the_task_follows_the_loss():
    X, y = load_diabetes(return_X_y=True)
    regressor = OnlineSubstitution(budget=4, loss="squared")
    assert is_regressor(regressor) and not is_classifier(regressor)
    assert not hasattr(regressor.fit(X, y), "decision_function")
    scores = cross_val_score(OnlineSubstitution(budget=4, loss="squared"), X, y, cv=3)      # R^2
    full = cross_val_score(LinearRegression(), X, y, cv=3)
    assert scores.mean() > full.mean() - 0.05
    classifier = OnlineSubstitution(budget=4, loss="logistic")
    assert is_classifier(classifier)
    Xc, yc = load_breast_cancer(return_X_y=True)
    labels = np.where(yc == 1, "benign", "malignant")
    accuracy = cross_val_score(classifier, StandardScaler().fit_transform(Xc), labels, cv=3)
    assert accuracy.mean() > 0.9
    fitted = classifier.fit(StandardScaler().fit_transform(Xc), labels)
    assert set(fitted.predict(Xc[:20])) <= {"benign", "malignant"}
    np.testing.assert_allclose(fitted.predict_proba(Xc[:5]).sum(axis=1), 1.0)


def test_set_output_and_feature_names():
    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    selector = OFSA(budget=5, task="classification").set_output(transform="pandas")
    out = selector.fit(X, y).transform(X)
    assert isinstance(out, pd.DataFrame) and out.shape == (X.shape[0], 5)
    assert list(out.columns) == list(selector.get_feature_names_out())
    assert set(out.columns) <= set(X.columns)


@pytest.mark.parametrize("estimator", [
    OnlineSubstitution(budget=3, passes=2), AsyncSampleStream(BudgetedARDA(budget=3, eta=0.5), n_workers=3),
    DFLS(alpha=0.5),
], ids=lambda e: type(e).__name__)
def test_clone_and_nested_parameters(estimator):
    copy = clone(estimator)
    assert copy is not estimator and copy.get_params().keys() == estimator.get_params().keys()
    if isinstance(estimator, AsyncSampleStream):
        copy.set_params(learner__budget=5)
        assert copy.learner.budget == 5 and estimator.learner.budget == 3
