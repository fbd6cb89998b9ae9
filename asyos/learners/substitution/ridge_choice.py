"""``ridge="auto"``: how much ridge Online Substitution selects and refits under when samples are few.

With p >> n, the exchange rule minimises the training loss over which features enter, and features
that fit a few rows exactly win: at k = 10 on a set of n = 280 rows and p = 100,000 binary features
OS reached training accuracy 1.000. The ridge of the exchange variant
(``asyos.learners.substitution.substitution``: the loss plus ``(alpha / 2) ||w||^2`` on the scaled
columns, in the exchange, the decrease check and the refit) makes such features cost their weight,
but no single ``alpha`` suits every set, so ``auto`` chooses ``alpha`` from ``RIDGE_GRID`` by
``FOLDS``-fold cross-validation on the training rows, scoring each ``alpha`` by the held-out loss
(at the predictions' best scale, below) of OS fitted (selection and refit) on the other folds, and
keeps the smallest ``alpha`` of the lowest mean loss. It does so only when samples are few next to
the features (``engages``: ``p >= FEATURE_RATIO * n``, the exchange variant, at least two rows of
every class per fold); elsewhere ``alpha = 0``.

Each alpha is scored by the held-out loss of its fits' predictions at their best scale
(``scale_free_loss``): without a ridge OS separates the training rows and its weights grow without
bound, so the plain held-out loss punished the size of the weights, not the features chosen, and
chose a ridge where none was needed. Measured (``bench_real_selection.py``, 5-fold CV, mean test
accuracy): on the full text sets at k = 50, where OS leads the batch selectors, the plain loss chose
alpha = 1 in every fold and cost 0.03 (basehock 0.962 -> 0.930, pcmac 0.907 -> 0.874); at the best
scale it keeps alpha = 0 there. Over the 66 cells of ``--small-n --draws 3``: 0.750 with the plain
loss, 0.754 at the best scale (OS 0.736, ``SelectKBest`` 0.737), below OS in 12 of the 35 cells where
OS is at or above ``SelectKBest`` (15 with the plain loss).

Why it is an option and not the default: arcene at k = 50 (160 training rows, where OS leads the
batch selectors by 0.13) takes alpha = 1 in every fold whatever the score (the loss plain or at its
best scale, the accuracy, 10 inner folds instead of 4) and loses 0.10 (0.810 -> 0.710); with the pool
widened to all 10,000 features (and the plain loss) it takes alpha = 10 and loses 0.045. No rule on n, p and k kept it
from there without giving up most of the gain elsewhere (an inner-fold size rule, n >= 100, loses in
2 of 35 lead cells but keeps half the gain: 0.746). Earlier studies: the choice among six alphas, by
held-out loss or accuracy, was no better; ``alpha`` fixed at 0.1-10 helps some sets and hurts others.

The cross-validation runs on a pool of the features, the ``pool_size(p, k)`` of largest marginal
gain (``asyos.learners.substitution.screening``: the gain of each feature alone, the order OS visits
them in), not on all ``p``: the pool is what the three ways of running need in common. Sequential
OS and the simulator take it from their columns; under ``mpiexec`` each worker sends its shard's
best ``pool_size`` (index and gain) and the central rank reads the pool's columns and chooses
(``asyos.distributed.ridge_pool``). Every way runs the same sequential fits on the same pool, so they
choose the same ``alpha`` (up to ties of equal gains across shards). Its 12 short fits run on the
compiled step (``kernels.many_runs``): on the 62 x 2000 gene set (first training fold, the fastest of
3, process CPU) one ``auto`` fit takes 0.20-0.34 s against 1.8-2.2 s on the numpy step, and 1.5-2.4
times a fit without a ridge (1.2-3.6 times on the gene sets, the fingerprints and arcene).
"""
from __future__ import annotations

import math
import warnings

import numpy as np

RIDGE_GRID = (0.0, 1.0, 10.0)
FOLDS = 4
FEATURE_RATIO = 5          # auto engages when p >= FEATURE_RATIO * n
MIN_POOL = 2000            # the pool: max(MIN_POOL, POOL_PER_FEATURE * k) features, at most p
POOL_PER_FEATURE = 20


def engages(n_samples: int, n_features: int, variant: str = "exchange") -> bool:
    """Whether ``ridge="auto"`` chooses by cross-validation (else ``alpha = 0``)."""
    return variant == "exchange" and n_features >= FEATURE_RATIO * n_samples and n_samples >= 2 * FOLDS


def pool_size(n_features: int, budget: int) -> int:
    """How many features of largest marginal gain the choice is made on."""
    return int(min(n_features, max(MIN_POOL, POOL_PER_FEATURE * budget)))


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


def choose_ridge(columns, y, loss, fit, seed: int, grid=RIDGE_GRID, folds: int = FOLDS):
    """``(alpha, scores)``: the ``alpha`` of ``grid`` whose fits have the lowest mean held-out loss at
    the predictions' best scale (``scale_free_loss``; the smallest ``alpha`` on ties) and every alpha's
    mean. ``columns``: the pool's raw values (n x d); ``fit(X, y, alpha)``: a fitted estimator with
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
    best = min(scores.values())
    return next(a for a, s in scores.items() if s == best), scores
