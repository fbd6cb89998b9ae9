"""Learners that never fail silently: ``SelectionWarning`` after every budget learner's fit, a default step
that adapts (``eta="auto"`` / ``gamma="auto"``) instead of stopping, and running averages refused
before they allocate ``p x p`` matrices that cannot fit.

Oracles: the fitted model itself (its non-zero weights, its predictions on the training data, counted
here with numpy), the explicit step that the adapted one equals, and ``8 p^2`` bytes per matrix.
"""
import json
import os
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from asyos.errors import ConvergenceWarning, DivergenceError, InputError, SelectionWarning, StepSizeWarning
from asyos.learners.averages import stats as S
from asyos.learners.averages.running_averages import OFSA, OLSThreshold
from asyos.learners.base import BudgetedSelector
from asyos.learners.baselines.batch import ProjectedGradient
from asyos.learners.stream import auto_step
from asyos.learners.stream.budgeted import BudgetedARDA
from asyos.learners.stream.l1 import OPG, RDA
from asyos.learners.stream.sfsa import SFSA, TSGD
from asyos.learners.substitution.online_substitution import OnlineSubstitution
from asyos.registry import all_algorithms
from tests.inprocess import run_asyos



def selection_notes(caught):
    return [str(w.message) for w in caught if issubclass(w.category, SelectionWarning)]


def fit_recording(estimator, X, y):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimator.fit(X, y)
    return estimator, caught


