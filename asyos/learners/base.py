"""The face every learner shows: a scikit-learn estimator.

Every learner derives from ``Estimator`` (scikit-learn's ``BaseEstimator``): the constructor stores
parameters only; ``fit`` validates them (``_parameter_constraints``, checked by scikit-learn's
parameter validation, so that a bad value reads like scikit-learn's own messages but is raised as our
``InputError``) and the data (scikit-learn's ``validate_data``: its messages, ``n_features_in_``,
``feature_names_in_``); fitted attributes end in ``_``; an unfitted model raises ``NotFittedError``.

**One class, two tasks.** A learner is a classifier or a regressor according to its loss (or its
``task``), not its class: ``OnlineSubstitution(loss="logistic")`` is a classifier,
``OnlineSubstitution(loss="squared")`` a regressor, and with ``loss="auto"`` the labels decide at
``fit`` (two classes: classification). The scikit-learn tags follow (``estimator_type``), so that
``is_classifier``, ``cross_val_score``'s stratified folds and the common estimator checks see the
right kind. A classifier has ``classes_``, accepts any two labels (mapped to -1/+1 inside, the
second class of ``classes_`` to +1), predicts them back, has ``decision_function`` (and
``predict_proba`` with the logistic loss) and scores accuracy. A regressor has neither
``decision_function`` nor ``classes_`` and scores R^2.

``BudgetedSelector`` adds scikit-learn's ``SelectorMixin``: a fitted learner is also a transformer
(``get_support``, ``transform``, ``fit_transform``, ``get_feature_names_out``, ``set_output``) that
keeps the ``support_`` columns.

**No silent failure.** Every ``fit`` of a ``BudgetedSelector`` subclass is wrapped (``__init_subclass__``)
so that, once the outermost ``fit`` returns, the model is checked on its own training data
(``check_selection``) and a ``SelectionWarning`` says what is suspect: fewer features than ``budget``,
one class predicted for every training sample, a training accuracy below the majority-class rate, or
(regression) a training R^2 below 0.
With their defaults on real sets (p = 10^4-5.5 10^4) Ada-FOBOS and OPG returned 0 of 10 features and
predicted one class, RDA 2 of 10, SOFS one class at budget 10 on arcene, and nothing said so. The
check costs one product of the ``n x s`` selected columns with the weights (its time is negligible
next to the fit's); it runs once per call of ``fit`` (a ``fit`` that calls ``fit`` again, as the l1 weight
search does, is checked once, at the end).
"""
from __future__ import annotations

import functools
import numbers
import threading
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.feature_selection import SelectorMixin
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import ClassifierTags, RegressorTags
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from ..data.columnar import is_column_matrix
from ..data.dataset import check_sparse_structure
from .checks import columns_dense, effective_budget
from ..errors import InputError, SelectionWarning
from ..losses import get_loss

TASKS = ("regression", "classification")
MINUS_PLUS = np.array([-1.0, 1.0])


def _is_classifier(estimator) -> bool:
    return estimator._task() == "classification"


def _is_probabilistic(estimator) -> bool:
    return estimator._task() == "classification" and estimator._loss_name() == "logistic"


