"""The compiled functions behind ``kernels.py`` (imported only when numba is installed).

Module-level, so that numba's on-disk cache finds them again in the next process. The loss is the
one of ``asyos/losses.py`` with the code ``code`` (``losses.TABLE``), evaluated per sample by the
table's scalar functions (``asyos/losses/compiled.py`` compiles them into these loops).
"""
import math

import numba
import numpy as np

from ...losses import compiled as _compiled_losses
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
def retained_step(XS, m, g, retained_scale, gS, dw, delta, w, ridge):
    """Alg. 1 line 6: ``gS = X_S^T g``, then ``retained_move``; returns ``|gS|^2`` (the overflow guard)."""
    if m > 0:
        np.dot(XS[:m], g, gS[:m])
    return retained_move(XS, m, gS, retained_scale, dw, delta, w, ridge)


@jit
def retained_move(XS, m, gS, retained_scale, dw, delta, w, ridge):
    """Alg. 1 line 6 from ``gS = X_S^T g``: the ridge's gradient ``ridge w`` added to ``gS`` (in place,
    as ``SubstitutionState._retained_step``), ``dw = retained_scale gS``, ``delta = X_S^T dw``;
    returns ``|gS|^2`` (the overflow guard)."""
    if m == 0:
        delta[:] = 0.0
        return 0.0
    guard = 0.0
    for i in range(m):
        gS[i] += ridge * w[i]
        dw[i] = gS[i] * retained_scale
        guard += gS[i] * gS[i]
    np.dot(dw[:m], XS[:m], delta)
    return guard


@jit
def propose_step(code, XS, m, w, u, y, xj, retained_scale, new_scale, budget, check, decrease_factor,
                 g, gS, dw, new_w, u_next, tmp, delta):
    """Returns ``(action, k, w_j, checked)``; ``action`` is ``DIVERGED`` when the squares of
    the new weights overflow (the caller raises)."""
    n = u.shape[0]
    dloss_raw(code, y, u, g)
    guard = retained_step(XS, m, g, retained_scale, gS, dw, delta, w, 0.0)
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


# Products over the retained columns with their sums free to be reordered, so that the compiler
# vectorises them (a plain loop adds one term at a time, each addition waiting for the last). The
# order it picks is fixed by the code, not by the data: a product's value depends only on the two
# vectors, which is what lets ``column_products`` compute ahead and still give every visit, resumed
# or not, the same bits.
fast = numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract", "nsz"})


@fast
def row_products(XS, m, g, v, h, with_c, gS, a, c):
    """``gS = X_S g``, ``a = X_S v`` and, ``with_c``, ``c_k = sum_i h_i XS[k, i]^2`` for the first ``m``
    rows in one sweep over ``X_S``, four rows at a time (``g``, ``v``, ``h`` loaded once for four).
    Three products one after the other (two BLAS ``dgemv`` and a loop) took 64 us at ``m`` = 100,
    ``n`` = 1715; in one sweep 29 us (``X_S``, 1.4 MB, is read from L3 once instead of three times)."""
    n = g.shape[0]
    for k in range(0, m, 4):
        x0, x1, x2, x3 = XS[k], XS[min(k + 1, m - 1)], XS[min(k + 2, m - 1)], XS[min(k + 3, m - 1)]
        g0 = g1 = g2 = g3 = a0 = a1 = a2 = a3 = c0 = c1 = c2 = c3 = 0.0
        for i in range(n):
            gi, vi, hi = g[i], v[i], h[i]
            p, q, r, s = x0[i], x1[i], x2[i], x3[i]
            g0 += p * gi
            g1 += q * gi
            g2 += r * gi
            g3 += s * gi
            a0 += p * vi
            a1 += q * vi
            a2 += r * vi
            a3 += s * vi
            if with_c:
                c0 += hi * p * p
                c1 += hi * q * q
                c2 += hi * r * r
                c3 += hi * s * s
        for d, (gd, ad, cd) in enumerate(((g0, a0, c0), (g1, a1, c1), (g2, a2, c2), (g3, a3, c3))):
            if k + d < m:
                gS[k + d], a[k + d], c[k + d] = gd, ad, cd


