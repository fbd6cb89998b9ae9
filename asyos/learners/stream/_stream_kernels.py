"""Row loops of the sample-stream learners, compiled with numba when it is available.

Each ``*_rows`` function processes the rows ``order`` of a CSR matrix one at a time, exactly as the
published per-sample algorithm does, but touches only the row's non-zeros plus what the budget
needs (the kept set), never a dense ``d``-vector:

* budgets are kept with an indexed binary heap (``heap_*``) or a quickselect over the kept set plus
  the row's non-zeros (``keep_top``), so truncation costs ``O(B + nnz)`` or ``O(nnz log B)``; B-ARDA,
  whose non-kept scores all move with ``t``, keeps a bounded buffer of candidates and a floor above
  the rest (``barda_rows``), not a heap of every coordinate ever touched;
* the per-coordinate state of B-ARDA, B-AMD, OFS and SOFS is one record (a row of a 2-D array,
  ``sample_stream.records``) per coordinate, so that a non-zero costs one cache line at d = 10^6;
* the CSR arrays are the caller's, int32 or int64 (numba compiles a loop for each), never copied;
* above ``PREFETCH_BYTES`` of records, a loop prefetches the next row's records while it reads this
  row's (``next_row``, ``prefetch``): at d = 10^6 a record is out of L2 and would be waited for;
* global rescalings (``(1 - lambda eta) w``, the L2-ball projection) are a scalar that multiplies
  the stored vector;
* l1 shrinkage of coordinates a row does not touch is applied lazily, in closed form, the next time
  the coordinate is read.

Every loop takes ``margins`` and ``given``: with ``given`` the prediction ``u = w.x`` of row ``j``
is ``margins[j]`` instead of being computed from the current state. This is how the staleness
simulator (``asyos.learners.stream.stream_simulator``) makes a step use a model several updates old.

Ordering: every top-B choice is a strict total order on ``(score, rank)``: a larger score wins, an
equal score goes to the smaller rank (the feature index, or minus it where the lower index must
lose), so results never depend on the order in which candidates were met.

The loss of a row loop is ``losses.dloss1(code, y, u)``, ``code`` from the one table of losses
(``asyos.losses.TABLE``: squared, squared hinge, logistic, and the hinge of OFS).

Parameters and counters by name: the small arrays a loop takes, ``params`` (float64, read only),
``counts`` (int64, the counters it reads and writes back) and B-ARDA's ``bound`` and OFS's ``scale``
(float64 state), have their slots named once, by module constants next to the loop (``B_ETA``,
``BA_SEEN`` ...), and are built by the helper beside them, called with keyword arguments
(``budgeted_params(eta=..., ...)``, ``barda_counts()``): neither the loops nor the learners know a slot
number. numba folds a module-level integer into the code as a constant, so ``params[B_ETA]`` costs
what ``params[0]`` did (the machine code of every loop but ``bamd_rows`` came out the same, byte for
byte; ``bamd_rows``' differs in its register allocation, a few instructions). The layouts are those of
the states already saved (pickles, checkpoints: ``StreamState`` holds these arrays as they are), so a
slot never moves. Every ``counts`` starts with the samples seen and ends with the updates and the
mistakes: ``SEEN``, ``UPDATES``, ``MISTAKES`` read those of any learner (``n_samples_seen_``,
``n_updates_``, ``online_accuracy_``, the training trace).

Without numba (or with ``ASYOS_KERNELS=numpy``) the same functions run as plain Python: correct
but slow; the tests compare both against the dense per-sample transcriptions in
``tests/test_sample_stream_oracles.py``.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ...losses import dloss1

NORM_REFRESH = 1024           # OFS recomputes its running sum of squares exactly this often
MERGE = 64                    # B-AMD: up to this many candidates are merged into the kept set (_bamd_merge)

SEEN, UPDATES, MISTAKES = 0, -2, -1     # in every learner's ``counts``: samples seen, updates, mistakes


def _packed(dtype, slots):
    """A 1-D array of ``dtype`` from ``{slot: value}``, whose slots must be exactly ``0 .. n-1`` (a slot
    constant repeated or left out is a bug of this module, named here rather than left as a zero)."""
    if sorted(slots) != list(range(len(slots))):
        raise ValueError(f"slots {sorted(slots)} are not 0..{len(slots) - 1}")
    out = np.empty(len(slots), dtype=dtype)
    for slot, value in slots.items():
        out[slot] = value
    return out


def _make_jit():
    if os.environ.get("ASYOS_KERNELS", "auto") == "numpy":
        return lambda f: f, False
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a declared dependency
        return lambda f: f, False
    return numba.njit(cache=True, nogil=True), True


jit, COMPILED = _make_jit()
if COMPILED:
    from ...losses import compiled as _compiled_losses  # dloss1(code, y, u) compiled: a branch per loss of the table


def _make_prefetch():
    """``prefetch(a, i)``: ask for the cache line of ``a[i]`` (1-D, any stride) ahead of its use, for
    writing, without waiting for it (``llvm.prefetch``; a no-op without numba)."""
    if not COMPILED:
        return lambda a, i: None
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def prefetch(typingctx, a, i):
        def codegen(context, builder, signature, args):
            aty, ity = signature.args
            array = context.make_array(aty)(context, builder, args[0])
            index = context.cast(builder, args[1], ity, types.intp)
            ptr = cgutils.get_item_pointer(context, builder, aty, array, [index], wraparound=False)
            byte, word = ir.IntType(8).as_pointer(), ir.IntType(32)
            signature_ = ir.FunctionType(ir.VoidType(), [byte, word, word, word])
            fn = cgutils.get_or_insert_function(builder.module, signature_, "llvm.prefetch.p0i8")
            builder.call(fn, [builder.bitcast(ptr, byte), word(1), word(3), word(1)])
            return context.get_dummy_value()
        return types.void(a, i), codegen
    return prefetch


prefetch = _make_prefetch()


PREFETCH_BYTES = 1 << 22      # per-coordinate state above this (the 4 MB L2 here) is prefetched a row ahead


@jit
def next_row(a, indptr, order, jj):
    """``(lo, hi)``: the non-zeros of the row after ``order[jj]`` whose records (``a[i]``) a row loop
    prefetches while it reads this row's, one for each of this row's (the rest after): none when it is
    the last, or when ``a`` spans at most ``PREFETCH_BYTES``, where the records stay in L2 and the
    prefetch only costs (0.1 us per row at d = 2e4). At d = 10^6, with the records (32-64 MB) out of
    L2, a row of B-ARDA took 1.94 us without, 1.40 us with all the next row's prefetched at its start;
    OFS 1.84 us without, 1.31 us interleaved (loops alone, 2 shared cores, noisy)."""
    if jj + 1 < order.shape[0] and a.shape[0] * a.strides[0] > PREFETCH_BYTES:
        r = order[jj + 1]
        return indptr[r], indptr[r + 1]
    return 0, 0


@jit
def mistake(y, u):
    """1 when the prediction ``u`` misclassifies label ``y`` (``u >= 0`` predicts +1), else 0: the
    online (progressive) error that the ECML'18 code records. Meaningless for regression labels."""
    return 1 if (u >= 0.0) != (y > 0.0) else 0


@jit
def row_dot(w, indptr, indices, data, r):
    """``w . x_r`` over the row's non-zeros."""
    u = 0.0
    for k in range(indptr[r], indptr[r + 1]):
        u += w[indices[k]] * data[k]
    return u


@jit
def beats(key_a, rank_a, key_b, rank_b):
    """The total order of every top-B choice: a larger key, or an equal key and a smaller rank."""
    return key_a > key_b or (key_a == key_b and rank_a < rank_b)


# -- an indexed binary heap: the item on top beats every other one ------------------------------
# (``reverse``: the order reversed, the item on top is beaten by every other one)
@jit
def ahead(key, rank, a, b, reverse):
    """Whether item ``a`` goes above item ``b`` in the heap."""
    if reverse:
        return beats(key[b], rank[b], key[a], rank[a])
    return beats(key[a], rank[a], key[b], rank[b])


@jit
def heap_sift_up(heap, pos, key, rank, i, reverse=False):
    item = heap[i]
    while i > 0:
        parent = (i - 1) >> 1
        other = heap[parent]
        if not ahead(key, rank, item, other, reverse):
            break
        heap[i] = other
        pos[other] = i
        i = parent
    heap[i] = item
    pos[item] = i


@jit
def heap_sift_down(heap, pos, key, rank, size, i, reverse=False):
    item = heap[i]
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        right = child + 1
        if right < size and ahead(key, rank, heap[right], heap[child], reverse):
            child = right
        other = heap[child]
        if not ahead(key, rank, other, item, reverse):
            break
        heap[i] = other
        pos[other] = i
        i = child
    heap[i] = item
    pos[item] = i


