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

    Parameters: ``budget``; ``eta`` and ``lam`` (the ball has radius ``1/sqrt(lam)``; ``lam = 0``: no
    projection and no shrinkage); ``loss`` (default ``hinge``, Wang et al.'s); ``passes``, ``scale``,
    ``random_state``, ``n_features`` as in ``asyos.learners.stream.sample_stream``.
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
        return StreamState(rec=rec, scale=K.ofs_scale(), heap=np.zeros(self.budget, dtype=np.int64),
                           counts=K.kept_counts(),
                           params=K.ofs_params(eta=self.eta, lam=self.lam, budget=self.budget, loss=code))

    def _kernel(self, s):
        return K.ofs_rows, (s.rec, s.scale, s.heap, s.counts, s.params)

    def _weights(self, s):
        return s.rec[:, 0] * s.scale[K.OS_SCALE]

    def _kept(self, s):
        kept = s.heap[:s.counts[K.KS_KEPT]]
        return kept, s.rec[kept, 0] * s.scale[K.OS_SCALE]


class SOFS(SampleStreamLearner):
    """SOFS: diagonal AROW, keep the mean on the ``B`` coordinates of smallest variance.

    Parameters: ``budget``; ``gamma`` (AROW's ``r``; the ECML'18 code uses ``1e5`` on raw data and
    grid-searches ``1/gamma``); ``loss`` (classification; the update is AROW's whatever it is);
    ``passes``, ``scale``, ``random_state``, ``n_features`` as in ``asyos.learners.stream.sample_stream``. Among equal
    variances (all features start at 1) the lower index is kept.
    """

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
        kept = np.arange(self.budget, dtype=np.int64)
        heap = np.zeros(self.budget, dtype=np.int64)
        rec = records(p, [0.0, 1.0, -1.0, 0.0], rank=3, sign=-1.0)   # mu, sigma, hpos, rank: _stream_kernels.sofs_rows
        # all variances are 1 at the start: the heap of kept features has the largest index on top
        heap[:] = kept[::-1]
        rec[heap, 2] = np.arange(self.budget)
        return StreamState(rec=rec, heap=heap, counts=K.kept_counts(kept=self.budget),
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