@fast
def column_products(XS, m, z0, z1, z2, z3, A):
    """``A[b, k] = XS[k] . z_b`` for four columns ``z_b`` and the first ``m`` rows: four rows by four
    columns at a time, each row of ``X_S`` read once for the four. ``a = X_S x_j`` one column at a
    time (BLAS ``dgemv``) cost 20 us at ``m`` = 100, ``n`` = 1715, two thirds of a squared-loss visit;
    four at a time 7.6 us a column. Every product is summed by the same code whichever lane and row
    it takes (a column repeated to fill the four gives the same bits), so a product computed ahead
    equals the one computed at the visit (``tests/test_loopback_batch.py``)."""
    n = z0.shape[0]
    for k in range(0, m, 4):
        x0, x1, x2, x3 = XS[k], XS[min(k + 1, m - 1)], XS[min(k + 2, m - 1)], XS[min(k + 3, m - 1)]
        s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = 0.0
        s20 = s21 = s22 = s23 = s30 = s31 = s32 = s33 = 0.0
        for i in range(n):
            p, q, r, s = x0[i], x1[i], x2[i], x3[i]
            e0, e1, e2, e3 = z0[i], z1[i], z2[i], z3[i]
            s00 += p * e0
            s01 += p * e1
            s02 += p * e2
            s03 += p * e3
            s10 += q * e0
            s11 += q * e1
            s12 += q * e2
            s13 += q * e3
            s20 += r * e0
            s21 += r * e1
            s22 += r * e2
            s23 += r * e3
            s30 += s * e0
            s31 += s * e1
            s32 += s * e2
            s33 += s * e3
        for d, (t0, t1, t2, t3) in enumerate(((s00, s01, s02, s03), (s10, s11, s12, s13),
                                              (s20, s21, s22, s23), (s30, s31, s32, s33))):
            if k + d < m:
                A[0, k + d], A[1, k + d], A[2, k + d], A[3, k + d] = t0, t1, t2, t3


@fast
def symmetric_product(G, m, x, out):
    """``out = G x`` over the first ``m`` rows and columns (``G`` kept square of side ``budget + 1``,
    so its top-left block is not contiguous for BLAS): at ``m`` = 100 summed in order 5.5 us a call,
    vectorised 1.5 us (a squared-loss visit now takes 12 us at ``n`` = 1715)."""
    for i in range(m):
        total = 0.0
        for q in range(m):
            total += G[i, q] * x[q]
        out[i] = total


@jit
def exchange_step(code, XS, m, w, curv, u, y, xj, retained_scale, budget, check, floor, entry_scale, ridge,
                  g, h, v, gS, dw, a, c, u_next, tmp, delta):
    """The exchange variant's step (``SubstitutionState._propose_exchange``: the same arithmetic, the
    products summed in another order). Returns ``(action, k, w_j, checked)``; ``action`` is ``DIVERGED``
    when the squares of the new weights overflow. Once the retained set is full, ``X_S g`` (line 6),
    ``a = X_S H x_j`` and the curvatures ``c`` are taken in one sweep over ``X_S``
    (``row_products``)."""
    n = u.shape[0]
    dloss_raw(code, y, u, g)
    if code != SQUARED:
        d2loss_raw(code, y, u, h)
    gj = np.dot(xj, g)
    if code == SQUARED:
        cj = np.dot(xj, xj)
        for i in range(n):
            v[i] = xj[i]
    else:
        for i in range(n):
            v[i] = h[i] * xj[i]
        cj = np.dot(xj, v)
    if m >= budget and cj > floor:                                      # a and c are needed
        row_products(XS, m, g, v, h, code != SQUARED, gS, a, c)
        guard = retained_move(XS, m, gS, retained_scale, dw, delta, w, ridge)
    else:
        guard = retained_step(XS, m, g, retained_scale, gS, dw, delta, w, ridge)
    if not math.isfinite(gj * gj + guard):
        return -1, 0, gj, False
    if not cj > floor:
        return 3, m, 0.0, False                                         # REJECT: no curvature along x_j
    cj += ridge
    wj = -gj / cj
    if m < budget:
        wj *= entry_scale
        for i in range(n):
            delta[i] += wj * xj[i]
        return 1, m, wj, False                                          # ENTER
    if code == SQUARED:
        for k in range(m):
            c[k] = curv[k]
    k, best = 0, math.inf
    for i in range(m):
        gp = gj - w[i] * a[i]
        net = -w[i] * gS[i] + 0.5 * w[i] * w[i] * (c[i] + ridge) - 0.5 * gp * gp / cj
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
        f_next = value(code, y, u_next, tmp) + 0.5 * ridge / n * (wj * wj - wk * wk)
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


