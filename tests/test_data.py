import os

import numpy as np
import pytest
import scipy.sparse as sp

from asyos.data.io import load_dataset, open_source
from asyos.data.shard import FeatureShard
from asyos.data.sharding import BLOCK, shard_columns, split_budget
from asyos.data.synthetic import CHUNK, SyntheticSource, default_n_samples, make_classification, make_regression
from asyos.errors import InputError
from tests.inprocess import run_asyos


# ------------------------------------------------------------------------------ synthetic
def test_kdd_sizes_and_support():
    d = make_regression(n_features=2000, n_informative=100, seed=3)
    assert d.n_samples == default_n_samples(100, 2000) == 1316            # ceil(1.2 * 100 * log2 2000)
    assert d.X.shape == (1316, 2000) and d.X_test.shape == (1316, 2000)
    assert d.true_support.size == 100
    resid = d.y - d.X @ d.true_coef
    assert 0.08 < resid.std() < 0.12                                        # noise 0.1
    assert abs(d.X.mean()) < 0.01 and abs(d.X.std() - 1) < 0.01


def test_classification_labels_are_signs_of_the_truth():
    d = make_classification(n_features=300, n_informative=20, seed=1)
    np.testing.assert_array_equal(d.y, np.where(d.X @ d.true_coef >= 0, 1.0, -1.0))
    assert set(np.unique(d.y_test)) == {-1.0, 1.0}


def test_same_seed_same_data_other_seed_other_data():
    a, b, c = (make_regression(n_features=200, n_informative=10, seed=s) for s in (5, 5, 6))
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    assert not np.array_equal(a.X, c.X)


def test_any_subset_of_columns_is_the_same_data():
    src = SyntheticSource("regression", n_features=103, n_informative=7, seed=2)
    full = src.load()
    cols = np.array([100, 3, 17, 18, 50])
    part = src.load(cols)
    np.testing.assert_array_equal(part.X, full.X[:, cols])
    np.testing.assert_array_equal(part.X_test, full.X_test[:, cols])
    np.testing.assert_array_equal(part.y, full.y)
    np.testing.assert_array_equal(src.labels("train"), full.y)


@pytest.mark.parametrize("kwargs, message", [
    (dict(n_informative=0), "n-informative"), (dict(n_informative=11, n_features=10), "n-informative"),
    (dict(noise=-1.0), "noise"), (dict(task="ranking"), "regression or classification")])
def test_synthetic_rejects_bad_settings(kwargs, message):
    base = dict(task="regression", n_features=10, n_informative=3)
    with pytest.raises(InputError, match=message):
        SyntheticSource(**{**base, **kwargs})


