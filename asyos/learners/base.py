"""The face every learner shows: scikit-learn conventions without a scikit-learn dependency.

The constructor stores parameters only; ``fit`` validates and learns; fitted attributes end in
``_`` (``coef_``, ``support_``, ``n_features_in_``). ``get_support``, ``transform``,
``decision_function`` and ``predict`` come from ``coef_`` and the loss.
"""
from __future__ import annotations

import inspect
import numbers

import numpy as np
import scipy.sparse as sp

from ..data.dataset import as_float_matrix, as_label_vector
from ..errors import InputError
from ..losses import default_loss_for_labels, get_loss


class Parameters:
    """``get_params`` / ``set_params`` / ``repr`` from the constructor's signature."""

    def get_params(self, deep=True):
        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {name: getattr(self, name) for name in names}

    def set_params(self, **params):
        valid = self.get_params()
        for key, value in params.items():
            if key not in valid:
                raise InputError(f"{type(self).__name__} has no parameter {key!r}")
            setattr(self, key, value)
        return self

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


class BudgetedSelector(Parameters):
    """Base of the learners that keep at most ``budget`` features."""

    # -- validation -----------------------------------------------------------------------------
    def _validate_data(self, X, y):
        X = as_float_matrix(X, "X")
        y = as_label_vector(y, X.shape[0], "y")
        loss = get_loss(default_loss_for_labels(y) if self.loss == "auto" else self.loss)
        loss.check_labels(y)
        check_budget(self.budget, X.shape[1])
        self.loss_ = loss.name
        return X, y, loss

    def _check_fitted(self):
        if not hasattr(self, "coef_"):
            raise InputError(f"this {type(self).__name__} is not fitted yet; call fit(X, y) first")

    def _check_X(self, X):
        self._check_fitted()
        X = as_float_matrix(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise InputError(f"X has {X.shape[1]} features, but {type(self).__name__} was fitted "
                             f"with {self.n_features_in_}")
        return X

    def _set_selection(self, X, y, loss, support, weights, intercept=None):
        """Record the selected features and their weights (and the intercept, ``None`` for a model
        without one), then (with ``refit``) refit on them."""
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
                columns_dense(X, self.support_), y, loss, self.raw_coef_[self.support_], intercept)
        return self

    # -- fitted face ----------------------------------------------------------------------------
    def get_support(self, indices=False):
        self._check_fitted()
        if indices:
            return self.support_.copy()
        mask = np.zeros(self.n_features_in_, dtype=bool)
        mask[self.support_] = True
        return mask

    def transform(self, X):
        X = self._check_X(X)
        return X[:, self.support_]

    def decision_function(self, X):
        X = self._check_X(X)
        out = X[:, self.support_] @ self.coef_[self.support_]
        return np.asarray(out).ravel() + getattr(self, "intercept_", 0.0)

    def predict(self, X):
        return get_loss(getattr(self, "loss_", self.loss)).predict(self.decision_function(X))


def check_budget(budget, n_features):
    if not isinstance(budget, numbers.Integral) or isinstance(budget, bool):
        raise InputError(f"budget must be an integer; got {budget!r}")
    if budget < 1:
        raise InputError(f"budget must be at least 1; got {budget}")
    if budget > n_features:
        raise InputError(f"budget {budget} is larger than the number of features ({n_features})")


def check_positive_int(value, name, minimum=1):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def check_positive_float(value, name, allow_none=False, minimum=0.0, inclusive=False):
    if value is None and allow_none:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number; got {value!r}") from None
    if not np.isfinite(v) or v < minimum or (v == minimum and not inclusive):
        op = ">=" if inclusive else ">"
        raise InputError(f"{name} must be a finite number {op} {minimum:g}; got {value!r}")
    return v


def columns_dense(X, support):
    """Dense ``(n, len(support))`` block of the given columns."""
    block = X[:, support]
    return block.toarray() if sp.issparse(block) else np.asarray(block)