class Estimator(BaseEstimator):
    """Common face: parameter and data validation, tasks and labels, prediction and scoring.

    A subclass says its task (``_task``: from the loss, or its ``task`` parameter; ``None`` while
    ``loss="auto"`` is unfitted) and gives ``_decision(X)``, the decision values ``u = X w + b``.
    """

    _parameter_constraints: dict = {}
    # the fitted attributes a run's record reports (``_run_report``); each family names its own
    _reported: tuple = ()

    def _run_report(self) -> dict:
        """The fitted figures a run's record holds (``asyos.runs``): each attribute of ``_reported`` this
        estimator has, named without its trailing underscore."""
        return {name.rstrip("_"): getattr(self, name) for name in self._reported if hasattr(self, name)}

    # -- parameters -------------------------------------------------------------------------------
    def set_params(self, **params):
        valid = self.get_params(deep=False)
        for key in params:
            if key.split("__", 1)[0] not in valid:
                raise InputError(f"{type(self).__name__} has no parameter {key!r}; its parameters: "
                                 f"{', '.join(valid)}")
        return super().set_params(**params)

    def _validate_params(self):
        """scikit-learn's check of ``_parameter_constraints`` (one message format for every
        parameter of every learner), raised as ``InputError`` (a ``ValueError``) so that the CLI
        prints it as one line."""
        try:
            super()._validate_params()
        except InvalidParameterError as error:
            raise InputError(str(error)) from None

    # -- task and labels --------------------------------------------------------------------------
    def _loss_name(self):
        name = getattr(self, "loss_", None) or getattr(self, "loss", None)
        return None if name in (None, "auto") else get_loss(name, smooth=False).name

    def _task(self):
        """``classification``, ``regression`` or ``None`` (not known before ``fit``)."""
        name = self._loss_name()
        if name is None:
            return getattr(self, "task_", None)
        return get_loss(name, smooth=False).task

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.target_tags.required = True
        task = self._task()
        if task == "classification":
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags(multi_class=False)
        elif task == "regression":
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
        return tags

    def _encode_labels(self, y, reset, classes=None):
        """Classification: the labels as -1/+1 (``classes_[1]`` is +1). ``classes_`` is set on
        ``reset``: from ``classes`` when given, else the two labels of ``y``; labels that are all
        -1 or +1 mean the classes ``[-1, 1]`` even when one of them is missing (a stream's first
        sample)."""
        y = np.asarray(y)
        if reset:
            self.classes_ = _two_classes(self, y, classes)
        else:
            unseen = np.setdiff1d(np.unique(y), self.classes_)
            if unseen.size:
                raise InputError(f"y has labels {_shown(unseen)} not among classes_ {_shown(self.classes_)}")
        return np.where(y == self.classes_[1], 1.0, -1.0)

    def _labels(self, y, reset, classes=None):
        """The labels as the learners read them: a classifier's as -1/+1 (``_encode_labels``), a
        regressor's as float64."""
        if self._task() == "classification":
            return self._encode_labels(y, reset, classes)
        y = np.asarray(y)
        if y.dtype.kind not in "iufb":
            raise InputError(f"y must be numbers for regression; got dtype {y.dtype}")
        return y.astype(np.float64, copy=False)

    # -- data -------------------------------------------------------------------------------------
    def _check_data(self, X, y="no_validation", reset=True, accept_sparse=("csr", "csc")):
        """scikit-learn's validation (messages, ``n_features_in_``, ``feature_names_in_``), float64;
        its ``ValueError`` is raised as ``InputError`` (a ``ValueError``: the CLI prints it as one line).
        A sparse ``X``'s structure is checked first (``check_sparse_structure``)."""
        check_sparse_structure(X, "X")
        try:
            if isinstance(y, str) and y == "no_validation":
                return validate_data(self, X, accept_sparse=accept_sparse, dtype=np.float64, reset=reset)
            return validate_data(self, X, y, accept_sparse=accept_sparse, dtype=np.float64, reset=reset,
                                 y_numeric=self._task() == "regression")
        except InputError:
            raise
        except ValueError as error:         # on one line (scikit-learn's NaN and 1-D messages have several)
            raise InputError(" ".join(str(error).split())) from None

    def _check_fitted(self):
        check_is_fitted(self)

    def __sklearn_is_fitted__(self):
        return "n_features_in_" in vars(self)

    def _check_X(self, X):
        self._check_fitted()
        return self._check_data(X, reset=False)

    # -- the fitted face --------------------------------------------------------------------------
    def _decision(self, X):
        raise NotImplementedError

    @available_if(_is_classifier)
    def decision_function(self, X):
        """Decision values ``u = X w + b``: ``u >= 0`` predicts ``classes_[1]``."""
        return self._decision(X)

    @available_if(_is_probabilistic)
    def predict_proba(self, X):
        """Logistic loss: ``P(classes_[1] | x) = 1 / (1 + exp(-u))``."""
        from scipy.special import expit
        p = expit(self._decision(X))
        return np.column_stack([1.0 - p, p])

    def predict(self, X):
        u = self._decision(X)
        if self._task() == "classification":
            return self.classes_[(u >= 0.0).astype(np.intp)]
        return u

    def score(self, X, y):
        """Accuracy (classification) or R^2 (regression), as scikit-learn's mixins define them."""
        if self._task() == "classification":
            return float(accuracy_score(y, self.predict(X)))
        return float(r2_score(y, self.predict(X)))


