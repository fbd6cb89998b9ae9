"""``ridge="auto"``: how much ridge Online Substitution selects and refits under when samples are few.

With p >> n, the exchange rule minimises the training loss over which features enter, and features
that fit a few rows exactly win: at k = 10 on a set of n = 280 rows and p = 100,000 binary features
OS reached training accuracy 1.000. The ridge of the exchange variant
(``asyos.learners.substitution.substitution``: the loss plus ``(alpha / 2) ||w||^2`` on the scaled
columns, in the exchange, the decrease check and the refit) makes such features cost their weight,
but no single ``alpha`` suits every set, so ``auto`` chooses ``alpha`` from ``RIDGE_GRID`` by
``FOLDS``-fold cross-validation on the training rows, scoring each ``alpha`` by the held-out loss
of OS fitted (selection and refit) on the other folds, and keeps the smallest ``alpha`` of the
lowest mean loss. It does so only when samples are few next to the features (``engages``:
``p >= FEATURE_RATIO * n``, the exchange variant, at least two rows of every class per fold);
elsewhere ``alpha = 0``.

Why it is an option and not the default: on 24 cells of p >> n sets (10 of the 11 sets of
``bench_real_selection.py --small-n``, all but the weak fingerprints, and arcene and dexter; k = 10 and
50, 5-fold CV), OS's mean test accuracy was 0.747 with ``alpha = 0`` and 0.746 with ``auto`` (0.748
choosing among six alphas from 0 to 10, by held-out loss or accuracy; 0.806 had each fold taken its
best alpha): the choice on 48-480 training rows is too noisy to find the alpha that helps. It
gained up to 0.10 (madelon's 100 rows, farm_ads's 300) and lost up to 0.13 (arcene's 60 rows) and
0.10 on arcene at k = 50, where OS leads the batch selectors.

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


def choose_ridge(columns, y, loss, fit, seed: int, grid=RIDGE_GRID, folds: int = FOLDS):
    """``(alpha, scores)``: the ``alpha`` of ``grid`` whose fits have the lowest mean held-out loss
    (the smallest on ties) and every alpha's mean loss. ``columns``: the pool's raw values (n x d);
    ``fit(X, y, alpha)``: a fitted estimator with ``coef_`` and ``intercept_`` in the data's units."""
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
            held_out.append(loss.value(y[test], u))
        scores[float(alpha)] = float(np.mean(held_out))
    best = min(scores.values())
    return next(a for a, s in scores.items() if s == best), scores
