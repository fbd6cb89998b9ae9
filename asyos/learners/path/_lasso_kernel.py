"""The lasso's DFLS path walked exactly, compiled (``solution_path._lasso_walk`` reads its output).

In ``v = s w`` (``s = theta`` on the moving columns, 1 elsewhere) and ``lam = 1 / theta`` the problem of
eq. 2 with singleton groups is the lasso ``1/2 v^T G v - c^T v + sum_j bound_j d_j(lam) |v_j|``,
``bound_j = alpha omega_j``, ``d_j = lam`` on the moving columns and 1 elsewhere. With the active
columns ``J`` and their signs ``sigma`` fixed, ``G_JJ v_J = c_J - bound_J sigma_J d_J(lam)``: ``v_J = a +
lam b`` and every column's correlation ``rho = c - G v = P + lam Q``. A piece ends where an active
``v_j`` reaches 0 or an inactive ``|rho_j|`` reaches ``bound_j d_j(lam)``.

One piece costs a Cholesky factorisation of ``G_JJ`` (``|J|^3 / 3``) and the products with
``G[:, J]`` (``2 m |J|``). The factorisation is taken anew at each piece rather than updated: at the
``|J|`` of tens that the path sees, that is below the products' cost. Compiled because the work per
piece is a few microseconds: the same walk in numpy calls cost ~130 us a piece (2.2 ms for the
16-transition path of ``bench_dfls.py``'s n = 20,000 row), most of it the calls' overhead.
"""
from __future__ import annotations

import numba
import numpy as np

jit = numba.njit(cache=True, nogil=True)

DONE, TOO_MANY, SINGULAR, STUCK = 0, 1, 2, 3


@jit
def _solve_pair(K, r1, r2, out1, out2):
    """Solve ``K x = r`` for two right-hand sides by Cholesky (``K`` overwritten by its factor);
    False when ``K`` is not numerically positive definite."""
    k = K.shape[0]
    top = 0.0
    for i in range(k):
        top = max(top, K[i, i])
    for j in range(k):
        d = K[j, j]
        for t in range(j):
            d -= K[j, t] * K[j, t]
        if d <= 1e-13 * top:
            return False
        d = np.sqrt(d)
        K[j, j] = d
        for i in range(j + 1, k):
            s = K[i, j]
            for t in range(j):
                s -= K[i, t] * K[j, t]
            K[i, j] = s / d
    for r, out in ((r1, out1), (r2, out2)):
        for i in range(k):                  # L y = r
            s = r[i]
            for t in range(i):
                s -= K[i, t] * out[t]
            out[i] = s / K[i, i]
        for i in range(k - 1, -1, -1):      # L^T x = y
            s = out[i]
            for t in range(i + 1, k):
                s -= K[t, i] * out[t]
            out[i] = s / K[i, i]
    return True


@jit
def _grow_float(a, need):
    if need <= a.size:
        return a
    out = np.empty(max(need, 2 * a.size))
    out[:a.size] = a
    return out


@jit
def _grow_int(a, need):
    if need <= a.size:
        return a
    out = np.empty(max(need, 2 * a.size), dtype=np.int64)
    out[:a.size] = a
    return out


