"""The face of the learners that see samples one at a time (B-ARDA, B-AMD, OFS, SOFS, the l1 family,
SFSA, TSGD): scikit-learn conventions plus ``partial_fit`` and ``learn_one``.

* ``fit(X, y)`` starts afresh and makes ``passes`` passes over ``X``, each in a fresh random order
  (``passes="auto"`` is the ECML'18 protocol's ``ceil(2 d / n)``);
* ``partial_fit(X, y)`` continues with the rows of ``X`` in the order given;
* ``learn_one(x, y)`` continues with one sample (a 1-D array or a one-row sparse matrix).

Rows are read as CSR, and each learner's row loop (``_stream_kernels``) touches only the row's
non-zeros plus its kept set: neither a row nor the data set is ever made dense.

**Raw, unscaled data.** With ``scale="maxabs"`` (the default) every feature is divided by its
largest absolute value in the data given to the first ``fit``/``partial_fit`` (features absent
there keep scale 1). This keeps sparsity, makes the default step sizes meaningful whatever the
units (arcene counts up to 999, farm_ads 0/1), and ``coef_`` is reported in the original units.
``scale=None`` learns on the data as given (the ECML'18 protocol, with its grid search). For
unbounded features (Gaussian, say) the largest value grows with ``n``, and with it the effective step:
there, standardize the data or use ``scale=None`` with a step chosen for the data.

Fitted attributes (read from the learner's state when asked): ``coef_``, ``support_``,
``n_features_in_``, ``n_samples_seen_``, ``n_updates_`` (steps that changed the model), ``scale_``,
and for classification ``online_accuracy_`` (each sample predicted before it was learned from; by
the iterate, which for SFSA before maturity and TSGD with ``truncate="end"`` holds more than ``k``
features).
Learners that are budgeted (all but the l1 family) satisfy ``||w||_0 <= budget`` after every step.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import scipy.sparse as sp

from ...data.dataset import as_float_matrix
from ...errors import DivergenceError, InputError
from ...losses import LOSSES, get_loss
from . import _stream_kernels as K
from ..base import BudgetedSelector, check_budget, check_positive_float, check_positive_int

STREAM_LOSSES = tuple(LOSSES)                # every loss of the table, the hinge of OFS included
SCALES = (None, "maxabs")


def stream_loss(name):
    """``(face, code)``: the ``Loss`` that checks labels and predicts, and the kernel's loss code
    (``losses.TABLE``; ``hinge``, the margin rule of OFS, is not smooth, which the row loops allow)."""
    face = get_loss(str(name), smooth=False)
    return face, face.code


def as_csr(X, where="X"):
    """``X`` as canonical float64 CSR (dense input is converted; values are checked)."""
    X = as_float_matrix(X, where)
    if not sp.issparse(X):
        X = sp.csr_matrix(X)
    X.sort_indices()
    return X


def margins_arg(margins):
    """``(margins, given)`` as the row loops take them: ``None`` means "compute each prediction"."""
    return (np.empty(0), False) if margins is None else (margins, True)


def rows_of(X):
    """The CSR arrays a row loop reads."""
    return X.indptr.astype(np.int64, copy=False), X.indices.astype(np.int64, copy=False), X.data


class SampleStreamLearner(BudgetedSelector):
    """Base class. A subclass provides ``_new_state`` (its arrays and counters, a ``StreamState``),
    ``_run_rows`` (its row loop over ``order``, with optional given margins) and ``_weights`` (the
    current ``w`` in the scaled space, a dense copy)."""

    tasks = ("regression", "classification")
    budgeted_every_step = True

    # -- what a subclass provides ------------------------------------------------------------------
    def _check_params(self, n_features):
        """Validate the constructor parameters (raise ``InputError``)."""

    def _new_state(self, n_features, code):
        raise NotImplementedError

    def _run_rows(self, state, indptr, indices, data, y, order, margins=None):
        raise NotImplementedError

    def _weights(self, state):
        raise NotImplementedError

    @classmethod
    def _smoke_params(cls):
        """Parameters for a tiny fit that compiles every loop (``stream_learners.warm_up``)."""
        return {"budget": 1}

    # -- fitting ---------------------------------------------------------------------------------
    def fit(self, X, y):
        X, y = self._validate(X, y, reset=True)
        n = X.shape[0]
        rng = np.random.default_rng(self.random_state)
        rows = rows_of(X)
        with np.errstate(over="ignore", invalid="ignore"):
            for _ in range(self._n_passes(n, X.shape[1])):
                self._run_rows(self._state, *rows, y, rng.permutation(n).astype(np.int64))
        return self._touched()._check_finite()

    def partial_fit(self, X, y, classes=None):
        """Continue with the rows of ``X`` in the order given. A classifier's first call takes
        ``classes`` (the two labels) when its first batch may lack one of them."""
        X, y = self._validate(X, y, reset=not hasattr(self, "_state"), classes=classes)
        with np.errstate(over="ignore", invalid="ignore"):
            self._run_rows(self._state, *rows_of(X), y, np.arange(X.shape[0], dtype=np.int64))
        return self._touched()._check_finite()

    def _check_finite(self):
        self._fitted_coef()
        return self

    def learn_one(self, x, y):
        """Learn from one sample: ``x`` a 1-D array (or a one-row sparse matrix), ``y`` its label."""
        if sp.issparse(x):
            return self.partial_fit(x, np.atleast_1d(np.asarray(y)))
        row = np.asarray(x)
        if row.ndim != 1:
            raise InputError(f"learn_one takes one sample as a 1-D array; got shape {row.shape}")
        if not hasattr(self, "_state"):
            return self.partial_fit(row[None, :], np.atleast_1d(np.asarray(y)))
        # the common case, without building a matrix: the checks of partial_fit on one row
        if row.shape[0] != self.n_features_in_:
            raise InputError(f"x has {row.shape[0]} features, but {type(self).__name__} was fitted with "
                             f"{self.n_features_in_}")
        row = as_float_matrix(row[None, :], "x")[0]
        label = self._labels(np.atleast_1d(np.asarray(y)), reset=False)
        index = np.flatnonzero(row)
        values = row[index] / self.scale_[index] if self.scale is not None else row[index]
        self._run_rows(self._state, np.array([0, index.size], dtype=np.int64), index.astype(np.int64), values,
                       label, np.zeros(1, dtype=np.int64))
        return self._touched()

    def _n_passes(self, n, p):
        if self.passes == "auto":
            return max(1, math.ceil(2 * p / n))
        return self.passes

    def _validate(self, X, y, reset, classes=None):
        if self.loss not in STREAM_LOSSES:
            raise InputError(f"unknown loss {self.loss!r}; choose one of: {', '.join(STREAM_LOSSES)}")
        face, code = stream_loss(self.loss)
        if face.task not in self.tasks:
            raise InputError(f"{self._name()} is a {' or '.join(self.tasks)} learner; the {self.loss} loss "
                             f"is for {face.task}")
        if reset:
            self._validate_params()
        X, y = self._check_data(X, y, reset=reset, accept_sparse=("csr", "csc"))
        X = as_csr(X)
        y = self._labels(y, reset, classes)
        p = X.shape[1]
        if reset:
            self._check_common(p)
            self._check_params(p)
            self.scale_ = self._fit_scale(X)
            self._state = self._new_state(p, code)
        if self.scale is not None:
            X = X @ sp.diags(1.0 / self.scale_, format="csr")
            X.sort_indices()
        return X, y

    def _check_common(self, p):
        if self.budget is not None or self.budgeted_every_step:
            check_budget(self.budget, p)
        if self.passes != "auto":
            check_positive_int(self.passes, "passes")
        if self.scale not in SCALES:
            raise InputError(f"scale must be None or 'maxabs'; got {self.scale!r}")
        if self.random_state is not None and not isinstance(self.random_state, numbers.Integral):
            raise InputError(f"random_state must be an integer or None; got {self.random_state!r}")

    def _fit_scale(self, X):
        if self.scale is None:
            return np.ones(X.shape[1])
        scale = np.abs(X).max(axis=0).toarray().ravel()
        scale[scale == 0] = 1.0
        return scale

    def _name(self):
        return getattr(self, "algorithm_name", type(self).__name__)

    def _touched(self):
        self._cache = None
        return self

    # -- the fitted face, read from the state ----------------------------------------------------
    def _fitted_coef(self):
        if not hasattr(self, "_state"):
            raise AttributeError("coef_")
        cache = getattr(self, "_cache", None)
        if cache is None:
            w = self._weights(self._state) / self.scale_
            if not np.all(np.isfinite(w)):      # a diverged run says what to change, never returns NaN
                steps = ", ".join(f"{k}={getattr(self, k)!r}" for k in ("eta", "gamma") if hasattr(self, k))
                raise DivergenceError(f"{self._name()} diverged (non-finite weights after {int(self._state.counts[0])} "
                                      f"samples, {steps}): use a smaller step (eta) or a larger gamma, or scale "
                                      f"the features (scale='maxabs')")
            self._cache = cache = (w, np.flatnonzero(w))
        return cache

    @property
    def coef_(self):
        return self._fitted_coef()[0]

    @property
    def raw_coef_(self):
        return self.coef_

    @property
    def support_(self):
        return self._fitted_coef()[1]

    @property
    def n_samples_seen_(self):
        self._check_fitted()
        return int(self._state.counts[0])

    @property
    def n_updates_(self):
        self._check_fitted()
        return int(self._state.counts[-2])

    @property
    def online_accuracy_(self):
        """Classification: the fraction of samples predicted right *before* learning from them (the
        progressive accuracy the ECML'18 code reports), over everything seen so far."""
        self._check_fitted()
        if stream_loss(self.loss)[0].task != "classification":
            raise AttributeError("online_accuracy_ is defined for classification")
        return 1.0 - int(self._state.counts[-1]) / max(int(self._state.counts[0]), 1)

    def _labels(self, y, reset, classes=None):
        """The labels as the row loops read them: -1/+1 for a classifier (``classes_``), floats else."""
        if stream_loss(self.loss)[0].task == "classification":
            return self._encode_labels(y, reset, classes)
        return np.asarray(y, dtype=np.float64)

    def _decision(self, X):
        X = self._check_X(X)
        support = self.support_
        return np.asarray(X[:, support] @ self.coef_[support], dtype=float).ravel()


class StreamState:
    """Arrays and counters of one learner; plain attributes so that it pickles."""

    def __init__(self, **arrays):
        self.__dict__.update(arrays)


def check_rate(value, name, allow_zero=False):
    return check_positive_float(value, name, inclusive=allow_zero)
