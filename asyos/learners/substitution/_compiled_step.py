"""The compiled functions behind ``kernels.py`` (imported only when numba is installed).

Module-level, so that numba's on-disk cache finds them again in the next process. The loss is the
one of ``asyos/losses.py`` with the code ``code`` (``losses.TABLE``), evaluated per sample by the
table's scalar functions (``_compiled_losses.py`` compiles them into these loops).
"""
import math

import numba
import numpy as np

from ... import _compiled_losses
from ...losses import LOSS_CODES, d2loss1, dloss1, value1

jit = numba.njit(cache=True, nogil=True)
SQUARED = LOSS_CODES["squared"]     # the loss whose curvature is 1 everywhere: ``exchange_step`` uses x^T x


@jit
def dloss_raw(code, y, u, out):
    """``n dL/du`` into ``out`` (``Loss.dloss_raw``)."""
    for i in range(u.shape[0]):
        out[i] = dloss1(code, y[i], u[i])


@jit
def value(code, y, u, tmp):
    """The loss ``L(u)`` (``Loss.value``); ``tmp`` is scratch of length n (the per-sample losses)."""
    n = u.shape[0]
    for i in range(n):
        tmp[i] = value1(code, y[i], u[i])
    return tmp.sum() / n


@jit
def retained_step(XS, m, g, retained_scale, gS, dw, delta):
    """Alg. 1 line 6: ``gS = X_S^T g``, ``dw = retained_scale gS``, ``delta = X_S^T dw``; returns
    ``|gS|^2`` (the overflow guard)."""
    if m == 0:
        delta[:] = 0.0
        return 0.0
    gSm = gS[:m]
    np.dot(XS[:m], g, gSm)
    for i in range(m):
        dw[i] = gS[i] * retained_scale
    np.dot(dw[:m], XS[:m], delta)
    return np.dot(gSm, gSm)


@jit
def propose_step(code, XS, m, w, u, y, xj, retained_scale, new_scale, budget, check, decrease_factor,
                 g, gS, dw, new_w, u_next, tmp, delta):
    """Returns ``(action, k, w_j, checked)``; ``action`` is ``DIVERGED`` when the squares of
    the new weights overflow (the caller raises)."""
    n = u.shape[0]
    dloss_raw(code, y, u, g)
    guard = retained_step(XS, m, g, retained_scale, gS, dw, delta)
    wj = new_scale * np.dot(xj, g)
    if not math.isfinite(wj * wj + guard):
        return -1, 0, wj, False
    action, k, checked = 1, m, False                                   # ENTER
    if m >= budget:
        k, best = 0, math.inf
        for i in range(m):
            new_w[i] = w[i] + dw[i]
            a = abs(new_w[i])
            if a < best:
                k, best = i, a
        if abs(wj) <= abs(new_w[k]):
            action = 3                                                  # REJECT
        elif check:
            for i in range(n):
                u_next[i] = u[i] + delta[i]
            for i in range(n):
                u_next[i] += wj * xj[i]
            a = -new_w[k]
            for i in range(n):
                u_next[i] += a * XS[k, i]
            f_prev = value(code, y, u, tmp)
            f_next = value(code, y, u_next, tmp)
            w_k = w[k]
            diff_sq = np.dot(dw[:m], dw[:m]) - dw[k] * dw[k] + w_k * w_k + wj * wj
            action = 2 if f_next - f_prev <= decrease_factor * diff_sq else 3
            checked = True
        else:
            action = 2                                                  # SUBSTITUTE
        if action == 2:
            a = -new_w[k]
            for i in range(n):
                delta[i] += wj * xj[i]
            for i in range(n):
                delta[i] += a * XS[k, i]
    if action == 1:
        for i in range(n):
            delta[i] += wj * xj[i]
    return action, k, wj, checked


@jit
def d2loss_raw(code, y, u, out):
    """``n d^2L/du^2`` into ``out`` (``Loss.d2loss_raw``)."""
    for i in range(u.shape[0]):
        out[i] = d2loss1(code, y[i], u[i])


@jit
def intercept_step(code, y, u, g, h):
    """The Newton step of the intercept at ``u`` (``Loss.intercept_step``); ``g``, ``h`` scratch."""
    d2loss_raw(code, y, u, h)
    curvature = h.sum()
    if not curvature > 0.0:
        return 0.0
    dloss_raw(code, y, u, g)
    return -g.sum() / curvature


@jit
def exchange_step(code, XS, m, w, curv, u, y, xj, retained_scale, budget, check, floor, entry_scale,
                  g, h, v, gS, dw, a, c, u_next, tmp, delta):
    """The exchange variant's step (``SubstitutionState._propose_exchange``, same arithmetic in the
    same order). Returns ``(action, k, w_j, checked)``; ``action`` is ``DIVERGED`` when the squares
    of the new weights overflow."""
    n = u.shape[0]
    dloss_raw(code, y, u, g)
    if code != SQUARED:
        d2loss_raw(code, y, u, h)
    guard = retained_step(XS, m, g, retained_scale, gS, dw, delta)
    gj = np.dot(xj, g)
    if code == SQUARED:
        cj = np.dot(xj, xj)
        for i in range(n):
            v[i] = xj[i]
    else:
        for i in range(n):
            v[i] = h[i] * xj[i]
        cj = np.dot(xj, v)
    if not math.isfinite(gj * gj + guard):
        return -1, 0, gj, False
    if not cj > floor:
        return 3, m, 0.0, False                                         # REJECT: no curvature along x_j
    wj = -gj / cj
    if m < budget:
        wj *= entry_scale
        for i in range(n):
            delta[i] += wj * xj[i]
        return 1, m, wj, False                                          # ENTER
    np.dot(XS[:m], v, a[:m])
    if code == SQUARED:
        for k in range(m):
            c[k] = curv[k]
    else:
        for k in range(m):
            total = 0.0
            for i in range(n):
                total += h[i] * XS[k, i] * XS[k, i]
            c[k] = total
    k, best = 0, math.inf
    for i in range(m):
        gp = gj - w[i] * a[i]
        net = -w[i] * gS[i] + 0.5 * w[i] * w[i] * c[i] - 0.5 * gp * gp / cj
        if net < best:
            k, best = i, net
    if not best < 0.0:
        return 3, k, wj, False                                          # REJECT
    wj = -(gj - w[k] * a[k]) / cj
    wk = -(w[k] + dw[k])
    action, checked = 2, False                                          # SUBSTITUTE
    if check:
        for i in range(n):
            tmp[i] = u[i] + delta[i]
        f_keep = value(code, y, tmp, u_next)
        for i in range(n):
            u_next[i] = tmp[i] + wj * xj[i]
        for i in range(n):
            u_next[i] += wk * XS[k, i]
        f_next = value(code, y, u_next, tmp)
        checked = True
        if not f_next < f_keep:
            action = 3
    if action == 2:
        wj *= entry_scale
        for i in range(n):
            delta[i] += wj * xj[i]
        for i in range(n):
            delta[i] += wk * XS[k, i]
    return action, k, wj, checked


_compiled_losses.refresh_cache(globals())