@jit
def lasso_walk(G, c, bound, moving, v0, adding, max_pieces, tie):
    """Walk ``lam`` from infinity down to 1 (``adding``) or from 1 up until no moving column is active.

    Returns ``(status, v, lam, pieces, columns, a, b, events)``: ``pieces`` rows ``(lam_from, lam_to,
    offset, size)`` index the piece's active columns and its ``a``, ``b`` in the flat ``columns``, ``a``,
    ``b``; ``events`` rows ``(piece, column, kind)`` (kind 1: enters, 0: leaves) at each piece's end;
    ``v`` and ``lam`` where the walk stopped; ``status`` DONE, TOO_MANY (more than ``max_pieces``
    pieces), SINGULAR (``G_JJ`` not positive definite) or STUCK (removing, a moving column still
    active with no event ahead)."""
    m = c.size
    v = v0.copy()
    lam = np.inf if adding else 1.0
    act = np.empty(m, dtype=np.int64)
    sgn = np.empty(m)
    nact = 0
    for j in range(m):
        if v[j] != 0.0:
            act[nact] = j
            sgn[nact] = 1.0 if v[j] > 0 else -1.0
            nact += 1
    pieces = np.empty((max_pieces, 4))
    columns = np.empty(4 * m + 16, dtype=np.int64)
    flat_a = np.empty(4 * m + 16)
    flat_b = np.empty(4 * m + 16)
    events = np.empty(2 * max_pieces + 16, dtype=np.int64)      # flattened (piece, column, kind) triples
    n_events = 0
    used = 0
    P = np.empty(m)
    Q = np.empty(m)
    is_active = np.zeros(m, dtype=np.bool_)
    for piece in range(max_pieces):
        any_moving = False
        for i in range(nact):
            if moving[act[i]]:
                any_moving = True
        if not adding and not any_moving:
            return DONE, v, lam, pieces[:piece], columns[:used], flat_a[:used], flat_b[:used], \
                events[:3 * n_events].reshape(n_events, 3)
        K = np.empty((nact, nact))
        r1 = np.empty(nact)
        r2 = np.empty(nact)
        for i in range(nact):
            ji = act[i]
            for t in range(nact):
                K[i, t] = G[ji, act[t]]
            if moving[ji]:
                r1[i] = c[ji]
                r2[i] = -bound[ji] * sgn[i]
            else:
                r1[i] = c[ji] - bound[ji] * sgn[i]
                r2[i] = 0.0
        a = np.empty(nact)
        b = np.empty(nact)
        if not _solve_pair(K, r1, r2, a, b):
            return SINGULAR, v, lam, pieces[:piece], columns[:used], flat_a[:used], flat_b[:used], \
                events[:3 * n_events].reshape(n_events, 3)
        is_active[:] = False
        for i in range(nact):
            is_active[act[i]] = True
        for j in range(m):
            p = c[j]
            q = 0.0
            for i in range(nact):
                g = G[j, act[i]]
                p -= g * a[i]
                q -= g * b[i]
            P[j] = p
            Q[j] = q
        # the end of the piece: the first root in the direction of travel
        stop = 1.0 if adding else np.inf
        for pass_ in range(2):
            for h in range(nact + 2 * m):
                if h < nact:
                    if b[h] == 0.0:
                        continue
                    root = -a[h] / b[h]
                else:
                    j = (h - nact) % m
                    if is_active[j]:
                        continue
                    side = bound[j] if h - nact < m else -bound[j]
                    den = (side - Q[j]) if moving[j] else Q[j]
                    if den == 0.0:
                        continue
                    root = P[j] / den if moving[j] else (side - P[j]) / den
                if not np.isfinite(root):
                    continue
                if adding:
                    ok = root >= 1.0 and (not np.isfinite(lam) or root < lam * (1.0 - tie))
                else:
                    ok = root > lam * (1.0 + tie)
                if not ok:
                    continue
                if pass_ == 0:
                    stop = max(stop, root) if adding else min(stop, root)
                elif abs(root - stop) <= tie * abs(stop):
                    events = _grow_int(events, 3 * n_events + 3)
                    events[3 * n_events] = piece
                    events[3 * n_events + 1] = act[h] if h < nact else (h - nact) % m
                    events[3 * n_events + 2] = 0 if h < nact else 1
                    n_events += 1
            if not np.isfinite(stop):
                break
        # record the piece
        need = used + nact
        columns = _grow_int(columns, need)
        flat_a = _grow_float(flat_a, need)
        flat_b = _grow_float(flat_b, need)
        for i in range(nact):
            columns[used + i] = act[i]
            flat_a[used + i] = a[i]
            flat_b[used + i] = b[i]
        pieces[piece, 0] = lam
        pieces[piece, 1] = stop
        pieces[piece, 2] = used
        pieces[piece, 3] = nact
        used = need
        v[:] = 0.0
        if np.isfinite(stop):
            for i in range(nact):
                v[act[i]] = a[i] + stop * b[i]
        else:
            for i in range(nact):
                v[act[i]] = a[i]
        lam = stop
        first = n_events
        while first > 0 and events[3 * (first - 1)] == piece:
            first -= 1
        if first == n_events:               # nothing happens before the end
            status = STUCK if not adding else DONE
            return status, v, lam, pieces[:piece + 1], columns[:used], flat_a[:used], flat_b[:used], \
                events[:3 * n_events].reshape(n_events, 3)
        for e in range(first, n_events):   # leaving columns first, then the entering ones
            j = events[3 * e + 1]
            if events[3 * e + 2] == 0:
                v[j] = 0.0
                keep = 0
                for i in range(nact):
                    if act[i] != j:
                        act[keep] = act[i]
                        sgn[keep] = sgn[i]
                        keep += 1
                nact = keep
        for e in range(first, n_events):
            if events[3 * e + 2] == 1:
                j = events[3 * e + 1]
                dup = False
                for i in range(nact):
                    if act[i] == j:
                        dup = True
                if dup:
                    continue
                rho = P[j] + lam * Q[j]
                act[nact] = j
                sgn[nact] = 1.0 if rho > 0 else -1.0
                nact += 1
    return TOO_MANY, v, lam, pieces, columns[:used], flat_a[:used], flat_b[:used], \
        events[:3 * n_events].reshape(n_events, 3)
