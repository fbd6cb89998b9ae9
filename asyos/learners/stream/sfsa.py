"""SFSA and TSGD (Sun, thesis Ch. 2): mini-batch stochastic gradient with hard thresholding.

* **SFSA** (Alg. 1): ``beta <- beta - eta (grad of the mini-batch's mean loss + lam beta)``, then only the
  ``M_t`` coordinates of largest ``sd_j |beta_j|`` stay in the model, with the annealing schedule
  ``M_t = k + (p - k) max(0, (T - t)/(t mu + T))`` (``t`` counts mini-batches, ``T`` = ``horizon``).
  Removed features never return. ``sd_j`` is the running standard deviation of feature ``j`` (Remark
  1: thresholding ``sigma_x beta`` makes the rule work on unnormalized data). ``method`` adds Nesterov's
  momentum (``nesterov``, the thesis' SFSA-AG) or Adam (``adam``) to the plain step (``sgd``).
* **TSGD** (Alg. 2): the same step without annealing; ``truncate="end"`` keeps every feature in the
  iterate and selects the ``k`` largest at the end, ``"every"`` hard-thresholds to ``k`` after every
  mini-batch (features may return), as the thesis' classification experiments do.

The model a user sees (``coef_``, ``predict``) always has at most ``k`` features: while ``M_t > k``
(or with ``truncate="end"``), it is the current iterate cut to its ``k`` largest scores. Work per
mini-batch is ``O(nnz + p)`` (numpy; the ``p`` is the thresholding), i.e. ``O(p / batch_size)``
per sample on top of the non-zeros.

``eta="auto"`` (the default of both) starts from the former default and is reduced tenfold, the fit
redone, when the fit diverges (``auto_step``); ``eta_`` is the value used.

The intercept. The thesis' data are centred, so its model has none; on data that are not (a regression
target of mean 80), the online model's predictions miss by the mean and its training R^2 was below 0
(cpu_act, diabetes). With ``fit_intercept=True`` (the default) the model is ``u = x . beta + b``: ``b``
is one more coordinate, of value 1 in every row, that takes the same step (``sgd``, ``nesterov`` or
``adam``) with the derivative ``mean(l'(u))`` and no ``lam``, and is never thresholded nor counted in
the budget. In the simulator (``asyos.learners.stream.stream_simulator``) a worker's stale prediction
takes the central model's current ``b``. ``fit_intercept=False`` is the thesis' algorithm
(``bench_thesis_sfsa.py`` runs it).
"""
from __future__ import annotations

import numpy as np

from ...truncation import annealing_schedule, keep_top_k
from . import _stream_kernels as K
from .auto_step import AutoStep
from .sample_stream import SampleStreamLearner, StreamState, margins_arg
from ..params import BOOLEAN, StrOptions, count, non_negative, positive

METHODS = ("sgd", "nesterov", "adam")
TRUNCATIONS = ("end", "every")
MOMENTUM = 0.9
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


