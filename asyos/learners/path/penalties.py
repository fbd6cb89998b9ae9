"""The two regularizers of DFLS (Li & Gu): group lasso (eq. 9) and the l_p penalty, p > 1 (eq. 10).

Both act on a coefficient vector ``w`` over the columns of the design; a penalty knows its value,
its group structure, its proximal operator (group lasso, for FISTA) and how far a point is from
stationarity (the KKT residual). The gradient and Hessian on a piece of the solution path (eq. 15
and the blocks ``B_g`` of App. B.1) are taken in ``solution_path.Piece``, vectorized over the
active columns.

* ``GroupLasso(labels)``: ``R(w) = sum_g sqrt(d_g) ||w_g||_2`` over the groups given by one label
  per column. A group is *active* when ``w_g != 0``; on the active groups ``R`` is smooth.
* ``LpNorm(exponent)``: ``R(w) = sum_j |w_j|^p``; smooth everywhere for ``p > 1`` (its Hessian
  ``p (p - 1) |w|^(p - 2)`` is zero at 0 for ``p > 2`` and unbounded there for ``p < 2``). It
  brings no sparsity, so it has no transition points: every column is one group of its own that
  is always active.
"""
from __future__ import annotations

import numpy as np

from ...errors import InputError


class GroupLasso:
    """``R(w) = sum_g sqrt(d_g) ||w_g||`` (eq. 9); ``labels[j]`` is the group of column ``j``."""

    sparse = True
    name = "group_lasso"

    def __init__(self, labels):
        labels = np.asarray(labels)
        if labels.ndim != 1:
            raise InputError(f"groups must be one label per feature; got an array of shape {labels.shape}")
        self.labels = labels
        self.group_labels, inverse = np.unique(labels, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(self.group_labels.size + 1))
        self.members = [order[bounds[g]:bounds[g + 1]] for g in range(self.group_labels.size)]
        self.sizes = np.diff(bounds)
        self.weights = np.sqrt(self.sizes)
        self.order, self.starts = order, bounds[:-1]      # columns group by group, where each group starts

    @property
    def n_groups(self) -> int:
        return len(self.members)

    def group_norms(self, w) -> np.ndarray:
        return np.sqrt(np.add.reduceat(w[self.order] ** 2, self.starts)) if w.size else np.zeros(0)

    def value(self, w) -> float:
        return float(self.weights @ self.group_norms(w))

    def prox(self, v, step) -> np.ndarray:
        """``argmin_w R(w) step + 1/2 ||w - v||^2``: each group shrunk towards 0 by ``step sqrt(d_g)``."""
        out = np.zeros_like(v)
        for m, weight in zip(self.members, self.weights):
            norm = np.linalg.norm(v[m])
            if norm > step * weight:
                out[m] = v[m] * (1.0 - step * weight / norm)
        return out

    def stationarity(self, w, loss_gradient, alpha) -> np.ndarray:
        """Per group, how far ``0 in loss_gradient + alpha dR(w)`` is from holding: for an active
        group ``||g_g + alpha sqrt(d_g) w_g / ||w_g|| ||``, for an inactive one
        ``max(0, ||g_g|| - alpha sqrt(d_g))`` (eqs. 15-16)."""
        if w.size == 0:
            return np.zeros(0)
        wo, go = w[self.order], loss_gradient[self.order]                 # group by group
        norms = np.sqrt(np.add.reduceat(wo * wo, self.starts))
        active = norms > 0
        unit = wo / np.repeat(np.where(active, norms, 1.0), self.sizes)
        moved = go + alpha * np.repeat(self.weights, self.sizes) * unit
        on = np.sqrt(np.add.reduceat(moved * moved, self.starts))
        off = np.maximum(0.0, np.sqrt(np.add.reduceat(go * go, self.starts)) - alpha * self.weights)
        return np.where(active, on, off)


class LpNorm:
    """``R(w) = sum_j |w_j|^p``, ``p > 1`` (eq. 10)."""

    sparse = False
    name = "lp"

    def __init__(self, exponent, n_features):
        self.exponent = float(exponent)
        self.members = [np.array([j]) for j in range(n_features)]
        self.sizes = np.ones(n_features, dtype=np.intp)
        self.weights = np.ones(n_features)

    @property
    def n_groups(self) -> int:
        return len(self.members)

    def value(self, w) -> float:
        return float(np.sum(np.abs(w) ** self.exponent))

    def gradient(self, w) -> np.ndarray:
        return self.exponent * np.abs(w) ** (self.exponent - 1.0) * np.sign(w)

    def curvature(self, w) -> np.ndarray:
        """The Hessian's diagonal ``p (p - 1) |w|^(p - 2)`` (infinite at 0 when ``p < 2``)."""
        p = self.exponent
        with np.errstate(divide="ignore"):
            return p * (p - 1.0) * np.abs(w) ** (p - 2.0)

    def stationarity(self, w, loss_gradient, alpha) -> np.ndarray:
        return np.abs(loss_gradient + alpha * self.gradient(w))


def make_penalty(penalty: str, labels=None, exponent=None, n_features=None):
    if penalty == "group_lasso":
        return GroupLasso(np.arange(n_features) if labels is None else labels)
    if penalty == "lp":
        return LpNorm(exponent, n_features)
    raise InputError(f"unknown penalty {penalty!r}; choose 'group_lasso' or 'lp'")
