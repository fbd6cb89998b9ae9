"""The fast paths of the sample-stream row loops: B-ARDA's buffer, floor and rescans, B-AMD's filtered
truncation, the per-coordinate records, int32/int64 index arrays read in place, and the O(nnz) maxabs
scaling. Each is checked against the dense per-sample transcriptions of ``test_sample_stream`` (written
independently of the row loops) or against the straightforward computation it replaces."""
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from asyos.learners.stream import _stream_kernels
from asyos.learners.stream.budgeted import BudgetedAMD, BudgetedARDA
from asyos.learners.stream.ofs import OFS, SOFS
from asyos.learners.stream.stream_learners import all_stream_learners
from tests.test_sample_stream import bamd, bamd_accumulate, barda, ofs, orders, sofs


def wide_problem(n=300, d=500, density=0.06, seed=7):
    """Rows that meet new coordinates all along, with spread scales: the kept sets change often."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < density) * rng.lognormal(size=d)
    y = np.sign(X[:, :10].sum(1) + 0.01)
    y[y == 0] = 1.0
    return X, y


@pytest.mark.parametrize("lam", [0.0, 0.2, 5.0, 50.0])
@pytest.mark.parametrize("B", [1, 3, 8])
def test_barda_buffer_trims_and_rescans_give_eq_1_2_exactly(monkeypatch, lam, B):
    """A buffer of two candidates per kept feature fills, is trimmed, and its floor overtakes the weakest
    member (a rescan of every active coordinate): the weights are still the dense transcription's."""
    monkeypatch.setattr(BudgetedARDA, "BUFFER", 1)
    X, y = wide_problem()
    model = BudgetedARDA(budget=B, eta=1.0, lam=lam, passes=2, scale=None, random_state=3).fit(X, y)
    expected = barda(X, y, orders(X.shape[0], passes=2, seed=3), B, 1.0, lam, 1e-2, "squared_hinge")
    np.testing.assert_allclose(model.coef_, expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(model.support_, np.flatnonzero(expected))
    assert model._state.counts[_stream_kernels.BA_BUFFER] <= 2 * B     # the buffer never outgrew its capacity
    if lam >= 0.2:
        assert model._state.bound[_stream_kernels.BB_RESCANS] > 0      # the rescan ran


def test_barda_rescans_happen_on_the_wide_problem_with_a_small_buffer(monkeypatch):
    monkeypatch.setattr(BudgetedARDA, "BUFFER", 1)
    X, y = wide_problem()
    model = BudgetedARDA(budget=2, eta=1.0, lam=5.0, passes=2, scale=None, random_state=3).fit(X, y)
    assert model._state.bound[_stream_kernels.BB_RESCANS] >= 2


@pytest.mark.parametrize("lam", [0.0, 0.05, 1.0])
@pytest.mark.parametrize("B", [1, 4, 5, 30])
@pytest.mark.parametrize("density", [0.02, 0.3, 0.9])
@pytest.mark.parametrize("outside,oracle", [("reset", bamd), ("accumulate", bamd_accumulate)])
def test_bamd_filtered_truncation_gives_eq_3_4_exactly(lam, B, density, outside, oracle):
    """Sparse rows (a few newcomers, merged into the kept set) and dense ones (many: past ``MERGE`` with
    d = 120 at density 0.9, the quickselect)."""
    X, y = wide_problem(n=200, d=120, density=density, seed=11)
    model = BudgetedAMD(budget=B, eta=0.5, lam=lam, passes=2, scale=None, outside=outside,
                        random_state=5).fit(X, y)
    expected = oracle(X, y, orders(X.shape[0], passes=2, seed=5), B, 0.5, lam, 1e-2, "squared_hinge")
    np.testing.assert_allclose(model.coef_, expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(model.support_, np.flatnonzero(expected))


@pytest.mark.parametrize("outside,oracle", [("reset", bamd), ("accumulate", bamd_accumulate)])
def test_bamd_member_heap_gives_eq_3_4_exactly_over_many_swaps(outside, oracle):
    """``lam = 0`` (the default): the members in a heap, the weakest on top, through many entries and
    replacements (B = 150 of d = 600 at 5% density) and the chunks of ``partial_fit`` (the heap is built
    again at each call)."""
    X, y = wide_problem(n=300, d=600, density=0.05, seed=7)
    model = BudgetedAMD(budget=150, eta=0.5, passes=2, scale=None, outside=outside, random_state=5).fit(X, y)
    assert model.lam == 0.0
    expected = oracle(X, y, orders(X.shape[0], passes=2, seed=5), 150, 0.5, 0.0, 1e-2, "squared_hinge")
    np.testing.assert_allclose(model.coef_, expected, rtol=1e-9, atol=1e-12)
    assert model.support_.size == 150
    chunked = BudgetedAMD(budget=150, eta=0.5, scale=None, outside=outside)
    for start in range(0, 300, 37):
        chunked.partial_fit(X[start:start + 37], y[start:start + 37], classes=[-1.0, 1.0])
    whole = BudgetedAMD(budget=150, eta=0.5, scale=None, outside=outside).partial_fit(X, y, classes=[-1.0, 1.0])
    np.testing.assert_array_equal(chunked.coef_, whole.coef_)


@pytest.mark.parametrize("B", [2, 10])
def test_ofs_and_sofs_records_give_the_transcriptions(B):
    X, y = wide_problem(n=200, d=150, density=0.1, seed=2)
    o = orders(X.shape[0], passes=2, seed=4)
    model = OFS(budget=B, eta=0.3, lam=0.05, passes=2, scale=None, random_state=4).fit(X, y)
    np.testing.assert_allclose(model.coef_, ofs(X, y, o, B, 0.3, 0.05, "hinge"), rtol=1e-9, atol=1e-12)
    model = SOFS(budget=B, gamma=1.0, passes=2, scale=None, random_state=4).fit(X, y)
    np.testing.assert_allclose(model.coef_, sofs(X, y, o, B, 1.0), rtol=1e-9, atol=1e-12)


def with_index_dtype(X, dtype):
    """``X`` as CSR with ``dtype`` index arrays (set after construction: scipy would narrow int64)."""
    out = sp.csr_matrix(X)
    out.indices, out.indptr = out.indices.astype(dtype), out.indptr.astype(dtype)
    return out


@pytest.mark.parametrize("cls", all_stream_learners(), ids=lambda c: c.algorithm_name)
@pytest.mark.parametrize("scale", [None, "maxabs"])
def test_int32_and_int64_indices_give_identical_models(cls, scale):
    X, y = wide_problem(n=120, d=80, density=0.15, seed=3)
    X32, X64 = with_index_dtype(X, np.int32), with_index_dtype(X, np.int64)
    assert X32.indices.dtype == np.int32 and X64.indices.dtype == np.int64
    params = dict(cls._smoke_params(), budget=5, passes=2, scale=scale, random_state=1)
    a = cls(**params).fit(X32, y)
    b = cls(**params).fit(X64, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.n_updates_ == b.n_updates_
    half = X.shape[0] // 2                                          # a stream of chunks, too
    a = cls(**params).partial_fit(X32[:half], y[:half]).partial_fit(X32[half:], y[half:])
    b = cls(**params).partial_fit(X64[:half], y[:half]).partial_fit(X64[half:], y[half:])
    np.testing.assert_array_equal(a.coef_, b.coef_)


def spy_on_rows(model):
    """Make ``model``'s row loop record the index arrays it is given."""
    seen = []
    real = model._kernel

    def kernel(state):
        loop, head = real(state)

        def recording(*args):
            seen.append((args[len(head)], args[len(head) + 1]))
            return loop(*args)
        return recording, head
    model._kernel = kernel
    return seen


@pytest.mark.parametrize("cls", [BudgetedARDA, BudgetedAMD, OFS, SOFS], ids=lambda c: c.algorithm_name)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("scale", [None, "maxabs"])
def test_the_row_loop_reads_the_inputs_index_arrays(cls, dtype, scale):
    X, y = wide_problem(n=60, d=50, density=0.2, seed=4)
    X = with_index_dtype(X, dtype)
    model = cls(budget=5, scale=scale)
    seen = spy_on_rows(model)
    model.partial_fit(X, y)
    (indptr, indices), = seen
    assert indices.dtype == dtype and indptr.dtype == dtype
    assert np.shares_memory(indices, X.indices) and np.shares_memory(indptr, X.indptr)


@pytest.mark.skipif(not _stream_kernels.COMPILED, reason="ASYOS_KERNELS=numpy: the row loops run as plain Python, "
                    "where every number is an object (and 20000 rows under tracemalloc take minutes)")
@pytest.mark.parametrize("scale", [None, "maxabs"])
def test_a_pass_allocates_less_than_a_copy_of_the_indices(scale):
    """The peak allocated during ``partial_fit`` (tracemalloc sees numpy's buffers): without scaling
    below the input's int32 index array (an int64 copy of it is twice that), with maxabs below the
    scaled values plus that array (the scaled values are a copy: 8 bytes per non-zero)."""
    rng = np.random.default_rng(0)
    n, d, nnz = 20000, 2000, 40
    cols = np.sort(np.argsort(rng.random((n, d)), axis=1)[:, :nnz], axis=1)
    X = sp.csr_matrix((rng.normal(size=n * nnz), cols.ravel().astype(np.int32),
                       np.arange(0, n * nnz + 1, nnz, dtype=np.int32)), shape=(n, d))
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    for cls in (BudgetedARDA, BudgetedAMD, OFS, SOFS):
        cls(budget=10, scale=scale).partial_fit(X[:50], y[:50])     # compiled before measuring
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            cls(budget=10, scale=scale).partial_fit(X, y)
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        limit = X.indices.nbytes + (X.data.nbytes if scale else 0)
        assert peak < limit, (cls.__name__, peak, limit)


def test_maxabs_scaling_is_the_diagonal_product_bit_for_bit():
    """The O(nnz) scaling gives the arrays ``X @ diags(1 / scale_)`` gave, explicit zeros dropped."""
    rng = np.random.default_rng(5)
    X = sp.random(40, 30, density=0.3, format="csr", random_state=6) * 1e3
    X.data[::7] = 0.0                                                # explicit zeros
    X.data[1::11] *= -1.0
    y = np.where(rng.random(40) < 0.5, -1.0, 1.0)
    model = OFS(budget=3)
    first = model.prepare(X[:20], y[:20])                            # the running scale of two chunks
    model.step_rows(first)
    rows = model.prepare(X[20:], y[20:])
    expected = X[20:] @ sp.diags(1.0 / model.scale_, format="csr")
    expected.sort_indices()
    np.testing.assert_array_equal(rows.indptr, expected.indptr)
    np.testing.assert_array_equal(rows.indices, expected.indices)
    np.testing.assert_array_equal(rows.data, expected.data)
    np.testing.assert_array_equal(model.scale_, np.where(abs(X).max(axis=0).toarray().ravel() > 0,
                                                         abs(X).max(axis=0).toarray().ravel(), 1.0))


def test_a_barda_state_saved_before_the_kept_heap_goes_on_exactly():
    """A state whose ``bound`` has the four slots of before (members in their slots' order, ``hkey``
    holding stale values for them) is made a heap when it next learns, and goes on as one never saved."""
    X, y = wide_problem(n=300, d=400, density=0.05, seed=3)
    for B in (1, 7, 40):
        whole = BudgetedARDA(budget=B, eta=0.5, lam=0.2, passes=1, scale=None).partial_fit(X, y, classes=[-1, 1])
        old = BudgetedARDA(budget=B, eta=0.5, lam=0.2, passes=1, scale=None).partial_fit(X[:150], y[:150],
                                                                                          classes=[-1, 1])
        state = old._state
        state.bound = state.bound[:_stream_kernels.BB_HEAP].copy()
        members = state.members[:state.counts[_stream_kernels.BA_MEMBERS]]
        np.random.default_rng(B).shuffle(members)          # any order (a view: the state's own), as a saved
        state.rec[members, 4] = np.arange(members.size)    # state had, and each member's slot
        state.rec[members, 3] = 123.0                      # what a saved member's key held: anything
        old.partial_fit(X[150:], y[150:])
        assert state.bound.size == _stream_kernels.BB_HEAP + 1
        np.testing.assert_array_equal(old.coef_, whole.coef_)


def test_the_named_slots_keep_the_layout_of_the_saved_states():
    """The packing helpers put every named value in the slot it has always had (pickles and checkpoints
    hold these arrays as they are), and every ``counts`` starts with the samples seen and ends with the
    updates and the mistakes (``SEEN``, ``UPDATES``, ``MISTAKES``)."""
    K = _stream_kernels
    frozen = {
        "budgeted_params": (K.budgeted_params(eta=1, lam=2, delta=3, budget=4, loss=5, power=6), [1, 2, 3, 4, 5, 6]),
        "ofs_params": (K.ofs_params(eta=1, lam=2, budget=3, loss=4), [1, 2, 3, 4]),
        "sofs_params": (K.sofs_params(gamma=7), [7]),
        "l1arda_params": (K.l1arda_params(eta=1, lam=2, delta=3, loss=4), [1, 2, 3, 4]),
        "prox_params": (K.prox_params(eta=1, lam1=2, lam2=3, delta=4, adaptive=5, loss=6), [1, 2, 3, 4, 5, 6]),
        "rda_params": (K.rda_params(lam1=1, lam2=2, gamma=3, loss=4), [1, 2, 3, 4]),
        "barda_bound": (K.barda_bound(), [0.0, 0.0, -1.0, 0.0, 1.0]),     # the 5th appended (the kept heap)
        "ofs_scale": (K.ofs_scale(), [1.0, 0.0]),
        "barda_counts": (K.barda_counts(seen=1, members=2, buffer=3, active=4, floor=5, updates=6, mistakes=7),
                         [1, 2, 3, 4, 5, 6, 7]),
        "fresh barda_counts": (K.barda_counts(), [0, 0, 0, 0, -1, 0, 0]),
        "kept_counts": (K.kept_counts(seen=1, kept=2, updates=3, mistakes=4), [1, 2, 3, 4]),
        "l1_counts": (K.l1_counts(seen=1, updates=2, mistakes=3), [1, 2, 3]),
        "batch_counts": (K.batch_counts(seen=1, batches=2, updates=3, mistakes=4), [1, 2, 3, 4]),
    }
    for name, (packed, expected) in frozen.items():
        kind = np.int64 if "counts" in name else np.float64
        assert packed.dtype == kind and packed.tolist() == expected, name
    for counts in (K.barda_counts(seen=1, updates=2, mistakes=3), K.kept_counts(seen=1, updates=2, mistakes=3),
                   K.l1_counts(seen=1, updates=2, mistakes=3), K.batch_counts(seen=1, updates=2, mistakes=3)):
        assert (counts[K.SEEN], counts[K.UPDATES], counts[K.MISTAKES]) == (1, 2, 3)
    with pytest.raises(TypeError):
        K.budgeted_params(eta=1, lam=2, delta=3, budget=4, loss=5)          # a slot left out is named
