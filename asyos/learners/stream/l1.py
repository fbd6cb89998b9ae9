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

**Meeting a budget.** With ``lam="auto"`` (the default) ``fit`` searches ``lam`` for the model with
exactly ``budget`` non-zeros; when no ``lam`` gives exactly that many (the count of an online l1 model
jumps: on dexter (maxabs-scaled, squared hinge) from 0 at ``lam = 1`` to 45 just below it, so
Ada-FOBOS and OPG kept no feature at budget 10 on arcene, dexter, basehock, pcmac and farm_ads),
the model with the fewest above it, whose ``budget`` largest weights are reported
(``budget_rule="at_least"``, the default; ``raw_coef_`` is that cut online model, ``coef_`` its refit).
``budget_rule="at_most"`` keeps the model with the most non-zeros not above ``budget``, as the ECML'18
protocol and the thesis do (the thesis' "largest number of non-zeros smaller than or equal to k").
Either way the search is ``budget_search.search_l1_weight``:
from ``lam = 1`` by decades (at most 12 each way) to a bracket, then bisection on ``log lam`` down
to a relative precision of 1e-4 (the count of non-zeros can jump there) in at most 30 steps, stopping
at the first fit with exactly ``budget``; a diverged fit counts as too many features. ``lam_`` is the
value found and ``lam_path_`` every ``(lam, non-zeros)`` tried (``None`` for a diverged fit). The
bracket was ``[1e-10 h, h]`` with ``h`` the first decade leaving no feature; the decade around the
budget needs 41-42% fewer fits for the same selected and true-feature counts in all 32 OPG/RDA units
of ``bench_thesis_sfsa.py --quick`` (185 -> 109 and 168 -> 97 fits); ``lam_`` moves within the range
that gives those counts (test RMSE within 0.07, AUC within 0.02, either way).

``partial_fit`` with ``lam="auto"`` on an unfitted model runs that search on its first batch (each
try a fresh one-pass ``partial_fit`` of the batch) and keeps the model found; every later
``partial_fit`` / ``learn_one``, and any on a model already fitted, continues with ``lam_``.

**The step.** ``eta`` (``gamma`` for RDA) may be ``"auto"``, OPG's and RDA's default
(``auto_step``): the former default value, reduced tenfold and the fit (the whole ``lam`` search)
redone when it diverges. With ``"auto"`` a search whose best model has fewer than ``budget``
features because weights above every non-diverged one with too many features diverged counts as
diverged too (a smaller step may reach the budget there). ``eta_`` / ``gamma_`` is the value used.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import DivergenceError, InputError
from . import _stream_kernels as K
from .auto_step import AutoStep
from ..budget_search import search_l1_weight
from .sample_stream import SampleStreamLearner, StreamState
from ..params import BOOLEAN, StrOptions, count, non_negative, positive

SEARCH = {"start": 1.0, "factor": 10.0, "max_expand": 12, "max_bisect": 30, "max_steps": 43, "precision": 1e-4}


class L1Learner(AutoStep, SampleStreamLearner):
    """Base of the l1 learners: the ``lam`` search around ``fit`` and the first ``partial_fit``."""

    budgeted_every_step = False

    def _lam_value(self):
        return self.lam_ if self.lam == "auto" else self.lam

    tuned_parameters = {"eta": "grid"}          # lam follows the budget (lam="auto")
    _parameter_constraints = {**SampleStreamLearner._parameter_constraints, "budget": [count(1), None],
                              "lam": [non_negative(), StrOptions({"auto"})], "eta": [positive(), StrOptions({"auto"})],
                              "delta": [positive()], "lam2": [non_negative()],
                              "gamma": [positive(), StrOptions({"auto"})], "refit": BOOLEAN,
                              "budget_rule": [StrOptions({"at_least", "at_most"})]}

    def _check_params(self, n_features):
        if self.lam == "auto" and self.budget is None:
            raise InputError("lam='auto' searches the l1 weight for a budget: give budget, or a numeric lam")

    def fit(self, X, y, checkpoint=None):
        def run(last):
            if self.lam != "auto":
                self.lam_ = self.lam
                return super(L1Learner, self).fit(X, y, checkpoint=checkpoint)
            if checkpoint is not None:            # every fit of the search saved and resumed: resumable
                from . import resumable
                return resumable.search_lam(self, X, y, checkpoint, lambda saved, outer: resumable.fit_in_chunks(
                    self, X, y, checkpoint, saved, outer), strict=not last)
            return self._search_lam(lambda: super(L1Learner, self).fit(X, y), strict=not last)
        return self._fit_adapting(run, X, y)

    def partial_fit(self, X, y, classes=None):
        if self.lam != "auto":
            self.lam_ = self.lam
        elif not hasattr(self, "_state"):        # the first batch of lam="auto": search lam on it
            def first_batch():
                self.__dict__.pop("_state", None)   # every try starts afresh on the batch
                super(L1Learner, self).partial_fit(X, y, classes=classes)
            try:
                return self._fit_adapting(lambda last: self._search_lam(first_batch, strict=not last), X, y)
            except Exception:
                self.__dict__.pop("_state", None)   # a failed first batch leaves the model unfitted
                raise
        return super().partial_fit(X, y, classes=classes)

    def _fitted_coef(self):
        """The online model, with ``lam="auto"`` and ``budget_rule="at_least"`` cut to its ``budget`` largest
        weights (in the scaled space the learner works in; ties to the lower index)."""
        cache = getattr(self, "_cache", None)
        w, support = super()._fitted_coef()
        if cache is not None or self.lam != "auto" or getattr(self, "budget_rule", "at_least") != "at_least" \
                or self.budget is None or support.size <= self.budget:
            return w, support
        strength = self._cut_strength(w[support] * self.scale_[support], support)
        keep = np.sort(support[np.lexsort((support, -strength))[:self.budget]])
        cut = np.zeros_like(w)
        cut[keep] = w[keep]
        self._cache = (cut, keep)
        return self._cache

    def _cut_strength(self, scaled, support):
        """How strong each of the online model's features ``support`` is when it is cut to ``budget``:
        ``|w|`` in the scaled space (the AdaGrad learners weigh it by ``H``, below)."""
        return np.abs(scaled)

    def _adagrad_strength(self, scaled, support):
        """``H_i |w_i|`` with ``H = delta + sqrt(sum g^2)``: ECML'18's linear truncation score (eq. 4). AdaGrad's
        per-coordinate step makes a rare feature's weight large; weighed by ``H`` the cut keeps the features the
        data moved often. Measured (Ada-FOBOS's defaults, one 70/30 split of ten shared and generated sets, k = 10
        and 50): mean test accuracy 0.644 with ``|w|``, 0.669 with ``H |w|``, higher in 6 of 20 cells and lower in
        none (arcene k = 10: 0.550 -> 0.717, farm_ads k = 50: 0.530 -> 0.718)."""
        state = self._state
        return np.abs(scaled) * (self.delta + np.sqrt(state.sq[support]))

    def _online_nnz(self) -> int:
        """The online model's number of non-zeros, before any cut (a fit replayed from a checkpoint has no
        state, only its count: ``resumable.search_lam``)."""
        state = self.__dict__.get("_state")
        if state is None:
            return int(np.count_nonzero(self._cache[0]))
        return int(np.count_nonzero(self._weights(state)))

    def _search_lam(self, run, strict=False):
        """``search_l1_weight`` over ``run()`` (a fit at ``self.lam_``); keeps the model it chose.
        ``strict``: a model with fewer than ``budget`` features where divergence may have cost the
        features (``_diverged_near``) raises ``DivergenceError``, for a smaller step to try again."""
        self._check_params(None)                  # lam='auto' without a budget is named before any fit
        diverged = []

        def attempt(lam, warm):
            self.lam_ = lam
            try:
                run()
            except DivergenceError as exc:
                diverged.append(str(exc))
                return None, None
            self._fitted_coef()                   # a diverged fit raises DivergenceError here
            return (self._state, self._cache), self._online_nnz()

        found = search_l1_weight(attempt, self.budget, warm=False, **SEARCH)
        self.lam_path_ = found.path
        best = found.at_most() if getattr(self, "budget_rule", "at_least") == "at_most" else found.at_least()
        if diverged and (best is None or best.nnz == 0 or (strict and best.nnz < self.budget
                                                           and _diverged_near(found.path, self.budget))):
            which = "every fit that kept a feature" if best is None or best.nnz == 0 else \
                f"the fits that could have kept more than {best.nnz} features"
            raise DivergenceError(f"{self._name()}: searching the l1 weight for budget {self.budget}, {which} "
                                  f"diverged; {diverged[-1]}")
        if best is None:
            top = max(weight for weight, _ in found.path)
            raise InputError(f"{self._name()}: no l1 weight up to {top:g} leaves at most {self.budget} features")
        self.lam_ = best.weight
        self._state, self._cache = best.model
        return self

    def _suspect_hint(self):
        step = f"{self.step_parameter}={self._step_value():g}"
        path = getattr(self, "lam_path_", None) if self.lam == "auto" else None
        if not path:
            return f"the l1 weight lam={self._lam_value():g} ({step}) decides how many features survive: lower it"
        over = [(w, n) for w, n in path if n is not None and n > self.budget_]
        failed = sum(n is None for _, n in path)
        text = f"the search of the l1 weight ended at lam_={self.lam_:.4g} ({step}, {len(path)} weights tried"
        if over:
            w, n = min(over, key=lambda item: (item[1], -item[0]))
            text += f"; the nearest count above the budget was {n} features at lam={w:.4g}"
        if failed:
            text += f"; {failed} fits diverged"
        return text + "): give a numeric lam, a smaller step, or use a budgeted learner (b-arda, b-amd)"

    def _stream_params(self):
        """A stream goes on with the searched ``lam_``; ``learn_one`` on an unfitted model with
        ``lam='auto'`` has no batch to search it on."""
        self._keep_step()
        if self.lam != "auto":
            self.lam_ = self.lam
        elif getattr(self, "lam_", None) is None:
            raise InputError(f"{self._name()}.learn_one on an unfitted model needs a numeric lam; lam='auto' "
                             f"searches it over a fit or the first partial_fit")


def _diverged_near(path, budget):
    """Whether a fit diverged at an l1 weight above every weight that gave more than ``budget``
    features: there the count was not known, and it may have been the budget."""
    over = [w for w, n in path if n is not None and n > budget]
    return any(n is None and w > max(over, default=0.0) for w, n in path)


class L1ARDA(L1Learner):
    """l1-ARDA (Duchi, Hazan, Singer 2011; ECML'18's baseline): AdaGrad's dual averaging with an l1
    term, ``w_{t,i} = eta t sign(-G_i) / H_i max(0, |G_i|/t - lam)`` with ``G = sum g`` and
    ``H = delta + ||g_{1:t,i}||`` (module docstring).

    Parameters
    ----------
    budget : int or None, default=10
        The non-zeros the ``lam="auto"`` search aims at (``budget_rule``). With a numeric ``lam`` the l1 weight
        alone decides how many features survive (``fit`` warns when fewer than ``budget`` do);
        ``None`` needs a numeric ``lam``.
    lam : float or "auto", default="auto"
        The l1 weight (>= 0). ``"auto"``: ``fit`` (and the first ``partial_fit``) searches it for a model
        with ``budget`` non-zeros (``budget_rule``; module docstring, "Meeting a budget").
    eta : float or "auto", default=0.3
        Step size (> 0). ``"auto"``: 0.3, reduced tenfold and the fit redone on divergence
        (``asyos.learners.stream.auto_step``).
    delta : float, default=1e-2
        AdaGrad's ``delta`` in ``H``.
    loss : {"squared_hinge", "hinge", "logistic", "squared"}, default="squared_hinge"
        The per-sample loss (``asyos.losses``): the first three for two classes, ``squared`` for
        regression.
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
    refit : bool, default=True
        ``fit`` ends by fitting the kept features again (at most ``budget``) with an intercept and the
        learner's loss (the hinge as squared hinge): ``coef_`` and ``intercept_`` are that model until
        the learner learns again, ``raw_coef_`` the online one. ``False``: the paper's online model.
    budget_rule : {"at_least", "at_most"}, default="at_least"
        The model the ``lam="auto"`` search keeps: ``budget`` features (``"at_least"``) or the most not above
        ``budget``, as ECML'18 and the thesis (module docstring, "Meeting a budget").

    Attributes
    ----------
    coef_ : ndarray of shape (n_features_in_,)
        The weights, in the data's units: after ``fit`` with ``refit``, the refit's; else the online
        model's (the learned weights divided by ``scale_``).
    intercept_ : float
        The refit's intercept (after ``fit`` with ``refit``; the online model has none).
    refitted_ : bool
        Whether ``coef_`` is the refit (``fit`` with ``refit``, no learning since).
    raw_coef_ : ndarray of shape (n_features_in_,)
        The online model's weights, in the data's units.
    support_ : ndarray of int
        Indices of the non-zero weights, sorted.
    lam_ : float
        The l1 weight used (with ``lam="auto"``: the one the search found).
    lam_path_ : list of (float, int or None)
        ``lam="auto"``: every ``(lam, non-zeros)`` tried (``None``: that fit diverged).
    eta_ : float
        The step size used.
    scale_ : ndarray of shape (n_features_in_,)
        Each feature's scale (1 where no value was seen, and everywhere with ``scale=None``).
    n_samples_seen_ : int
        Samples learned from (every pass counted).
    n_updates_ : int
        Steps that changed the model (non-zero loss gradient).
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
    >>> from asyos import L1ARDA, make_classification
    >>> data = make_classification(n_features=50, n_informative=5, n_samples=500, seed=0)
    >>> model = L1ARDA(budget=5).fit(data.X, data.y)
    >>> model.support_.tolist()
    [7, 13, 24, 27, 49]
    >>> data.true_support.tolist()
    [7, 13, 24, 27, 49]
    >>> bool(model.score(data.X_test, data.y_test) > 0.9)
    True
    """

    algorithm_name = "l1-arda"
    _cut_strength = L1Learner._adagrad_strength
    auto_start = 0.3

    def __init__(self, budget=10, lam="auto", eta=0.3, delta=1e-2, loss="squared_hinge", passes="auto",
                 scale="maxabs", random_state=0, n_features=None, refit=True, budget_rule="at_least"):
        self.budget = budget
        self.lam = lam
        self.eta = eta
        self.delta = delta
        self.loss = loss
        self.passes = passes
        self.scale = scale
        self.random_state = random_state
        self.n_features = n_features
        self.refit = refit
        self.budget_rule = budget_rule

    def _new_state(self, p, code):
        return StreamState(sg=np.zeros(p), sq=np.zeros(p), counts=K.l1_counts(),
                           params=K.l1arda_params(eta=self._step_value(), lam=self._lam_value(), delta=self.delta,
                                                  loss=code))

    def _kernel(self, s):
        return K.l1arda_rows, (s.sg, s.sq, s.counts, s.params)

    def _weights(self, s):
        t = s.counts[K.L_SEEN]
        if t == 0:
            return np.zeros(s.sg.shape[0])
        excess = np.maximum(0.0, np.abs(s.sg) / t - s.params[K.A_LAM])
        return -np.sign(s.sg) * s.params[K.A_ETA] * t * excess / (s.params[K.A_DELTA] + np.sqrt(s.sq))


class _Proximal(L1Learner):
    adaptive = False

    def _new_state(self, p, code):
        delta = getattr(self, "delta", 1.0)
        return StreamState(w=np.zeros(p), sq=np.zeros(p), last=np.zeros(p, dtype=np.int64), counts=K.l1_counts(),
                           params=K.prox_params(eta=self._step_value(), lam1=self._lam_value(), lam2=self.lam2,
                                                delta=delta, adaptive=float(self.adaptive), loss=code))

    def _kernel(self, s):
        return K.prox_rows, (s.w, s.sq, s.last, s.counts, s.params)

    def _weights(self, s):
        K.prox_settle(s.w, s.sq, s.last, s.counts[K.L_SEEN], s.params)
        return s.w.copy()


class AdaFOBOS(_Proximal):
    """Ada-FOBOS (Duchi, Hazan, Singer 2011; ECML'18's baseline): the diagonal AdaGrad step, then
    soft-thresholding, ``w <- soft(w - eta g / H, lam eta / H) / (1 + lam2 eta / H)`` with
    ``H = delta + ||g_{1:t,i}||`` (module docstring; ``_stream_kernels.prox_rows``).

    Parameters
    ----------
    budget : int or None, default=10
        The non-zeros the ``lam="auto"`` search aims at (``budget_rule``). With a numeric ``lam`` the l1 weight
        alone decides how many features survive (``fit`` warns when fewer than ``budget`` do);
        ``None`` needs a numeric ``lam``.
    lam : float or "auto", default="auto"
        The l1 weight (>= 0). ``"auto"``: ``fit`` (and the first ``partial_fit``) searches it for a model
        with ``budget`` non-zeros (``budget_rule``; module docstring, "Meeting a budget").
    eta : float or "auto", default=0.1
        Step size (> 0). ``"auto"``: 0.1, reduced tenfold and the fit redone on divergence
        (``asyos.learners.stream.auto_step``).
    delta : float, default=1e-2
        AdaGrad's ``delta`` in ``H``.
    lam2 : float, default=0.0
        An l2 weight (>= 0).
    loss : {"squared_hinge", "hinge", "logistic", "squared"}, default="squared_hinge"
        The per-sample loss (``asyos.losses``): the first three for two classes, ``squared`` for
        regression.
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
    refit : bool, default=True
        ``fit`` ends by fitting the kept features again (at most ``budget``) with an intercept and the
        learner's loss (the hinge as squared hinge): ``coef_`` and ``intercept_`` are that model until
        the learner learns again, ``raw_coef_`` the online one. ``False``: the paper's online model.
    budget_rule : {"at_least", "at_most"}, default="at_least"
        The model the ``lam="auto"`` search keeps: ``budget`` features (``"at_least"``) or the most not above
        ``budget``, as ECML'18 and the thesis (module docstring, "Meeting a budget").

    Attributes
    ----------
    coef_ : ndarray of shape (n_features_in_,)
        The weights, in the data's units: after ``fit`` with ``refit``, the refit's; else the online
        model's (the learned weights divided by ``scale_``).
    intercept_ : float
        The refit's intercept (after ``fit`` with ``refit``; the online model has none).
    refitted_ : bool
        Whether ``coef_`` is the refit (``fit`` with ``refit``, no learning since).
    raw_coef_ : ndarray of shape (n_features_in_,)
        The online model's weights, in the data's units.
    support_ : ndarray of int
        Indices of the non-zero weights, sorted.
    lam_ : float
        The l1 weight used (with ``lam="auto"``: the one the search found).
    lam_path_ : list of (float, int or None)
        ``lam="auto"``: every ``(lam, non-zeros)`` tried (``None``: that fit diverged).
    eta_ : float
        The step size used.
    scale_ : ndarray of shape (n_features_in_,)
        Each feature's scale (1 where no value was seen, and everywhere with ``scale=None``).
    n_samples_seen_ : int
        Samples learned from (every pass counted).
    n_updates_ : int
        Steps that changed the model (non-zero loss gradient).
    online_accuracy_ : float
        Classification: the fraction of samples predicted right before being learned from.
    classes_ : ndarray of shape (2,)
        Classification: the two labels (the second one is +1 inside).
    n_features_in_ : int
        Number of features seen by ``fit``.
    feature_names_ : list or None
        Dict rows: the feature names in column order; ``None`` for array rows.

    Notes
    -----
    The model is the last iterate, whose non-zeros include what the last steps' gradients moved. On
    dense data (``make_classification(n_features=50, n_informative=5, n_samples=500)``) the
    ``lam="auto"`` search reaches 5 non-zeros only at l1 weights that have shrunk the learned weights
    away: it keeps 1 of the 5 informative features, the same 5 features for every ``eta`` from 1e-3
    to 1. A numeric ``lam``, as below, or a budgeted learner (``BudgetedARDA``) suits such data.

    Examples
    --------
    >>> from asyos import AdaFOBOS, make_classification
    >>> data = make_classification(n_features=50, n_informative=5, n_samples=500, seed=0)
    >>> model = AdaFOBOS(budget=None, lam=0.03, passes=5).fit(data.X, data.y)
    >>> bool(set(data.true_support) <= set(model.support_))
    True
    >>> bool(model.score(data.X_test, data.y_test) > 0.9)
    True
    """

    algorithm_name = "ada-fobos"
    _cut_strength = L1Learner._adagrad_strength
    adaptive = True
    auto_start = 0.1

    def __init__(self, budget=10, lam="auto", eta=0.1, delta=1e-2, lam2=0.0, loss="squared_hinge",
                 passes="auto", scale="maxabs", random_state=0, n_features=None, refit=True,
                 budget_rule="at_least"):
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
        self.refit = refit
        self.budget_rule = budget_rule


class OPG(_Proximal):
    """OPG / FOBOS (Duchi and Singer 2009; thesis Ch. 4): ``w <- soft(w - eta g, eta lam) / (1 + eta lam2)``
    (l1, plus l2 with ``lam2 > 0``, the thesis' choice for classification).

    Parameters
    ----------
    budget : int or None, default=10
        The non-zeros the ``lam="auto"`` search aims at (``budget_rule``). With a numeric ``lam`` the l1 weight
        alone decides how many features survive (``fit`` warns when fewer than ``budget`` do);
        ``None`` needs a numeric ``lam``.
    lam : float or "auto", default="auto"
        The l1 weight (>= 0). ``"auto"``: ``fit`` (and the first ``partial_fit``) searches it for a model
        with ``budget`` non-zeros (``budget_rule``; module docstring, "Meeting a budget").
    lam2 : float, default=0.0
        The l2 weight (>= 0).
    eta : float or "auto", default="auto"
        Step size (> 0). ``"auto"``: 0.01, reduced tenfold and the fit redone on divergence
        (``asyos.learners.stream.auto_step``).
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
        The number of features of dict rows (``learn_one``); ``None``: grows with the names met.
    refit : bool, default=True
        ``fit`` ends by fitting the kept features again (at most ``budget``) with an intercept and the
        learner's loss (the hinge as squared hinge): ``coef_`` and ``intercept_`` are that model until
        the learner learns again, ``raw_coef_`` the online one. ``False``: the paper's online model.
    budget_rule : {"at_least", "at_most"}, default="at_least"
        The model the ``lam="auto"`` search keeps: ``budget`` features (``"at_least"``) or the most not above
        ``budget``, as ECML'18 and the thesis (module docstring, "Meeting a budget").

    Attributes
    ----------
    coef_ : ndarray of shape (n_features_in_,)
        The weights, in the data's units: after ``fit`` with ``refit``, the refit's; else the online
        model's (the learned weights divided by ``scale_``).
    intercept_ : float
        The refit's intercept (after ``fit`` with ``refit``; the online model has none).
    refitted_ : bool
        Whether ``coef_`` is the refit (``fit`` with ``refit``, no learning since).
    raw_coef_ : ndarray of shape (n_features_in_,)
        The online model's weights, in the data's units.
    support_ : ndarray of int
        Indices of the non-zero weights, sorted.
    lam_ : float
        The l1 weight used (with ``lam="auto"``: the one the search found).
    lam_path_ : list of (float, int or None)
        ``lam="auto"``: every ``(lam, non-zeros)`` tried (``None``: that fit diverged).
    eta_ : float
        The step size used (with ``eta="auto"``: after any reduction).
    scale_ : ndarray of shape (n_features_in_,)
        Each feature's scale (1 where no value was seen, and everywhere with ``scale=None``).
    n_samples_seen_ : int
        Samples learned from (every pass counted).
    n_updates_ : int
        Steps that changed the model (non-zero loss gradient).
    online_accuracy_ : float
        Classification: the fraction of samples predicted right before being learned from.
    classes_ : ndarray of shape (2,)
        Classification: the two labels (the second one is +1 inside).
    n_features_in_ : int
        Number of features seen by ``fit``.
    feature_names_ : list or None
        Dict rows: the feature names in column order; ``None`` for array rows.

    Notes
    -----
    The model is the last iterate, whose non-zeros include what the last steps' gradients moved. On
    dense data (``make_regression(n_features=50, n_informative=5, n_samples=500)``) the
    ``lam="auto"`` search reaches 5 non-zeros only at l1 weights that have shrunk the learned weights
    away: it keeps 1 of the 5 informative features, the same 5 features for every ``eta`` from 1e-3
    to 1. A numeric ``lam``, as below, or a budgeted learner (``BudgetedARDA``) suits such data.

    Examples
    --------
    >>> from asyos import OPG, make_regression
    >>> data = make_regression(n_features=50, n_informative=5, n_samples=500, seed=0)
    >>> model = OPG(budget=None, lam=0.01, passes=10).fit(data.X, data.y)
    >>> bool(set(data.true_support) <= set(model.support_))
    True
    >>> bool(model.score(data.X_test, data.y_test) > 0.9)
    True
    >>> model.eta_
    0.01
    """

    algorithm_name = "opg"
    auto_start = 0.01

    def __init__(self, budget=10, lam="auto", lam2=0.0, eta="auto", loss="squared", passes="auto",
                 scale="maxabs", random_state=0, n_features=None, refit=True, budget_rule="at_least"):
        self.budget = budget
        self.lam = lam
        self.lam2 = lam2
        self.eta = eta
        self.loss = loss
        self.passes = passes
        self.scale = scale
        self.random_state = random_state
        self.n_features = n_features
        self.refit = refit
        self.budget_rule = budget_rule


class RDA(L1Learner):
    """l1-RDA (Xiao 2010; thesis Ch. 4): ``w_i = -soft(G_i / t, lam) / (lam2 + gamma / sqrt(t))`` with
    ``G = sum g`` over the ``t`` samples seen.

    Parameters
    ----------
    budget : int or None, default=10
        The non-zeros the ``lam="auto"`` search aims at (``budget_rule``). With a numeric ``lam`` the l1 weight
        alone decides how many features survive (``fit`` warns when fewer than ``budget`` do);
        ``None`` needs a numeric ``lam``.
    lam : float or "auto", default="auto"
        The l1 weight (>= 0). ``"auto"``: ``fit`` (and the first ``partial_fit``) searches it for a model
        with ``budget`` non-zeros (``budget_rule``; module docstring, "Meeting a budget").
    lam2 : float, default=0.0
        The l2 weight (>= 0).
    gamma : float or "auto", default="auto"
        The step's ``gamma`` (> 0; the step is ``1 / gamma``). ``"auto"``: 10, multiplied by 10 and the
        fit redone on divergence (``asyos.learners.stream.auto_step``).
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
        The number of features of dict rows (``learn_one``); ``None``: grows with the names met.
    refit : bool, default=True
        ``fit`` ends by fitting the kept features again (at most ``budget``) with an intercept and the
        learner's loss (the hinge as squared hinge): ``coef_`` and ``intercept_`` are that model until
        the learner learns again, ``raw_coef_`` the online one. ``False``: the paper's online model.
    budget_rule : {"at_least", "at_most"}, default="at_least"
        The model the ``lam="auto"`` search keeps: ``budget`` features (``"at_least"``) or the most not above
        ``budget``, as ECML'18 and the thesis (module docstring, "Meeting a budget").

    Attributes
    ----------
    coef_ : ndarray of shape (n_features_in_,)
        The weights, in the data's units: after ``fit`` with ``refit``, the refit's; else the online
        model's (the learned weights divided by ``scale_``).
    intercept_ : float
        The refit's intercept (after ``fit`` with ``refit``; the online model has none).
    refitted_ : bool
        Whether ``coef_`` is the refit (``fit`` with ``refit``, no learning since).
    raw_coef_ : ndarray of shape (n_features_in_,)
        The online model's weights, in the data's units.
    support_ : ndarray of int
        Indices of the non-zero weights, sorted.
    lam_ : float
        The l1 weight used (with ``lam="auto"``: the one the search found).
    lam_path_ : list of (float, int or None)
        ``lam="auto"``: every ``(lam, non-zeros)`` tried (``None``: that fit diverged).
    gamma_ : float
        The ``gamma`` used (with ``gamma="auto"``: after any increase).
    scale_ : ndarray of shape (n_features_in_,)
        Each feature's scale (1 where no value was seen, and everywhere with ``scale=None``).
    n_samples_seen_ : int
        Samples learned from (every pass counted).
    n_updates_ : int
        Steps that changed the model (non-zero loss gradient).
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
    >>> from asyos import RDA, make_classification
    >>> data = make_classification(n_features=50, n_informative=5, n_samples=500, seed=0)
    >>> model = RDA(budget=5, loss="squared_hinge").fit(data.X, data.y)
    >>> model.support_.tolist()
    [7, 13, 24, 27, 49]
    >>> bool(model.score(data.X_test, data.y_test) > 0.85)
    True
    >>> model.gamma_
    10.0
    """

    algorithm_name = "rda"
    tuned_parameters = {"gamma": "inverse"}
    step_parameter = "gamma"
    step_grows = True
    auto_start = 10.0

    def __init__(self, budget=10, lam="auto", lam2=0.0, gamma="auto", loss="squared", passes="auto",
                 scale="maxabs", random_state=0, n_features=None, refit=True, budget_rule="at_least"):
        self.budget = budget
        self.lam = lam
        self.lam2 = lam2
        self.gamma = gamma
        self.loss = loss
        self.passes = passes
        self.scale = scale
        self.random_state = random_state
        self.n_features = n_features
        self.refit = refit
        self.budget_rule = budget_rule

    def _new_state(self, p, code):
        return StreamState(sg=np.zeros(p), counts=K.l1_counts(),
                           params=K.rda_params(lam1=self._lam_value(), lam2=self.lam2, gamma=self._step_value(),
                                               loss=code))

    def _kernel(self, s):
        return K.rda_rows, (s.sg, s.counts, s.params)

    def _weights(self, s):
        t = s.counts[K.L_SEEN]
        if t == 0:
            return np.zeros(s.sg.shape[0])
        lam1, lam2, gamma = s.params[K.R_LAM1], s.params[K.R_LAM2], s.params[K.R_GAMMA]
        gbar = s.sg / t
        return -np.sign(gbar) * np.maximum(0.0, np.abs(gbar) - lam1) / (lam2 + gamma / math.sqrt(t))