# ------------------------------------------------------------------------------- sharding
@pytest.mark.parametrize("scheme", ["contiguous", "strided", "blocked", "hashed"])
@pytest.mark.parametrize("p, q", [(10, 3), (2000, 12), (7, 7), (1, 1)])
def test_shards_partition_the_features(scheme, p, q):
    parts = [shard_columns(p, q, w, scheme) for w in range(q)]
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(p))
    if scheme in ("contiguous", "strided"):
        assert max(map(len, parts)) - min(map(len, parts)) <= 1
    if scheme == "blocked":          # whole blocks of the synthetic generator's chunks, dealt round-robin
        assert max(map(len, parts)) - min(map(len, parts)) <= BLOCK
        for w, part in enumerate(parts):
            assert np.all((part // CHUNK) % q == w)


def test_split_budget_is_even():
    assert split_budget(100, 12) == [9, 9, 9, 9, 8, 8, 8, 8, 8, 8, 8, 8]
    assert sum(split_budget(64, 12)) == 64
    assert split_budget(5, 5) == [1] * 5


# ------------------------------------------------------------------------------- shard
def test_sparse_shard_columns_equal_dense(rng):
    X = rng.standard_normal((20, 9)) * (rng.random((20, 9)) < 0.3)
    dense, sparse = FeatureShard(X), FeatureShard(sp.csr_matrix(X))
    for j in [0, 4, 8, 4, 2]:
        np.testing.assert_array_equal(sparse.column(j), dense.column(j))
        np.testing.assert_array_equal(dense.column(j), X[:, j])
    np.testing.assert_allclose(sparse.squared_norms(), (X ** 2).sum(0))


# --------------------------------------------------------------------------------- files
@pytest.fixture
def dense_npz(tmp_path, rng):
    X, Xt = rng.integers(0, 999, (30, 12)).astype(np.int16), rng.standard_normal((10, 12)).astype(np.float32)
    y, yt = np.where(rng.random(30) < 0.5, -1, 1).astype(np.int8), np.ones(10, dtype=np.int8)
    path = tmp_path / "d.npz"
    np.savez_compressed(path, X_train=X, y_train=y, X_test=Xt, y_test=yt)
    return path, X, y, Xt, yt


def test_dense_npz_full_and_by_columns(dense_npz, monkeypatch):
    path, X, y, Xt, yt = dense_npz
    import asyos.data.npz_member as npz_member
    monkeypatch.setattr(npz_member, "_CHUNK_BYTES", 50)          # force many row chunks
    d = load_dataset(path)
    np.testing.assert_array_equal(d.X, X.astype(float))
    np.testing.assert_array_equal(d.y, y)
    np.testing.assert_array_equal(d.X_test, Xt.astype(float))
    part = load_dataset(path, columns=[11, 0, 5])
    np.testing.assert_array_equal(part.X, X[:, [11, 0, 5]].astype(float))
    np.testing.assert_array_equal(part.X_test, Xt[:, [11, 0, 5]].astype(float))
    src = open_source(str(path))
    assert (src.n_train, src.n_features) == (30, 12)


def test_dense_npz_with_X_y_only(tmp_path, rng):
    X = rng.standard_normal((8, 3))
    np.savez(tmp_path / "a.npz", X=X, y=np.arange(8.0))
    d = load_dataset(tmp_path)                           # a directory holding one dense .npz
    np.testing.assert_array_equal(d.X, X)
    assert not d.has_test


def test_sparse_directory(tmp_path, rng):
    X = sp.random(25, 40, density=0.1, format="csr", random_state=1, dtype=np.float32)
    Xt = sp.random(5, 40, density=0.1, format="csr", random_state=2, dtype=np.float32)
    sp.save_npz(tmp_path / "X_train.npz", X)
    sp.save_npz(tmp_path / "X_test.npz", Xt)
    np.save(tmp_path / "y_train.npy", np.ones(25, dtype=np.int8))
    np.save(tmp_path / "y_test.npy", -np.ones(5, dtype=np.int8))
    d = load_dataset(tmp_path, columns=[39, 2])
    assert sp.issparse(d.X)
    np.testing.assert_array_equal(d.X.toarray(), X[:, [39, 2]].toarray())
    np.testing.assert_array_equal(d.y_test, -np.ones(5))
    assert open_source(str(tmp_path)).n_features == 40


@pytest.mark.parametrize("base", [0, 1])
def test_libsvm_index_base_detected(tmp_path, base):
    text = (f"+1 {base + 0}:1.5 {base + 3}:2 # comment\n"
            f"-1 qid:3 {base + 1}:-1\n\n"
            f"+1 {base + 4}:0.25\n")
    path = tmp_path / "a.svm"
    path.write_text(text)
    d = load_dataset(path, index_base="auto" if base == 0 else "auto")
    expected = np.array([[1.5, 0, 0, 2, 0], [0, -1, 0, 0, 0], [0, 0, 0, 0, 0.25]])
    if base == 1:   # no 0 index seen: 1-based, so column 0 of the file is feature index 1
        assert d.n_features == 5
    np.testing.assert_array_equal(d.X.toarray(), expected)
    np.testing.assert_array_equal(d.y, [1, -1, 1])
    part = load_dataset(path, columns=[3, 1])
    np.testing.assert_array_equal(part.X.toarray(), expected[:, [3, 1]])


def test_libsvm_declared_base_and_test_file(tmp_path):
    (tmp_path / "tr.svm").write_text("1 1:1 2:2\n-1 3:3\n")
    (tmp_path / "te.svm").write_text("1 4:4\n")
    d = load_dataset(tmp_path / "tr.svm", test_path=str(tmp_path / "te.svm"), index_base=0)
    assert d.n_features == 5 and d.X_test.shape == (1, 5)
    d1 = load_dataset(tmp_path / "tr.svm", test_path=str(tmp_path / "te.svm"), index_base=1)
    assert d1.n_features == 4 and d1.X_test.toarray().tolist() == [[0, 0, 0, 4]]
    with pytest.raises(InputError, match="index 0 found"):
        (tmp_path / "z.svm").write_text("1 0:1\n")
        load_dataset(tmp_path / "z.svm", index_base=1)


@pytest.mark.parametrize("content, message", [
    ("1 2:x\n", "line 1: cannot read '2:x'"), ("abc 1:2\n", "label 'abc'"), ("1 -2:1\n", "negative"),
    ("\n# nothing\n", "no samples")])
def test_libsvm_errors_name_the_line(tmp_path, content, message):
    path = tmp_path / "bad.svm"
    path.write_text(content)
    with pytest.raises(InputError, match=message):
        load_dataset(path)


def test_file_errors(tmp_path, rng):
    with pytest.raises(InputError, match="does not exist"):
        load_dataset(tmp_path / "missing.npz")
    X = rng.standard_normal((4, 3))
    X[1, 2] = np.nan
    np.savez(tmp_path / "nan.npz", X=X, y=np.zeros(4))
    with pytest.raises(InputError, match="1 NaN or infinite"):
        load_dataset(tmp_path / "nan.npz")
    np.savez(tmp_path / "short.npz", X=rng.standard_normal((4, 3)), y=np.zeros(3))
    with pytest.raises(InputError, match="3 labels but X has 4 rows"):
        load_dataset(tmp_path / "short.npz")
    np.savez(tmp_path / "keys.npz", A=np.zeros(2))
    with pytest.raises(InputError, match="expected X_train"):
        load_dataset(tmp_path / "keys.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="cannot read"):
        load_dataset(tmp_path / "junk.npz")
    (tmp_path / "bin.svm").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(InputError):
        load_dataset(tmp_path / "bin.svm")
    os.mkdir(tmp_path / "empty")
    with pytest.raises(InputError, match="no data set found"):
        load_dataset(tmp_path / "empty")


def test_sparse_columns_are_streamed_in_chunks(tmp_path, monkeypatch):
    import asyos.data.io as io
    X = sp.random(50, 300, density=0.2, format="csr", random_state=3, dtype=np.float32)
    sp.save_npz(tmp_path / "X.npz", X)
    np.save(tmp_path / "y.npy", np.arange(50.0))
    original = io._NpyMember.iter_chunks
    monkeypatch.setattr(io._NpyMember, "iter_chunks", lambda self, items=1 << 20: original(self, 37))
    cols = np.array([299, 0, 150, 7])
    d = load_dataset(tmp_path, columns=cols)
    np.testing.assert_array_equal(d.X.toarray(), X[:, cols].toarray())
    np.testing.assert_array_equal(load_dataset(tmp_path).X.toarray(), X.toarray())


# ------------------------------------------------------------------ row streaming (running averages)
def _row_files(tmp_path):
    import scipy.sparse as sp
    rng = np.random.default_rng(0)
    S = sp.random(103, 40, density=0.15, format="csr", random_state=1)
    y = np.where(rng.normal(size=103) > 0, 1.0, -1.0)
    dense = tmp_path / "dense.npz"
    np.savez_compressed(dense, X=S.toarray().astype(np.float32), y=y)
    (tmp_path / "csr").mkdir()
    sp.save_npz(tmp_path / "csr" / "X.npz", S)
    np.save(tmp_path / "csr" / "y.npy", y)
    text = tmp_path / "rows.svm"
    with open(text, "w") as fh:
        fh.write("# header comment\n")
        for i in range(103):
            row = S[i]
            fh.write(f"{y[i]:g} " + " ".join(f"{j + 1}:{float(v)!r}" for j, v in zip(row.indices, row.data)) + "\n")
            if i == 50:
                fh.write("\n")
    return S.toarray(), y, [str(dense), str(tmp_path / "csr"), str(text)]


@pytest.mark.parametrize("which", [0, 1, 2], ids=["dense-npz", "csr-directory", "libsvm"])
def test_iter_rows_streams_exactly_the_requested_rows(tmp_path, which):
    import scipy.sparse as sp
    from asyos.data.io import open_source
    X, y, paths = _row_files(tmp_path)
    source = open_source(paths[which], n_features=40 if which == 2 else None)
    for start, stop, chunk in ((0, 103, 1000), (10, 95, 17), (50, 51, 4), (103, 103, 5)):
        blocks = list(source.iter_rows(start, stop, chunk))
        assert all(b[0].shape[0] <= chunk for b in blocks)
        got = (np.vstack([b[0].toarray() if sp.issparse(b[0]) else b[0] for b in blocks]) if blocks
               else np.empty((0, 40)))
        np.testing.assert_allclose(got, X[start:stop].astype(np.float32))
        np.testing.assert_array_equal(np.concatenate([b[1] for b in blocks]) if blocks else [], y[start:stop])
    with pytest.raises(InputError, match="outside the 103 training rows"):
        list(source.iter_rows(5, 200))


def test_a_scaled_shard_centres_and_scales_every_column(rng):
    """Dense and sparse alike: z = (x - mean) / std with an intercept, x / rms without; a constant
    column becomes zero; ``to_units`` undoes it (a model on z equals its converse on x)."""
    import scipy.sparse as sp
    X = rng.standard_normal((30, 6)) * [1.0, 10.0, 0.1, 1.0, 5.0, 1.0] + [0.0, 3.0, -2.0, 7.0, 0.0, 1.0]
    X[:, 3] = 7.0
    X[rng.random((30, 6)) < 0.3] = 0.0
    X[:, 3] = 7.0
    for data in (X, sp.csr_matrix(X)):
        centred = FeatureShard(data, standardize=True, center=True)
        Z = np.array([centred.column(j).copy() for j in range(6)]).T     # (a sparse shard reuses its buffer)
        keep = [0, 1, 2, 4, 5]
        np.testing.assert_allclose(Z[:, keep], (X[:, keep] - X[:, keep].mean(0)) / X[:, keep].std(0), atol=1e-12)
        np.testing.assert_array_equal(Z[:, 3], 0.0)
        np.testing.assert_allclose(centred.squared_norms(), (Z ** 2).sum(0), atol=1e-9)
        w = rng.standard_normal(6)
        coef, b = centred.to_units(np.arange(6), w, 0.5)
        np.testing.assert_allclose(X @ coef + b, Z @ w + 0.5, atol=1e-10)
        plain = FeatureShard(data, standardize=True, center=False)
        R = np.array([plain.column(j).copy() for j in range(6)]).T
        np.testing.assert_allclose(R, X / np.sqrt((X ** 2).mean(0)), atol=1e-12)
    assert isinstance(FeatureShard(sp.csr_matrix(X), standardize=True).XT, sp.csr_matrix)   # stays sparse


def test_a_shard_given_its_columns_scales_them_in_place_to_the_same_bits(rng):
    """``copy=False``: a C-contiguous float64 ``X.T`` (a generated shard, feature-major) is scaled where it
    lies, to the same values as the copy; anything else (a C-ordered ``X``, a read-only array) is copied."""
    XT = rng.standard_normal((6, 40)) * 3.0 + 1.0
    for center in (True, False):
        copied = FeatureShard(XT.T, standardize=True, center=center)
        given = XT.copy()
        inplace = FeatureShard(given.T, standardize=True, center=center, copy=False)
        assert np.shares_memory(inplace.XT, given) and not np.shares_memory(copied.XT, XT)
        np.testing.assert_array_equal(inplace.XT, copied.XT)
        np.testing.assert_array_equal(inplace.scales, copied.scales)
        np.testing.assert_array_equal(inplace.offsets, copied.offsets)
    X = np.ascontiguousarray(XT.T)                       # sample-major: X.T is not C-contiguous
    assert not np.shares_memory(FeatureShard(X, standardize=True, copy=False).XT, X)
    frozen = XT.copy()
    frozen.flags.writeable = False
    assert not np.shares_memory(FeatureShard(frozen.T, standardize=True, copy=False).XT, frozen)


def test_a_generated_shard_gives_its_raw_columns_again_after_scaling_in_place():
    """Under mpiexec a worker scales a generated shard in place (``copy=False``) and drops ``X``; the raw
    columns of its selection, which the central rank refits on, are generated again: the same values."""
    from asyos.runs.mpi_run import _raw_columns
    source = SyntheticSource(n_features=300, seed=4)
    columns = shard_columns(300, 3, 1)
    kept = source.load(columns, with_test=False).X.copy()
    data = source.load(columns, with_test=False)
    shard = FeatureShard(data.X, columns, standardize=True, copy=False)
    assert np.shares_memory(shard.XT, data.X)
    local = np.array([0, 7, 42, 99])
    np.testing.assert_array_equal(_raw_columns(shard, None, local, source), kept[:, local].T)


def test_a_malformed_sparse_matrix_is_refused_before_any_compiled_code(tmp_path):
    """An index beyond the shape or decreasing pointers: InputError from the API and exit 2 from the
    CLI (a column index beyond the shape crashed the OS step with a segmentation fault)."""
    import scipy.sparse as sp

    from asyos import BudgetedARDA, OnlineSubstitution
    from asyos.errors import InputError
    from tests.conftest import REPO
    beyond = sp.csr_matrix((np.ones(3), np.array([0, 5, 1]), np.array([0, 2, 3])), shape=(2, 3))
    backwards = sp.csr_matrix((np.ones(3), np.array([0, 1, 2]), np.array([0, 2, 1])), shape=(2, 3))
    for X, message in ((beyond, "indices must be < 3"), (backwards, "non-decreasing")):
        for estimator in (OnlineSubstitution(budget=1), BudgetedARDA(budget=1)):
            with pytest.raises(InputError, match=f"not a valid CSR matrix: .*{message}"):
                estimator.fit(X, np.array([1.0, 2.0]))
    G = sp.random(50, 20, density=0.3, format="csr", random_state=0)
    G.indices[3] = 40
    np.savez(tmp_path / "X.npz", data=G.data, indices=G.indices, indptr=G.indptr, shape=np.array(G.shape),
             format=np.array(b"csr"))
    np.save(tmp_path / "y.npy", np.arange(50.0))
    status, _, stderr = run_asyos("--data", tmp_path, "--budget", "2", cwd=REPO)
    assert status == 2 and stderr.strip().count("\n") == 0
    assert "is not a valid CSR matrix: indices must be < 20" in stderr


def test_complex_values_in_an_npz_are_refused(tmp_path):
    from asyos.data.io import open_source
    from asyos.errors import InputError
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "c.npz", X=rng.normal(size=(20, 5)) + 1j, y=np.arange(20.0))
    source = open_source(str(tmp_path / "c.npz"))
    with pytest.raises(InputError, match="must hold real numbers; got dtype complex128"):
        source.load()
    with pytest.raises(InputError, match="real-valued"):
        next(source.iter_rows(0, 20, 5))


def _flip_member(path, member):
    """XOR 16 bytes in the middle of ``member``'s stored (or compressed) bytes of the zip at ``path``."""
    import zipfile
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    raw = bytearray(open(path, "rb").read())
    start = info.header_offset + 30 + int.from_bytes(raw[info.header_offset + 26:info.header_offset + 28], "little") \
        + int.from_bytes(raw[info.header_offset + 28:info.header_offset + 30], "little")
    middle = start + info.compress_size // 2
    for k in range(max(start, middle - 8), min(start + info.compress_size, middle + 8)):
        raw[k] ^= 0x5A
    open(path, "wb").write(bytes(raw))


@pytest.mark.parametrize("compressed", [False, True])
def test_a_corrupt_npz_member_is_an_input_error_on_every_read_path(tmp_path, compressed):
    """Bytes flipped inside a member (a bad CRC-32, or a damaged deflate stream): InputError naming the
    file ("corrupt") from the dense .npz, the CSR directory (whole, by columns, by rows) and the CSC
    directory (read whole: a stored member's CRC-32 is checked when its reads run from start to end);
    it was a BadZipFile or zlib.error traceback."""
    from asyos.data.columnar import CscNpz
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 30))
    y = rng.normal(size=400)
    save = np.savez_compressed if compressed else np.savez
    cases = []
    for member in ("X.npy", "y.npy"):
        path = tmp_path / f"dense_{member[0]}.npz"
        save(path, X=X, y=y)
        _flip_member(path, member)
        cases.append((path, lambda p: load_dataset(p)))
    S = sp.random(400, 30, density=0.3, format="csr", random_state=2)
    for member in ("data.npy", "indices.npy", "indptr.npy"):
        for fmt in ("csr", "csc"):
            directory = tmp_path / f"{fmt}_{member[:-4]}"
            directory.mkdir()
            sp.save_npz(directory / "X.npz", S.asformat(fmt), compressed=compressed)
            np.save(directory / "y.npy", y)
            _flip_member(directory / "X.npz", member)
            cases.append((directory, lambda p: load_dataset(p)))
            if fmt == "csr":
                cases.append((directory, lambda p: load_dataset(p, columns=[0, 7, 29])))
                cases.append((directory, lambda p: list(open_source(p).iter_rows(chunk_rows=50))))
            else:
                cases.append((directory, lambda p: CscNpz(str(p / "X.npz")).block(np.arange(30))))
    for path, read in cases:
        try:
            read(path)
        except InputError as exc:
            assert "X.npz" in str(exc) or ".npz" in str(exc), exc
            assert "\n" not in str(exc)
        else:
            raise AssertionError(f"{path} read without error")
    bad = tmp_path / "dense_X.npz"
    with pytest.raises(InputError, match=r"dense_X.npz'?: corrupt array 'X' \((BadZipFile|error)"):
        load_dataset(bad)