def easy_classification(n=200, p=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    return X, np.where(X[:, 0] + X[:, 1] > 0, 1, -1)


def one_column(n=60, p=8, seed=1):
    """Only column 0 is not zero: no learner can give a weight to more than one feature."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, p))
    X[:, 0] = rng.normal(size=n)
    return X, np.where(X[:, 0] > 0, 1.0, -1.0)


# -- SelectionWarning -----------------------------------------------------------------------------
def budget_learners():
    for spec in all_algorithms():
        if issubclass(spec.estimator_class, BudgetedSelector):
            yield spec


@pytest.mark.parametrize("spec", list(budget_learners()), ids=lambda spec: spec.name)
def test_every_budget_learner_warns_when_it_keeps_fewer_features_than_its_budget(spec):
    X, y = one_column()
    params = dict(spec.test_params, budget=3)
    if "task" in spec.estimator_class().get_params():
        params["task"] = "classification"
    if spec.estimator_class().get_params().get("loss") == "squared":
        params["loss"] = "squared_hinge"
    model, caught = fit_recording(spec.estimator_class(**params), X, y)
    kept = int(np.count_nonzero(model.coef_[model.support_]))
    assert kept <= 1
    notes = selection_notes(caught)
    assert sum(f"selected {kept} of its budget of 3 features" in note for note in notes) == 1, notes


def test_a_good_model_gets_no_warning():
    X, y = easy_classification()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SelectionWarning)
        model = OnlineSubstitution(budget=2).fit(X, y)
    assert model.score(X, y) > 0.9


def test_one_class_for_every_training_sample_is_named():
    X, y = easy_classification()
    model, caught = fit_recording(RDA(budget=3, lam=1e6, loss="squared_hinge"), X, y)     # lam leaves nothing
    predicted = model.predict(X)
    assert np.unique(predicted).size == 1 and model.support_.size == 0
    notes = selection_notes(caught)
    assert any(f"predicts {predicted[0]} for every one of its {y.size} training samples" in n for n in notes), notes
    assert any("selected 0 of its budget of 3" in n and "lam=1e+06" in n for n in notes), notes


def test_accuracy_below_the_majority_rate_is_named():
    X, y = easy_classification(seed=3)
    y = np.where(np.arange(y.size) < 150, np.abs(y), y)              # 3/4 or more positive
    model = ProjectedGradient(budget=2, loss="squared_hinge").fit(X, y)
    model.coef_ = -model.coef_                                        # the opposite of the fitted rule
    model.intercept_ = -model.intercept_
    accuracy = float(np.mean(model.predict(X) == y))
    majority = float(np.mean(y == 1))
    assert accuracy < majority and np.unique(model.predict(X)).size == 2
    with pytest.warns(SelectionWarning, match=f"training accuracy {accuracy:.3f}, majority-class rate "
                                              f"{majority:.3f}: predicting the most frequent class"):
        notes = model.check_selection(X, y)
    assert len(notes) == 1


def test_a_regression_worse_than_the_mean_is_named():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 6))
    y = 100.0 + X[:, 0]                       # no intercept in the model: far from a mean of 100
    model, caught = fit_recording(BudgetedARDA(budget=2, loss="squared"), X, y)
    r2 = model.score(X, y)
    assert r2 < 0
    notes = selection_notes(caught)
    assert any(f"training R^2 is {r2:.3g}" in n and "centre y" in n for n in notes), notes


def test_a_search_of_many_fits_warns_once():
    """The l1 search calls fit again and again: the check runs once, at the end of the outer fit."""
    X, y = one_column()
    model, caught = fit_recording(OPG(budget=3, loss="squared_hinge", passes=2), X, y)
    assert len(model.lam_path_) > 1
    assert len([n for n in selection_notes(caught) if "of its budget" in n]) == 1


def test_selection_warnings_reach_the_cli_record(tmp_path):
    X, y = one_column()
    data = tmp_path / "one.npz"
    np.savez(data, X=X, y=y)
    out = tmp_path / "out"
    status, _, stderr = run_asyos("--algorithm", "b-arda", "--data", data, "--budget", "3", "--output", out)
    assert status == 0, stderr
    record = json.loads((out / "results.json").read_text())
    assert any("of its budget of 3 features" in w for w in record["warnings"]), record["warnings"]
    assert "asyos: warning: b-arda selected" in stderr


def test_selection_warning_is_a_convergence_warning():
    assert issubclass(SelectionWarning, ConvergenceWarning) and issubclass(StepSizeWarning, ConvergenceWarning)


# -- the default step adapts ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def large_rows():
    """Positive features, p = 3000: ||x||^2 is about 1700 after max-abs scaling, so that the default steps
    of OPG (eta 0.01), RDA (gamma 10) and TSGD (eta 0.03) diverge."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0.5, 1.0, size=(100, 3000))
    return X, X[:, :5].sum(axis=1)


@pytest.mark.parametrize("cls", [OPG, RDA, TSGD])
def test_a_diverging_default_step_is_reduced_with_a_warning(cls, large_rows):
    # 5 passes, not "auto"'s 60 (each try is a pass over 100 x 3000 dense values: about two minutes per
    # learner as plain Python under ASYOS_KERNELS=numpy with 60). In 5 passes the former defaults blow up
    # by a wide margin: OPG's and RDA's weights overflow from the third pass on; TSGD's stay finite with a
    # training R^2 of about -5e64, which the "auto" rule counts as diverged (BLOW_UP). TSGD runs without
    # its intercept (the thesis' model): centred by the running means, the step of 0.03 no longer diverges
    # on these all-positive rows (the test after this one)
    X, y = large_rows
    name = cls.step_parameter
    extra = {"fit_intercept": False} if cls is TSGD else {}
    former = cls(budget=5, lam=1e-2, passes=5, refit=False, **extra, **{name: cls.auto_start})   # the former default
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SelectionWarning)
            former.fit(X, y)
    except DivergenceError as exc:
        assert "diverged" in str(exc)
    else:
        assert cls is TSGD and former.score(X, y) < -1e20
    model = cls(budget=5, lam=1e-2, passes=5, **extra)
    assert getattr(model, name) == "auto"
    with pytest.warns(StepSizeWarning, match=f"the default step {name}={cls.auto_start:g} diverged"):
        model.fit(X, y)
    used = getattr(model, name + "_")
    assert (used > cls.auto_start) if cls.step_grows else (used < cls.auto_start)
    assert np.all(np.isfinite(model.coef_))
    again = cls(budget=5, lam=1e-2, passes=5, **extra, **{name: used})        # the step it settled on
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SelectionWarning)
        again.fit(X, y)
    np.testing.assert_array_equal(again.coef_, model.coef_)                  # deterministic: the same model


