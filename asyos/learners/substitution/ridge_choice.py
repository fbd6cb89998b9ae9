"""``ridge="auto"`` (the default): how much ridge Online Substitution selects and refits under when samples are few.

With p >> n, the exchange rule minimises the training loss over which features enter, and features
that fit a few rows exactly win: at k = 10 on a set of n = 280 rows and p = 100,000 binary features
OS reached training accuracy 1.000. The ridge of the exchange variant
(``asyos.learners.substitution.substitution``: the loss plus ``(alpha / 2) ||w||^2`` on the scaled
columns, in the exchange, the decrease check and the refit) makes such features cost their weight,
but no single ``alpha`` suits every set, so ``auto`` chooses ``alpha`` from ``RIDGE_GRID`` by
``FOLDS``-fold cross-validation on the training rows, scoring each ``alpha`` by the held-out loss
(at the predictions' best scale, below) of OS fitted (selection and refit) on the other folds. It
takes a ridge only where its mean loss is at least ``MARGIN`` (15%) below that of ``alpha = 0``, else
none (``pick``). It does so only when samples are few, next to the features and in number
(``engages``: ``p >= FEATURE_RATIO * n``, ``n <= MAX_ROWS``, the exchange variant, at least two rows of
every class per fold); elsewhere ``alpha = 0``, OS as before the ridge (where OS leads the batch
selectors with n large: the full text sets, gisette, the regression sets). Every cell below where the
choice moved the score has at most 480 training rows; on farm_ads' 3314 it moved it by 0.004 at most
(the 2000-feature pool), and on KDD'16's problems (``make_regression`` / ``make_classification``, p =
20000 and 100000, s = 100, n = 1715 and 1994) it chose ``alpha = 0`` at 4 to 13 times OS's CPU.

The rule was chosen on held-out accuracy (``bench_real_selection.py`` protocol, 5-fold CV, k = 10 and
50, the choice made inside each training fold), on 70 cells: the ``--small-n`` sets, three draws each,
and full arcene, dexter. Against OS without a ridge (0.742 on average; ``SelectKBest`` 0.739):

* the earlier ``auto`` (a pool of the 2000 features of largest marginal gain, the lowest loss, no
  margin): 0.758, but below OS in 14 of the 38 cells where OS is at or above ``SelectKBest`` (the
  "lead" cells), arcene k = 50 0.810 -> 0.710: on the pool its inner folds favoured alpha = 1 (inner
  accuracy 0.82 against 0.79) where on all the columns they favour alpha = 0 (0.76 against 0.70), as
  the test folds do: the pool keeps the features strong alone and drops the weak ones that OS at
  alpha = 0 combines, so it understates alpha = 0. The pool is therefore every feature up to
  ``POOL_CELLS`` values (``pool_size``); arcene k = 50 then chooses alpha = 0 in 4 folds of 5 (0.795),
  and with the margin below in all 5 (0.810);
* the margin then keeps alpha = 0 where the folds disagree: every feature and no margin 0.758, below
  OS in 15 lead cells (-0.56 summed); margin 0.05 0.760 (12, -0.34); 0.10 0.758 (7, -0.14); 0.15
  0.754 (3, -0.02, worst -0.013); 0.20 0.750 (1). Rules tried on the 2000-feature pool instead (a
  margin of 2-30%, a ridge only when it wins in 3 or 4 of the 4 inner folds, or beats alpha = 0 by 0.5-3
  standard errors) lost arcene k = 50 in every case (0.705-0.770);
* checked on data not used to choose: draws 4 and 5 of the ``--small-n`` sets (44 cells), margin 0.15:
  0.745 against OS 0.736 (``SelectKBest`` 0.717), at or above the better of the two in 27 cells (OS 24),
  below OS in 1 of the 24 lead cells (-0.005); no margin 0.752 but 8 lead cells down (-0.45, worst -0.15);
* the grid: choosing between 0 and 10 only (8 fits instead of 12) gives the same (0.752 on the 70 cells,
  1 lead cell down by 0.01; 0.745 on the 44) as 0, 1 and 10 (0.754, 3 down by 0.02 in all; 0.745); 0 and 1
  only, less (0.746; 0.739).

Each alpha is scored by the held-out loss of its fits' predictions at their best scale
(``scale_free_loss``): without a ridge OS separates the training rows and its weights grow without
bound, so the plain held-out loss punished the size of the weights, not the features chosen, and
chose a ridge where none was needed (the full text sets at k = 50: alpha = 1 in every fold, basehock
0.962 -> 0.930, pcmac 0.907 -> 0.874; at the best scale alpha = 0).

The cost: 8 fits on 3/4 of the rows, on the compiled step (``kernels.many_runs``), their passes over the
features nearly all of it. Process CPU of ``auto`` against ``ridge=0`` over the benchmark's folds
(``--small-n --draws 3``, two runs at a time): 1.4-5.9x on the dense gene sets of 2000 and 6000 columns,
4-15x on the others (fingerprints, 280 x 100,000 sparse bits: 3.5 s a fit at k = 10, 11 s at k = 50); the
choice among 0, 1 and 10 cost a third more. With ``n <= MAX_ROWS`` the pool holds at least 30,000 features.
Sequential OS and the simulator take the pool from their columns; under ``mpiexec`` each worker sends
its shard's best ``pool_size`` (index and gain) and the central rank reads the pool's columns and
chooses (``asyos.distributed.ridge_pool``). Every way runs the same sequential fits on the same pool,
so they choose the same ``alpha`` (up to ties of equal gains across shards).
"""
from __future__ import annotations