class BudgetedSelector(SelectorMixin, Estimator):
    """Base of the learners that keep at most ``budget`` features: also a feature selector. Every
    subclass's ``fit`` is checked when it returns (``check_selection``, module docstring)."""

    _reads_columns = False        # True: fit reads X's columns on demand (out of core, ``_out_of_core_data``)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        fit = cls.__dict__.get("fit")
        if fit is not None and not getattr(fit, "_checks_selection", False):
            cls.fit = _checked_fit(fit)

    def _suspect_hint(self) -> str:
        """What to change when the fitted model is suspect (a learner names its own parameters)."""
        params = self.get_params(deep=False)
        shown = ", ".join(f"{k}={_param_text(self, k, params[k])}" for k in
                          ("eta", "gamma", "lam", "lam2", "step_size", "ridge", "passes") if params.get(k) is not None)
        return f"check its step size and regularization{f' ({shown})' if shown else ''}, or scale the features"

    def check_selection(self, X, y):
        """The warnings (``SelectionWarning``) a model fitted on ``(X, y)`` deserves (``selection_notes``);
        ``fit`` calls it on its training data (``y=None``: the number of features only). Returns their
        texts (each also issued)."""
        name = getattr(self, "algorithm_name", type(self).__name__)
        task = self._task()
        u = None
        if y is not None and (task == "regression" or getattr(self, "classes_", None) is not None):
            with np.errstate(all="ignore"):
                u = _training_decision(self, X)
        n_features = getattr(self, "n_features_in_", None)
        notes = selection_notes(name, getattr(self, "budget", None), _n_weighted(self), task, y, u,
                                getattr(self, "classes_", None), n_features, hasattr(self, "intercept_"),
                                self._suspect_hint)
        for note in notes:
            warnings.warn(note, SelectionWarning, stacklevel=3)
        return notes

    def _fit_data(self, X, y):
        """Parameters, then ``X`` (float64, dense or CSR) and the labels, the loss resolved
        (``loss_``; ``auto``: two classes mean classification, the squared hinge, else the squared
        loss) and the budget checked against ``n_features``."""
        self._validate_params()
        if is_column_matrix(X) or (isinstance(X, np.memmap) and self._reads_columns):
            X, y = self._out_of_core_data(X, y)
        else:
            X, y = self._check_data(X, y, accept_sparse=("csr", "csc"))
        if sp.issparse(X):
            X = sp.csr_matrix(X)
            X.sum_duplicates()
        loss = get_loss(auto_loss(y) if self.loss == "auto" else self.loss)
        self.loss_ = loss.name
        self.task_ = loss.task
        y = self._labels(y, reset=True)
        self.budget_ = effective_budget(self.budget, X.shape[1])
        return X, y, loss

    def _out_of_core_data(self, X, y):
        """``X`` out of core (a ``ColumnMatrix``, or a memory-mapped array): kept as a
        ``ColumnMatrix`` for learners that read columns on demand (``_reads_columns``), whose
        values are then checked chunk by chunk as they are read; read into memory for the others.
        ``y`` is checked here (scikit-learn's ``validate_data`` would read the whole ``X``)."""
        from ..data.columnar import as_column_matrix
        matrix = as_column_matrix(X)
        y = column_or_1d(y, warn=True)
        if y.shape[0] != matrix.shape[0]:
            raise InputError(f"X has {matrix.shape[0]} rows but y has {y.shape[0]} labels")
        if matrix.shape[1] < 1:
            raise InputError("X has no feature column")
        if not self._reads_columns:
            return self._check_data(matrix[:, np.arange(matrix.shape[1])], y, accept_sparse=("csr", "csc"))
        for name in ("feature_names_in_",):
            self.__dict__.pop(name, None)
        self.n_features_in_ = matrix.shape[1]
        return matrix, y

    def _set_selection(self, X, y, loss, support, weights, intercept=None, ridge=0.0):
        """Record the selected features and their weights (and the intercept, ``None`` for a model
        without one), then (with ``refit``) refit on them (``ridge``: the selection's, ``refit_selection``)."""
        from .refit import refit_selection
        p = X.shape[1]
        order = np.argsort(np.asarray(support, dtype=np.intp), kind="stable")
        self.n_features_in_ = p
        self.support_ = np.asarray(support, dtype=np.intp)[order]
        self.raw_coef_ = np.zeros(p)
        self.raw_coef_[self.support_] = np.asarray(weights, dtype=float)[order]
        self.raw_intercept_ = self.intercept_ = 0.0 if intercept is None else float(intercept)
        self.coef_ = self.raw_coef_.copy()
        if self.refit:
            self.coef_[self.support_], self.intercept_ = refit_selection(
                columns_dense(X, self.support_), y, loss, self.raw_coef_[self.support_], intercept, ridge=ridge)
        return self

    def _get_support_mask(self):
        self._check_fitted()
        mask = np.zeros(self.n_features_in_, dtype=bool)
        mask[self.support_] = True
        return mask

    def _decision(self, X):
        X = self._check_X(X)
        support = self.support_
        out = X[:, support] @ self.coef_[support]
        return np.asarray(out, dtype=float).ravel() + getattr(self, "intercept_", 0.0)