# ``loopback_visits``' counters (an int64 array the caller keeps between calls), by name: ``set_counters``
# writes them before a call, ``read_counters`` reads them after (neither the loop nor its callers know a slot)
C_PASS, C_POS, C_CHANGES, C_PASSES_RUN, C_SIZE, C_STEPS, C_CHECKS, C_CHECK_REJECTIONS, C_EVENTS, C_STATUS, \
    C_LAST_J = range(11)
N_COUNTERS = 11
RUNNING, DONE, STOPPED_DIVERGED, PASS_END = 0, 1, 2, 3
COUNTERS = {"pass_index": C_PASS, "pos": C_POS, "changes": C_CHANGES, "passes_run": C_PASSES_RUN, "size": C_SIZE,
            "steps": C_STEPS, "checks": C_CHECKS, "check_rejections": C_CHECK_REJECTIONS, "events": C_EVENTS,
            "status": C_STATUS, "last_j": C_LAST_J}
if sorted(COUNTERS.values()) != list(range(N_COUNTERS)):
    raise ImportError(f"loopback_visits' counters: slots {sorted(COUNTERS.values())} are not 0..{N_COUNTERS - 1}")


def set_counters(counters, *, pass_index, pos, changes, passes_run, size, steps, checks, check_rejections):
    """Write into ``counters`` (``N_COUNTERS`` int64) what a call of ``loopback_visits`` starts from: the
    worker's cursor, ``C_PASS`` (``pass_index``, the pass), ``C_POS`` (``pos``, the position in its order)
    and ``C_CHANGES`` (``changes``, the pass's changes so far); ``C_PASSES_RUN`` the passes begun;
    ``C_SIZE`` the retained set's size; the tallies ``C_STEPS`` (steps), ``C_CHECKS`` (decrease checks)
    and ``C_CHECK_REJECTIONS`` (substitutions they refused). The call's outputs start afresh: ``C_EVENTS``
    (the entries and departures it wrote in the ``ev_*`` arrays) 0, ``C_STATUS`` ``RUNNING`` (then
    ``DONE``, ``STOPPED_DIVERGED`` or ``PASS_END``), ``C_LAST_J`` (the feature of the last visit) -1."""
    values = [0] * N_COUNTERS       # one write into the array: item by item cost 2-4 us more a call
    values[C_PASS], values[C_POS], values[C_CHANGES], values[C_PASSES_RUN] = pass_index, pos, changes, passes_run
    values[C_SIZE], values[C_STEPS], values[C_CHECKS], values[C_CHECK_REJECTIONS] = size, steps, checks, \
        check_rejections
    values[C_EVENTS], values[C_STATUS], values[C_LAST_J] = 0, RUNNING, -1
    counters[:] = values