@pytest.mark.parametrize("cls", [SFSA, TSGD])
def test_the_online_intercept_centres_a_squared_loss_fit(cls, large_rows):
    # the intercept of the squared loss is mean(y) - mean(x) . w: the mean direction, the largest of these
    # all-positive rows, leaves the step, which then converges at the former default where the
    # uncentred model diverges (the test before this one); the online model predicts y's mean and more
    X, y = large_rows
    model = cls(budget=5, lam=1e-2, passes=5, refit=False, eta=cls.auto_start).fit(X, y)
    # (the running means are of the rows as scaled when seen: the scales settle within the first pass)
    assert abs(model.intercept_ - (y.mean() - X.mean(axis=0) @ model.coef_)) < 1e-2 * abs(y.mean())
    assert model.score(X, y) > 0.0
    plain = cls(budget=5, lam=1e-2, passes=5, refit=False, eta=cls.auto_start, fit_intercept=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SelectionWarning)
        plain.fit(X, y)
    assert not hasattr(plain, "intercept_")


def test_the_search_of_the_l1_weight_adapts_the_step_too(large_rows):
    # 3 passes, not "auto"'s 60: some 30 fits, each a pass over 100 x 3000 dense values (minutes as
    # plain Python under ASYOS_KERNELS=numpy otherwise); the steps diverge within the first pass
    X, y = large_rows
    with pytest.raises(DivergenceError, match="every fit that kept a feature diverged"):
        RDA(budget=5, gamma=10.0, passes=3).fit(X, y)
    with pytest.warns(StepSizeWarning, match="gamma_=100"):
        model = RDA(budget=5, passes=3).fit(X, y)
    assert model.gamma_ == 100.0 and 0 < model.support_.size <= 5


def test_a_step_that_never_converges_raises_after_the_last_reduction(large_rows, monkeypatch):
    X, y = large_rows
    monkeypatch.setattr(auto_step, "MAX_REDUCTIONS", 0)
    with pytest.raises(DivergenceError, match=r"eta='auto' diverged even at eta=0.03 \(0 reductions"):
        TSGD(budget=5, fit_intercept=False).fit(X, y)        # (centred, the rows do not make it diverge)


def test_a_default_step_that_converges_is_left_as_it_was():
    X, y = easy_classification()
    with warnings.catch_warnings():
        warnings.simplefilter("error", StepSizeWarning)
        auto = TSGD(budget=3, loss="squared_hinge").fit(X, y)
    explicit = TSGD(budget=3, eta=0.03, loss="squared_hinge").fit(X, y)
    assert auto.eta_ == 0.03
    np.testing.assert_array_equal(auto.coef_, explicit.coef_)


# -- running averages: p x p refused before it is allocated ---------------------------------------
def test_running_averages_refuse_a_p_whose_matrices_do_not_fit(monkeypatch):
    X, y = easy_classification(n=20, p=50)
    room = 4 * 8 * 50 * 50 / S.MEMORY_SHARE                                        # 4 matrices in their share
    monkeypatch.setattr(S, "available_memory", lambda: int(room) - 1)
    with pytest.raises(InputError, match=r"p = 50 features need 4 p x p matrices"):
        OFSA(budget=3).fit(X, y)
    monkeypatch.setattr(S, "available_memory", lambda: int(room) + 1)
    assert OFSA(budget=3).fit(X, y).support_.size == 3


def test_the_memory_check_names_the_sizes_at_p_1e5(monkeypatch):
    monkeypatch.setattr(S, "available_memory", lambda: 16 * 2 ** 30)
    with pytest.raises(InputError) as error:
        S.check_gram_memory(10 ** 5, S.GRAM_MATRICES, "ofsa")
    text = str(error.value)
    assert "p = 100000" in text and "74.51 GiB" in text and "298.0 GiB" in text and "16.0 GiB" in text