@jit
def heap_push(heap, pos, key, rank, size, item, reverse=False):
    heap[size] = item
    pos[item] = size
    heap_sift_up(heap, pos, key, rank, size, reverse)
    return size + 1


@jit
def heap_fix(heap, pos, key, rank, size, item, reverse=False):
    """Restore the heap after ``key[item]`` changed either way."""
    heap_sift_up(heap, pos, key, rank, int(pos[item]), reverse)
    heap_sift_down(heap, pos, key, rank, size, int(pos[item]), reverse)


# -- quickselect: the ``k`` best of ``cand[:n]`` moved to ``cand[:k]`` ---------------------------
@jit
def heap_replace_top(heap, pos, key, rank, size, item):
    """Put ``item`` (not in the heap, ``key[item]`` set) in place of the top, which leaves."""
    pos[heap[0]] = -1
    heap[0] = item
    pos[item] = 0
    heap_sift_down(heap, pos, key, rank, size, 0)


@jit
def keep_top(cand, n, k, score, rank):
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        piv = cand[mid]
        pk, pr = score[piv], rank[piv]
        i, j = lo, hi
        while i <= j:
            while beats(score[cand[i]], rank[cand[i]], pk, pr):
                i += 1
            while beats(pk, pr, score[cand[j]], rank[cand[j]]):
                j -= 1
            if i <= j:
                tmp = cand[i]
                cand[i] = cand[j]
                cand[j] = tmp
                i += 1
                j -= 1
        if k - 1 <= j:
            hi = j
        elif k - 1 >= i:
            lo = i
        else:
            break


# -- B-ARDA (ECML'18 Alg. 1): dual averaging, keep the B largest H z^2 ---------------------------
B_ETA, B_LAM, B_DELTA, B_BUDGET, B_LOSS, B_POWER = range(6)                 # params of barda_rows and bamd_rows
BA_SEEN, BA_MEMBERS, BA_BUFFER, BA_ACTIVE, BA_FLOOR, BA_UPDATES, BA_MISTAKES = range(7)     # counts of barda_rows
BB_FLOOR_KEY, BB_RESCANS, BB_LOW, BB_LOW_C, BB_HEAP = range(5)              # bound of barda_rows


def budgeted_params(*, eta, lam, delta, budget, loss, power):
    """``params`` of ``barda_rows`` and ``bamd_rows``: ``B_ETA`` the step size ``eta``; ``B_LAM`` the l2
    weight ``lam`` of ``phi = lam/2 ||w||^2``; ``B_DELTA`` AdaGrad's ``delta``; ``B_BUDGET`` the budget
    ``B``; ``B_LOSS`` the loss code (``losses.TABLE``); ``B_POWER`` the power of the truncation score
    ``H |z|^power`` (2: B-ARDA's ``H z^2``, 1: B-AMD's ``H |z|``)."""
    return _packed(np.float64, {B_ETA: eta, B_LAM: lam, B_DELTA: delta, B_BUDGET: budget, B_LOSS: loss,
                                B_POWER: power})


def barda_counts(*, seen=0, members=0, buffer=0, active=0, floor=-1, updates=0, mistakes=0):
    """``counts`` of ``barda_rows`` (the defaults: a fresh state): ``BA_SEEN`` the samples seen (``t``);
    ``BA_MEMBERS`` the size of the kept set; ``BA_BUFFER`` the size of the buffer of candidates;
    ``BA_ACTIVE`` the coordinates ever touched; ``BA_FLOOR`` the floor's item (-1: none yet);
    ``BA_UPDATES`` the steps with a non-zero loss gradient; ``BA_MISTAKES`` the online mistakes."""
    return _packed(np.int64, {BA_SEEN: seen, BA_MEMBERS: members, BA_BUFFER: buffer, BA_ACTIVE: active,
                              BA_FLOOR: floor, BA_UPDATES: updates, BA_MISTAKES: mistakes})


def barda_bound(*, floor_key=0.0, rescans=0, low=-1.0, low_c=0.0, heap=1.0):
    """``bound`` of ``barda_rows`` (the defaults: a fresh state): ``BB_FLOOR_KEY`` the floor's key (an
    upper bound of the scores outside the kept set and the buffer); ``BB_RESCANS`` the rescans of every
    active coordinate so far; ``BB_LOW`` a lower bound of the weakest member's score (-1: unknown) at
    ``c = lam eta t`` = ``BB_LOW_C``; ``BB_HEAP`` 1 when the kept set is a heap of its members' lower
    bounds (``barda_member_heap``; states saved before it have four slots and no heap)."""
    return _packed(np.float64, {BB_FLOOR_KEY: floor_key, BB_RESCANS: rescans, BB_LOW: low, BB_LOW_C: low_c,
                                BB_HEAP: heap})


@jit
def _arda_score(i, c, sg, h, eta, power):
    """The truncation score ``H_i |z_i|^power`` of eq. 2 (power 2) or eq. 4 (power 1)."""
    z = abs(eta * sg[i] / (c + h[i]))
    return h[i] * z * z if power == 2 else h[i] * z


@jit
def _arda_below(i, c, sg, h, eta, power, key):
    """True when the score of ``i`` (``_arda_score``) is certainly below ``key``: the comparison without its
    division (a margin of 1e-12 covers the rounding of both sides; False when in doubt)."""
    a = eta * abs(sg[i])
    den = c + h[i]
    if power == 2:
        return h[i] * a * a < key * den * den * (1.0 - 1e-12)
    return h[i] * a < key * den * (1.0 - 1e-12)


