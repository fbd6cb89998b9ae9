"""The face of the learners that see samples one at a time (B-ARDA, B-AMD, OFS, SOFS, the l1 family,
SFSA, TSGD): scikit-learn conventions plus ``partial_fit``, and River's ``learn_one``/``predict_one``.

* ``fit(X, y)`` starts afresh and makes ``passes`` passes over ``X``, each in a fresh random order
  (``passes="auto"`` is the ECML'18 protocol's ``ceil(2 d / n)``);
* ``partial_fit(X, y)`` continues with the rows of ``X`` in the order given;
* ``learn_one(x, y)`` continues with one sample, ``predict_one(x)`` predicts one (the label for a
  classification loss, the value for ``squared``). ``x`` is a 1-D array (or a one-row sparse
  matrix) of ``n_features_in_`` values, or a dict ``{feature name: value}``.

**Dict rows.** A model that first sees a dict is a model of named features: a name met for the first
time becomes the next column (``feature_names_`` lists them in column order; ``coef_``,
``support_`` index them), up to the declared ``n_features`` (``None``: no limit; the state's arrays
then double their capacity when full, which leaves every result unchanged). A name over the limit
is an ``InputError`` (the row is not learned). ``predict_one`` ignores names it has not learned.
The key order of a dict does not matter (its columns are sorted before the step, so a dict
gives the same model as the array row of the same values). A model trained on arrays (``fit``,
``partial_fit``, array rows) refuses dicts and the reverse (``InputError``): arrays have no names to
map; ``predict``/``decision_function`` take matrices in ``feature_names_`` column order. SFSA and
TSGD threshold over all ``p`` features: with dicts they need ``n_features``.

Rows are read as CSR, and each learner's row loop (``_stream_kernels``) touches only the row's
non-zeros plus its kept set: neither a row nor the data set is ever made dense. ``learn_one`` checks
the parameters once per model and then reuses the row loop's argument tuple and one-row buffers: a
call converts the row (a compiled scan of a dense row, or the dict's names looked up) and runs the
loop on it; nothing of size ``d`` is built.

**Raw, unscaled data.** With ``scale="maxabs"`` (the default) every feature is divided by its
largest absolute value in the data seen so far, the data of the current call included: ``fit``
takes it over ``X`` (features absent there keep scale 1), each ``partial_fit`` raises it to the
largest values of its ``X`` before learning from it, each ``learn_one`` to its row's (in the
compiled step: a running max over the stream, so ``learn_one`` row by row is ``partial_fit`` row by
row, bit for bit). This keeps sparsity, makes the default step sizes meaningful whatever the units
(arcene counts up to 999, farm_ads 0/1), and ``coef_`` is reported in the original units (the
weights divided by the current scale). ``learn_one`` applies it in the compiled step (the row's
values divided by the running max, O(nnz)); before, a one-row sparse matrix went through
``partial_fit``, which built a diagonal of size ``d`` and a sparse product per call. Measured by
``bench_learn_one.py`` (300000 rows, d = 10^4): 1.22x ``scale=None``'s time on array rows.
``scale=None`` learns on the data as given (the ECML'18 protocol, with its grid search). For
unbounded features (Gaussian, say) the largest value grows with ``n``, and with it the
effective step: there, standardize the data or use ``scale=None`` with a step chosen for the data.

**The step API** (what ``fit``, ``partial_fit``, ``learn_one`` and the staleness simulator
``asyos.learners.stream.stream_simulator`` drive a learner with):

* ``start(X, y) -> rows``: a fresh model for ``X`` (checks, ``fit``'s scaling), and ``X``'s rows
  as the loops read them (``StreamRows``: CSR arrays, labels, ``passes``, the passes ``fit`` makes);
* ``prepare(X, y) -> rows``: the same for a model that goes on (a stream's running scaling);
* ``step_rows(rows, order=None, margins=None)``: learn from the rows ``order`` (default all, in
  order), one after the other; with ``margins`` the prediction of ``order[j]`` is taken to be
  ``margins[j]`` instead of the current model's (a stale model's, for the simulator);
* ``weights()``: the current weights in the scaled space the rows are in (a dense copy).

Fitted attributes (read from the learner's state when asked): ``coef_``, ``support_``,
``n_features_in_``, ``feature_names_`` (dict rows), ``n_samples_seen_``, ``n_updates_`` (steps
that changed the model), ``scale_``, and for classification ``online_accuracy_`` (each sample
predicted before it was learned from; by the iterate, which for SFSA before maturity and TSGD with
``truncate="end"`` holds more than ``k`` features).
Learners that are budgeted (all but the l1 family) satisfy ``||w||_0 <= budget`` after every step.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from ...data.dataset import as_float_matrix
from ...errors import DivergenceError, InputError
from ...losses import LOSSES, get_loss
from . import _stream_kernels as K
from ..base import BudgetedSelector
from ..checks import check_budget, effective_budget
from ..params import BUDGET, PASSES, SEED, StrOptions, count

STREAM_LOSSES = tuple(LOSSES)                # every loss of the table, the hinge of OFS included


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
    """The CSR arrays a row loop reads: ``X``'s own ``indptr``, ``indices`` and ``data``, never copied.
    The row loops are compiled for int32 and int64 index arrays (numba specializes each on first use);
    before, the indices were copied to int64, which added 0.9 GB (8 bytes per non-zero) at 10^6 rows of
    100 non-zeros and 0.33 s per 10^6 rows of ``partial_fit`` (``bench_stream_throughput.py``)."""
    return X.indptr, X.indices, X.data


class StreamRows:
    """Rows as the row loops read them (``start``/``prepare``): ``indptr, indices, data`` (CSR, scaled),
    ``y``, ``n_rows``, and ``passes``, the passes ``fit`` makes over them."""

    def __init__(self, X, y, passes, data=None):
        self.indptr, self.indices, self.data = rows_of(X)
        if data is not None:                         # X's rows with other values (the scaled ones)
            self.data = data
        self.y = y
        self.n_rows = X.shape[0]
        self.passes = passes


_CSR_TYPES = (sp.csr_matrix, sp.csr_array)


def _csr_row_width(x) -> int:
    """The width of ``x``, a CSR matrix, when it is one row that ``prepare_sparse`` reads as it is
    (float64 values, its columns sorted and distinct, no stored entries beyond the row); else -1."""
    if x.shape[0] != 1 or x.dtype != np.float64 or x.indptr[0] != 0 or x.indptr[1] != x.data.shape[0] \
            or not x.has_canonical_format:
        return -1
    return x.shape[1]


class _OneRow:
    """What ``learn_one`` reuses: the row loop's full argument tuple (the state's arrays, one-row CSR
    buffers ``indptr = [0, n]``, ``indices``, ``data``, ``y``, ``order = [0]``), built once per state."""

    def __init__(self, model):
        state = model._state
        capacity = model._absmax.shape[0]
        self.state = state
        self.indptr = np.zeros(2, dtype=np.int64)
        self.idx = np.zeros(capacity, dtype=np.int64)
        self.val = np.zeros(capacity)
        self.y = np.zeros(1)
        self.order = np.zeros(1, dtype=np.int64)
        self.absmax = model._absmax
        self.scaling = model.scale is not None
        self.width = -1 if model._named else model.n_features_in_     # dense rows' width (-1: dict rows)
        self.names = model._names
        self.buffers = (self.idx, self.val, self.indptr, self.absmax, self.scaling)
        face = stream_loss(model.loss)[0]
        self.classification = face.task == "classification"
        loop = model._kernel(state)
        self.kernel = None if loop is None else loop[0]
        self.args = None if loop is None else (*loop[1], self.indptr, self.idx, self.val, self.y, self.order,
                                                np.empty(0), False)


class SampleStreamLearner(BudgetedSelector):
    """Base class. A subclass provides ``_new_state`` (its arrays and counters, a ``StreamState``),
    ``_kernel`` (its compiled row loop and the state arguments it takes before the rows; or
    ``_run_rows``, its own loop over ``order`` with optional given margins) and ``_weights`` (the
    current ``w`` in the scaled space, a dense copy). The public step API (``start``, ``prepare``,
    ``step_rows``, ``weights``) is described in ``asyos.learners.stream.sample_stream``."""

    _reported = ("n_steps_", "n_samples_seen_", "n_updates_", "lam_", "online_accuracy_", "raw_intercept_",
                 "refitted_")

    tasks = ("regression", "classification")
    budgeted_every_step = True
    _parameter_constraints = {"budget": BUDGET, "loss": [StrOptions(set(STREAM_LOSSES))], "passes": PASSES,
                              "scale": [StrOptions({"maxabs"}), None], "random_state": SEED,
                              "n_features": [count(1), None]}
    fixed_width = False             # True: the learner's rule depends on p (dict rows need n_features)
    INITIAL_CAPACITY = 64           # columns of a growing dict model's first state

    # -- what a subclass provides ------------------------------------------------------------------
    def _check_params(self, n_features):
        """Validate the constructor parameters (raise ``InputError``)."""

    def _new_state(self, n_features, code):
        raise NotImplementedError

    def _kernel(self, state):
        """``(row loop, state arguments)``: ``loop(*arguments, indptr, indices, data, y, order, margins,
        given)`` learns from the rows ``order``; ``None`` when the subclass runs its own ``_run_rows``."""
        return None

    def _run_rows(self, state, indptr, indices, data, y, order, margins=None):
        kernel, head = self._kernel(state)
        margins, given = margins_arg(margins)
        kernel(*head, indptr, indices, data, y, order, margins, given)

    def _weights(self, state):
        raise NotImplementedError

    def _online_intercept(self, state):
        """The online model's intercept (``None``: it has none; SFSA and TSGD learn one)."""
        return None

    def _stream_params(self):
        """Checks of the parameters that only a stream (``partial_fit``, ``learn_one``) needs."""

    @classmethod
    def _smoke_params(cls):
        """Parameters for a tiny fit that compiles every loop (``stream_learners.warm_up``)."""
        return {"budget": 1}

    # -- the step API ----------------------------------------------------------------------------
    def start(self, X, y, classes=None):
        """A fresh model for ``X`` (``fit``'s checks); returns ``X``'s rows (``StreamRows``)."""
        X, y, code = self._checked(X, y, reset=True, classes=classes)
        self._begin(X.shape[1], X.shape[1], code, named=False)
        if hasattr(self._state, "horizon"):        # SFSA's maturity: the mini-batches of one pass
            self._state.horizon = self._horizon(X.shape[0])
        return self._scaled_rows(X, y)

    def prepare(self, X, y, classes=None):
        """``X``'s rows for the model as it is (a fresh one when unfitted)."""
        fresh = not hasattr(self, "_state")
        if not fresh:
            self._check_kind(named=False)
        X, y, code = self._checked(X, y, reset=fresh, classes=classes)
        if fresh:
            self._begin(X.shape[1], X.shape[1], code, named=False)
        return self._scaled_rows(X, y)

    def _scaled_rows(self, X, y):
        """With ``maxabs``: the scale raised to the largest ``|x_j|`` of ``X``, then ``X`` divided by it.
        Both in one compiled pass over the non-zeros (``K.maxabs_scale``: O(nnz), the same bits as
        ``X @ diags(1 / scale_)``, whose explicit zeros it drops as that product did); the scaled rows
        share ``X``'s ``indptr`` and ``indices``. Before, ``np.abs(X).max(axis=0)``, ``scale_`` and the
        diagonal product cost O(d) per call besides their copies of ``X``: a ``partial_fit`` per chunk
        of rows paid for every feature at each call."""
        if self.scale is not None:
            data = np.empty_like(X.data)
            if K.maxabs_scale(X.indices, X.data, self._absmax, data):
                return StreamRows(X, y, self._n_passes(X.shape[0], X.shape[1]), data=data)
            X = sp.csr_matrix((data, X.indices.copy(), X.indptr.copy()), shape=X.shape)
            X.eliminate_zeros()                     # a zero among the values: dropped, as the product did
        return StreamRows(X, y, self._n_passes(X.shape[0], X.shape[1]))

    def step_rows(self, rows, order=None, margins=None):
        """Learn from the rows ``order`` (int64 indices into ``rows``; default all, in order) of
        ``rows`` one after the other; ``margins[j]``, when given, is the prediction used for ``order[j]``."""
        if order is None:
            order = np.arange(rows.n_rows, dtype=np.int64)
        with np.errstate(over="ignore", invalid="ignore"):
            self._run_rows(self._state, rows.indptr, rows.indices, rows.data, rows.y, order, margins)
        self._cache = None
        return self

    def weights(self):
        """The current weights in the scaled space of the rows (a dense copy, ``n_features_in_`` long)."""
        return self._weights(self._state)[:self.n_features_in_]

    # -- fitting ---------------------------------------------------------------------------------
    def fit(self, X, y, checkpoint=None):
        """``passes`` passes over ``X``, each in a fresh random order. ``checkpoint`` (an
        ``asyos.records.checkpoint.Checkpointer``) saves the fit between chunks of rows and, holding a saved
        state, continues from it: the result is the uninterrupted fit's, bit for bit (``resumable``)."""
        if checkpoint is not None:
            from . import resumable
            return resumable.fit(self, X, y, checkpoint)
        rows = self.start(X, y)
        rng = np.random.default_rng(self.random_state)
        for _ in range(rows.passes):
            self.step_rows(rows, rng.permutation(rows.n_rows).astype(np.int64))
        self._fitted_coef()                 # fit is O(d) anyway: coef_ built now, predict leaves vars() as is
        return self

    def partial_fit(self, X, y, classes=None):
        """Continue with the rows of ``X`` in the order given. A classifier's first call takes
        ``classes`` (the two labels) when its first batch may lack one of them."""
        self._stream_params()
        return self.step_rows(self.prepare(X, y, classes))._check_finite()

    def _check_finite(self):
        """Raise ``DivergenceError`` when a weight is not finite. A budgeted learner checks only its kept
        coordinates (``_kept``, O(budget)): ``coef_`` (O(d)) is built only when one is not finite, so a
        ``partial_fit`` per chunk of rows does no O(d) work at d = 10^6."""
        kept = self._kept(self._state)
        if kept is None:
            self._fitted_coef()
            return self
        index, values = kept
        scale = self._absmax[index]
        scale[scale == 0] = 1.0
        with np.errstate(over="ignore", invalid="ignore"):
            finite = np.all(np.isfinite(values / scale))
        if not finite:
            self._fitted_coef()
        return self

    def _kept(self, state):
        """``(index, weights)`` of the coordinates that can be non-zero (a budgeted learner's kept set,
        in the scaled space), or ``None``: any coordinate can."""
        return None

    def learn_one(self, x, y):
        """Learn from one sample: ``x`` a 1-D array, a one-row sparse matrix or a dict ``{name: value}``;
        ``y`` its label (``_encode_label``). A one-row CSR matrix (float64, canonical: sorted distinct
        columns) is read as it is, its non-zeros only: the fastest form when rows are sparse (a dense
        row is scanned for its non-zeros, all ``p`` values)."""
        one = self.__dict__.get("_one")            # the common cases first, checked in the fewest steps
        if one is None or one.state is not self.__dict__.get("_state"):
            one = self._one_row(x, learn=True)
        elif type(x) is np.ndarray and one.width == x.shape[0] and x.ndim == 1 and x.dtype == np.float64 \
                and x.flags.c_contiguous:
            if K.prepare_dense(x, *one.buffers) < 0:
                raise InputError("x contains NaN or infinite values")
        elif type(x) in _CSR_TYPES and 0 <= one.width == _csr_row_width(x):   # a row in (index, value) form
            if K.prepare_sparse(x.indices, x.data, *one.buffers) < 0:      # read as it is: no scan of zeros
                raise InputError("x contains NaN or infinite values")
        elif type(x) is dict and one.width < 0:
            try:                                    # every name known: no new column
                cols = np.fromiter(map(one.names.__getitem__, x), np.int64, len(x))
                values = np.fromiter(x.values(), np.float64, len(x))
            except (KeyError, TypeError, ValueError):
                one = self._one_row(x, learn=True)
            else:
                if K.prepare_sparse(cols, values, *one.buffers) < 0:
                    raise InputError("x contains NaN or infinite values")
        else:
            one = self._one_row(x, learn=True)
        one.y[0] = self._encode_label(y, one)
        if one.kernel is not None:                   # compiled: no floating-point warnings to silence
            one.kernel(*one.args)
        else:
            self.step_rows(StreamRows(sp.csr_matrix((one.val[:one.indptr[1]], one.idx[:one.indptr[1]],
                                                     one.indptr), shape=(1, one.absmax.shape[0])), one.y, 1))
        self._cache = None
        return self

    _supervised = True          # River's flag (river.evaluate, river.compose): learn_one takes a label

    def predict_one(self, x):
        """The prediction for one sample (a label for classification, a value for regression): ``x``
        as in ``learn_one``; ``predict`` of the one row (dict names not learned count as zeros). Before
        any sample was learned it answers as River's models do: ``None`` for a classifier (no class seen),
        ``0.0`` for a regressor."""
        if self.__dict__.get("_state") is None:
            return None if self._task() == "classification" else 0.0
        u, one = self._decision_one(x)
        return self.classes_[int(u >= 0.0)] if one.classification else u

    def predict_proba_one(self, x):
        """``{class: probability}`` for one sample, a classifier's (River's ``predict_proba_one``): with the
        logistic loss ``P(classes_[1] | x) = 1 / (1 + exp(-u))``; a margin loss estimates no probability, so
        the predicted class has 1 and the other 0; ``{}`` before any sample was learned (River's default)."""
        if self._task() != "classification":
            raise AttributeError(f"{self._name()} with loss {self.loss!r} is a regressor: it has no class "
                                 f"probabilities")
        if self.__dict__.get("_state") is None:
            return {}
        u, _ = self._decision_one(x)
        p = 1.0 / (1.0 + math.exp(-u)) if self._loss_name() == "logistic" else float(u >= 0.0)
        low, high = (c.item() if hasattr(c, "item") else c for c in self.classes_)    # numpy scalars: Python's
        return {low: 1.0 - p, high: p}

    def _decision_one(self, x):
        """``(u, row)``: ``u = x . coef_`` for one sample ``x`` as ``learn_one`` takes it (dict names not
        learned count as zeros), and the one-row buffers it was read into (their ``classification``)."""
        one = self._one_row(x, learn=False)
        n = one.indptr[1]
        refitted = self._refit_model()
        if refitted is None:
            bias = self._online_intercept(self._state)
            u = float(one.val[:n] @ self._fitted_coef()[0][one.idx[:n]])
            return (u if bias is None else u + bias), one
        coef, intercept = refitted
        return float(one.val[:n] @ coef[one.idx[:n]]) + intercept, one

    def _encode_label(self, y, one):
        """The label as the loss takes it: a classifier's as -1/+1 through ``classes_`` (set by the
        first label: -1/+1 or booleans name both classes; other labels need ``partial_fit(...,
        classes=[a, b])`` first), a regressor's a finite number."""
        if one.classification:
            classes = self.__dict__.get("classes_")
            if classes is not None:
                if y == classes[1]:
                    return 1.0
                if y == classes[0]:
                    return -1.0
            return float(self._encode_labels(np.array([y]), reset=classes is None)[0])
        try:
            value = float(y)
        except (TypeError, ValueError):
            raise InputError(f"y must be a number; got {y!r}") from None
        if not math.isfinite(value):
            raise InputError(f"y must be finite; got {y!r}")
        return value

    def _one_row(self, x, learn):
        """The sample ``x`` in the one-row buffers: scaled when learning (the running scale updated
        first), as given when predicting (``predict_one`` uses ``coef_``, in the original units)."""
        one = getattr(self, "_one", None)
        if isinstance(x, dict):
            if one is None or one.state is not getattr(self, "_state", None):
                one = self._row_model(named=True, width=len(x), learn=learn)
            self._check_kind(named=True)
            cols, values = self._dict_columns(x, learn)
            if learn and self.n_features_in_ > one.absmax.shape[0]:
                self._grow(self.n_features_in_)
                one = self._row_model(named=True, width=0, learn=learn)
            n = K.prepare_sparse(cols, values, one.idx, one.val, one.indptr, one.absmax, one.scaling and learn)
        elif type(x) in _CSR_TYPES and _csr_row_width(x) >= 0:
            one = self._array_row_model(one, x.shape[1], learn)
            n = K.prepare_sparse(x.indices, x.data, one.idx, one.val, one.indptr, one.absmax, one.scaling and learn)
        else:
            row = x
            if type(row) is not np.ndarray or row.ndim != 1 or row.dtype != np.float64 or \
                    not row.flags.c_contiguous:
                row = self._as_row(x)
            one = self._array_row_model(one, row.shape[0], learn)
            n = K.prepare_dense(row, one.idx, one.val, one.indptr, one.absmax, one.scaling and learn)
        if n < 0:
            raise InputError("x contains NaN or infinite values")
        return one

    def _array_row_model(self, one, width, learn):
        """The ``_OneRow`` for an array row of ``width`` values (a new one for a new state), after checking
        that the model learns from arrays of that width."""
        if one is None or one.state is not getattr(self, "_state", None):
            one = self._row_model(named=False, width=width, learn=learn)
        self._check_kind(named=False)
        if width != self.n_features_in_:
            raise InputError(f"x has {width} features, but {type(self).__name__} was fitted with "
                             f"{self.n_features_in_}")
        return one

    def _row_model(self, named, width, learn):
        """The ``_OneRow`` of the current state, after a first sample starts the model."""
        if not hasattr(self, "_state"):
            if not learn:
                self._check_fitted()
            self._stream_params()
            face, code = self._loss_code()
            if named:
                if self.fixed_width and self.n_features is None:
                    raise InputError(f"{self._name()} thresholds over all p features: give n_features to "
                                     f"learn from dict rows")
                capacity = self.n_features if self.n_features is not None else \
                    max(self.INITIAL_CAPACITY, self.budget or 0, width)
                self._begin(0, capacity, code, named=True)
            else:
                self._begin(width, width, code, named=False)
        self._check_kind(named)
        self._one = _OneRow(self)
        return self._one

    def _as_row(self, x):
        if sp.issparse(x):
            if x.shape[0] != 1:
                raise InputError(f"learn_one takes one sample; got a matrix of shape {x.shape}")
            return as_float_matrix(x, "x").toarray()[0]
        row = np.asarray(x)
        if row.ndim != 1:
            raise InputError(f"learn_one takes one sample as a 1-D array or a dict; got shape {row.shape}")
        return np.ascontiguousarray(as_float_matrix(row[None, :], "x")[0])

    def _dict_columns(self, x, learn):
        """``(columns, values)`` of a dict row; new names become columns when learning (up to
        ``n_features``), and are left out when predicting."""
        names = self._names
        try:
            values = np.fromiter(x.values(), np.float64, len(x))
        except (TypeError, ValueError):
            raise InputError("the values of a dict row must be numbers") from None
        try:
            return np.fromiter(map(names.__getitem__, x), np.int64, len(x)), values
        except KeyError:
            pass
        if not learn:
            cols = np.fromiter((names.get(k, -1) for k in x), np.int64, len(x))
            return cols[cols >= 0], values[cols >= 0]
        new = [k for k in x if k not in names]
        limit = self.n_features
        if limit is not None and len(names) + len(new) > limit:
            raise InputError(f"{len(new)} new feature name(s) ({', '.join(map(repr, new[:3]))}"
                             f"{' ...' if len(new) > 3 else ''}) would make {len(names) + len(new)} features, over "
                             f"n_features={limit}")
        for k in new:
            names[k] = len(names)
            self.feature_names_.append(k)
        self.n_features_in_ = len(names)
        return np.fromiter(map(names.__getitem__, x), np.int64, len(x)), values

    def _grow(self, need):
        """Double the state's capacity (at least to ``need`` columns), keeping every value: the arrays
        indexed by feature are copied into a fresh state's, the others (counters, budget-sized sets) kept."""
        old = self._state
        capacity = self._absmax.shape[0]
        new_capacity = max(need, 2 * capacity)
        fresh = self._new_state(new_capacity, self._loss_code()[1])
        for key, value in old.__dict__.items():
            target = fresh.__dict__[key]
            if isinstance(value, np.ndarray) and value.shape[0] == capacity and target.shape[0] == new_capacity:
                target[:capacity] = value
            else:
                fresh.__dict__[key] = value
        self._state = fresh
        self._absmax = np.concatenate([self._absmax, np.zeros(new_capacity - capacity)])
        self._cache = None

    def _begin(self, p, capacity, code, named):
        """A fresh state of ``capacity`` columns for a model of ``p`` features (checks the parameters)."""
        self._validate_params()
        width = self.n_features
        if width is not None:
            if not named and p != width:
                raise InputError(f"X has {p} features, but n_features={width} was declared")
        self._check_common(capacity)
        self._check_params(capacity)
        self.n_features_in_ = p
        self._named = named
        self._names = {}
        self.feature_names_ = [] if named else None
        self._absmax = np.zeros(capacity)
        self._state = self._new_state(capacity, code)
        self._cache = None

    def _check_kind(self, named):
        if self._named != named:
            trained, given = ("dict rows", "arrays") if self._named else ("arrays", "dict rows")
            raise InputError(f"this {self._name()} was trained on {trained}; it does not take {given} "
                             f"({'arrays have no feature names' if self._named else 'its columns have no names'}); "
                             f"start a new model (or fit) to change")

    def _loss_code(self):
        if self.loss not in STREAM_LOSSES:
            raise InputError(f"unknown loss {self.loss!r}; choose one of: {', '.join(STREAM_LOSSES)}")
        face, code = stream_loss(self.loss)
        if face.task not in self.tasks:
            raise InputError(f"{self._name()} is a {' or '.join(self.tasks)} learner; the {self.loss} loss "
                             f"is for {face.task}")
        return face, code

    def _checked(self, X, y, reset, classes=None):
        """``X`` (sklearn's validation, then canonical CSR), the labels as the loops read them (a
        classifier's as -1/+1, ``classes_`` set on ``reset``) and the loss code."""
        face, code = self._loss_code()
        X, y = self._check_data(X, y, reset=reset, accept_sparse=("csr", "csc"))
        if sp.issparse(X) and X.format == "csr" and X.dtype == np.float64:
            X.sum_duplicates()                  # values checked by scikit-learn's validation: not again
        else:
            X = as_csr(X)
        return X, self._labels(y, reset, classes), code

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_one", None)                      # buffers and compiled loops: rebuilt on demand
        return state

    def _n_passes(self, n, p):
        if self.passes == "auto":
            return max(1, math.ceil(2 * p / n))
        return self.passes

    def _check_common(self, p):
        if self.budget is None and self.budgeted_every_step:
            check_budget(self.budget, p)            # a budgeted learner needs its budget: the error says so
        self.budget_ = effective_budget(self.budget, p)

    @property
    def scale_(self):
        """The scale of each feature (1 where none was seen)."""
        if not hasattr(self, "_state"):
            raise AttributeError("scale_")
        scale = self._absmax[:self.n_features_in_].copy()
        scale[scale == 0] = 1.0
        return scale

    def _name(self):
        return getattr(self, "algorithm_name", type(self).__name__)

    # -- the fitted face, read from the state ----------------------------------------------------
    def _fitted_coef(self):
        if not hasattr(self, "_state"):
            raise AttributeError("coef_")
        cache = getattr(self, "_cache", None)
        if cache is None:
            w = self.weights() / self.scale_
            if not np.all(np.isfinite(w)):      # a diverged run says what to change, never returns NaN
                steps = ", ".join(f"{k}={self.__dict__.get(k + '_', getattr(self, k))!r}"    # eta_: the value used
                                  for k in ("eta", "gamma") if hasattr(self, k))
                seen = int(self._state.counts[K.SEEN])
                raise DivergenceError(f"{self._name()} diverged (non-finite weights after {seen} "
                                      f"samples, {steps}): use a smaller step (eta) or a larger gamma, or scale "
                                      f"the features (scale='maxabs')")
            self._cache = cache = (w, np.flatnonzero(w))
        return cache

    # -- the refit that ends fit (``refit=True``) ------------------------------------------------------
    REFIT_LOSS = {"hinge": "squared_hinge"}     # L-BFGS needs a smooth loss: the hinge's squared form

    def _finish_fit(self, X, y):
        """After the outermost ``fit`` (the data in hand), with ``refit``: the kept features (the online
        model's non-zero weights, at most ``budget``) fitted again on ``(X, y)`` with an unpenalised
        intercept and the learner's loss (``asyos.learners.refit.refit_with_intercept``). The online
        model stays ``raw_coef_``; ``coef_`` and ``intercept_`` are the refit's until the model learns
        again (``partial_fit``, ``learn_one``), which continues from the online state. Measured on nine
        shared sets (budgets 10 and 50, three 70/30 splits; 18 cells a learner): the weights the l1 weight
        shrinks and SFSA's and TSGD's few mini-batch steps leave the refit better in 13-16 cells and worse
        in 1-3 for each of Ada-FOBOS, OPG, RDA, l1-ARDA, SFSA and TSGD; on the regression sets test R^2
        went from -14 .. 0.34 to 0.20 .. 0.73 (scikit-learn's ``check_regressors_train``: 0.03-0.27 to
        0.81, what least squares on the kept feature gives)."""
        self.__dict__.pop("_refitted", None)
        if not getattr(self, "refit", False):
            return
        w, support = self._fitted_coef()
        if self.budget_ is None or support.size > self.budget_:
            return                     # no budget to refit to (a numeric lam that kept more): the online model
        from ..checks import columns_dense
        from ..refit import refit_with_intercept
        if not (sp.issparse(X) or isinstance(X, np.ndarray)):
            X = np.asarray(X, dtype=np.float64)
        elif sp.issparse(X) and X.format not in ("csr", "csc"):
            X = sp.csc_matrix(X)
        y = np.asarray(y).ravel()
        name = self._loss_name()
        loss = get_loss(self.REFIT_LOSS.get(name, name))
        labels = np.where(y == self.classes_[1], 1.0, -1.0) if loss.task == "classification" \
            else y.astype(np.float64)
        coef_s, intercept = refit_with_intercept(columns_dense(X, support), labels, loss, w[support])
        coef = np.zeros_like(w)
        coef[support] = coef_s
        counts = self._state.counts
        self._refitted = (self._state, int(counts[K.SEEN]), int(counts[K.UPDATES]), coef, float(intercept))

    def _refit_model(self):
        """``(coef, intercept)`` of the refit while the model has not learned since, else ``None``."""
        refitted = self.__dict__.get("_refitted")
        if refitted is None:
            return None
        state, seen, updates, coef, intercept = refitted
        counts = state.counts
        if state is not self.__dict__.get("_state") or int(counts[K.SEEN]) != seen or \
                int(counts[K.UPDATES]) != updates:
            return None
        return coef, intercept

    @property
    def coef_(self):
        refitted = self._refit_model()
        return refitted[0] if refitted is not None else self._fitted_coef()[0]

    @property
    def intercept_(self):
        """The refit's intercept (``refit=True``, after ``fit``), else the online model's where it has one
        (SFSA, TSGD); the other online models have none."""
        refitted = self._refit_model()
        if refitted is None:
            bias = self._online_intercept(self._state) if "_state" in self.__dict__ else None
            if bias is None:
                raise AttributeError("intercept_")
            return bias
        return refitted[1]

    @property
    def refitted_(self):
        """Whether ``coef_`` is the refit on the kept features (``_finish_fit``) or the online model."""
        self._check_fitted()
        return self._refit_model() is not None

    @property
    def raw_coef_(self):
        """The online model's weights (in the original units)."""
        return self._fitted_coef()[0]

    @property
    def support_(self):
        return self._fitted_coef()[1]

    @property
    def n_samples_seen_(self):
        self._check_fitted()
        return int(self._state.counts[K.SEEN])

    @property
    def n_updates_(self):
        self._check_fitted()
        return int(self._state.counts[K.UPDATES])

    @property
    def online_accuracy_(self):
        """Classification: the fraction of samples predicted right *before* learning from them (the
        progressive accuracy the ECML'18 code reports), over everything seen so far."""
        self._check_fitted()
        if stream_loss(self.loss)[0].task != "classification":
            raise AttributeError("online_accuracy_ is defined for classification")
        return 1.0 - int(self._state.counts[K.MISTAKES]) / max(int(self._state.counts[K.SEEN]), 1)


def records(n, fill, rank=None, sign=1.0):
    """An ``(n, len(fill))`` float64 array whose rows start on 64-byte boundaries (a cache line): the
    per-coordinate records of a row loop, so that a record never straddles two lines. Every record is
    ``fill``, with ``sign * i`` in column ``rank`` of record ``i`` when ``rank`` is given. Written in one
    sequential pass (``K.fill_records``): at d = 10^6 the column-by-column assignments took 18-40 ms of
    a ``partial_fit`` (one strided pass per column)."""
    width = len(fill)
    buffer = np.empty(n * width + 8)
    skip = (-buffer.ctypes.data % 64) // 8
    rec = buffer[skip:skip + n * width].reshape(n, width)
    fill = np.asarray(fill, dtype=float)
    if K.COMPILED:
        K.fill_records(rec, fill, -1 if rank is None else rank, float(sign))
    else:
        rec[:] = fill
        if rank is not None:
            rec[:, rank] = sign * np.arange(n)
    return rec


class StreamState:
    """Arrays and counters of one learner; plain attributes so that it pickles."""

    def __init__(self, **arrays):
        self.__dict__.update(arrays)