def selection_notes(name, budget, kept, task, y=None, u=None, classes=None, n_features=None, intercept=True,
                    hint=lambda: "") -> list:
    """The doubts a fitted model deserves, in one wording for every learner and every way of running (the
    estimators' ``check_selection``, the central rank of an MPI run on its ``u_C``): fewer features with a
    non-zero weight than ``budget``; on the training data (labels ``y``, decision values ``u``), for a
    classifier one class predicted for every sample or an accuracy below the majority-class rate, for a
    regressor an R^2 below 0; and, with at least as many features as samples, a model that fits the training
    samples exactly (the selection may not generalise: OS fitted 280 rows of a 100,000-feature set with a
    training objective of 5e-30 and predicted below the majority rate on the test rows, with no warning).
    ``hint()``: what to change (the learner's parameters)."""
    notes = []
    if isinstance(budget, numbers.Integral) and kept < budget:
        notes.append(f"{name} selected {kept} of its budget of {budget} features (non-zero weights); {hint()}")
    if y is None or u is None:
        return notes
    y = np.ravel(np.asarray(y))
    u = np.ravel(np.asarray(u, dtype=np.float64))
    if y.size < 2:
        return notes
    exact = False
    if task == "classification" and classes is not None:
        _, counts = np.unique(y, return_counts=True)
        predicted = np.asarray(classes)[(u >= 0.0).astype(np.intp)]
        correct = int(np.count_nonzero(predicted == y))
        accuracy, majority = correct / y.size, counts.max() / y.size
        shown = f"training accuracy {accuracy:.3f}, majority-class rate {majority:.3f}"
        if np.unique(predicted).size == 1 and counts.size > 1:
            notes.append(f"{name} predicts {predicted[0]} for every one of its {y.size} training samples ({shown}) "
                         f"with {kept} features; {hint()}")
        elif correct < counts.max():
            notes.append(f"{name}'s {shown}: predicting the most frequent class would do better; {hint()}")
        exact = correct == y.size and counts.size > 1
    elif task == "regression":
        y = y.astype(np.float64)
        spread = float(np.sum((y - y.mean()) ** 2))
        if spread > 0.0:
            with np.errstate(all="ignore"):
                r2 = 1.0 - float(np.sum((y - u) ** 2)) / spread
            if r2 < 0.0:
                centre = "" if intercept else f"; it fits no intercept and the mean of y is {y.mean():.3g}: centre y"
                notes.append(f"{name}'s training R^2 is {r2:.3g}: predicting the mean of y would do better"
                             f"{centre}; {hint()}")
            exact = r2 >= 1.0 - 1e-9
    if exact and n_features is not None and n_features >= y.size:
        notes.append(f"{name} fits its {y.size} training samples exactly with {kept} features of p = {n_features} "
                     f">= n: the selection may not generalise; try a smaller budget, or choose it by validation "
                     f"(a held-out split, cross_val_score)")
    return notes


def _n_weighted(estimator) -> int:
    """The selected features with a non-zero weight."""
    support = np.asarray(estimator.support_)
    return int(np.count_nonzero(np.asarray(estimator.coef_)[support])) if support.size else 0


def _param_text(estimator, name, value):
    """A parameter as a hint shows it: ``"auto"`` with the value the fit used (``eta_``) when it has one."""
    used = estimator.__dict__.get(name + "_")
    if isinstance(value, str) and isinstance(used, numbers.Real):
        return f"{value!r} (used {used:g})"
    return f"{value:g}" if isinstance(value, float) else repr(value)