def test_available_memory_reads_the_system():
    found = S.available_memory()
    assert found is not None and 0 < found <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def test_the_cli_refuses_before_reading_rows(tmp_path):
    """p = 10^6 from one libsvm line: 7.3 TiB of matrices; exit 2 with the sizes, at once."""
    data = tmp_path / "wide.svm"
    data.write_text("1 1:1.0 1000000:2.0\n-1 2:1.0\n")
    status, _, stderr = run_asyos("--algorithm", "ofsa", "--data", data, "--budget", "2")
    assert status == 2, stderr
    assert "p = 1000000 features need" in stderr and "GiB" in stderr
    assert "Traceback" not in stderr


def test_fit_stats_checks_the_extraction_memory(monkeypatch):
    X, y = easy_classification(n=30, p=40)
    stats = S.RunningAverages(40).update(X, y)
    monkeypatch.setattr(S, "available_memory", lambda: 8 * 40 * 40)              # room for one matrix, not three
    with pytest.raises(InputError, match="need 3 p x p matrices"):
        OLSThreshold(budget=2).fit_stats(stats)


def test_sparse_input_of_any_format_is_checked():
    X, y = easy_classification()
    for matrix in (sp.coo_matrix(X), sp.dia_matrix(X), sp.csc_matrix(X)):
        model, caught = fit_recording(BudgetedARDA(budget=2), matrix.tocsr(), y)
        assert model.check_selection(matrix, y) == []


def test_a_stream_keeps_its_step_and_names_it_when_it_diverges(large_rows):
    X, y = large_rows
    model = TSGD(budget=5, lam=1e-2, passes=1, fit_intercept=False)      # (centred, the rows do not diverge)
    with pytest.raises(DivergenceError, match=r"eta=0\.03\b"):
        for _ in range(80):                                 # partial_fit cannot go back: no reduction
            model.partial_fit(X, y)
    assert model.eta_ == 0.03


def test_input_read_in_part_or_by_a_guess_is_warned_of_and_recorded(tmp_path, capsys):
    """An ``.npz`` with members the reader leaves out (an X_test without its y_test, another array), and a
    libsvm file read as 0-based because index 0 appears once: one ``asyos: warning:`` line each, in
    ``results.json`` too (they were read without a word). A file whose 0-based indices are common is not
    warned of."""
    from asyos.cli.run import main
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 30))
    y = X[:, :3].sum(axis=1)
    np.savez(tmp_path / "extra.npz", X_train=X, y_train=y, X_test=X[:20], extra=np.ones(3))
    rows = [" ".join([f"{y[i]:g}"] + [f"{j + 1}:{X[i, j]:g}" for j in range(5)]) for i in range(200)]
    (tmp_path / "stray.svm").write_text("\n".join([rows[0] + " 0:1.5", *rows[1:]]) + "\n")
    zero_based = [" ".join([f"{y[i]:g}"] + [f"{j}:{X[i, j]:g}" for j in range(5)]) for i in range(200)]
    (tmp_path / "zero.svm").write_text("\n".join(zero_based) + "\n")
    said = {"extra.npz": "members X_test, extra not read", "stray.svm": "because index 0 appears 1 time in 200 rows",
            "zero.svm": None}
    for name, words in said.items():
        out = tmp_path / f"run-{name}"
        assert main(["--data", str(tmp_path / name), "--budget", "3", "--output", str(out), "--no-picture"]) == 0
        err = capsys.readouterr().err
        recorded = json.loads((out / "results.json").read_text()).get("warnings", [])
        if words is None:
            assert "0-based" not in err and not any("0-based" in w for w in recorded)
        else:
            assert sum(words in line for line in err.splitlines()) == 1, err
            assert any(words in w for w in recorded), recorded