def read_counters(counters) -> dict:
    """The counters after a call of ``loopback_visits``, by name (``COUNTERS``: the keywords of
    ``set_counters``, plus ``events``, ``status`` and ``last_j``), as Python ints."""
    values = counters.tolist()
    return {name: values[slot] for name, slot in COUNTERS.items()}


# ``loopback_visits``' CSR arguments for a dense shard (the types of scipy's usual CSR: one compiled version)
NO_CSR = (np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int32), np.empty(0), np.empty(0))
NO_DENSE = np.empty((0, 0))


@jit
def loopback_visits(code, XT, sparse, indptr, indices, data, shift, column, order, retained, counters, passes,
                    auto_passes, min_auto_passes, visits, stop_at_pass_end, entry_level,
                    XS, w, curv, slots, u, y, retained_scale, budget, check, floor, entry_scale, ridge,
                    owns_intercept, intercept, g, h, v, gS, dw, a, c, u_next, tmp, view, hess, delta,
                    ev_step, ev_pass, ev_local, ev_enter, ev_weight, gram, G, R, W, colsum, Gdw, ahead, ahead_j):
    """Up to ``visits`` feature visits of sequential OS (the exchange variant) against the in-process
    central node: what ``loopback.run_loopback`` does one Python call at a time (``Worker._next_feature``,
    the intercept's Newton step, ``exchange_step``, ``Central.apply``, ``Worker.commit``), the same
    arithmetic in the same order, in one compiled call. The shard's columns are the rows of ``XT``
    or, when ``sparse``, of the CSR ``(indptr, indices, data)`` less ``shift`` (its centring; empty:
    none), written into ``column`` as ``FeatureShard.column`` does. ``counters`` (``C_*``, written by
    ``set_counters`` and read by ``read_counters``) carry the cursor and the tallies in and out; entries and
    departures go to the ``ev_*`` arrays (two per visit at most). Returns ``intercept`` after the visits;
    ``counters[C_STATUS]`` says whether the passes are done or the weights diverged (``C_LAST_J``: the
    feature whose step did).

    A worker of Asy-OS (``Worker.visit_view``) runs its visits at its view of ``u_C`` (``u``):
    ``stop_at_pass_end`` returns at the end of each pass (``PASS_END``, the cursor left there), so that
    the pass-end rules that read the other workers' progress run in Python; ``entry_level`` > 0 is the
    global budget's admission rule (``SubstitutionState.refuse_small_entry``: an entry whose weight is
    below it, before ``entry_scale``, is rejected).

    ``gram`` (the squared loss): the visits run on maintained products instead (``gram_visit``);
    ``G`` (the retained columns' Gram matrix) is kept between calls once built (``gram[0]``). On a
    dense shard their one product with ``X_S``, ``a = X_S x_j``, is taken for the next four features
    of the pass at once (``column_products``) into ``ahead`` (four rows of ``budget + 1``; ``ahead_j``
    names their features), kept until ``X_S`` changes."""
    p_local = order.shape[0]
    n = u.shape[0]
    m = counters[C_SIZE]
    counters[C_STATUS] = RUNNING
    use_gram = gram.shape[0] > 0 and code == SQUARED
    T = 0.0
    if not use_gram or gram[0] == 0:            # X_S changed since the last call (gram_begin's flag)
        ahead_j[:] = -1
    if use_gram:
        T = gram_begin(XS, m, u, y, gram, G, R, W, colsum, tmp)
    for _ in range(visits):
        # Worker._next_feature (no other workers to watch)
        pass_index, pos, changes = counters[C_PASS], counters[C_POS], counters[C_CHANGES]
        j = -1
        while pass_index < passes:
            while pos < p_local:
                if not retained[order[pos]]:
                    j = order[pos]
                    break
                pos += 1
            if j >= 0:
                break
            if stop_at_pass_end:
                counters[C_PASS], counters[C_POS], counters[C_CHANGES] = pass_index, pos, changes
                counters[C_STATUS] = PASS_END
                if use_gram:
                    gram_end(XS, m, u, W, tmp)
                return intercept
            if auto_passes and pass_index + 1 >= min_auto_passes and changes == 0:
                pass_index = passes
                break
            pass_index, pos, changes = pass_index + 1, 0, 0
        if j < 0:
            counters[C_PASS], counters[C_POS], counters[C_CHANGES] = pass_index, pos, changes
            counters[C_STATUS] = DONE
            if use_gram:
                gram_end(XS, m, u, W, tmp)
            return intercept
        counters[C_PASS], counters[C_POS], counters[C_CHANGES] = pass_index, pos + 1, changes
        counters[C_PASSES_RUN] = max(counters[C_PASSES_RUN], pass_index + 1)
        counters[C_LAST_J] = j
        if sparse:
            fill = -shift[j] if shift.shape[0] > 0 else 0.0
            for i in range(n):
                column[i] = fill
            for q in range(indptr[j], indptr[j + 1]):
                column[indices[q]] += data[q]
            xj = column
        else:
            xj = XT[j]
        if use_gram:
            if m > 0 and sparse:
                np.dot(XS[:m], xj, a[:m])
            elif m > 0:
                take_ahead(XT, XS, m, order, retained, pos, j, ahead, ahead_j, a)
            action, k, wj, checked, b, T = gram_visit(XS, m, w, curv, u, y, xj, retained_scale, budget, check, floor,
                                                     entry_scale, entry_level, ridge, owns_intercept, T, G, R, W,
                                                     colsum, Gdw, gS, dw, a)
            if action == -1:
                counters[C_STATUS] = STOPPED_DIVERGED
                gram_end(XS, m, u, W, tmp)
                return intercept
        if not use_gram:
            # Worker.propose: the intercept's step, then the feature's at u + b
            point = u
            b = 0.0
            if owns_intercept:
                b = intercept_step(code, y, u, g, hess)
                for i in range(n):
                    view[i] = u[i] + b
                point = view
            action, k, wj, checked = exchange_step(code, XS, m, w, curv, point, y, xj, retained_scale, budget, check,
                                                   floor, entry_scale, ridge, g, h, v, gS, dw, a, c, u_next, tmp,
                                                   delta)
            if action == -1:
                counters[C_STATUS] = STOPPED_DIVERGED
                return intercept
            if action == 1 and abs(wj) < entry_level * entry_scale:     # SubstitutionState.refuse_small_entry
                for i in range(n):
                    delta[i] += -wj * xj[i]
                action = 3
            if owns_intercept:
                for i in range(n):
                    delta[i] += b
            # Central.apply
            for i in range(n):
                u[i] += delta[i]
            for i in range(m):
                w[i] += dw[i]
        if checked:
            counters[C_CHECKS] += 1
            if action == 3:
                counters[C_CHECK_REJECTIONS] += 1
        # Worker.commit / SubstitutionState.commit (every step is applied: a loopback push is never stale)
        counters[C_STEPS] += 1
        intercept += b
        if action != 3:
            left = -1
            if action == 2:
                left = slots[k]
            else:
                m += 1
            for i in range(n):
                XS[k, i] = xj[i]
            w[k] = wj
            slots[k] = j
            if not use_gram:
                curv[k] = np.dot(xj, xj)
            counters[C_CHANGES] += 1
            ahead_j[:] = -1                     # X_S changed
            retained[j] = True
            e = counters[C_EVENTS]
            if left >= 0:
                retained[left] = False
                ev_step[e], ev_pass[e], ev_local[e], ev_enter[e], ev_weight[e] = \
                    counters[C_STEPS], pass_index, left, False, 0.0
                e += 1
            ev_step[e], ev_pass[e], ev_local[e], ev_enter[e], ev_weight[e] = \
                counters[C_STEPS], pass_index, j, True, w[k]
            counters[C_EVENTS] = e + 1
            counters[C_SIZE] = m
    if use_gram:
        gram_end(XS, m, u, W, tmp)
    return intercept