_FITTING = threading.local()          # ids of the estimators inside a checked fit (of this thread)


def _checked_fit(fit):
    """``fit`` followed, for the outermost call on an estimator, by ``check_selection`` on its data."""
    @functools.wraps(fit)
    def checked(self, *args, **kwargs):
        active = _FITTING.__dict__.setdefault("ids", set())
        if id(self) in active:
            return fit(self, *args, **kwargs)
        active.add(id(self))
        try:
            result = fit(self, *args, **kwargs)
        finally:
            active.discard(id(self))
        X = args[0] if args else kwargs.get("X")
        y = args[1] if len(args) > 1 else kwargs.get("y")
        finish = getattr(self, "_finish_fit", None)
        if finish is not None:                    # once, after the outermost fit (a sample-stream learner's refit)
            finish(X, y)
        self.check_selection(X, y)
        return result
    checked._checks_selection = True
    return checked


def _training_decision(estimator, X):
    """``u = X w + b`` on the training data: from the selected columns only when ``X`` is an array, a
    sparse or an out-of-core matrix (no second validation of the whole ``X``), else ``decision_function``."""
    support = np.asarray(estimator.support_)
    intercept = float(getattr(estimator, "intercept_", 0.0))
    if not (is_column_matrix(X) or sp.issparse(X) or isinstance(X, np.ndarray)):
        return np.asarray(decision_values(estimator, X), dtype=float)
    if support.size == 0:
        return np.full(X.shape[0], intercept)
    if sp.issparse(X) and X.format not in ("csr", "csc"):
        X = sp.csc_matrix(X)                     # coo, dia, ...: not column-indexable
    block = np.asarray(columns_dense(X, support), dtype=np.float64)
    return block @ np.asarray(estimator.coef_, dtype=float)[support] + intercept


def decision_values(estimator, X):
    """``u = X w + b`` of a fitted learner whatever its task: what the loss's error metrics take
    (a regressor's ``predict``, a classifier's ``decision_function``)."""
    if hasattr(estimator, "decision_function"):
        return estimator.decision_function(X)
    return estimator.predict(X)


def auto_loss(y) -> str:
    """``loss="auto"``: the squared hinge when ``y`` holds two classes (labels that are not
    continuous numbers: two integers, two strings, ...), else the squared loss."""
    y = np.asarray(y)
    if y.dtype.kind in "OUSb":
        return "squared_hinge"
    values = np.unique(y)
    return "squared_hinge" if values.size == 2 and np.all(values == np.round(values)) else "squared"


def _two_classes(estimator, y, classes=None):
    name = type(estimator).__name__
    if classes is not None:
        classes = np.unique(np.asarray(classes))
        if classes.size != 2:
            raise InputError(f"{name} is a binary classifier: classes must hold two labels; got {_shown(classes)}")
        unseen = np.setdiff1d(np.unique(y), classes)
        if unseen.size:
            raise InputError(f"y has labels {_shown(unseen)} not among classes {_shown(classes)}")
        return classes
    found = np.unique(y)
    if y.dtype.kind == "f" and not np.all(found == np.round(found)):
        raise InputError(f"Unknown label type: continuous. {name} is a classifier but y holds continuous values "
                         f"({_shown(found)}); use a regression loss (squared) or give class labels")
    if found.size == 2:
        return found
    if found.size < 2 and y.dtype.kind in "iuf" and np.all((found == 1) | (found == -1)):
        return MINUS_PLUS.astype(y.dtype)
    if found.size < 2 and y.dtype.kind == "b":
        return np.array([False, True])
    if found.size < 2:
        raise InputError(f"{name} is a binary classifier and y has one class ({_shown(found)}): it needs two "
                         f"(or pass classes=[a, b] to partial_fit)")
    raise InputError(f"Only binary classification is supported. The type of the target is multiclass: {name} "
                     f"got {found.size} classes ({_shown(found)}); train one model per class against the rest "
                     f"(sklearn.multiclass.OneVsRestClassifier)")


def _shown(values, limit=5):
    values = list(values)
    text = ", ".join(str(v) for v in values[:limit])
    return text + (" ..." if len(values) > limit else "")