import math
import warnings

import numpy as np

RIDGE_GRID = (0.0, 10.0)
FOLDS = 4
FEATURE_RATIO = 5          # auto engages when p >= FEATURE_RATIO * n and n <= MAX_ROWS
MAX_ROWS = 1000
MARGIN = 0.15              # a ridge is taken only if it lowers alpha = 0's held-out loss by this fraction
POOL_CELLS = 30_000_000    # the pool: every feature while n * p <= POOL_CELLS, else
MIN_POOL = 2000            # max(MIN_POOL, POOL_PER_FEATURE * k, POOL_CELLS / n) features
POOL_PER_FEATURE = 20


def engages(n_samples: int, n_features: int, variant: str = "exchange") -> bool:
    """Whether ``ridge="auto"`` chooses by cross-validation (else ``alpha = 0``)."""
    return (variant == "exchange" and n_features >= FEATURE_RATIO * n_samples
            and 2 * FOLDS <= n_samples <= MAX_ROWS)


def pool_size(n_samples: int, n_features: int, budget: int) -> int:
    """How many features of largest marginal gain the choice is made on: all of them while the
    ``n x p`` block is at most ``POOL_CELLS`` values."""
    return int(min(n_features, max(MIN_POOL, POOL_PER_FEATURE * budget, POOL_CELLS // max(int(n_samples), 1))))


def cross_validation_steps(size: int) -> int:
    """About how many OS steps the choice takes on a pool of ``size`` features (3 passes a fit)."""
    return len(RIDGE_GRID) * FOLDS * 3 * size


def best_positions(indices, gains, size: int) -> np.ndarray:
    """Positions of the ``size`` largest gains, largest first (equal gains: the lower index first)."""
    return np.lexsort((np.asarray(indices), -np.asarray(gains, dtype=np.float64)))[:size]


def top_features(indices, gains, size: int) -> np.ndarray:
    """The ``size`` features of largest gain (equal gains: the lower index first), sorted by index."""
    indices = np.asarray(indices, dtype=np.int64)
    return np.sort(indices[best_positions(indices, gains, size)])


def inner_folds(y, task: str, folds: int, seed: int):
    """``folds`` (train, held-out) row splits of ``y``: stratified for classification; ``None`` when a
    class has fewer rows than ``folds`` (the choice then falls back to ``alpha = 0``)."""
    from sklearn.model_selection import KFold, StratifiedKFold
    if task == "classification":
        counts = np.unique(y, return_counts=True)[1]
        if counts.size < 2 or counts.min() < folds:
            return None
        return list(StratifiedKFold(folds, shuffle=True, random_state=seed).split(np.zeros(y.size), y))
    return list(KFold(folds, shuffle=True, random_state=seed).split(np.zeros(y.size)))


def scale_free_loss(loss, y, u) -> float:
    """The mean loss of the predictions ``u`` at their best scale, ``min_{c >= 0} loss(y, c u)``: what
    the fit's direction (its features and their relative weights) is worth on rows it did not see,
    not how far its weights grew. ``c`` is searched on a log scale (``exp(-20)`` to ``exp(10)`` times
    ``u / max |u|``) and ``c = 0`` (the constant 0) is a candidate."""
    y = np.asarray(y, dtype=float)
    u = np.asarray(u, dtype=float)
    zero = loss.value(y, np.zeros_like(u))
    top = float(np.max(np.abs(u))) if u.size else 0.0
    if not np.isfinite(top) or top == 0.0:
        return zero
    from scipy.optimize import minimize_scalar
    v = u / top
    best = minimize_scalar(lambda t: loss.value(y, math.exp(t) * v), bounds=(-20.0, 10.0), method="bounded",
                           options={"xatol": 1e-3})
    return float(min(best.fun, zero))


def choose_ridge(columns, y, loss, fit, seed: int, grid=RIDGE_GRID, folds: int = FOLDS, margin: float = MARGIN):
    """``(alpha, scores)``: the ``alpha`` of ``grid`` whose fits have the lowest mean held-out loss at
    the predictions' best scale (``scale_free_loss``; the smallest ``alpha`` on ties) among 0 and the
    alphas whose loss is at most ``1 - margin`` times alpha = 0's, and every alpha's mean. ``columns``:
    the pool's raw values (n x d, dense or sparse); ``fit(X, y, alpha)``: a fitted estimator with
    ``coef_`` and ``intercept_`` in the data's units."""
    splits = inner_folds(np.asarray(y), loss.task, folds, seed)
    if splits is None:
        return 0.0, {}
    scores = {}
    for alpha in grid:
        held_out = []
        for train, test in splits:
            with warnings.catch_warnings():     # a fold's fit on a quarter fewer rows is not the user's run
                warnings.simplefilter("ignore")
                model = fit(columns[train], y[train], float(alpha))
            u = np.asarray(columns[test] @ model.coef_, dtype=float).ravel() + model.intercept_
            held_out.append(scale_free_loss(loss, y[test], u))
        scores[float(alpha)] = float(np.mean(held_out))
    return pick(scores, margin), scores


def pick(scores: dict, margin: float = MARGIN) -> float:
    """The alpha of lowest score among 0 and those at most ``1 - margin`` times alpha = 0's score (all of
    them when 0 was not tried); the smallest alpha on ties."""
    plain = scores.get(0.0)
    allowed = {a: s for a, s in scores.items() if plain is None or a == 0.0 or s <= (1.0 - margin) * plain}
    best = min(allowed.values())
    return min(a for a, s in allowed.items() if s == best)
