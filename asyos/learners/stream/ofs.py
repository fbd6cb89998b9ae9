"""The truncation baselines of ECML'18: OFS and SOFS.

* **OFS** (Wang, Zhao, Hoi, Jin, TKDE 2014; FOFS in the thesis): when ``l'(u_t) != 0`` (with the
  default hinge: a margin violation ``y w.x < 1``), ``w <- (1 - lam eta) w - eta l'(u) x`` (with the
  hinge, ``+ eta y x``), then the projection onto the L2 ball of radius ``1/sqrt(lam)``, then the
  ``B`` largest ``|w_i|`` are kept; otherwise only ``w <- (1 - lam eta) w``.
* **SOFS** (Wu, Hoi, Mei, Yu, TKDD 2017): diagonal AROW. On a margin violation, with
  ``beta = 1/(x^T Sigma x + gamma)`` and ``alpha = max(0, 1 - y mu.x) beta``: ``mu <- mu + alpha y Sigma x``,
  ``Sigma^{-1} <- Sigma^{-1} + diag(x^2)/gamma``; then the mean is zeroed on the ``d - B``
  coordinates of largest variance. Its update is AROW's; the ``loss`` only checks the labels.
"""
from __future__ import annotations

import numpy as np

from . import _stream_kernels as K
from .sample_stream import SampleStreamLearner, StreamState, records
from ..params import non_negative, positive


class OFS(SampleStreamLearner):
    """OFS: margin update, L2-ball projection, keep the ``B`` largest ``|w_i|``.

    When ``l'(u_t) != 0`` (with the hinge: a margin violation), ``w <- (1 - lam eta) w - eta l'(u) x``,
    then the projection onto the L2 ball of radius ``1/sqrt(lam)``, then the ``B`` largest ``|w_i|``
    are kept; otherwise only ``w <- (1 - lam eta) w`` (Wang, Zhao, Hoi, Jin, TKDE 2014; module
    docstring).

    Parameters
    ----------
    budget : int, default=10
        ``B``: ``||w||_0 <= B`` after every sample.
    eta : float, default=0.1
        Step size (> 0).
    lam : float, default=1e-2
        The shrinkage weight (>= 0); the ball has radius ``1/sqrt(lam)``. ``0``: no projection and no
        shrinkage.
    loss : {"hinge", "squared_hinge", "logistic", "squared"}, default="hinge"
        The per-sample loss (``asyos.losses``; ``hinge`` is Wang et al.'s): ``squared`` for
        regression, the others for two classes.
    passes : int or "auto", default="auto"
        Passes of ``fit`` over the data, each in a fresh random order; ``"auto"``: ``ceil(2 d / n)``
        (the ECML'18 protocol).
    scale : {"maxabs", None}, default="maxabs"
        ``"maxabs"``: each feature divided by its largest absolute value seen so far
        (``asyos.learners.stream.sample_stream``); ``None``: the data as given.
    random_state : int or None, default=0
        Seed of the pass orders.
    n_features : int or None, default=None
        The number of features of dict rows (``learn_one``); ``None``: grows with the names met.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features_in_,)
        The weights, in the data's units (the learned weights divided by ``scale_``); at most
        ``budget`` non-zeros.
    raw_coef_ : ndarray of shape (n_features_in_,)
        The same as ``coef_`` (no refit).
    support_ : ndarray of int
        Indices of the non-zero weights, sorted.
    scale_ : ndarray of shape (n_features_in_,)
        Each feature's scale (1 where no value was seen, and everywhere with ``scale=None``).
    n_samples_seen_ : int
        Samples learned from (every pass counted).
    n_updates_ : int
        Steps with ``l'(u) != 0`` (with the hinge: margin violations).
    online_accuracy_ : float
        Classification: the fraction of samples predicted right before being learned from.
    classes_ : ndarray of shape (2,)
        Classification: the two labels (the second one is +1 inside).
    n_features_in_ : int
        Number of features seen by ``fit``.
    feature_names_ : list or None
        Dict rows: the feature names in column order; ``None`` for array rows.

    Examples
    --------
    >>> from asyos import OFS, make_classification
    >>> data = make_classification(n_features=50, n_informative=5, n_samples=500, seed=0)
    >>> model = OFS(budget=5, passes=10).fit(data.X, data.y)
    >>> model.support_.size
    5
    >>> bool(model.score(data.X_test, data.y_test) > 0.85)
    True
    """

    algorithm_name = "ofs"
    tuned_parameters = {"eta": "grid", "lam": "grid"}
    _parameter_constraints = {**SampleStreamLearner._parameter_constraints, "eta": [positive()],
                              "lam": [non_negative()]}

    def __init__(self, budget=10, eta=0.1, lam=1e-2, loss="hinge", passes="auto", scale="maxabs",
                 random_state=0, n_features=None):
        self.budget = budget
        self.eta = eta
        self.lam = lam
        self.loss = loss
        self.passes = passes
        self.scale = scale
        self.random_state = random_state
        self.n_features = n_features


    def _new_state(self, p, code):
        rec = records(p, [0.0, 0.0, -1.0, 0.0], rank=3, sign=-1.0)   # v, hkey, hpos, rank: _stream_kernels.ofs_rows
        return StreamState(rec=rec, scale=K.ofs_scale(), heap=np.zeros(self.budget_, dtype=np.int64),
                           counts=K.kept_counts(),
                           params=K.ofs_params(eta=self.eta, lam=self.lam, budget=self.budget_, loss=code))

    def _kernel(self, s):
        return K.ofs_rows, (s.rec, s.scale, s.heap, s.counts, s.params)

    def _weights(self, s):
        return s.rec[:, 0] * s.scale[K.OS_SCALE]

    def _kept(self, s):
        kept = s.heap[:s.counts[K.KS_KEPT]]
        return kept, s.rec[kept, 0] * s.scale[K.OS_SCALE]