@pytest.mark.parametrize("line, message", [
    ("1 100000000000000000000000:1.0", "line 2: feature index in '100000000000000000000000:1.0' is too large"),
    ("1 9223372036854775808:1.0", "line 2: feature index in '9223372036854775808:1.0' is too large"),
    ("1 -4:1.0", "line 2: negative feature index -4"),
    ("1 2.5:1.0", "line 2: cannot read '2.5:1.0' as index:value"),
    ("1 1:1.0 1:2.0", "line 2: duplicate feature index 1"),
])
def test_bad_libsvm_indices_are_refused_by_every_reader(tmp_path, line, message):
    """The in-memory load, the row stream and ``asyos.convert`` share the compiled reader: each refuses
    an index beyond int64 (an OverflowError before), negative, not an integer, or given twice on a line."""
    from asyos.cli.convert import main as convert
    path = tmp_path / "bad.svm"
    path.write_text(f"-1 3:1\n{line}\n1 2:1\n")
    with pytest.raises(InputError, match=message):
        load_dataset(str(path))
    with pytest.raises(InputError, match=message):
        list(open_source(str(path), n_features=4, index_base=1).iter_rows())
    assert convert([str(path), str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()


def test_values_whose_squares_overflow_are_refused():
    from asyos.data.dataset import check_scale
    X = np.random.default_rng(0).standard_normal((20, 4))
    check_scale(X, "X")                                        # ordinary data: silent
    X[3, 2] = 1e200
    with pytest.raises(InputError, match="values up to 1e\\+200 .* squares overflow float64"):
        check_scale(X, "X")
    with pytest.raises(InputError, match="squares overflow"):
        FeatureShard(sp.csr_matrix(X))


@pytest.mark.parametrize("sparse", [False, True])
def test_vanishing_and_zero_scales_warn(sparse):
    from asyos.data.dataset import check_scale
    from asyos.errors import ConvergenceWarning
    X = np.random.default_rng(0).standard_normal((20, 4))
    X[:, 1] *= 1e-300
    wrap = sp.csr_matrix if sparse else np.asarray
    with pytest.warns(ConvergenceWarning, match="1 of 4 columns has no value above 1e-150"):
        check_scale(wrap(X), "X")
    with pytest.warns(ConvergenceWarning, match="every nonzero column"):
        check_scale(wrap(X * 1e-300), "X")
    with pytest.warns(ConvergenceWarning, match="X is all zeros"):
        check_scale(wrap(np.zeros((5, 3))), "X")


def test_an_allocation_larger_than_memory_is_refused_before_it_is_made():
    from asyos.data.dataset import available_memory_bytes, check_fits_in_memory
    available = available_memory_bytes()
    assert available is not None and available > 0
    check_fits_in_memory(available // 2, "half")
    with pytest.raises(InputError, match="the thing: about .* GiB of memory needed"):
        check_fits_in_memory(available * 2 + 2 ** 40, "the thing")
    source = SyntheticSource(n_features=1000, n_informative=5, n_samples=10 ** 13)
    with pytest.raises(InputError, match="synthetic train columns"):
        source.columns_T(np.arange(1000))


def test_large_arrays_the_package_fills_come_from_a_mapping_of_their_own():
    """``asyos.data.memory``: from 4 MiB on an anonymous mapping (which numpy does not advise to back
    with hugepages), below it numpy's own; the shard's scaled copy and a generated problem use it and
    hold the same values."""
    from asyos.data import memory
    big, small = memory.empty((600, 1000)), memory.empty((10, 10))
    assert _mapped(big)
    assert not _mapped(small) and big.flags.c_contiguous and big.flags.writeable
    X = np.random.default_rng(0).standard_normal((700, 900))
    copied = memory.copy(X.T)
    assert _mapped(copied) and np.array_equal(copied, X.T) and copied.flags.c_contiguous
    shard = FeatureShard(X, standardize=True)
    assert _mapped(shard.XT)
    source = SyntheticSource(n_features=900, n_informative=5, n_samples=700, seed=1)
    assert _mapped(source.columns_T(np.arange(900)))


def _mapped(a) -> bool:
    import mmap
    base = a
    while base is not None:
        if isinstance(base, mmap.mmap):
            return True
        base = base.obj if isinstance(base, memoryview) else getattr(base, "base", None)
    return False


@pytest.mark.parametrize("argv, ours", [
    (["python", "-m", "asyos.run"], True), (["python", "-X", "dev", "-m", "asyos"], True),
    (["python", "-m", "pytest"], False), (["python", "x.py", "-m", "asyos.run"], False),
    (["python", "-c", "import asyos"], False)])
def test_our_commands_are_told_from_other_programs(argv, ours, monkeypatch):
    from asyos import _env
    monkeypatch.setattr("sys.orig_argv", argv)
    assert _env.our_command() is ours


def test_the_scale_and_finiteness_checks_read_a_column_major_x_by_columns_to_the_same_answer(rng):
    from asyos.data.dataset import check_finite, column_max_abs
    X = rng.standard_normal((300, 2000)) * rng.uniform(0.1, 10.0, 2000)
    F = np.asfortranarray(X)
    assert np.array_equal(column_max_abs(F), np.abs(X).max(axis=0))
    assert np.array_equal(column_max_abs(F), column_max_abs(X))
    F[3, 7], F[10, 2] = np.nan, np.inf
    with pytest.raises(InputError, match="2 NaN or infinite values"):
        check_finite(F, "X")


def _overcommit_mode():
    try:
        with open("/proc/sys/vm/overcommit_memory") as fh:
            return fh.read().strip()
    except OSError:
        return None


@pytest.mark.skipif(_overcommit_mode() not in ("0", "2"),
                    reason="the kernel refuses a 1 PiB mapping only under heuristic or strict overcommit "
                           "(mode 0 or 2)")
def test_an_array_too_large_for_the_machine_is_a_memory_error_as_numpy_says_it():
    from asyos.data import memory
    with pytest.raises(MemoryError, match="unable to allocate"):
        memory.empty((1 << 24, 1 << 23))
