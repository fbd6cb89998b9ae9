"""The ECML'18 protocol's parameter choice: a grid search on training accuracy.

Every value of ``eta``, ``lam`` (and ``1/gamma`` for SOFS) is taken from
``{10^-1, 10^-1.5, ..., 10^-8}`` (``ECML_GRID``); each combination is fitted on the training data
and scored there (accuracy for classification, minus the RMSE for regression); the best one wins.
Many points often reach a training accuracy of 1; among tied points the one with the best online
accuracy (each sample predicted before it was learned from, which the ECML'18 code records) wins,
then the first in grid order. ``--tune`` on the command line does this before the final fit. The
``SelectionWarning`` of each point's fit is dropped (its score says the same); the refit of the
best point warns as any fit does.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np

from ...errors import InputError, SelectionWarning

ECML_GRID = tuple(float(10.0 ** -(k / 2)) for k in range(2, 17))       # 1e-1, 1e-1.5, ..., 1e-8


def tuning_grid(estimator, values=ECML_GRID) -> dict:
    """The parameters the protocol searches for ``estimator``: its class names them in
    ``tuned_parameters`` (``"grid"``: the values; ``"inverse"``: their inverses, for SOFS's and RDA's
    ``gamma``, the ECML'18 grid of ``1/gamma``)."""
    tuned = getattr(type(estimator), "tuned_parameters", None)
    if not tuned:
        raise InputError(f"--tune has no grid for {type(estimator).__name__}")
    values = list(values)
    return {name: [1.0 / v for v in values] if how == "inverse" else values for name, how in tuned.items()}


def grid_search(estimator, X, y, grid=None, on_result=None):
    """Fit ``estimator`` at every point of ``grid`` (default ``tuning_grid``), keep the best on the
    training data, refit it there and return ``(estimator, table)``; ``table`` lists every point
    with its training score (``None`` when the fit failed, e.g. diverged)."""
    grid = tuning_grid(estimator) if grid is None else grid
    names = list(grid)
    table = []
    best = None
    from ...utils.progress import Progress
    points = list(itertools.product(*(grid[k] for k in names)))
    progress = Progress(f"--tune {type(estimator).__name__}", len(points), "points")
    for values in points:
        point = dict(zip(names, values))
        estimator.set_params(**point)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", SelectionWarning)     # scored here; the final fit warns
            try:
                estimator.fit(X, y)
                score = (float(estimator.score(X, y)), _online_accuracy(estimator))
            except InputError:
                score = None
        if score is not None and not np.all(np.isfinite(score)):
            score = None
        table.append({**point, "train_score": None if score is None else score[0],
                      "online_accuracy": None if score is None else score[1]})
        if on_result is not None:
            on_result(table[-1])
        if score is not None and (best is None or score > best[1]):
            best = (point, score)
        progress.advance(1, **({"best so far": f"{_point(best[0])} (train score {best[1][0]:.4g})"} if best else {}))
    if best is None:
        raise InputError("--tune: no point of the grid gave a usable model")
    estimator.set_params(**best[0])
    estimator.fit(X, y)
    estimator.tuned_params_ = dict(best[0])
    estimator.tuning_table_ = table
    return estimator, table


def _point(point) -> str:
    return ", ".join(f"{k}={v:.3g}" for k, v in point.items())


def _online_accuracy(estimator):
    """The tie-break: online accuracy for classification, nothing (0) for regression."""
    try:
        return float(estimator.online_accuracy_)
    except AttributeError:
        return 0.0