class SOFS(SampleStreamLearner):
    """SOFS: diagonal AROW, keep the mean on the ``B`` coordinates of smallest variance.

    On a margin violation, with ``beta = 1/(x^T Sigma x + gamma)`` and ``alpha = max(0, 1 - y mu.x) beta``:
    ``mu <- mu + alpha y Sigma x``, ``Sigma^{-1} <- Sigma^{-1} + diag(x^2)/gamma``; then the mean is
    zeroed on the ``d - B`` coordinates of largest variance (Wu, Hoi, Mei, Yu, TKDD 2017; module
    docstring). Among equal variances (all features start at 1) the lower index is kept.

    Parameters
    ----------
    budget : int, default=10
        ``B``: ``||mu||_0 <= B`` after every sample.
    gamma : float, default=10.0
        AROW's ``r`` (> 0; not checked by ``fit``: 0 fails with ``ZeroDivisionError``); the ECML'18 code
        uses ``1e5`` on raw data and grid-searches ``1/gamma``.
    loss : {"hinge", "squared_hinge", "logistic"}, default="hinge"
        Classification only; the update is AROW's whatever it is (the loss checks the labels).
    passes : int or "auto", default="auto"
        Passes of ``fit`` over the data, each in a fresh random order; ``"auto"``: ``ceil(2 d / n)``
        (the ECML'18 protocol).
    scale : {"maxabs", None}, default="maxabs"
        ``"maxabs"``: each feature divided by its largest absolute value seen so far
        (``asyos.learners.stream.sample_stream``); ``None``: the data as given.
    random_state : int or None, default=0
        Seed of the pass orders.
    n_features : int or None, default=None
        The number of features of dict rows (``learn_one``); ``None``: grows with the names met.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features_in_,)
        The mean ``mu``, in the data's units (divided by ``scale_``); at most ``budget`` non-zeros.
    raw_coef_ : ndarray of shape (n_features_in_,)
        The same as ``coef_`` (no refit).
    support_ : ndarray of int
        Indices of the non-zero weights, sorted.
    variance_ : ndarray of shape (n_features_in_,)
        The diagonal of ``Sigma``, in the data's units (divided by ``scale_ ** 2``).
    scale_ : ndarray of shape (n_features_in_,)
        Each feature's scale (1 where no value was seen, and everywhere with ``scale=None``).
    n_samples_seen_ : int
        Samples learned from (every pass counted).
    n_updates_ : int
        Margin violations (steps that changed the model).
    online_accuracy_ : float
        The fraction of samples predicted right before being learned from.
    classes_ : ndarray of shape (2,)
        The two labels (the second one is +1 inside).
    n_features_in_ : int
        Number of features seen by ``fit``.
    feature_names_ : list or None
        Dict rows: the feature names in column order; ``None`` for array rows.

    Notes
    -----
    The variances depend on the labels only through which samples violate the margin: on dense
    Gaussian data (``make_classification(n_features=50, n_informative=5, n_samples=500)``) SOFS keeps
    none (``scale="maxabs"``) or one (``scale=None``) of the 5 informative features at ``budget=5``,
    with a test accuracy of 0.51-0.53.

    Examples
    --------
    >>> import numpy as np
    >>> from asyos import SOFS, make_classification
    >>> data = make_classification(n_features=50, n_informative=5, n_samples=500, seed=0)
    >>> model = SOFS(budget=5, scale=None).fit(data.X, data.y)
    >>> model.support_.size
    5
    >>> others = np.delete(model.variance_, model.support_)
    >>> bool(model.variance_[model.support_].max() <= others.min())
    True
    >>> model.classes_.tolist()
    [-1.0, 1.0]
    """

    _parameter_constraints = {**SampleStreamLearner._parameter_constraints, "gamma": [positive()]}

    algorithm_name = "sofs"
    tuned_parameters = {"gamma": "inverse"}
    tasks = ("classification",)

    def __init__(self, budget=10, gamma=10.0, loss="hinge", passes="auto", scale="maxabs", random_state=0,
                 n_features=None):
        self.budget = budget
        self.gamma = gamma
        self.loss = loss
        self.passes = passes
        self.scale = scale
        self.random_state = random_state
        self.n_features = n_features


    def _new_state(self, p, code):
        kept = np.arange(self.budget_, dtype=np.int64)
        heap = np.zeros(self.budget_, dtype=np.int64)
        rec = records(p, [0.0, 1.0, -1.0, 0.0], rank=3, sign=-1.0)   # mu, sigma, hpos, rank: _stream_kernels.sofs_rows
        # all variances are 1 at the start: the heap of kept features has the largest index on top
        heap[:] = kept[::-1]
        rec[heap, 2] = np.arange(self.budget_)
        return StreamState(rec=rec, heap=heap, counts=K.kept_counts(kept=self.budget_),
                           params=K.sofs_params(gamma=self.gamma))

    def _kernel(self, s):
        return K.sofs_rows, (s.rec, s.heap, s.counts, s.params)

    def _weights(self, s):
        return s.rec[:, 0].copy()

    def _kept(self, s):
        kept = s.heap[:s.counts[K.KS_KEPT]]
        return kept, s.rec[kept, 0]

    @property
    def variance_(self):
        self._check_fitted()
        return self._state.rec[:self.n_features_in_, 1] / self.scale_ ** 2
