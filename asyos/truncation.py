"""Truncation and projection operators: small pure functions.

All top-k selections are deterministic: ties in the score are broken in favour of the lower
index (a stable sort), so the same input always gives the same support.
"""
from __future__ import annotations

import numpy as np


def keep_top_k(scores, k: int) -> np.ndarray:
    """Indices (sorted ascending) of the ``k`` largest ``scores``; ties go to the lower index.

    ``k <= 0`` gives an empty set, ``k >= len(scores)`` gives every index.

    >>> keep_top_k(np.array([0.5, 2.0, 2.0, 1.0]), 2).tolist()
    [1, 2]
    >>> keep_top_k(np.array([1.0, 1.0, 1.0]), 2).tolist()
    [0, 1]
    """
    scores = np.asarray(scores)
    p = scores.shape[0]
    if k <= 0:
        return np.empty(0, dtype=np.intp)
    if k >= p:
        return np.arange(p, dtype=np.intp)
    if np.isnan(scores).any():                          # NaN ranks last, as in a sort
        order = np.argsort(-scores, kind="stable")
        return np.sort(order[:k])
    kth = np.partition(scores, p - k)[p - k]            # O(p): the k-th largest value
    above = np.flatnonzero(scores > kth)
    ties = np.flatnonzero(scores == kth)[:k - above.size]
    return np.sort(np.concatenate([above, ties]))


def project_l0(w, k: int) -> np.ndarray:
    """Projection onto the L0 ball ``{w : ||w||_0 <= k}``: keep the ``k`` entries of largest
    magnitude, zero the rest (a new array).

    >>> project_l0(np.array([0.1, -3.0, 2.0]), 1).tolist()
    [0.0, -3.0, 0.0]
    """
    w = np.asarray(w, dtype=float)
    out = np.zeros_like(w)
    keep = keep_top_k(np.abs(w), k)
    out[keep] = w[keep]
    return out


def argmin_magnitude(w) -> int:
    """Index of the entry of smallest magnitude; ties go to the lower index (KDD'16 Alg. 1 line 11).

    >>> argmin_magnitude(np.array([3.0, -0.5, 0.5]))
    1
    """
    return int(np.argmin(np.abs(w)))


def soft_threshold(w, threshold):
    """``sign(w) * max(|w| - threshold, 0)`` elementwise (the prox of ``threshold * ||.||_1``).

    >>> soft_threshold(np.array([-2.0, 0.5, 3.0]), 1.0).tolist()
    [-1.0, 0.0, 2.0]
    """
    w = np.asarray(w, dtype=float)
    return np.sign(w) * np.maximum(np.abs(w) - threshold, 0.0)


def project_l2_ball(w, radius: float):
    """Projection onto ``{w : ||w||_2 <= radius}``.

    >>> project_l2_ball(np.array([3.0, 4.0]), 1.0).tolist()
    [0.6, 0.8]
    """
    w = np.asarray(w, dtype=float)
    norm = float(np.linalg.norm(w))
    if norm <= radius:
        return w.copy()
    return w * (radius / norm)


def annealing_schedule(t: int, k: int, p: int, horizon: int, mu: float) -> int:
    """Number of features kept at step ``t`` by feature selection with annealing:
    ``M_t = k + (p - k) max(0, (T - t)/(t mu + T))`` (thesis Alg. 1/4), rounded down.

    >>> [annealing_schedule(t, 10, 100, 50, 10.0) for t in (0, 50, 80)]
    [100, 10, 10]
    """
    frac = max(0.0, (horizon - t) / (t * mu + horizon)) if horizon > 0 else 0.0
    return int(k + (p - k) * frac)