class _MiniBatchThresholding(AutoStep, SampleStreamLearner):
    """Mini-batch gradient steps plus a thresholding rule (``_keep_count``)."""

    method = "sgd"
    fixed_width = True              # the annealing schedule and the thresholding run over all p features

    tuned_parameters = {"eta": "grid"}
    _parameter_constraints = {**SampleStreamLearner._parameter_constraints, "eta": [positive(), StrOptions({"auto"})],
                              "lam": [non_negative()], "batch_size": [count(1)], "method": [StrOptions(set(METHODS))],
                              "mu": [non_negative()], "horizon": [count(1), StrOptions({"auto"})],
                              "truncate": [StrOptions(set(TRUNCATIONS))], "refit": BOOLEAN, "fit_intercept": BOOLEAN}

    def _new_state(self, p, code):
        return StreamState(beta=np.zeros(p), active=np.ones(p, dtype=bool), velocity=np.zeros(p),
                           second=np.zeros(p), sum_x=np.zeros(p), sum_x2=np.zeros(p), code=code,
                           horizon=None, counts=K.batch_counts(), bias=np.zeros(4))

    def fit(self, X, y, checkpoint=None):
        return self._fit_adapting(lambda last: super(_MiniBatchThresholding, self).fit(X, y, checkpoint=checkpoint),
                                  X, y)

    def _stream_params(self):
        self._keep_step()

    def _run_rows(self, s, indptr, indices, data, y, order, margins=None):
        if s.horizon is None:
            s.horizon = self._horizon(order.shape[0])
        b = self.batch_size
        dl = np.empty(b)
        centring = self._centring()
        for start in range(0, order.shape[0], b):
            rows = order[start:start + b]
            K.batch_moments(indptr, indices, data, rows, s.sum_x, s.sum_x2)
            if centring:
                self._bias(s)[3] += y[rows].sum()
            s.counts[K.M_SEEN] += rows.shape[0]
            batch = (indptr, indices, data, y, rows, margins[start:start + b] if margins is not None else None,
                     dl[:rows.shape[0]])
            self._step(s, batch, centring)
            s.counts[K.M_BATCHES] += 1
            self._threshold(s)

    def _gradient(self, s, batch, point, bias, centring):
        """``(g, g_b)``: the mini-batch's mean loss gradient at ``(point, bias)`` plus ``lam point``, on the
        active features (``centring``: on the rows centred by the running means), and its derivative in
        the intercept (the mean of the loss derivatives)."""
        indptr, indices, data, y, rows, margins, dl = batch
        margins, given = margins_arg(margins)
        changed, mistakes = K.batch_dloss(s.code, indptr, indices, data, y, rows, point,
                                          margins, given, dl, bias)
        s.counts[K.M_MISTAKES] += mistakes          # (with Nesterov: at the look-ahead point)
        if changed:
            s.counts[K.M_UPDATES] += 1
        g = self.lam * point
        K.batch_gradient(indptr, indices, data, rows, dl, 1.0 / rows.shape[0], g)
        gb = float(np.mean(dl))
        if centring:                                # the gradient on centred rows, (x - mean(x)) l'(u)
            g -= s.sum_x * (gb / max(int(s.counts[K.M_SEEN]), 1))
        g[~s.active] = 0.0
        return g, gb

    def _centring(self):
        """Whether the intercept is the squared loss' closed form (``_centred``) rather than a step."""
        return self.fit_intercept and self._loss_name() == "squared"

    def _bias(self, s):
        """The intercept's ``[value, velocity or first moment, second moment, sum of y]`` (``None`` without
        one)."""
        if not self.fit_intercept:
            return None
        if getattr(s, "bias", None) is None:        # a state saved before the intercept existed
            s.bias = np.zeros(4)
        return s.bias

    def _centred(self, s, point):
        """Squared loss: the intercept that minimises the seen rows' loss given ``point``, ``mean(y) -
        mean(x) . point`` (the thesis' centred data, centred by running means)."""
        n = max(int(s.counts[K.M_SEEN]), 1)
        return (s.bias[3] - s.sum_x @ point) / n

    def _step(self, s, batch, centring):
        """One step of ``method`` on ``beta`` and the intercept alike (the intercept: no ``lam``, never
        thresholded; ``centring``: its closed form, ``_centred``, instead of a step)."""
        eta = self._step_value()
        b = self._bias(s)
        moving = b is not None and not centring
        b = np.zeros(4) if b is None else b         # without an intercept it stays 0
        nesterov = self.method == "nesterov"
        point = s.beta + MOMENTUM * s.velocity if nesterov else s.beta      # where the gradient is taken
        if centring:
            b[0] = self._centred(s, point)
        g, gb = self._gradient(s, batch, point, b[0] + MOMENTUM * b[1] if nesterov else b[0], centring)
        if nesterov:
            s.velocity = MOMENTUM * s.velocity - eta * g
            s.beta += s.velocity
            if moving:
                b[1] = MOMENTUM * b[1] - eta * gb
                b[0] += b[1]
        elif self.method == "adam":
            b1, b2 = ADAM_BETAS
            t = s.counts[K.M_BATCHES] + 1
            s.velocity = b1 * s.velocity + (1 - b1) * g
            s.second = b2 * s.second + (1 - b2) * g * g
            step = (s.velocity / (1 - b1 ** t)) / (np.sqrt(s.second / (1 - b2 ** t)) + ADAM_EPS)
            s.beta -= eta * step
            if moving:
                b[1] = b1 * b[1] + (1 - b1) * gb
                b[2] = b2 * b[2] + (1 - b2) * gb * gb
                b[0] -= eta * (b[1] / (1 - b1 ** t)) / (np.sqrt(b[2] / (1 - b2 ** t)) + ADAM_EPS)
        else:
            s.beta -= eta * g
            if moving:
                b[0] -= eta * gb
        s.beta[~s.active] = 0.0

    def _online_intercept(self, s):
        """``b`` plus the mean contribution ``mean(x_j) beta_j`` of the iterate's features the shown model
        leaves out (its ``_weights``): they are predicted at their mean, not at 0. ``O(p)``, so it is kept
        with the shown model's weights (``_fitted_coef``'s cache, renewed when the model learns): a stream
        of ``predict_one`` calls costs each row's non-zeros."""
        if not self.fit_intercept or getattr(s, "bias", None) is None:
            return None
        shown = self._fitted_coef()
        kept = self.__dict__.get("_intercept_of")
        if kept is not None and kept[0] is shown:
            return kept[1]
        w = self._weights(s)
        if self._centring():
            value = float(self._centred(s, w))
        else:
            value = float(s.bias[0] + (s.sum_x / max(int(s.counts[K.M_SEEN]), 1)) @ (s.beta - w))
        self._intercept_of = (shown, value)
        return value

    def _scores(self, s, index=slice(None)):
        """``sd_j |beta_j|`` (of the features ``index``): Remark 1's scale-free thresholding score."""
        n = max(int(s.counts[K.M_SEEN]), 1)
        mean = s.sum_x[index] / n
        var = np.maximum(s.sum_x2[index] / n - mean * mean, 0.0)
        return np.sqrt(var) * np.abs(s.beta[index])

    def _threshold(self, s):
        raise NotImplementedError

    def _weights(self, s):
        if not np.all(np.isfinite(s.beta)):
            return s.beta.copy()                  # diverged: the facade names it
        w = np.zeros(s.beta.shape[0])
        keep = keep_top_k(self._scores(s), self.budget_)
        w[keep] = s.beta[keep]
        return w

    def _horizon(self, rows_in_first_call):
        if self.horizon == "auto":
            return max(1, -(-rows_in_first_call // self.batch_size))
        return self.horizon


class SFSA(_MiniBatchThresholding):
    """Stochastic feature selection with annealing (thesis Alg. 1).

    Per mini-batch ``beta <- beta - eta (grad of the mini-batch's mean loss + lam beta)``, then only the
    ``M_t`` coordinates of largest ``sd_j |beta_j|`` stay in the model (Remark 1), with
    ``M_t = k + (p - k) max(0, (T - t)/(t mu + T))``; removed features never return (module docstring).

    Parameters
    ----------
    budget : int, default=10
        ``k``: the features left once the schedule reaches it; the model shown (``coef_``) never has
        more.
    eta : float or "auto", default="auto"
        Step size (> 0). ``"auto"``: 0.1, reduced tenfold and the fit redone on divergence
        (``asyos.learners.stream.auto_step``). With 0.1 fixed, madelon's (squared loss) weights grew to
        6e35 in one fit and the online model's training R^2 was -1e76; ``"auto"`` sees the blow-up and
        settles on 0.01 there, and keeps 0.1 on cpu_act and diabetes.
    lam : float, default=1e-4
        The l2 weight (>= 0) of ``f``.
    mu : float, default=10.0
        The annealing parameter (>= 0; 10 as in the thesis' OFSA).
    horizon : int or "auto", default="auto"
        ``T``, in mini-batches; ``"auto"``: the mini-batches of one pass over the data of the first
        ``fit``/``partial_fit``.
    batch_size : int, default=25
        Samples per mini-batch (the thesis').
    method : {"sgd", "nesterov", "adam"}, default="sgd"
        The plain step, Nesterov's momentum (0.9; the thesis' SFSA-AG) or Adam.
    loss : {"squared", "squared_hinge", "hinge", "logistic"}, default="squared"
        The per-sample loss (``asyos.losses``): ``squared`` for regression, the others for two
        classes.
    passes : int or "auto", default="auto"
        Passes of ``fit`` over the data, each in a fresh random order; ``"auto"``: ``ceil(2 d / n)``
        (the ECML'18 protocol).
    scale : {"maxabs", None}, default="maxabs"
        ``"maxabs"``: each feature divided by its largest absolute value seen so far
        (``asyos.learners.stream.sample_stream``); ``None``: the data as given.
    random_state : int or None, default=0
        Seed of the pass orders.
    n_features : int or None, default=None
        The number of features of dict rows (``learn_one``); required for dict rows, since the
        schedule runs over all ``p`` features.
    refit : bool, default=True
        ``fit`` ends by fitting the kept features again (at most ``budget``) with an intercept and the
        learner's loss (the hinge as squared hinge): ``coef_`` and ``intercept_`` are that model until
        the learner learns again, ``raw_coef_`` the online one. ``False``: the paper's online model.
    fit_intercept : bool, default=True
        The online model learns an intercept: an unpenalised coordinate that takes the same step as
        ``beta`` (module docstring, "The intercept"). ``False``: the thesis' model, for centred data.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features_in_,)
        After ``fit`` with ``refit``, the refit's weights on the kept features; else the online model's:
        the weights, in the data's units (divided by ``scale_``), of the iterate cut to its ``budget``
        largest scores ``sd_j |beta_j|`` (while ``M_t > k`` the iterate holds more).
    intercept_ : float
        The refit's intercept after ``fit`` with ``refit``; else the online model's (``fit_intercept``;
        without one it is not set).
    refitted_ : bool
        Whether ``coef_`` is the refit (``fit`` with ``refit``, no learning since).
    raw_coef_ : ndarray of shape (n_features_in_,)
        The online model's weights, in the data's units.
    support_ : ndarray of int
        Indices of the non-zero weights, sorted.
    eta_ : float
        The step size used (with ``eta="auto"``: after any reduction).
    scale_ : ndarray of shape (n_features_in_,)
        Each feature's scale (1 where no value was seen, and everywhere with ``scale=None``).
    n_samples_seen_ : int
        Samples learned from (every pass counted).
    n_updates_ : int
        Mini-batches with a non-zero loss gradient.
    online_accuracy_ : float
        Classification: the fraction of samples predicted right before being learned from (by the
        iterate).
    classes_ : ndarray of shape (2,)
        Classification: the two labels (the second one is +1 inside).
    n_features_in_ : int
        Number of features seen by ``fit``.
    feature_names_ : list or None
        Dict rows: the feature names in column order; ``None`` for array rows.

    Examples
    --------
    >>> from asyos import SFSA, make_regression
    >>> data = make_regression(n_features=50, n_informative=5, n_samples=500, seed=0)
    >>> model = SFSA(budget=5, method="nesterov", passes=5).fit(data.X, data.y)
    >>> model.support_.size
    5
    >>> bool(model.score(data.X_test, data.y_test) > 0.9)
    True
    >>> model.n_samples_seen_
    2500
    """

    algorithm_name = "sfsa"
    auto_start = 0.1

    def __init__(self, budget=10, eta="auto", lam=1e-4, mu=10.0, horizon="auto", batch_size=25, method="sgd",
                 loss="squared", passes="auto", scale="maxabs", random_state=0, n_features=None, refit=True,
                 fit_intercept=True):
        self.budget = budget
        self.eta = eta
        self.lam = lam
        self.mu = mu
        self.horizon = horizon
        self.batch_size = batch_size
        self.method = method
        self.loss = loss
        self.passes = passes
        self.scale = scale
        self.random_state = random_state
        self.n_features = n_features
        self.refit = refit
        self.fit_intercept = fit_intercept


    def _threshold(self, s):
        p = s.beta.shape[0]
        keep = annealing_schedule(int(s.counts[K.M_BATCHES]), self.budget_, p, s.horizon, self.mu)
        active = np.flatnonzero(s.active)
        if active.size <= keep:
            return
        dropped = np.delete(active, keep_top_k(self._scores(s, active), keep))
        s.active[dropped] = False
        s.beta[dropped] = 0.0
        s.velocity[dropped] = 0.0
        s.second[dropped] = 0.0


class TSGD(_MiniBatchThresholding):
    """Truncated stochastic gradient descent (thesis Alg. 2).

    SFSA's mini-batch step without annealing: ``truncate="end"`` keeps every feature in the iterate and
    selects the ``k`` largest scores ``sd_j |beta_j|`` at the end; ``"every"`` hard-thresholds to ``k``
    after every mini-batch (features may return), as the thesis' classification experiments do.

    Parameters
    ----------
    budget : int, default=10
        ``k``: the features of the model shown (``coef_``).
    eta : float or "auto", default="auto"
        Step size (> 0). ``"auto"``: 0.03, reduced tenfold and the fit redone on divergence
        (``asyos.learners.stream.auto_step``).
    lam : float, default=1e-4
        The l2 weight (>= 0) of ``f``.
    truncate : {"end", "every"}, default="end"
        Select the ``k`` features at the end, or after every mini-batch.
    batch_size : int, default=25
        Samples per mini-batch.
    loss : {"squared", "squared_hinge", "hinge", "logistic"}, default="squared"
        The per-sample loss (``asyos.losses``): ``squared`` for regression, the others for two
        classes.
    passes : int or "auto", default="auto"
        Passes of ``fit`` over the data, each in a fresh random order; ``"auto"``: ``ceil(2 d / n)``
        (the ECML'18 protocol).
    scale : {"maxabs", None}, default="maxabs"
        ``"maxabs"``: each feature divided by its largest absolute value seen so far
        (``asyos.learners.stream.sample_stream``); ``None``: the data as given.
    random_state : int or None, default=0
        Seed of the pass orders.
    n_features : int or None, default=None
        The number of features of dict rows (``learn_one``); required for dict rows, since the
        truncation runs over all ``p`` features.
    refit : bool, default=True
        ``fit`` ends by fitting the kept features again (at most ``budget``) with an intercept and the
        learner's loss (the hinge as squared hinge): ``coef_`` and ``intercept_`` are that model until
        the learner learns again, ``raw_coef_`` the online one. ``False``: the paper's online model.
    fit_intercept : bool, default=True
        The online model learns an intercept: an unpenalised coordinate that takes the same step as
        ``beta`` (module docstring, "The intercept"). ``False``: the thesis' model, for centred data.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features_in_,)
        After ``fit`` with ``refit``, the refit's weights on the kept features; else the online model's:
        the weights, in the data's units (divided by ``scale_``), of the iterate cut to its ``budget``
        largest scores (with ``truncate="end"`` the iterate holds every feature).
    intercept_ : float
        The refit's intercept after ``fit`` with ``refit``; else the online model's (``fit_intercept``;
        without one it is not set).
    refitted_ : bool
        Whether ``coef_`` is the refit (``fit`` with ``refit``, no learning since).
    raw_coef_ : ndarray of shape (n_features_in_,)
        The online model's weights, in the data's units.
    support_ : ndarray of int
        Indices of the non-zero weights, sorted.
    eta_ : float
        The step size used (with ``eta="auto"``: after any reduction).
    scale_ : ndarray of shape (n_features_in_,)
        Each feature's scale (1 where no value was seen, and everywhere with ``scale=None``).
    n_samples_seen_ : int
        Samples learned from (every pass counted).
    n_updates_ : int
        Mini-batches with a non-zero loss gradient.
    online_accuracy_ : float
        Classification: the fraction of samples predicted right before being learned from (by the
        iterate).
    classes_ : ndarray of shape (2,)
        Classification: the two labels (the second one is +1 inside).
    n_features_in_ : int
        Number of features seen by ``fit``.
    feature_names_ : list or None
        Dict rows: the feature names in column order; ``None`` for array rows.

    Examples
    --------
    >>> from asyos import TSGD, make_regression
    >>> data = make_regression(n_features=50, n_informative=5, n_samples=500, seed=0)
    >>> model = TSGD(budget=5, passes=10).fit(data.X, data.y)
    >>> model.support_.tolist()
    [7, 13, 24, 27, 49]
    >>> data.true_support.tolist()
    [7, 13, 24, 27, 49]
    >>> model.eta_
    0.03
    """

    algorithm_name = "tsgd"
    auto_start = 0.03

    def __init__(self, budget=10, eta="auto", lam=1e-4, truncate="end", batch_size=25, loss="squared",
                 passes="auto", scale="maxabs", random_state=0, n_features=None, refit=True,
                 fit_intercept=True):
        self.budget = budget
        self.eta = eta
        self.lam = lam
        self.truncate = truncate
        self.batch_size = batch_size
        self.loss = loss
        self.passes = passes
        self.scale = scale
        self.random_state = random_state
        self.n_features = n_features
        self.refit = refit
        self.fit_intercept = fit_intercept


    def _horizon(self, rows_in_first_call):
        return 0

    def _threshold(self, s):
        if self.truncate == "every":
            kept = keep_top_k(self._scores(s), self.budget_)
            mask = np.ones(s.beta.shape[0], dtype=bool)
            mask[kept] = False
            s.beta[mask] = 0.0
