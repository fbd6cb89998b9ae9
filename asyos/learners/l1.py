"""l1-regularized online learners: the ones B-ARDA/B-AMD are compared with (ECML'18 Sec. 5.3) and the
thesis' OPG and RDA (Ch. 4). None of them can promise a budget at every step; the l1 weight ``lam``
decides how many features survive.

* **l1-ARDA** (Duchi, Hazan, Singer 2011): ``w_{t,i} = eta t sign(-G_i) / H_i max(0, |G_i|/t - lam)``
  with ``G = sum g`` and ``H = delta + ||g_{1:t,i}||``, as in the ECML'18 code.
* **Ada-FOBOS** (ibid.): ``w <- soft(w - eta g / H, lam eta / H)`` coordinate-wise.
* **OPG** (FOBOS, Duchi and Singer 2009): ``w <- soft(w - eta g, eta lam) / (1 + eta lam2)``.
* **RDA** (Xiao 2010, l1-RDA with an l2 term): ``w_i = -soft(G_i/t, lam) / (lam2 + gamma / sqrt(t))``.

A row touches only its non-zeros: the shrinkage of the other coordinates is applied lazily, in closed
form, the next time they are read (``_stream_kernels.prox_rows``).

**Meeting a budget.** With ``lam="auto"`` (the default) ``fit`` searches ``lam`` (bisection on
``log lam``, at most 30 steps, down to a relative precision of 1e-4: the count of non-zeros can jump
there) for the model with the most non-zeros not above ``budget``, as the ECML'18 protocol
and the thesis do (the thesis' "largest number of non-zeros smaller than or equal to k");
``lam_`` is the value found and ``lam_path_`` every ``(lam, non-zeros)`` tried. ``partial_fit`` and
``learn_one`` need a numeric ``lam``.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import DivergenceError, InputError
from . import _stream_kernels as K
from .sample_stream import SampleStreamLearner, StreamState, check_rate

SEARCH_STEPS = 30
SEARCH_PRECISION = 1e-4       # stop when the bracket [lo, hi] has hi / lo < 1 + this


class L1Learner(SampleStreamLearner):
    """Base of the l1 learners: the ``lam`` search around ``fit``."""

    budgeted_every_step = False

    def _lam_value(self):
        return self.lam_ if self.lam == "auto" else self.lam

    def _check_params(self, n_features):
        if self.lam != "auto":
            check_rate(self.lam, "lam", allow_zero=True)
        elif self.budget is None:
            raise InputError("lam='auto' searches the l1 weight for a budget: give budget, or a numeric lam")

    def fit(self, X, y):
        if self.lam != "auto":
            self.lam_ = self.lam
            return super().fit(X, y)
        path = []
        best = None
        diverged = []

        def attempt(lam):
            """The number of non-zeros at ``lam``; a diverged fit counts as too many."""
            nonlocal best
            self.lam_ = lam
            try:
                super(L1Learner, self).fit(X, y)
            except DivergenceError as exc:
                diverged.append(str(exc))
                path.append((lam, None))
                return self.budget + 1
            count = int(np.count_nonzero(self.coef_))
            path.append((lam, count))
            if count <= self.budget and (best is None or count > best[1]):
                best = (lam, count, self._state, self._cache)
            return count

        hi = 1.0
        for _ in range(12):                         # the smallest power of ten that leaves nothing
            if attempt(hi) == 0:
                break
            hi *= 10.0
        lo = hi * 1e-10
        if attempt(lo) > self.budget:
            log_lo, log_hi = math.log(lo), math.log(hi)
            for _ in range(SEARCH_STEPS):
                if (best is not None and best[1] == self.budget) or log_hi - log_lo < SEARCH_PRECISION:
                    break
                mid = 0.5 * (log_lo + log_hi)
                if attempt(math.exp(mid)) > self.budget:
                    log_lo = mid
                else:
                    log_hi = mid
        self.lam_path_ = path
        if diverged and (best is None or best[1] == 0):
            raise DivergenceError(f"{self._name()}: searching the l1 weight for budget {self.budget}, every fit "
                                  f"that kept a feature diverged; {diverged[-1]}")
        if best is None:
            raise InputError(f"{self._name()}: no l1 weight up to {hi:g} leaves at most {self.budget} features")
        self.lam_, _, self._state, self._cache = best
        return self

    def _stream_params(self):
        if self.lam == "auto":
            raise InputError(f"{self._name()}.partial_fit and learn_one need a numeric lam; lam='auto' searches "
                             f"it over whole fits")
        self.lam_ = self.lam


class L1ARDA(L1Learner):
    """l1-ARDA (ECML'18's baseline). Parameters: ``budget``, ``lam`` (``"auto"`` or the l1 weight),
    ``eta``, ``delta``, ``loss``, ``passes``, ``scale``, ``random_state``, ``n_features``."""

    algorithm_name = "l1-arda"

    def __init__(self, budget=10, lam="auto", eta=0.3, delta=1e-2, loss="squared_hinge", passes="auto",
                 scale="maxabs", random_state=0, n_features=None):
        self.budget = budget
        self.lam = lam
        self.eta = eta
        self.delta = delta
        self.loss = loss
        self.passes = passes
        self.scale = scale
        self.random_state = random_state
        self.n_features = n_features

    def _check_params(self, n_features):
        super()._check_params(n_features)
        check_rate(self.eta, "eta")
        check_rate(self.delta, "delta")

    def _new_state(self, p, code):
        return StreamState(sg=np.zeros(p), sq=np.zeros(p), counts=np.zeros(3, dtype=np.int64),
                           params=np.array([self.eta, self._lam_value(), self.delta, code], dtype=float))

    def _kernel(self, s):
        return K.l1arda_rows, (s.sg, s.sq, s.counts, s.params)

    def _weights(self, s):
        t = s.counts[0]
        if t == 0:
            return np.zeros(s.sg.shape[0])
        excess = np.maximum(0.0, np.abs(s.sg) / t - s.params[1])
        return -np.sign(s.sg) * s.params[0] * t * excess / (s.params[2] + np.sqrt(s.sq))


class _Proximal(L1Learner):
    adaptive = False

    def _new_state(self, p, code):
        delta = getattr(self, "delta", 1.0)
        return StreamState(w=np.zeros(p), sq=np.zeros(p), last=np.zeros(p, dtype=np.int64),
                           counts=np.zeros(3, dtype=np.int64),
                           params=np.array([self.eta, self._lam_value(), self.lam2, delta, float(self.adaptive),
                                            code], dtype=float))

    def _kernel(self, s):
        return K.prox_rows, (s.w, s.sq, s.last, s.counts, s.params)

    def _weights(self, s):
        K.prox_settle(s.w, s.sq, s.last, s.counts[0], s.params)
        return s.w.copy()

    def _check_params(self, n_features):
        super()._check_params(n_features)
        check_rate(self.eta, "eta")
        check_rate(self.lam2, "lam2", allow_zero=True)


class AdaFOBOS(_Proximal):
    """Ada-FOBOS (ECML'18's baseline): the diagonal AdaGrad step, then soft-thresholding by
    ``lam eta / H``. Parameters: ``budget``, ``lam``, ``eta``, ``delta``, ``lam2`` (an l2 weight,
    default 0), ``loss``, ``passes``, ``scale``, ``random_state``, ``n_features``."""

    algorithm_name = "ada-fobos"
    adaptive = True

    def __init__(self, budget=10, lam="auto", eta=0.1, delta=1e-2, lam2=0.0, loss="squared_hinge",
                 passes="auto", scale="maxabs", random_state=0, n_features=None):
        self.budget = budget
        self.lam = lam
        self.eta = eta
        self.delta = delta
        self.lam2 = lam2
        self.loss = loss
        self.passes = passes
        self.scale = scale
        self.random_state = random_state
        self.n_features = n_features

    def _check_params(self, n_features):
        super()._check_params(n_features)
        check_rate(self.delta, "delta")


class OPG(_Proximal):
    """OPG / FOBOS: ``w <- soft(w - eta g, eta lam) / (1 + eta lam2)`` (l1, plus l2 with ``lam2 > 0``,
    the thesis' choice for classification). Parameters: ``budget``, ``lam``, ``lam2``, ``eta``,
    ``loss``, ``passes``, ``scale``, ``random_state``, ``n_features``."""

    algorithm_name = "opg"

    def __init__(self, budget=10, lam="auto", lam2=0.0, eta=0.01, loss="squared", passes="auto",
                 scale="maxabs", random_state=0, n_features=None):
        self.budget = budget
        self.lam = lam
        self.lam2 = lam2
        self.eta = eta
        self.loss = loss
        self.passes = passes
        self.scale = scale
        self.random_state = random_state
        self.n_features = n_features


class RDA(L1Learner):
    """l1-RDA (Xiao 2010): ``w_i = -soft(G_i / t, lam) / (lam2 + gamma / sqrt(t))``.
    Parameters: ``budget``, ``lam``, ``lam2``, ``gamma``, ``loss``, ``passes``, ``scale``,
    ``random_state``, ``n_features``."""

    algorithm_name = "rda"

    def __init__(self, budget=10, lam="auto", lam2=0.0, gamma=10.0, loss="squared", passes="auto",
                 scale="maxabs", random_state=0, n_features=None):
        self.budget = budget
        self.lam = lam
        self.lam2 = lam2
        self.gamma = gamma
        self.loss = loss
        self.passes = passes
        self.scale = scale
        self.random_state = random_state
        self.n_features = n_features

    def _check_params(self, n_features):
        super()._check_params(n_features)
        check_rate(self.gamma, "gamma")
        check_rate(self.lam2, "lam2", allow_zero=True)

    def _new_state(self, p, code):
        return StreamState(sg=np.zeros(p), counts=np.zeros(3, dtype=np.int64),
                           params=np.array([self._lam_value(), self.lam2, self.gamma, code], dtype=float))

    def _kernel(self, s):
        return K.rda_rows, (s.sg, s.counts, s.params)

    def _weights(self, s):
        t = s.counts[0]
        if t == 0:
            return np.zeros(s.sg.shape[0])
        lam1, lam2, gamma = s.params[0], s.params[1], s.params[2]
        gbar = s.sg / t
        return -np.sign(gbar) * np.maximum(0.0, np.abs(gbar) - lam1) / (lam2 + gamma / math.sqrt(t))
