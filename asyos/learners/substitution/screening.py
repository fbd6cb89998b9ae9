"""The order in which an Online Substitution worker visits its features (exchange variant).

KDD'16 scans the features in the order of the file. The exchange variant scans each worker's
shard by decreasing *marginal gain*: how much the loss would fall if the feature alone were added
to the empty model (the intercept alone, when the model has one), by one Newton step:

    gain_j = (x_j^T g0)^2 / (x_j^T H0 x_j - [intercept] (1^T H0 x_j)^2 / 1^T H0 1)

with ``g0 = n dL/du`` and ``H0 = n d^2L/du^2`` at the empty model's ``u`` (the second term profiles
the intercept out, which makes the gain the same whatever a column's offset). One pass over the
shard, ``O(nnz)``, before the first step.

Why: the order of the file decides which features fill the retained set first, and a search that
only exchanges one feature at a time keeps much of that start. Measured on a prototype of the
exchange rule with 5-fold CV at k = 10: visiting in this order raised test accuracy from 0.86-0.87
to 0.91 on dexter and from 0.80 to 0.85 on pcmac, and on the KDD'16 synthetic classification
problems recall from 0.49-0.63 to 0.58-0.66. It also makes the selection a function of the
columns' contents rather than their positions: shuffled columns are visited in the same order
(ties, equal gains, keep the file's order; ``bench_real_selection.py --column-order``).
"""
from __future__ import annotations

import numpy as np


def marginal_gains(shard, y, loss, intercept: bool) -> np.ndarray:
    """``gain_j`` (module docstring) of every column of ``shard`` (0 for a flat column)."""
    n = shard.n_samples
    u0 = np.full(n, loss.best_intercept(y) if intercept else 0.0)
    g0 = loss.dloss_raw(y, u0)
    h0 = loss.d2loss_raw(y, u0)
    xg = shard.dot(g0)
    xhx = shard.weighted_squares(h0)
    if intercept:
        total = float(h0.sum())
        if total > 0:
            xh = shard.dot(h0)
            xhx = xhx - xh * xh / total
    gains = np.zeros(shard.n_local)
    ok = xhx > 1e-10 * np.maximum(np.asarray(xhx), 0.0).max(initial=0.0)
    np.divide(xg * xg, xhx, out=gains, where=ok & (xhx > 0))
    return gains


def screening_order(shard, y, loss, intercept: bool) -> np.ndarray:
    """Local column indices by decreasing marginal gain (stable: equal gains keep column order)."""
    return order_by_gain(marginal_gains(shard, y, loss, intercept))


def order_by_gain(gains) -> np.ndarray:
    """Indices by decreasing gain (stable: equal gains keep column order)."""
    return np.argsort(-np.asarray(gains), kind="stable")
