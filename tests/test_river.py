"""River's conventions (``asyos.learners.stream.river_compat``): the sample-stream learners answer before they
learn, give class probabilities, and run in ``river.evaluate.progressive_val_score`` and ``river.compose``
pipelines with River's own metrics, on a data set River ships (Phishing: 1,250 rows, 9 features, 56 %
of the majority class)."""
import warnings

import pytest
from river import base, datasets, evaluate, metrics, preprocessing

from asyos import OPG, BudgetedARDA
from asyos.learners.stream.river_compat import to_river
from asyos.learners.stream.stream_learners import all_stream_learners

L1 = ("AdaFOBOS", "L1ARDA", "OPG", "RDA")


def classifier(cls):
    """``cls`` with budget 5 of Phishing's 9 features, as a classifier learning from dict rows: a numeric l1
    weight (lam='auto' searches it over a fit), a classification loss for the learners whose default is
    regression, and the width for those that threshold over all features."""
    kw = {"budget": 5}
    if cls.__name__ in L1:
        kw["lam"] = 1e-3
    if cls().loss == "squared":
        kw["loss"] = "squared_hinge"
    if getattr(cls, "fixed_width", False):
        kw["n_features"] = 9
    return cls(**kw)


def test_a_learner_answers_before_it_learns_as_river_models_do():
    x, y = next(iter(datasets.Phishing()))
    model = BudgetedARDA(budget=5)
    assert model.predict_one(x) is None and model.predict_proba_one(x) == {}
    model.learn_one(x, y)
    proba = model.predict_proba_one(x)
    assert set(proba) == {False, True} and sum(proba.values()) == pytest.approx(1.0)
    assert model.predict_one(x) == max(proba, key=proba.get)
    assert OPG(budget=3, lam=1e-3).predict_one(x) == 0.0                 # a regressor's first answer
    with pytest.raises(AttributeError, match="regressor"):
        OPG(budget=3, lam=1e-3).predict_proba_one(x)


def test_the_logistic_loss_gives_calibrated_probabilities():
    model = BudgetedARDA(budget=5, loss="logistic")
    for x, y in datasets.Phishing().take(200):
        model.learn_one(x, y)
    proba = model.predict_proba_one(x)
    assert 0.0 < proba[True] < 1.0 and proba[True] == pytest.approx(1.0 - proba[False])


@pytest.mark.parametrize("cls", all_stream_learners(), ids=lambda c: c.__name__)
def test_progressive_validation_with_rivers_metrics(cls):
    model = to_river(classifier(cls))
    assert isinstance(model, base.Classifier)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                                 # the learners' early SelectionWarnings
        accuracy = evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy()).get()
        auc = evaluate.progressive_val_score(datasets.Phishing(), to_river(classifier(cls)), metrics.ROCAUC()).get()
    assert accuracy > 0.65, accuracy                                    # the majority class is 0.56
    assert auc > 0.6, auc
    assert model.learner.n_samples_seen_ == 1250


def test_a_river_pipeline_and_a_regressor():
    pipeline = preprocessing.StandardScaler() | to_river(BudgetedARDA(budget=5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert evaluate.progressive_val_score(datasets.Phishing(), pipeline, metrics.Accuracy()).get() > 0.8
        regressor = to_river(OPG(budget=3, lam=1e-3))
        assert isinstance(regressor, base.Regressor) and not isinstance(regressor, base.Classifier)
        mae = evaluate.progressive_val_score(datasets.TrumpApproval(), regressor, metrics.MAE()).get()
    mean = [y for _, y in datasets.TrumpApproval()]
    spread = sum(abs(y - sum(mean) / len(mean)) for y in mean) / len(mean)
    assert mae < spread, (mae, spread)                      # better than predicting the mean


AVERAGES = ("OLSThreshold", "OFSA", "OLasso", "OElasticNet", "OMCP")


@pytest.mark.parametrize("name", AVERAGES)
def test_the_running_averages_in_rivers_loop(name):
    """The running averages learn River's dict rows (the first row's names are the features of their p x p
    averages) and re-extract their model after each new row, so progressive validation scores them as
    River scores its own models: near River's StandardScaler | LogisticRegression (0.893) on Phishing,
    and far below the spread of TrumpApproval's target (its mean absolute deviation, 1.44)."""
    import asyos
    cls = getattr(asyos, name)
    x, y = next(iter(datasets.Phishing()))
    assert cls(budget=5, task="classification").predict_one(x) is None
    assert cls(budget=5).predict_one(x) == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = to_river(cls(budget=5, task="classification"))
        accuracy = evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy()).get()
        pipeline = preprocessing.StandardScaler() | to_river(cls(budget=5, task="classification"))
        scaled = evaluate.progressive_val_score(datasets.Phishing(), pipeline, metrics.Accuracy()).get()
        mae = evaluate.progressive_val_score(datasets.TrumpApproval(), to_river(cls(budget=3)), metrics.MAE()).get()
    assert accuracy > 0.85 and scaled > 0.85, (accuracy, scaled)
    assert model.learner.n_samples_seen_ == 1250 and len(model.learner.support_) == 5
    proba = model.learner.predict_proba_one(x)
    assert set(proba) == {False, True} and sorted(proba.values()) == [0.0, 1.0]
    mean = [t for _, t in datasets.TrumpApproval()]
    spread = sum(abs(t - sum(mean) / len(mean)) for t in mean) / len(mean)
    assert mae < 0.6 * spread, (mae, spread)


def test_the_running_averages_keep_the_first_rows_features():
    from asyos import OLasso
    from asyos.errors import InputError
    model = OLasso(budget=2)
    model.learn_one({"a": 1.0, "b": 2.0, "c": 0.5}, 1.0)
    model.learn_one({"a": 2.0, "c": 1.0}, 2.0)                  # a name left out is a zero
    assert model.n_features_in_ == 3 and model.n_samples_seen_ == 2
    assert isinstance(model.predict_one({"a": 1.0, "z": 5.0}), float)  # a name never learned weighs nothing
    with pytest.raises(InputError, match="'z' is not one of them"):
        model.learn_one({"a": 1.0, "z": 5.0}, 1.0)
    with pytest.raises(InputError, match="learned from dict rows; a vector row"):
        model.learn_one([1.0, 2.0, 3.0], 1.0)
    fitted = OLasso(budget=2).fit([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0], [2.0, 0.0, 1.0]], [1.0, 2.0, 3.0])
    with pytest.raises(InputError, match="learned from vector rows; a dict row"):
        fitted.predict_one({"a": 1.0})
    assert fitted.predict_one([1.0, 2.0, 0.0]) == pytest.approx(float(fitted.predict([[1.0, 2.0, 0.0]])[0]))