@jit
def barda_rows(rec, members, heap, cand, bound, counts, params, indptr, indices, data, y, order, margins, given):
    """``params`` (``budgeted_params``), ``counts`` (``barda_counts``) and ``bound`` (``barda_bound``) by
    their named slots.

    State: ``sg = sum g`` and ``sq = sum g^2`` per coordinate, ``h = H = delta + sqrt(sq)``; the kept set
    (``members``, ``mpos``) is the top ``B`` of ``H z^2`` over the coordinates ever touched (``active``),
    with ``z = -eta sg / (lam eta t + H)`` (eq. 1 with ``phi = lam/2 ||w||^2``). A score only falls while
    ``t`` grows and the coordinate is not touched, so a score computed earlier is an upper bound of it.
    The other active coordinates are split in two: a *buffer* (a heap of at most ``len(heap)`` of them,
    keyed by such an upper bound, the strongest on top) and the rest, none of which beats the *floor*
    ``(floor_key, floor_item)`` (an upper bound, in the ``beats`` order, of their scores). After every row
    the invariant is restored at ``c = lam eta t``: buffer tops that beat the weakest member have their
    key refreshed or swap in; when the floor beats the weakest member, ``_barda_rescan`` scores every
    active non-member exactly and refills the buffer with the best half of its capacity.

    The weakest member's score is not computed at every row (B divisions): ``low`` is a lower bound of it
    at ``c = low_c`` (-1: unknown), lowered when a member is touched; a score falls with ``c`` by at most
    ``((low_c + delta) / (c + delta))^power`` (as ``H >= delta``), so when the buffer's top and the floor
    are below that bound (with a margin of 1e-9 for rounding) nothing is looked at. Otherwise the kept
    set is a heap of the same bound scaled to a common ``c`` (``_arda_weakest``): its top, rescored until
    its key is exact, is the weakest, and each swap or touched member costs ``O(log B)``. Before, the
    weakest two were found by scoring every member: at B = 1000 (d = 2e4, 100 non-zeros a row) 2,738
    scores a row, 0.31x scikit-learn's SGD rows per second (``bench_stream_throughput.py``); with the heap
    53 scores a row and 0.59x.

    A touched coordinate outside the buffer is admitted to it only when it beats the floor, so at
    d = 10^6 the ~10 coordinates per row met for the first time cost a score and a comparison, not a
    push into a heap of every coordinate ever met (as before: 7.7x slower than at d = 2e4 per row,
    ``bench_stream_throughput.py``); rescans are rare (counted in ``tests``) and cost O(active).
    """
    sg, sq, h, hkey, mpos, hpos, active, ranks = _arda_columns(rec)
    eta, lam, delta, budget, code = params[B_ETA], params[B_LAM], params[B_DELTA], int(params[B_BUDGET]), \
        int(params[B_LOSS])
    power = int(params[B_POWER])
    t, nmem, hsize, nact = counts[BA_SEEN], counts[BA_MEMBERS], counts[BA_BUFFER], counts[BA_ACTIVE]
    floor, nupd, miss = counts[BA_FLOOR], counts[BA_UPDATES], counts[BA_MISTAKES]
    fkey, low, lowc = bound[BB_FLOOR_KEY], bound[BB_LOW], bound[BB_LOW_C]
    capacity = heap.shape[0]
    for jj in range(order.shape[0]):
        r = order[jj]
        lo, hi = indptr[r], indptr[r + 1]
        nlo, nhi = next_row(sg, indptr, order, jj)
        c_prev = lam * eta * t
        if given:
            u = margins[jj]
        else:
            u = 0.0
            for k in range(lo, hi):
                i = indices[k]
                if nhi > 0 and nlo < nhi:            # nhi = 0 (d = 2e4): 0.75 us per row, as without
                    prefetch(sg, indices[nlo])
                    nlo += 1
                if mpos[i] >= 0:
                    u -= eta * sg[i] / (c_prev + h[i]) * data[k]
        for k in range(nlo, nhi):
            prefetch(sg, indices[k])
        miss += mistake(y[r], u)
        t += 1
        c = lam * eta * t
        f = (c + delta) ** power                       # a member's key: its score times f (below)
        gl = dloss1(code, y[r], u)
        if gl != 0.0:
            nupd += 1
            for k in range(lo, hi):
                i = indices[k]
                g = gl * data[k]
                sg[i] += g
                sq[i] += g * g
                h[i] = delta + math.sqrt(sq[i])
                if mpos[i] >= 0:                       # a member: the lower bound of the weakest follows it
                    s = _arda_score(i, c, sg, h, eta, power)
                    if s < low:
                        low = s
                    hkey[i] = -(s * f)                 # its place in the kept set's heap
                    heap_fix(members, mpos, hkey, ranks, nmem, i)
                    continue
                if active[i] == 0.0:
                    active[i] = 1.0
                    nact += 1
                    if nmem < budget:
                        hkey[i] = -(_arda_score(i, c, sg, h, eta, power) * f)
                        nmem = heap_push(members, mpos, hkey, ranks, nmem, i)
                        low = -1.0                     # the weakest is unknown
                        continue
                if hpos[i] < 0 and floor >= 0 and _arda_below(i, c, sg, h, eta, power, fkey):
                    continue                           # under the floor: it stays out, and no division
                s = _arda_score(i, c, sg, h, eta, power)
                if hpos[i] >= 0:
                    if s > hkey[i]:                    # a key that fell is still an upper bound
                        hkey[i] = s
                        heap_sift_up(heap, hpos, hkey, ranks, int(hpos[i]))
                elif floor < 0 or beats(s, ranks[i], fkey, ranks[floor]):
                    if hsize == capacity:              # full: its weaker half goes out, the floor rises
                        for m in range(hsize):
                            j = heap[m]
                            hpos[j] = -1
                            hkey[j] = _arda_score(j, c, sg, h, eta, power)
                            cand[m] = j
                        hsize, floor, fkey = _barda_refill(cand, hsize, heap, hpos, hkey, ranks, floor, fkey)
                    if floor < 0 or beats(s, ranks[i], fkey, ranks[floor]):
                        hkey[i] = s                    # admitted to the buffer
                        hsize = heap_push(heap, hpos, hkey, ranks, hsize, i)
        # restore: every coordinate outside the kept set scores no higher than the weakest member
        if low >= 0.0 and (hsize > 0 or floor >= 0):  # nothing outside can beat the weakest: no scan
            bar = low * ((lowc + delta) / (c + delta)) ** power * (1.0 - 1e-9)
            if (hsize == 0 or hkey[heap[0]] < bar) and (floor < 0 or fkey < bar):
                continue
        weakest, wscore = -1, 0.0
        while hsize > 0 or floor >= 0:
            if weakest < 0:                            # the weakest member, from the kept set's heap
                weakest, wscore = _arda_weakest(members, mpos, hkey, ranks, nmem, c, f, sg, h, eta, power, cand)
            if hsize > 0 and beats(hkey[heap[0]], ranks[heap[0]], wscore, ranks[weakest]):
                top = heap[0]
                exact = _arda_score(top, c, sg, h, eta, power)
                if exact != hkey[top]:
                    hkey[top] = exact
                    heap_sift_down(heap, hpos, hkey, ranks, hsize, 0)
                    continue
                slot = int(mpos[weakest])              # swap: top joins, the weakest takes its place
                members[slot] = top
                mpos[top] = slot
                hpos[top] = -1
                mpos[weakest] = -1
                hkey[weakest] = wscore
                heap[0] = weakest
                hpos[weakest] = 0
                heap_sift_down(heap, hpos, hkey, ranks, hsize, 0)
                hkey[top] = -(exact * f)
                heap_fix(members, mpos, hkey, ranks, nmem, top)
                weakest = -1
                continue
            if floor >= 0 and beats(fkey, ranks[floor], wscore, ranks[weakest]):
                hsize, floor, fkey = _barda_rescan(c, sg, h, eta, power, active, mpos, heap, hpos, hkey, ranks,
                                                   cand)
                bound[BB_RESCANS] += 1.0
                continue
            low, lowc = wscore, c
            break
    counts[BA_SEEN], counts[BA_MEMBERS], counts[BA_BUFFER], counts[BA_ACTIVE] = t, nmem, hsize, nact
    counts[BA_FLOOR], counts[BA_UPDATES], counts[BA_MISTAKES] = floor, nupd, miss
    bound[BB_FLOOR_KEY], bound[BB_LOW], bound[BB_LOW_C] = fkey, low, lowc


@jit
def _arda_weakest(members, mpos, hkey, ranks, nmem, c, f, sg, h, eta, power, stack):
    """``(weakest member, its score)`` at ``c``, from the kept set's heap (``members``, positions ``mpos``):
    a member's key ``hkey = -score(c') f(c')`` at the ``c'`` it was last scored, ``f(c) = (c + delta)^power``,
    is minus a lower bound of ``score(c) f(c)`` for every later ``c`` (a score falls with ``c`` by at most
    ``f(c') / f(c)``, as ``H >= delta``), so the top has the least bound. Stale tops are rescored until the
    top's key is its score; then every member whose bound is within 1e-12 of it (rounding) is scored and
    the weakest of them in the ``beats`` order is the weakest member. ``stack``: scratch of ``nmem`` ints."""
    while True:
        i = members[0]
        s = _arda_score(i, c, sg, h, eta, power)
        key = -(s * f)
        if key < hkey[i] * (1.0 + 1e-12) - 1e-300:     # its bound was below its score: raise it, look again
            hkey[i] = key
            heap_sift_down(members, mpos, hkey, ranks, nmem, 0)
            continue
        break
    best, bscore = i, s
    limit = -key * (1.0 + 1e-12) + 1e-300             # bounds up to this may hide a score below s
    n = 0
    for child in (1, 2):
        if child < nmem:
            stack[n] = child
            n += 1
    while n > 0:
        n -= 1
        node = stack[n]
        j = members[node]
        if -hkey[j] > limit:                           # it and its subtree score above the candidate
            continue
        sj = _arda_score(j, c, sg, h, eta, power)
        if beats(bscore, ranks[best], sj, ranks[j]):
            best, bscore = j, sj
        for child in (2 * node + 1, 2 * node + 2):
            if child < nmem:
                stack[n] = child
                n += 1
    return best, bscore


