"""Coordinate descent on a Gram matrix, compiled with numba (plain Python with ``ASYOS_KERNELS=numpy``).

Minimizes ``1/2 b^T G b - r^T b + sum_j P(b_j)`` where ``G`` is the running average ``S_xx`` of the
standardized data (so ``G_jj = 1``, or 0 for a constant feature, which then stays at 0) and ``P``
is one of the penalties of thesis Sec. 3.2.5:

* ``LASSO``: ``lam |b|``;
* ``ELNET``: ``lam (l1_ratio |b| + (1 - l1_ratio)/2 b^2)``;
* ``MCP``: ``lam |b| - b^2/(2 gamma)`` for ``|b| <= gamma lam``, ``gamma lam^2/2`` beyond.

One coordinate step minimizes over ``b_j`` exactly: with ``z = r_j - (G b)_j + G_jj b_j`` it is the
thesis' thresholding operator ``Theta(z; lam)`` (soft thresholding for the Lasso and the elastic net,
eq. 3.10 for MCP with ``b = gamma``). Alg. 5 applies the same operators after full gradient steps;
coordinate steps reach the same fixed points in far fewer passes over ``G`` (``O(p)`` per changed
coordinate, as in glmnet's covariance updates). Sweeps alternate between every feature and the
non-zero ones only, until a full sweep moves no coefficient by more than ``tol``.
"""
from __future__ import annotations

from ..stream._stream_kernels import jit

LASSO, ELNET, MCP = 0, 1, 2


@jit
def _coordinate(z, d, lam, l1_ratio, gamma, penalty):
    if d <= 0.0:
        return 0.0
    if penalty == MCP:
        a = abs(z)
        if a <= lam:
            return 0.0
        if a <= gamma * lam * d:
            s = a - lam
            return (s if z > 0 else -s) / (d - 1.0 / gamma)
        return z / d
    t = lam * l1_ratio if penalty == ELNET else lam
    a = abs(z) - t
    if a <= 0.0:
        return 0.0
    denom = d + lam * (1.0 - l1_ratio) if penalty == ELNET else d
    return (a if z > 0 else -a) / denom


@jit
def coordinate_descent(G, r, beta, Gb, lam, l1_ratio, gamma, penalty, max_sweeps, tol):
    """Run coordinate descent from ``beta`` (updated in place, ``Gb = G @ beta`` kept in step);
    return the number of sweeps made (``max_sweeps`` + 1 when it did not converge)."""
    p = r.shape[0]
    sweeps = 0
    full = True
    while sweeps < max_sweeps:
        sweeps += 1
        moved = 0.0
        for j in range(p):
            if not full and beta[j] == 0.0:
                continue
            d = G[j, j]
            old = beta[j]
            z = r[j] - Gb[j] + d * old
            new = _coordinate(z, d, lam, l1_ratio, gamma, penalty)
            if new != old:
                delta = new - old
                beta[j] = new
                for i in range(p):
                    Gb[i] += delta * G[j, i]
                step = abs(delta) * (d ** 0.5)
                if step > moved:
                    moved = step
        if moved <= tol:
            if full:
                return sweeps
            full = True
        else:
            full = False
    return max_sweeps + 1