@jit
def take_ahead(XT, XS, m, order, retained, pos, j, ahead, ahead_j, a):
    """``a = X_S x_j`` for the feature ``j`` at ``order[pos]`` from ``ahead``, filling it first when it
    does not hold ``j``: the products of ``j`` and of the next three features the pass will offer
    (``j`` again where the pass has fewer left), ``column_products``."""
    slot = -1
    for b in range(4):
        if ahead_j[b] == j:
            slot = b
    if slot < 0:
        ahead_j[:] = j
        filled, q = 1, pos + 1
        while filled < 4 and q < order.shape[0]:
            if not retained[order[q]]:
                ahead_j[filled] = order[q]
                filled += 1
            q += 1
        column_products(XS, m, XT[ahead_j[0]], XT[ahead_j[1]], XT[ahead_j[2]], XT[ahead_j[3]], ahead)
        slot = 0
    for i in range(m):
        a[i] = ahead[slot, i]


@jit
def gram_begin(XS, m, u, y, gram, G, R, W, colsum, tmp):
    """The maintained products of ``gram_visit`` at the start of a call: ``G = X_S X_S^T`` and the
    row sums of ``X_S`` (once: later calls find them kept, and with them the products taken ahead,
    until ``X_S`` changes outside the calls and ``gram[0]`` is cleared), ``R = X_S (u - y)`` (one
    BLAS ``dgemv``), ``W = 0``; returns ``T = 1^T (u - y)``.

    ``R`` in one scalar loop with the row sums cost 240 us of a call's start at n = 1994, s = 100
    (a call of 32 visits took 610 us: the shared-memory workers' batches)."""
    n = u.shape[0]
    if gram[0] == 0:
        for i in range(m):
            for k in range(i + 1):
                product = np.dot(XS[i], XS[k])
                G[i, k] = product
                G[k, i] = product
        for k in range(m):
            total = 0.0
            for i in range(n):
                total += XS[k, i]
            colsum[k] = total
        gram[0] = 1
    T = 0.0
    for i in range(n):
        r = u[i] - y[i]
        tmp[i] = r
        T += r
    if m > 0:
        np.dot(XS[:m], tmp, R[:m])
    W[:] = 0.0
    return T