def barda_member_heap(rec, members, nmem, params, seen):
    """Make the kept set of a B-ARDA state saved before the heap (``bound`` of four slots) a heap of its
    members' keys (``_arda_weakest``) at ``c = lam eta seen``."""
    sg, h, hkey, mpos, ranks = rec[:, 0], rec[:, 2], rec[:, 3], rec[:, 4], rec[:, 7]
    eta, lam, delta, power = params[B_ETA], params[B_LAM], params[B_DELTA], int(params[B_POWER])
    c = lam * eta * seen
    f = (c + delta) ** power
    for m in range(nmem):
        i = members[m]
        hkey[i] = -(_arda_score(i, c, sg, h, eta, power) * f)
        mpos[i] = m
    for m in range(nmem // 2 - 1, -1, -1):
        heap_sift_down(members, mpos, hkey, ranks, nmem, m)


@jit
def _arda_columns(rec):
    """B-ARDA's per-coordinate state, one 64-byte record per coordinate (``ARDA_COLUMNS``): ``sg, sq, h,
    hkey, mpos, hpos, active, rank``. A row's non-zero then costs one cache line instead of seven arrays'
    (at d = 10^6 the arrays exceed the 4 MB L2: 3.6 us per row with separate arrays, 2.5 us packed, 50000
    rows of 100 non-zeros, B = 100; one run each on 2 shared cores)."""
    return rec[:, 0], rec[:, 1], rec[:, 2], rec[:, 3], rec[:, 4], rec[:, 5], rec[:, 6], rec[:, 7]


@jit
def _barda_rescan(c, sg, h, eta, power, active, mpos, heap, hpos, hkey, ranks, cand):
    """Score every active non-member exactly at ``c`` and refill the buffer (``_barda_refill``); a
    sequential pass over the coordinates (at d = 10^6, 3x faster than visiting the active ones in the
    order they came). Returns ``(buffer_size, floor_item, floor_key)``."""
    n = 0
    for i in range(active.shape[0]):
        if active[i] != 0.0 and mpos[i] < 0:
            hpos[i] = -1
            hkey[i] = _arda_score(i, c, sg, h, eta, power)
            cand[n] = i
            n += 1
    return _barda_refill(cand, n, heap, hpos, hkey, ranks, -1, 0.0)


@jit
def _barda_refill(cand, n, heap, hpos, hkey, ranks, floor, fkey):
    """The best ``len(heap) // 2`` of ``cand[:n]`` (keyed by ``hkey``, out of the buffer) become the
    buffer; the floor rises to the best of the others. Returns ``(buffer_size, floor_item, floor_key)``."""
    keep = min(n, max(heap.shape[0] // 2, 1))
    if n > keep:
        keep_top(cand, n, keep, hkey, ranks)
    hsize = 0
    for m in range(keep):
        hsize = heap_push(heap, hpos, hkey, ranks, hsize, cand[m])
    for m in range(keep, n):
        i = cand[m]
        if floor < 0 or beats(hkey[i], ranks[i], fkey, ranks[floor]):
            floor, fkey = i, hkey[i]
    return hsize, floor, fkey


# -- B-AMD (ECML'18 Alg. 2): adaptive mirror descent, keep the B largest H |z| -------------------
KS_SEEN, KS_KEPT, KS_UPDATES, KS_MISTAKES = range(4)        # counts of bamd_rows, ofs_rows and sofs_rows


def kept_counts(*, seen=0, kept=0, updates=0, mistakes=0):
    """``counts`` of the loops with a kept set of at most ``B`` coordinates, ``bamd_rows``, ``ofs_rows``
    and ``sofs_rows`` (the defaults: a fresh state): ``KS_SEEN`` the samples seen (``t``); ``KS_KEPT``
    the size of the kept set (B-AMD's members, OFS's and SOFS's heap); ``KS_UPDATES`` the steps that
    changed the model (a non-zero loss gradient, SOFS: a margin violation); ``KS_MISTAKES`` the online
    mistakes."""
    return _packed(np.int64, {KS_SEEN: seen, KS_KEPT: kept, KS_UPDATES: updates, KS_MISTAKES: mistakes})


@jit
def bamd_rows(rec, members, kept, cand, score, ranks, counts, params, accumulate, indptr, indices, data, y, order,
              margins, given):
    """``params`` (``budgeted_params``) and ``counts`` (``kept_counts``: ``KS_KEPT`` is the members) by
    their named slots.

    Per row: ``g = lam w + l'(u) x`` (non-zero on the kept set and the row), ``s_i = ||g_{1:t,i}||``,
    ``z = w - eta g / H`` (eq. 3's closed form), then the ``B`` largest ``H_i |z_i|`` among the non-zeros
    (eq. 4). ``w`` is zero outside ``members``.

    The kept set lives in dense arrays of length ``B`` (``kept`` rows ``w, sq, H, score, touched``; slot
    ``m`` holds ``members[m]``, whose ``mpos`` in ``rec`` is ``m``): eq. 3 with ``phi = lam/2 ||w||^2``
    moves every kept weight at every row, and over contiguous slots that pass is a branch-free loop the
    compiler vectorizes (a touched member gets ``g = 0``, which leaves it as it is, bit for bit).
    Before, it went through ``members`` to the per-coordinate records, with a branch per member: at
    d = 2e4, B = 100 a row cost 1.89 us, 0.45x scikit-learn's (see the commit for the figures after).
    ``rec`` holds one 32-byte record ``w, sq, H, mpos`` per coordinate, read for each non-zero of a
    row; a member's ``w`` there is 0 and its ``sq, H`` are written back when it leaves the kept set.

    With the kept set full (``B`` members) and the linear score, a newcomer's score ``H_i |z_i|`` is
    ``eta |g_i|`` up to three roundings, so one that is below the weakest member's by a margin of 1e-12
    is dropped with its ``sq`` updated and neither ``H_i`` nor ``z_i`` computed (a square root and a
    division per non-zero: 1.32 -> 0.98 us per row at d = 2e4); ``H`` in the record of a coordinate
    outside the kept set may then be stale, and is recomputed from ``sq`` before it is read.

    The truncation: a newcomer (a row coordinate outside the kept set) that does not beat the weakest
    member cannot be among the ``B`` largest, so it is dropped after one comparison; the members' scores
    are taken in the shrinking pass, and the few newcomers that beat the weakest (``MERGE`` or fewer) are
    merged into the kept set (``_bamd_merge``: the weakest members found in one pass, only the slots that
    change written); more: one quickselect over the members and them.

    ``accumulate`` (``outside="accumulate"``): a coordinate outside the kept set keeps its ``z`` in its
    record, moved by each step that touches it, and competes with it; without it (ECML'18 Alg. 2) it
    restarts from 0 at each step and is zeroed when it stays out. A row whose strongest newcomer does
    not beat the weakest member (three rows in four at B = 100, counted on 6,000 rows of 100 random
    features of 20,000, the benchmark's shape) then ends after its first pass. That pass keeps only the
    strongest newcomer's score, a branch-free maximum: a score equal to the weakest member's goes on to
    the second pass, whose comparisons break the tie by rank (0.78x scikit-learn's rows per CPU-second at
    d = 2e4, B = 100, against 0.76-0.77x with the rank compared at each newcomer: within the run-to-run
    noise; what remains is each newcomer's square root and division, AdaGrad's step).

    ``lam = 0`` (``BudgetedAMD``'s default): an untouched member neither moves nor changes its score, so
    there is no shrinking pass; a touched member's score is taken where it is touched, and the members
    sit in a heap with the weakest on top (``wh``, ``wp``: the indexed heap in reverse order), kept as
    members are touched, enter and are replaced. A row then costs its non-zeros and ``O(log B)`` per change
    instead of ``O(B)`` (on those rows at B = 1000, 60% bring a newcomer that enters: a pass
    to find the weakest and one in ``_weakest_slots`` each). The model is the same, bit for bit, as
    the shrinking pass gives with ``lam = 0``. Measured (``bench_stream_throughput.py``, rows per
    CPU-second against scikit-learn's SGD, the default ``lam`` 1e-4 before): d = 2e4, B = 100 0.55x ->
    0.76x, B = 1000 0.15x -> 0.52x; d = 1e6, B = 100 0.79x -> 1.07x. (Heap functions of their own,
    without ``heap_sift_*``'s ``reverse`` branch, gave 0.55x at B = 1000.)
    """
    w, sq, h, mpos = rec[:, 0], rec[:, 1], rec[:, 2], rec[:, 3]
    kw, ksq, kh, ks, kt = kept[0], kept[1], kept[2], kept[3], kept[4]
    eta, lam, delta, budget, code = params[B_ETA], params[B_LAM], params[B_DELTA], int(params[B_BUDGET]), \
        int(params[B_LOSS])
    power = int(params[B_POWER])
    shrink = lam != 0.0                              # lam = 0: an untouched member does not move
    t, nmem, nupd, miss = counts[KS_SEEN], counts[KS_KEPT], counts[KS_UPDATES], counts[KS_MISTAKES]
    wh = np.empty(max(budget, 1), np.int64)          # (lam = 0) the members' slots, the weakest on top,
    wp = np.empty(max(budget, 1), np.int64)          # and each slot's place in that heap
    if not shrink:
        for m in range(nmem):                        # the scores as saved (a state saved before entries took
            ks[m] = _amd_score(kw[m], kh[m], power)  # their scores had some unset)
        _weak_build(wh, wp, ks, members, nmem)
    for jj in range(order.shape[0]):
        r = order[jj]
        lo, hi = indptr[r], indptr[r + 1]
        nlo, nhi = next_row(w, indptr, order, jj)
        if given:
            u = margins[jj]
        else:                                        # w is zero outside the kept set
            u = 0.0
            for k in range(lo, hi):
                if nlo < nhi:
                    prefetch(w, indices[nlo])
                    nlo += 1
                p = mpos[indices[k]]
                if p >= 0.0:
                    u += kw[int(p)] * data[k]
        for k in range(nlo, nhi):
            prefetch(w, indices[k])
        miss += mistake(y[r], u)
        t += 1
        gl = dloss1(code, y[r], u)
        if gl != 0.0:
            nupd += 1
        full = nmem == budget and power == 1 and not accumulate   # newcomers filtered before H and z are computed
        fresh = 0                                    # the newcomers: the row's non-zeros of z outside
        zeros = 0
        best_s = -1.0                                # (accumulate) the strongest newcomer's score (-1: none)
        for k in range(lo, hi):
            i = indices[k]
            p = mpos[i]
            if p >= 0.0:
                m = int(p)
                if shrink:
                    kt[m] = 1.0                      # touched: no second (shrink) step below
                g = lam * kw[m] + gl * data[k]
                if g != 0.0:
                    ksq[m] += g * g
                    kh[m] = delta + math.sqrt(ksq[m])
                    kw[m] -= eta * g / kh[m]
                    if not shrink:                   # its score now: no pass over the members below
                        ks[m] = _amd_score(kw[m], kh[m], power)
                        zeros += kw[m] == 0.0
                        heap_fix(wh, wp, ks, members, nmem, m, True)
                continue
            g = gl * data[k]                         # lam w_i + l' x_i with w_i = 0
            if g != 0.0:
                sq[i] += g * g
                if not full:
                    fresh += _bamd_newcomer(w, sq, h, i, g, eta, delta, accumulate)
                    if accumulate and w[i] != 0.0:
                        s = _amd_score(w[i], h[i], power)
                        if s > best_s:
                            best_s = s
        if shrink:                                   # untouched members shrink (g = lam w); g = 0: unchanged
            for m in range(nmem):                    # ... and every member's score, in the same pass
                g = 0.0 if kt[m] != 0.0 else lam * kw[m]
                ksq[m] += g * g
                kh[m] = delta + math.sqrt(ksq[m])
                kw[m] -= eta * g / kh[m]
                kt[m] = 0.0
                ks[m] = _amd_score(kw[m], kh[m], power)
                zeros += kw[m] == 0.0
        if zeros:
            nmem = _bamd_compact(rec, members, kept, nmem)
            if not shrink:
                _weak_build(wh, wp, ks, members, nmem)
        if full and nmem < budget:                   # a member left: every newcomer's z after all
            full = False
            for k in range(lo, hi):
                i = indices[k]
                g = gl * data[k]
                if mpos[i] < 0.0 and g != 0.0:
                    fresh += _bamd_newcomer(w, sq, h, i, g, eta, delta, accumulate)
        if not full and nmem + fresh <= budget:
            for k in range(lo, hi):
                i = indices[k]
                if mpos[i] < 0.0 and w[i] != 0.0 and gl * data[k] != 0.0:     # the newcomers counted
                    _bamd_enter(rec, members, kept, nmem, i, power)
                    if not shrink:
                        heap_push(wh, wp, ks, members, nmem, nmem, True)
                    nmem += 1
            continue
        weakest = -1                                 # the weakest member's slot
        if not shrink:
            weakest = wh[0] if nmem > 0 else -1
        else:
            for m in range(nmem):
                if weakest < 0 or beats(ks[weakest], members[weakest], ks[m], members[m]):
                    weakest = m
        # the strongest newcomer does not beat the weakest member (an equal score goes on to the pass
        # below, which breaks the tie by rank)
        if accumulate and nmem == budget and weakest >= 0 and best_s < ks[weakest]:
            continue
        n = 0                                        # survivors: newcomers beating the weakest member
        bar = ks[weakest] * (1.0 - 1e-12) if weakest >= 0 else 0.0
        for k in range(lo, hi):
            i = indices[k]
            if mpos[i] >= 0.0:
                continue
            if full:
                g = gl * data[k]
                if g == 0.0 or eta * abs(g) < bar:   # H |z| = eta |g| up to 3 roundings: below the weakest
                    continue
                _bamd_newcomer(w, sq, h, i, g, eta, delta, accumulate)
            if w[i] != 0.0:
                s = _amd_score(w[i], h[i], power)
                if nmem < budget or beats(s, ranks[i], ks[weakest], ranks[members[weakest]]):
                    score[i] = s
                    cand[n] = i
                    n += 1
                elif not accumulate:
                    w[i] = 0.0
        if n == 0:
            continue
        if n <= MERGE:
            nmem = _bamd_merge(rec, members, kept, cand, n, score, ranks, nmem, budget, accumulate, power,
                               wh, wp, not shrink)
            continue
        for m in range(nmem):                        # a quickselect over the members and the survivors
            i = members[m]
            score[i] = ks[m]
            cand[n + m] = i
            _bamd_leave(rec, members, kept, m, accumulate)
            w[i] = kw[m]
        n += nmem
        keep_top(cand, n, budget, score, ranks)
        if not accumulate:
            for m in range(budget, n):
                w[cand[m]] = 0.0
        for m in range(budget):
            _bamd_enter(rec, members, kept, m, cand[m], power)
        nmem = budget
        if not shrink:
            _weak_build(wh, wp, ks, members, nmem)
    counts[KS_SEEN], counts[KS_KEPT], counts[KS_UPDATES], counts[KS_MISTAKES] = t, nmem, nupd, miss


# -- B-AMD with lam = 0: the members in a heap, the weakest on top --------------------------------
@jit
def _weak_build(wh, wp, ks, members, nmem):
    """The heap of the member slots ``0 .. nmem - 1``, the weakest on top (``O(nmem)``)."""
    for m in range(nmem):
        wh[m] = m
        wp[m] = m
    for i in range(nmem // 2 - 1, -1, -1):
        heap_sift_down(wh, wp, ks, members, nmem, i, True)


@jit
def _bamd_enter(rec, members, kept, m, i, power):
    """Coordinate ``i`` (``w_i`` in its record) takes slot ``m`` of B-AMD's kept set, with its score."""
    members[m] = i
    rec[i, 3] = m
    kept[0, m], kept[1, m], kept[2, m], kept[4, m] = rec[i, 0], rec[i, 1], rec[i, 2], 0.0
    kept[3, m] = _amd_score(kept[0, m], kept[2, m], power)
    rec[i, 0] = 0.0


@jit
def _bamd_newcomer(w, sq, h, i, g, eta, delta, accumulate):
    """``H_i`` and ``z_i = -eta g / H_i`` of a coordinate outside the kept set (``sq_i`` already
    updated with ``g``), or with ``accumulate`` ``z_i`` moved by that step from where it was; returns 1
    when ``z_i != 0``."""
    h[i] = delta + math.sqrt(sq[i])
    if accumulate:
        w[i] -= eta * g / h[i]
    else:
        w[i] = -(eta * g / h[i])
    return 1 if w[i] != 0.0 else 0


@jit
def _bamd_leave(rec, members, kept, m, accumulate):
    """The member in slot ``m`` leaves the kept set (``w = 0``, or with ``accumulate`` its ``z``; ``sq, H``
    back into its record)."""
    i = members[m]
    rec[i, 0], rec[i, 1], rec[i, 2], rec[i, 3] = kept[0, m] if accumulate else 0.0, kept[1, m], kept[2, m], -1.0


@jit
def _bamd_compact(rec, members, kept, nmem):
    """Members whose weight is exactly 0 leave; the others close ranks (in order). Returns their number."""
    n = 0
    for m in range(nmem):
        if kept[0, m] == 0.0:
            _bamd_leave(rec, members, kept, m, False)
            continue
        members[n] = members[m]
        rec[members[n], 3] = n
        for c in range(5):
            kept[c, n] = kept[c, m]
        n += 1
    return n


@jit
def _bamd_merge(rec, members, kept, cand, n, score, ranks, nmem, budget, accumulate, power, wh, wp, heaped):
    """The ``B`` strongest of the members and the ``n`` candidates ``cand[:n]`` (``score``) become the kept
    set, the members that stay keeping their slots: the candidates sorted strongest first fill the free
    slots, then replace the weakest members (found in one pass, ``_weakest_slots``) while they beat
    them. ``O(B log n + n^2)`` where the quickselect over every member and candidate wrote every
    member's record back and in again. ``heaped`` (``lam = 0``): the weakest member is the top of the heap
    ``wh``, kept as slots change, ``O(n log B)``. Returns the number of members. A coordinate that enters
    takes its score (``kept[3]``) with it."""
    ks = kept[3]
    for a in range(1, n):                            # candidates, strongest first (insertion sort: n is small)
        x = cand[a]
        b = a - 1
        while b >= 0 and beats(score[x], ranks[x], score[cand[b]], ranks[cand[b]]):
            cand[b + 1] = cand[b]
            b -= 1
        cand[b + 1] = x
    free = min(budget - nmem, n)
    # the weakest members that the candidates past the free slots may replace: the candidates that take
    # the free slots beat those, so only the members before them can leave; scratch past the candidates
    # (``n`` candidates and ``nmem`` members are distinct features: ``len(cand) - n >= nmem``)
    weak = cand[n:]
    j = nmem if heaped else _weakest_slots(ks, members, nmem, min(n - free, nmem), weak)
    q = 0
    while q < free:                                  # free slots
        i = cand[q]
        _bamd_enter(rec, members, kept, nmem, i, power)
        if heaped:
            heap_push(wh, wp, ks, members, nmem, nmem, True)
        nmem += 1
        q += 1
    t = 0
    while q < n and t < j:
        i = cand[q]
        m = wh[0] if heaped else weak[t]
        if not beats(score[i], ranks[i], ks[m], members[m]):
            break
        _bamd_leave(rec, members, kept, m, accumulate)
        _bamd_enter(rec, members, kept, m, i, power)
        if heaped:                                   # a stronger score in the weakest's slot
            heap_sift_down(wh, wp, ks, members, nmem, 0, True)
        q += 1
        t += 1
    if not accumulate:
        w = rec[:, 0]
        for r in range(q, n):
            w[cand[r]] = 0.0
    return nmem


@jit
def _weakest_slots(ks, members, nmem, j, out):
    """The ``j`` weakest member slots (in the ``beats`` order, the feature index the rank), weakest first,
    in ``out[:j]``: one pass keeping a heap of the ``j`` weakest so far, its strongest on top."""
    size = 0
    for m in range(nmem):
        if size < j:
            out[size] = m
            c = size
            size += 1
            while c > 0:
                par = (c - 1) // 2
                if not beats(ks[out[c]], members[out[c]], ks[out[par]], members[out[par]]):
                    break
                out[c], out[par] = out[par], out[c]
                c = par
        elif j > 0 and beats(ks[out[0]], members[out[0]], ks[m], members[m]):
            out[0] = m
            c = 0
            while True:
                big, left = c, 2 * c + 1
                if left < size and beats(ks[out[left]], members[out[left]], ks[out[big]], members[out[big]]):
                    big = left
                if left + 1 < size and beats(ks[out[left + 1]], members[out[left + 1]], ks[out[big]],
                                             members[out[big]]):
                    big = left + 1
                if big == c:
                    break
                out[c], out[big] = out[big], out[c]
                c = big
    for a in range(1, size):                         # weakest first
        x = out[a]
        b = a - 1
        while b >= 0 and beats(ks[out[b]], members[out[b]], ks[x], members[x]):
            out[b + 1] = out[b]
            b -= 1
        out[b + 1] = x
    return size


@jit
def _amd_score(wi, hi, power):
    """The truncation score ``H_i |z_i|^power`` of B-AMD (eq. 4: power 1)."""
    a = abs(wi)
    return hi * (a * a if power == 2 else a)


# -- OFS (Wang et al. 2014, FOFS): margin update, L2-ball projection, keep the B largest |w| ------
O_ETA, O_LAM, O_BUDGET, O_LOSS = range(4)                   # params of ofs_rows
OS_SCALE, OS_NORM2 = range(2)                               # scale of ofs_rows


def ofs_params(*, eta, lam, budget, loss):
    """``params`` of ``ofs_rows``: ``O_ETA`` the step size ``eta``; ``O_LAM`` ``lam`` (the shrinkage
    ``1 - lam eta`` and the ball's radius ``1/sqrt(lam)``; 0: neither); ``O_BUDGET`` the budget ``B``;
    ``O_LOSS`` the loss code (``losses.TABLE``)."""
    return _packed(np.float64, {O_ETA: eta, O_LAM: lam, O_BUDGET: budget, O_LOSS: loss})


def ofs_scale(*, scale=1.0, norm2=0.0):
    """``scale`` of ``ofs_rows`` (the defaults: a fresh state): ``OS_SCALE`` the scalar ``a`` of
    ``w = a v``; ``OS_NORM2`` the sum of ``v^2`` over the kept set."""
    return _packed(np.float64, {OS_SCALE: scale, OS_NORM2: norm2})


@jit
def ofs_rows(rec, scale, heap, counts, params, indptr, indices, data, y, order, margins, given):
    """``w = scale[OS_SCALE] * v``, ``scale[OS_NORM2] = sum of v^2`` over the kept set (recomputed exactly
    every ``NORM_REFRESH`` updates); ``counts`` (``kept_counts``) and ``params`` (``ofs_params``) by their
    named slots.

    On a step with ``l'(u) != 0`` (for the hinge: a margin violation): ``w <- (1 - lam eta) w -
    eta l'(u) x``, projected onto the ball of radius ``1/sqrt(lam)``, then the ``B`` largest ``|w_i|``
    kept; otherwise only ``w <- (1 - lam eta) w``. The kept set is a heap with the weakest on top
    (``hkey = -|v|``, ``ranks = -index``). ``rec`` holds one 32-byte record ``v, hkey, hpos, rank`` per
    coordinate: one cache line per non-zero instead of four arrays' (d = 10^6, B = 100: 2.0 us per row
    before, 1.7 us; 2 shared cores, noisy).
    """
    v, hkey, hpos, ranks = rec[:, 0], rec[:, 1], rec[:, 2], rec[:, 3]
    eta, lam, budget, code = params[O_ETA], params[O_LAM], int(params[O_BUDGET]), int(params[O_LOSS])
    t, size, nupd, miss = counts[KS_SEEN], counts[KS_KEPT], counts[KS_UPDATES], counts[KS_MISTAKES]
    a, norm2 = scale[OS_SCALE], scale[OS_NORM2]
    shrink = 1.0 - lam * eta
    for jj in range(order.shape[0]):
        r = order[jj]
        lo, hi = indptr[r], indptr[r + 1]
        nlo, nhi = next_row(v, indptr, order, jj)
        u, xx = 0.0, 0.0                              # w.x, and sum x^2 over the newcomers (off the heap)
        for k in range(lo, hi):
            i = indices[k]
            if nlo < nhi:
                prefetch(v, indices[nlo])
                nlo += 1
            u += v[i] * data[k]
            if hpos[i] < 0:
                xx += data[k] * data[k]
        for k in range(nlo, nhi):
            prefetch(v, indices[k])
        u = margins[jj] if given else a * u
        miss += mistake(y[r], u)
        t += 1
        gl = dloss1(code, y[r], u)
        a *= shrink
        if gl == 0.0:
            continue
        nupd += 1
        if nupd % NORM_REFRESH == 0:
            norm2 = 0.0
            for m in range(size):
                norm2 += v[heap[m]] * v[heap[m]]
        step = -eta * gl / a
        for k in range(lo, hi):                       # the kept coordinates first
            i = indices[k]
            if hpos[i] >= 0:
                old = v[i]
                v[i] += step * data[k]
                norm2 += v[i] * v[i] - old * old
                hkey[i] = -abs(v[i])
                heap_fix(heap, hpos, hkey, ranks, size, i)
        norm_before_truncation = norm2 + step * step * xx
        top = heap[0]
        entering = False                              # a newcomer beats the weakest member (which only rises)
        for k in range(lo, hi):
            i = indices[k]
            vi = step * data[k]
            if hpos[i] < 0 and vi != 0.0 and (size < budget or beats(hkey[top], ranks[top], -abs(vi), ranks[i])):
                entering = True
                break
        if entering:                                  # the newcomers into v, then the B largest kept
            for k in range(lo, hi):
                i = indices[k]
                if hpos[i] < 0 and data[k] != 0.0:
                    v[i] = step * data[k]
                    norm2 += v[i] * v[i]
            norm_before_truncation = norm2
            for k in range(lo, hi):
                i = indices[k]
                if hpos[i] < 0 and v[i] != 0.0:
                    hkey[i] = -abs(v[i])
                    if size < budget:
                        size = heap_push(heap, hpos, hkey, ranks, size, i)
                        continue
                    out = i
                    if beats(hkey[heap[0]], ranks[heap[0]], hkey[i], ranks[i]):
                        out = heap[0]
                        heap_replace_top(heap, hpos, hkey, ranks, size, i)
                    norm2 -= v[out] * v[out]
                    v[out] = 0.0
        if lam > 0.0:
            norm = a * math.sqrt(max(norm_before_truncation, 0.0))
            if norm * math.sqrt(lam) > 1.0:
                a /= norm * math.sqrt(lam)
        if a < 1e-150 or a > 1e150:                   # fold the scale back into v
            for m in range(size):
                v[heap[m]] *= a
            norm2 *= a * a
            a = 1.0
    scale[OS_SCALE], scale[OS_NORM2] = a, norm2
    counts[KS_SEEN], counts[KS_KEPT], counts[KS_UPDATES], counts[KS_MISTAKES] = t, size, nupd, miss


# -- SOFS (Wu et al. 2017): diagonal AROW, keep the B most confident coordinates -----------------
S_GAMMA = 0                                                 # params of sofs_rows (one slot)


def sofs_params(*, gamma):
    """``params`` of ``sofs_rows``: ``S_GAMMA`` AROW's ``gamma`` (``r``)."""
    return _packed(np.float64, {S_GAMMA: gamma})


@jit
def sofs_rows(rec, heap, counts, params, indptr, indices, data, y, order, margins, given):
    """``counts`` (``kept_counts``) and ``params`` (``sofs_params``) by their named slots.

    On a margin violation (``y u < 1``): ``beta = 1 / (x^T Sigma x + gamma)``, ``alpha = (1 - y u) beta``,
    ``mu <- mu + alpha y Sigma x``, ``Sigma^-1 <- Sigma^-1 + x x^T / gamma`` (diagonal); the mean is then
    kept only on the ``B`` coordinates of smallest variance. The kept set is a heap with the largest
    variance on top (``ranks = -index``: among equal variances the lower index is kept).
    ``rec`` holds one 32-byte record ``mu, sigma, hpos, rank`` per coordinate (one cache line per non-zero).
    """
    mu, sigma, hpos, ranks = rec[:, 0], rec[:, 1], rec[:, 2], rec[:, 3]
    gamma = params[S_GAMMA]
    t, size, nupd, miss = counts[KS_SEEN], counts[KS_KEPT], counts[KS_UPDATES], counts[KS_MISTAKES]
    for jj in range(order.shape[0]):
        r = order[jj]
        lo, hi = indptr[r], indptr[r + 1]
        nlo, nhi = next_row(mu, indptr, order, jj)
        yr = y[r]
        u, conf = 0.0, 0.0                           # mu.x and x^T Sigma x in one pass over the records
        for k in range(lo, hi):
            i = indices[k]
            if nlo < nhi:
                prefetch(mu, indices[nlo])
                nlo += 1
            u += mu[i] * data[k]
            conf += data[k] * data[k] * sigma[i]
        for k in range(nlo, nhi):
            prefetch(mu, indices[k])
        if given:
            u = margins[jj]
        miss += mistake(yr, u)
        t += 1
        if yr * u >= 1.0:
            continue
        nupd += 1
        alpha = (1.0 - yr * u) / (conf + gamma)
        for k in range(lo, hi):
            i = indices[k]
            x = data[k]
            si = sigma[i]
            mu[i] += alpha * yr * si * x
            sigma[i] = si * gamma / (gamma + x * x * si)    # 1 / (1 / sigma + x^2 / gamma): one division
            if hpos[i] >= 0:
                heap_fix(heap, hpos, sigma, ranks, size, i)
        for k in range(lo, hi):
            i = indices[k]
            if hpos[i] < 0:
                top = heap[0]
                if size > 0 and beats(sigma[top], ranks[top], sigma[i], ranks[i]):
                    heap_replace_top(heap, hpos, sigma, ranks, size, i)
                    mu[top] = 0.0
                else:
                    mu[i] = 0.0
    counts[KS_SEEN], counts[KS_KEPT], counts[KS_UPDATES], counts[KS_MISTAKES] = t, size, nupd, miss


# -- l1-ARDA (Duchi et al. 2011, used as in ECML'18 Sec. 5.3) -----------------------------------
L_SEEN, L_UPDATES, L_MISTAKES = range(3)                    # counts of l1arda_rows, prox_rows and rda_rows
A_ETA, A_LAM, A_DELTA, A_LOSS = range(4)                    # params of l1arda_rows


def l1_counts(*, seen=0, updates=0, mistakes=0):
    """``counts`` of the l1 learners' loops, ``l1arda_rows``, ``prox_rows`` and ``rda_rows`` (the
    defaults: a fresh state): ``L_SEEN`` the samples seen (``t``); ``L_UPDATES`` the steps with a
    non-zero loss gradient; ``L_MISTAKES`` the online mistakes."""
    return _packed(np.int64, {L_SEEN: seen, L_UPDATES: updates, L_MISTAKES: mistakes})


def l1arda_params(*, eta, lam, delta, loss):
    """``params`` of ``l1arda_rows``: ``A_ETA`` the step size ``eta``; ``A_LAM`` the l1 weight ``lam``;
    ``A_DELTA`` AdaGrad's ``delta``; ``A_LOSS`` the loss code (``losses.TABLE``)."""
    return _packed(np.float64, {A_ETA: eta, A_LAM: lam, A_DELTA: delta, A_LOSS: loss})


@jit
def l1arda_weight(i, t, sg, sq, eta, lam, delta):
    """``w_i = eta t sign(-sg_i) / H_i max(0, |sg_i| / t - lam)``."""
    if t == 0:
        return 0.0
    excess = abs(sg[i]) / t - lam
    if excess <= 0.0:
        return 0.0
    w = eta * t * excess / (delta + math.sqrt(sq[i]))
    return -w if sg[i] > 0.0 else w


@jit
def l1arda_rows(sg, sq, counts, params, indptr, indices, data, y, order, margins, given):
    """``counts`` (``l1_counts``) and ``params`` (``l1arda_params``) by their named slots."""
    eta, lam, delta, code = params[A_ETA], params[A_LAM], params[A_DELTA], int(params[A_LOSS])
    t, nupd, miss = counts[L_SEEN], counts[L_UPDATES], counts[L_MISTAKES]
    for jj in range(order.shape[0]):
        r = order[jj]
        lo, hi = indptr[r], indptr[r + 1]
        if given:
            u = margins[jj]
        else:
            u = 0.0
            for k in range(lo, hi):
                u += l1arda_weight(indices[k], t, sg, sq, eta, lam, delta) * data[k]
        miss += mistake(y[r], u)
        t += 1
        gl = dloss1(code, y[r], u)
        if gl != 0.0:
            nupd += 1
            for k in range(lo, hi):
                g = gl * data[k]
                sg[indices[k]] += g
                sq[indices[k]] += g * g
    counts[L_SEEN], counts[L_UPDATES], counts[L_MISTAKES] = t, nupd, miss


# -- proximal steps with lazy shrinkage: Ada-FOBOS (adaptive) and OPG (plain) --------------------
P_ETA, P_LAM1, P_LAM2, P_DELTA, P_ADAPTIVE, P_LOSS = range(6)      # params of prox_rows and prox_settle


def prox_params(*, eta, lam1, lam2, delta, adaptive, loss):
    """``params`` of ``prox_rows`` and ``prox_settle``: ``P_ETA`` the step size ``eta``; ``P_LAM1`` the l1
    weight; ``P_LAM2`` the l2 weight; ``P_DELTA`` AdaGrad's ``delta``; ``P_ADAPTIVE`` 1.0 for AdaGrad's
    ``H`` (Ada-FOBOS), 0.0 for ``H = 1`` (OPG); ``P_LOSS`` the loss code (``losses.TABLE``)."""
    return _packed(np.float64, {P_ETA: eta, P_LAM1: lam1, P_LAM2: lam2, P_DELTA: delta, P_ADAPTIVE: adaptive,
                                P_LOSS: loss})


@jit
def lazy_prox(wi, steps, a, b):
    """``steps`` applications of ``w <- soft(w, a) / (1 + b)`` in closed form."""
    if steps <= 0 or wi == 0.0:
        return wi
    mag = abs(wi)
    if b == 0.0:
        mag -= steps * a
    else:
        ratio = a / b
        mag = (mag + ratio) * (1.0 + b) ** (-steps) - ratio
    if mag <= 0.0:
        return 0.0
    return mag if wi > 0.0 else -mag


@jit
def prox_rows(w, sq, last, counts, params, indptr, indices, data, y, order, margins, given):
    """``counts`` (``l1_counts``) and ``params`` (``prox_params``) by their named slots.

    Per row: ``w <- prox(w - eta g / H)`` with ``prox = soft(., eta lam1 / H) / (1 + eta lam2 / H)``;
    ``H = delta + sqrt(sum g^2)`` when ``adaptive`` (Ada-FOBOS, ECML'18's baseline) else ``H = 1``
    (OPG / FOBOS). Rows that do not touch coordinate ``i`` still shrink it; ``last[i]`` is the step up
    to which ``w[i]`` is current, and the pending shrinkage is applied when it is next read.
    """
    eta, lam1, lam2, delta = params[P_ETA], params[P_LAM1], params[P_LAM2], params[P_DELTA]
    adaptive, code = params[P_ADAPTIVE] != 0.0, int(params[P_LOSS])
    t, nupd, miss = counts[L_SEEN], counts[L_UPDATES], counts[L_MISTAKES]
    for jj in range(order.shape[0]):
        r = order[jj]
        lo, hi = indptr[r], indptr[r + 1]
        u = 0.0
        for k in range(lo, hi):
            i = indices[k]
            h = delta + math.sqrt(sq[i]) if adaptive else 1.0
            w[i] = lazy_prox(w[i], t - last[i], eta * lam1 / h, eta * lam2 / h)
            last[i] = t
            u += w[i] * data[k]
        if given:
            u = margins[jj]
        miss += mistake(y[r], u)
        t += 1
        gl = dloss1(code, y[r], u)
        if gl != 0.0:
            nupd += 1
        for k in range(lo, hi):
            i = indices[k]
            g = gl * data[k]
            if adaptive:
                sq[i] += g * g
                h = delta + math.sqrt(sq[i])
            else:
                h = 1.0
            w[i] = lazy_prox(w[i] - eta * g / h, 1, eta * lam1 / h, eta * lam2 / h)
            last[i] = t
    counts[L_SEEN], counts[L_UPDATES], counts[L_MISTAKES] = t, nupd, miss


@jit
def prox_settle(w, sq, last, t, params):
    """Bring every coordinate up to step ``t`` (before reading the whole vector)."""
    eta, lam1, lam2, delta = params[P_ETA], params[P_LAM1], params[P_LAM2], params[P_DELTA]
    adaptive = params[P_ADAPTIVE] != 0.0
    for i in range(w.shape[0]):
        h = delta + math.sqrt(sq[i]) if adaptive else 1.0
        w[i] = lazy_prox(w[i], t - last[i], eta * lam1 / h, eta * lam2 / h)
        last[i] = t


# -- l1-RDA (Xiao 2010) with an l2 term --------------------------------------------------------
R_LAM1, R_LAM2, R_GAMMA, R_LOSS = range(4)                  # params of rda_rows


def rda_params(*, lam1, lam2, gamma, loss):
    """``params`` of ``rda_rows``: ``R_LAM1`` the l1 weight; ``R_LAM2`` the l2 weight; ``R_GAMMA`` the
    step's ``gamma`` (``w`` divided by ``lam2 + gamma / sqrt(t)``); ``R_LOSS`` the loss code
    (``losses.TABLE``)."""
    return _packed(np.float64, {R_LAM1: lam1, R_LAM2: lam2, R_GAMMA: gamma, R_LOSS: loss})


@jit
def rda_weight(i, t, sg, lam1, lam2, gamma):
    """``w_i = -soft(gbar_i, lam1) / (lam2 + gamma / sqrt(t))``, ``gbar = sum g / t``."""
    if t == 0:
        return 0.0
    gbar = sg[i] / t
    excess = abs(gbar) - lam1
    if excess <= 0.0:
        return 0.0
    w = excess / (lam2 + gamma / math.sqrt(t))
    return -w if gbar > 0.0 else w


@jit
def rda_rows(sg, counts, params, indptr, indices, data, y, order, margins, given):
    """``counts`` (``l1_counts``) and ``params`` (``rda_params``) by their named slots."""
    lam1, lam2, gamma, code = params[R_LAM1], params[R_LAM2], params[R_GAMMA], int(params[R_LOSS])
    t, nupd, miss = counts[L_SEEN], counts[L_UPDATES], counts[L_MISTAKES]
    for jj in range(order.shape[0]):
        r = order[jj]
        lo, hi = indptr[r], indptr[r + 1]
        if given:
            u = margins[jj]
        else:
            u = 0.0
            for k in range(lo, hi):
                u += rda_weight(indices[k], t, sg, lam1, lam2, gamma) * data[k]
        miss += mistake(y[r], u)
        t += 1
        gl = dloss1(code, y[r], u)
        if gl != 0.0:
            nupd += 1
            for k in range(lo, hi):
                sg[indices[k]] += gl * data[k]
    counts[L_SEEN], counts[L_UPDATES], counts[L_MISTAKES] = t, nupd, miss


# -- mini-batch helpers of SFSA / TSGD (O(nnz) on the raw CSR arrays) ------------------------------
M_SEEN, M_BATCHES, M_UPDATES, M_MISTAKES = range(4)         # counts of SFSA and TSGD (sfsa.py's loop)


def batch_counts(*, seen=0, batches=0, updates=0, mistakes=0):
    """``counts`` of SFSA and TSGD (the defaults: a fresh state): ``M_SEEN`` the samples seen;
    ``M_BATCHES`` the mini-batches (``t`` of the annealing schedule and of Adam); ``M_UPDATES`` the
    mini-batches with a non-zero loss gradient; ``M_MISTAKES`` the online mistakes."""
    return _packed(np.int64, {M_SEEN: seen, M_BATCHES: batches, M_UPDATES: updates, M_MISTAKES: mistakes})


@jit
def batch_moments(indptr, indices, data, rows, sum_x, sum_x2):
    """Add the batch's column sums and sums of squares (for the running standard deviations)."""
    for r in rows:
        for k in range(indptr[r], indptr[r + 1]):
            sum_x[indices[k]] += data[k]
            sum_x2[indices[k]] += data[k] * data[k]


@jit
def batch_dloss(code, indptr, indices, data, y, rows, point, margins, given, out, offset=0.0):
    """``out[j] = l'(u_j)`` for the batch's rows, ``u = x.point + offset`` (or ``margins + offset`` when
    ``given``; ``offset``: the intercept); returns whether any is non-zero, and the number of mistakes."""
    any_nonzero = False
    miss = 0
    for j in range(rows.shape[0]):
        r = rows[j]
        u = offset + (margins[j] if given else row_dot(point, indptr, indices, data, r))
        out[j] = dloss1(code, y[r], u)
        miss += mistake(y[r], u)
        if out[j] != 0.0:
            any_nonzero = True
    return any_nonzero, miss


@jit
def batch_gradient(indptr, indices, data, rows, dl, factor, g):
    """``g += factor X_rows^T dl``."""
    for j in range(rows.shape[0]):
        a = factor * dl[j]
        if a != 0.0:
            r = rows[j]
            for k in range(indptr[r], indptr[r + 1]):
                g[indices[k]] += a * data[k]


# -- the per-coordinate records of a fresh state (``sample_stream.records``) -------------------------
@jit
def fill_records(rec, fill, rank, sign):
    """Every row of ``rec`` is ``fill``, with ``sign * i`` in column ``rank`` of row ``i`` (``rank < 0``: none)."""
    for i in range(rec.shape[0]):
        for c in range(rec.shape[1]):
            rec[i, c] = fill[c]
        if rank >= 0:
            rec[i, rank] = sign * i


# -- maxabs scaling of a chunk of rows (``partial_fit``): O(nnz) --------------------------------------
@jit
def maxabs_scale(indices, data, absmax, out):
    """Raise ``absmax`` to the chunk's largest ``|x_j|``, then ``out = data / absmax`` (as the product
    with ``diags(1 / scale_)`` computes it: the same bits); returns False when a scaled value is zero."""
    for k in range(data.shape[0]):
        a = abs(data[k])
        i = indices[k]
        if a > absmax[i]:
            absmax[i] = a
    nonzero = True
    for k in range(data.shape[0]):
        m = absmax[indices[k]]
        out[k] = data[k] * (1.0 / m) if m != 0.0 else data[k]
        if out[k] == 0.0:
            nonzero = False
    return nonzero


# -- one sample at a time (``learn_one``): a row into preallocated one-row CSR buffers ------------
@jit
def _finish_row(idx, val, n, indptr, absmax, scaling):
    """Close the one-row buffers holding ``n`` non-zeros: -1 (nothing changed) when a value is not
    finite, else ``n``, the values divided by the running max-abs of their features (updated with
    the row first) when ``scaling``."""
    for m in range(n):
        if not math.isfinite(val[m]):
            return -1
    if scaling:
        for m in range(n):
            i = idx[m]
            a = abs(val[m])
            if a > absmax[i]:
                absmax[i] = a
            val[m] = val[m] * (1.0 / absmax[i])     # as X @ diags(1 / scale) does: same bits
    indptr[1] = n
    return n


@jit
def prepare_dense(x, idx, val, indptr, absmax, scaling):
    """A dense row into the one-row buffers (its non-zeros in column order); returns their number,
    or -1 when a value is not finite. Blocks of 16 values are first tested with one OR of their bit
    patterns (the sign bit shifted out, so -0.0 counts as zero), a fixed-length loop the compiler
    vectorizes: a row of 10^4 values with 50 non-zeros is scanned in 1.8 us here, against 5.1 us
    with one branch per value (and 2.9 us with blocks of 64)."""
    d = x.shape[0]
    bits = x.view(np.int64)
    block = 16
    full = d - d % block
    n = 0
    for b in range(0, full, block):
        acc = 0
        for j in range(block):
            acc |= bits[b + j]
        if (acc << 1) != 0:
            n = _collect(x, b, b + block, idx, val, n)
    n = _collect(x, full, d, idx, val, n)
    return _finish_row(idx, val, n, indptr, absmax, scaling)


@jit
def _collect(x, lo, hi, idx, val, n):
    """Append the non-zeros of ``x[lo:hi]`` (NaN included: ``_finish_row`` rejects it)."""
    for j in range(lo, hi):
        if x[j] != 0.0:
            idx[n] = j
            val[n] = x[j]
            n += 1
    return n


@jit
def prepare_sparse(cols, values, idx, val, indptr, absmax, scaling):
    """Columns ``cols`` (distinct, any order) with ``values`` into the one-row buffers, sorted by
    column so that sums run in the order a CSR row gives; zeros are dropped. Returns the number of
    non-zeros, or -1 when a value is not finite."""
    n = 0
    for k in range(cols.shape[0]):                    # insertion sort: dict rows usually come sorted
        c, v = cols[k], values[k]
        if v == 0.0:
            continue
        m = n
        while m > 0 and idx[m - 1] > c:
            idx[m] = idx[m - 1]
            val[m] = val[m - 1]
            m -= 1
        idx[m] = c
        val[m] = v
        n += 1
    return _finish_row(idx, val, n, indptr, absmax, scaling)


if COMPILED:
    _compiled_losses.refresh_cache(globals())