@jit
def gram_end(XS, m, u, W, tmp):
    """``u += X_S^T W``: the retained steps the visits deferred (``gram_visit``)."""
    if m > 0:
        np.dot(W[:m], XS[:m], tmp)
        for i in range(u.shape[0]):
            u[i] += tmp[i]
    W[:] = 0.0


@jit
def gram_visit(XS, m, w, curv, u, y, xj, retained_scale, budget, check, floor, entry_scale, entry_level, ridge,
               owns_intercept, T, G, R, W, colsum, Gdw, gS, dw, a):
    """One visit of sequential OS's exchange step under the squared loss on maintained products,
    committed and applied: the decisions of ``exchange_step`` (and of ``intercept_step`` before it)
    from the same quantities, computed another way. The true ``u`` is ``u + X_S^T W``: line 6's
    steps of the retained weights are summed in ``W`` (``gram_end`` adds them to ``u``) instead of
    being added to ``u`` at every visit, and ``X_S g``, which they change, is kept up to date as
    ``R = X_S (u_true - y)`` through ``G = X_S X_S^T`` (``O(s^2)`` a visit instead of ``O(n s)``);
    the decrease check is the squared loss's change in closed form. What is left of ``O(n s)`` is
    ``a = X_S x_j`` (which the exchange score needs, and ``x_j^T (u_true - y)`` with it), which the
    caller gives: one product a visit instead of three. Returns ``(action, k, w_j, checked, b, T)`` with
    ``b`` the intercept's step and ``T = 1^T (u_true - y)`` after the visit; ``action`` is ``-1`` when the weights
    overflow (nothing committed then)."""
    n = u.shape[0]
    # x_j^T (u - y), 1^T x_j, x_j^T x_j in one pass
    rj, sx, cj = 0.0, 0.0, 0.0
    for i in range(n):
        x = xj[i]
        rj += x * (u[i] - y[i])
        sx += x
        cj += x * x
    sW = 0.0
    aW = 0.0
    for i in range(m):
        sW += colsum[i] * W[i]
        aW += a[i] * W[i]
    b = 0.0
    if owns_intercept:
        b = -(T + sW) / n                       # the intercept's Newton step: h = 1 on every sample
    guard = 0.0
    for i in range(m):                          # gS: the loss's gradient (R is kept from it); dw with the ridge's
        gS[i] = R[i] + b * colsum[i]
        dw[i] = (gS[i] + ridge * w[i]) * retained_scale
        guard += gS[i] * gS[i]
    adw = 0.0
    for i in range(m):
        adw += a[i] * dw[i]
    symmetric_product(G, m, dw, Gdw)
    gj = rj + aW + b * sx
    if not math.isfinite(gj * gj + guard):
        return -1, 0, gj, False, 0.0, T
    action, k, wj, checked = 3, m, 0.0, False
    wk = 0.0
    if cj > floor:
        cr = cj + ridge                         # the curvature with the ridge's (cj itself goes into R and G)
        wj = -gj / cr
        if m < budget:
            wj *= entry_scale
            action = 1 if abs(wj) >= entry_level * entry_scale else 3     # ENTER (or refused: the global budget)
        else:
            best = math.inf
            for i in range(m):
                gp = gj - w[i] * a[i]
                net = -w[i] * (gS[i] + ridge * w[i]) + 0.5 * w[i] * w[i] * (curv[i] + ridge) - 0.5 * gp * gp / cr
                if net < best:
                    k, best = i, net
            if best < 0.0:
                wj = -(gj - w[k] * a[k]) / cr
                wk = -(w[k] + dw[k])
                action = 2                                              # SUBSTITUTE
                if check:
                    # n (f_next - f_keep) x 2 for d = w_j x_j + w_k x_k at r_keep = u + b + X_S^T dw - y,
                    # the ridge's change with it
                    change = (2.0 * (wj * (gj + adw) + wk * (gS[k] + Gdw[k]))
                              + wj * wj * cj + 2.0 * wj * wk * a[k] + wk * wk * G[k, k]
                              + ridge * (wj * wj - wk * wk))
                    checked = True
                    if not change < 0.0:
                        action = 3
                if action == 2:
                    wj *= entry_scale
    # the step: line 6 deferred, the intercept and the exchange applied to u
    for i in range(m):
        W[i] += dw[i]
        w[i] += dw[i]
    if b != 0.0:
        for i in range(n):
            u[i] += b
        T += n * b
    if action == 3:
        for i in range(m):
            R[i] = gS[i] + Gdw[i]
        return action, k, wj, checked, b, T
    if action == 1:
        for i in range(m):
            R[i] = gS[i] + Gdw[i] + wj * a[i]
        R[m] = gj + adw + wj * cj
    else:
        for i in range(m):
            R[i] = gS[i] + Gdw[i] + wj * a[i] + wk * G[i, k]
        R[k] = gj + adw + wj * cj + wk * a[k]
        out = W[k] + wk                          # x_k leaves: its deferred steps and its weight
        for i in range(n):
            u[i] += out * XS[k, i]
        T += out * colsum[k]
    for i in range(n):
        u[i] += wj * xj[i]
    T += wj * sx
    for i in range(m):
        G[i, k] = a[i]
        G[k, i] = a[i]
    G[k, k] = cj
    colsum[k] = sx
    curv[k] = cj
    W[k] = 0.0
    return action, k, wj, checked, b, T


_compiled_losses.refresh_cache(globals())
