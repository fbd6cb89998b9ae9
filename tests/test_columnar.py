"""Column-major sources (``asyos.data.columnar``) and out-of-core Online Substitution
(``asyos.data.column_shard``): the same columns as the array in memory, only the asked columns'
bytes read, and the same selection as from memory."""
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from asyos import OnlineSubstitution, make_classification, make_regression
from asyos.data.column_shard import ColumnShard
from asyos.data.columnar import ColumnMatrix, ParquetColumns, as_column_matrix
from asyos.data.io import open_source
from asyos.data.shard import FeatureShard
from asyos.data.sharding import shard_columns
from asyos.errors import InputError
from tests.conftest import REPO
from tests.inprocess import run_asyos


def _dense(rng, n=40, p=23, dtype=np.float64):
    X = rng.normal(size=(n, p)) * rng.uniform(0.1, 10, size=p) + rng.normal(size=p) * 3
    return X.astype(dtype)


def _sparse(rng, n=40, p=23):
    X = sp.random(n, p, density=0.2, random_state=int(rng.integers(1 << 30)), format="csc")
    X.data = rng.normal(size=X.nnz)
    keep = np.ones(p)
    keep[5] = 0.0                                # an empty column
    X = (X @ sp.diags(keep)).tocsc()
    X.eliminate_zeros()
    return X


def write_dense_dir(path, X, y, X_test=None, y_test=None):
    os.makedirs(path, exist_ok=True)
    np.save(os.path.join(path, "X.npy"), np.asfortranarray(X))
    np.save(os.path.join(path, "y.npy"), y)
    if X_test is not None:
        np.save(os.path.join(path, "X_test.npy"), np.asfortranarray(X_test))
        np.save(os.path.join(path, "y_test.npy"), y_test)
    return str(path)


def write_csc_dir(path, X, y, X_test=None, y_test=None, compressed=False):
    os.makedirs(path, exist_ok=True)
    train = "X_train" if X_test is not None else "X"
    sp.save_npz(os.path.join(path, train + ".npz"), sp.csc_matrix(X), compressed=compressed)
    np.save(os.path.join(path, train.replace("X", "y") + ".npy"), y)
    if X_test is not None:
        sp.save_npz(os.path.join(path, "X_test.npz"), sp.csc_matrix(X_test), compressed=compressed)
        np.save(os.path.join(path, "y_test.npy"), y_test)
    return str(path)


def write_parquet(path, X, y, row_group_size=16):
    table = pa.table({**{f"f{j}": X[:, j] for j in range(X.shape[1])}, "y": y})
    pq.write_table(table, path, row_group_size=row_group_size)
    return str(path)


def _as_dense(block):
    return block.toarray() if sp.issparse(block) else np.asarray(block)


@pytest.mark.parametrize("kind", ["dense64", "dense32", "csc", "csc-compressed", "parquet", "parquet32"])
@pytest.mark.parametrize("with_test", [False, True])
def test_every_source_gives_the_columns_of_the_array(tmp_path, rng, kind, with_test):
    sparse = kind.startswith("csc")
    dtype = np.float32 if kind.endswith("32") else np.float64
    X = _sparse(rng) if sparse else _dense(rng, dtype=dtype)
    X_test = (_sparse(rng, n=11) if sparse else _dense(rng, n=11, dtype=dtype)) if with_test else None
    y, y_test = rng.normal(size=X.shape[0]), (rng.normal(size=11) if with_test else None)
    if kind.startswith("dense"):
        path = write_dense_dir(tmp_path / "d", X, y, X_test, y_test)
    elif sparse:
        path = write_csc_dir(tmp_path / "d", X, y, X_test, y_test, compressed=kind == "csc-compressed")
    else:
        path = write_parquet(tmp_path / "train.parquet", X, y)
        if with_test:
            write_parquet(tmp_path / "test.parquet", X_test, y_test)
            path = str(tmp_path)
    source = open_source(path)
    assert source.columnar and (source.n_train, source.n_features) == X.shape
    np.testing.assert_array_equal(source.labels("train"), y)
    cols = np.array([7, 0, 22, 3, 4, 5, 6, 12])           # any order, runs and gaps
    for split, M in (("train", X), ("test", X_test)) if with_test else (("train", X),):
        block = source.file(split).block(cols)
        assert block.dtype == dtype and block.shape == (cols.size, M.shape[0])
        np.testing.assert_array_equal(_as_dense(block), _as_dense(M[:, cols]).T)
        np.testing.assert_array_equal(_as_dense(source.matrix(split)[:, cols]), _as_dense(M[:, cols]).astype(float))
    data = source.load(columns=cols)
    np.testing.assert_array_equal(_as_dense(data.X), _as_dense(X[:, cols]).astype(float))
    assert data.has_test == with_test
    if with_test:
        np.testing.assert_array_equal(_as_dense(data.X_test), _as_dense(X_test[:, cols]).astype(float))
        np.testing.assert_array_equal(data.y_test, y_test)
    rows = list(source.iter_rows(3, 29, chunk_rows=7))
    np.testing.assert_array_equal(np.vstack([_as_dense(r[0]) for r in rows]), _as_dense(X[3:29]).astype(float))


@pytest.mark.parametrize("kind", ["dense", "csc"])
def test_a_sharded_read_touches_only_its_columns(tmp_path, rng, kind):
    """Each worker's shard, read column by column, costs its columns' bytes plus the headers, both
    by the reader's own count and by the kernel's (``/proc/self/io`` of a fresh process)."""
    n, p = 2000, 600
    if kind == "dense":
        X = _dense(rng, n, p, dtype=np.float32)
        path = write_dense_dir(tmp_path / "d", X, rng.normal(size=n))
    else:
        X = sp.random(n, p, density=0.05, random_state=1, format="csc", dtype=np.float64)
        path = write_csc_dir(tmp_path / "d", X, rng.normal(size=n))
    total = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    for index in range(3):
        columns = shard_columns(p, 3, index, "strided")
        # scipy.sparse is imported before the count: the reader imports it on a sparse file's first
        # block, and its modules' files are not the shard's bytes
        script = (f"import numpy as np, scipy.sparse, sys; sys.path.insert(0, {REPO!r})\n"
                  "from asyos.data.io import open_source\nfrom asyos.utils.process_stats import bytes_read\n"
                  f"columns = np.arange({index}, {p}, 3)\n"
                  f"before = bytes_read(); source = open_source({path!r}); block = source.file().block(columns)\n"
                  "print(bytes_read() - before, source.bytes_read, block.shape[0])")
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
        kernel_count, own_count, k = (int(v) for v in out.stdout.split())
        if kind == "dense":
            shard = k * n * 4
        else:
            nnz = int(X[:, columns].nnz)
            shard = nnz * (8 + 4)                       # float64 values and int32 row indices
        assert k == columns.size
        assert shard <= own_count <= shard + 4096 + 8 * (p + 1)     # headers and (csc) the column pointers
        # and the archive's directory, read through buffered files (a fixed cost, not the shard's)
        assert kernel_count <= 1.2 * shard + (1 << 17)
        assert kernel_count < total / 2


def test_compressed_csc_is_streamed_and_gives_the_same_block(tmp_path, rng):
    X = _sparse(rng, n=300, p=50)
    stored = open_source(write_csc_dir(tmp_path / "a", X, np.zeros(300)))
    packed = open_source(write_csc_dir(tmp_path / "b", X, np.zeros(300), compressed=True))
    with zipfile.ZipFile(os.path.join(tmp_path, "b", "X.npz")) as zf:
        assert zf.getinfo("data.npy").compress_type == zipfile.ZIP_DEFLATED
    cols = np.arange(3, 50, 4)
    assert (stored.file().block(cols) != packed.file().block(cols)).nnz == 0
    assert stored.file().stored and not packed.file().stored


def test_row_major_npy_and_bad_files_are_refused(tmp_path, rng):
    d = tmp_path / "rowmajor"
    d.mkdir()
    np.save(d / "X.npy", np.ascontiguousarray(_dense(rng)))
    np.save(d / "y.npy", np.zeros(40))
    with pytest.raises(InputError, match="row-major.*asyos.convert"):
        open_source(str(d))
    short = tmp_path / "short"
    write_dense_dir(short, _dense(rng), np.zeros(40))
    with open(short / "X.npy", "r+b") as fh:
        fh.truncate(os.path.getsize(short / "X.npy") - 8)
    with pytest.raises(InputError, match="truncated"):
        open_source(str(short))
    nan = tmp_path / "nan"
    X = _dense(rng)
    X[3, 9] = np.nan
    write_dense_dir(nan, X, np.zeros(40))
    with pytest.raises(InputError, match="column 9 contains NaN"):
        OnlineSubstitution(budget=2).fit(open_source(str(nan)).matrix(), np.zeros(40))
    labels = tmp_path / "labels"
    write_dense_dir(labels, _dense(rng), np.zeros(39))
    with pytest.raises(InputError, match="39 labels but X has 40 rows"):
        open_source(str(labels)).labels()
    table = pa.table({"f0": ["a", "b"], "y": [1.0, 2.0]})
    pq.write_table(table, tmp_path / "text.parquet")
    with pytest.raises(InputError, match="must be numbers"):
        ParquetColumns(str(tmp_path / "text.parquet"))


@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize("variant", ["exchange", "kdd16"])
def test_out_of_core_os_equals_os_in_memory_on_dense_files(tmp_path, task, variant):
    maker = make_regression if task == "regression" else make_classification
    d = maker(n_samples=120, n_features=300, n_informative=6, seed=3)
    path = write_dense_dir(tmp_path / "d", d.X, d.y)
    kwargs = dict(budget=6, variant=variant, passes=3 if variant == "kdd16" else "auto")
    in_memory = OnlineSubstitution(**kwargs).fit(d.X, d.y)
    source = open_source(path)
    out_of_core = OnlineSubstitution(**kwargs).fit(source.matrix(), source.labels())
    mapped = OnlineSubstitution(**kwargs).fit(np.load(os.path.join(path, "X.npy"), mmap_mode="r"), d.y)
    for other in (out_of_core, mapped):
        np.testing.assert_array_equal(other.support_, in_memory.support_)
        np.testing.assert_array_equal(other.coef_, in_memory.coef_)
        assert other.n_steps_ == in_memory.n_steps_ and other.intercept_ == in_memory.intercept_
        np.testing.assert_array_equal(other.predict(d.X), in_memory.predict(d.X))
    assert out_of_core.n_features_in_ == 300 and not hasattr(out_of_core, "feature_names_in_")


def test_out_of_core_os_on_csc_and_float32_matches_the_same_data_in_memory(tmp_path, rng):
    X = sp.random(150, 400, density=0.1, random_state=2, format="csc")
    w = np.zeros(400)
    w[[3, 50, 77, 201]] = [2.0, -1.5, 1.0, 3.0]
    y = X @ w + 0.01 * rng.normal(size=150)
    source = open_source(write_csc_dir(tmp_path / "s", X, y))
    a = OnlineSubstitution(budget=4).fit(X.tocsr(), y)
    b = OnlineSubstitution(budget=4).fit(source.matrix(), y)
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-10, atol=1e-12)
    X32 = _dense(rng, 150, 200, dtype=np.float32)
    y32 = X32[:, [1, 9, 40]].astype(float) @ np.array([1.0, -2.0, 0.5])
    c = OnlineSubstitution(budget=3).fit(X32.astype(np.float64), y32)
    e = OnlineSubstitution(budget=3).fit(open_source(write_dense_dir(tmp_path / "f", X32, y32)).matrix(), y32)
    np.testing.assert_array_equal(c.support_, e.support_)
    np.testing.assert_allclose(c.coef_, e.coef_, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("hold", [False, True])
def test_column_shard_is_feature_shard(rng, sparse, hold):
    """Every product of the shard interface, standardized or not, centred or not."""
    X = _sparse(rng, 60, 30) if sparse else _dense(rng, 60, 30)
    if not sparse:
        X[:, 11] = 4.0                                     # constant column: scale 0 (sparse: column 5 is empty)
    columns = np.array([0, 2, 3, 11, 17, 29, 8, 5])
    matrix = as_column_matrix(sp.csc_matrix(X) if sparse else X)
    v, h = rng.normal(size=60), rng.uniform(0, 2, size=60)
    for standardize, center in ((False, None), (True, True), (True, False)):
        ref = FeatureShard(X[:, columns], columns, standardize=standardize, center=center)
        got = ColumnShard(matrix, columns, standardize=standardize, center=center, hold=hold, chunk_bytes=8 * 60 * 3)
        np.testing.assert_allclose(got.offsets, ref.offsets, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(got.scales, ref.scales, rtol=1e-13)
        np.testing.assert_allclose(got.squared_norms(), ref.squared_norms(), rtol=1e-10, atol=1e-9)
        np.testing.assert_allclose(got.dot(v), ref.dot(v), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(got.weighted_squares(h), ref.weighted_squares(h), rtol=1e-10, atol=1e-10)
        for j in range(columns.size):
            np.testing.assert_allclose(got.column(j), ref.column(j), rtol=1e-12, atol=1e-12)
        rows = np.array([1, 3, 6])
        for a, b in ((got.block(rows), ref.block(rows)),):
            dense = (lambda B: B.gram() if hasattr(B, "gram") else _as_dense(B @ B.T))  # noqa: E731
            np.testing.assert_allclose(dense(a), dense(b), rtol=1e-10, atol=1e-10)
        np.testing.assert_array_equal(got.raw_columns(rows), _as_dense(X[:, columns[rows]]))


def test_column_matrix_refuses_row_access(rng):
    M = as_column_matrix(_dense(rng))
    assert isinstance(M, ColumnMatrix) and M.shape == (40, 23)
    with pytest.raises(TypeError, match="by columns"):
        M[3]


def test_cli_runs_os_out_of_core_and_asy_os_reads_its_shard(tmp_path):
    """``--data DIR`` with a column-major X.npy: sequential OS reads columns on demand; under
    ``mpiexec -n 3`` each worker reads its shard's bytes (<= 1.2x) and both select the same."""
    d = make_regression(n_samples=200, n_features=3000, n_informative=5, seed=4)
    path = write_dense_dir(tmp_path / "d", d.X.astype(np.float32), d.y)
    out = tmp_path / "seq"
    status, _, stderr = run_asyos("--data", path, "--budget", "5", "--output", out, cwd=REPO)
    assert status == 0, stderr
    record = json.loads((out / "results.json").read_text())
    assert sorted(record["selected"]) == sorted(np.flatnonzero(d.true_coef).tolist())
    from tests.launch.mpirun import run_mpiexec
    mpi_out = tmp_path / "mpi"
    rc, stdout, stderr, _ = run_mpiexec(3, [sys.executable, "-m", "asyos.run", "--data", path, "--budget", "5",
                                            "--output", str(mpi_out)], timeout=180)
    assert rc == 0, stderr
    record = json.loads((mpi_out / "results.json").read_text())
    assert sorted(record["selected"]) == sorted(np.flatnonzero(d.true_coef).tolist())
    for worker in record["workers"]:
        assert worker["shard_bytes"] == worker["n_features"] * 200 * 4
        assert worker["bytes_read"] <= 1.2 * worker["shard_bytes"] + (1 << 20)


@pytest.mark.parametrize("transport", [None, "shared-memory"])
def test_the_simulator_reads_its_shards_out_of_core(tmp_path, transport):
    from asyos import AsyncOnlineSubstitution
    d = make_classification(n_samples=100, n_features=240, n_informative=6, seed=5)
    source = open_source(write_dense_dir(tmp_path / "d", d.X, d.y))
    kwargs = dict(budget=6, n_workers=3, transport=transport, random_state=2)
    a = AsyncOnlineSubstitution(**kwargs).fit(d.X, d.y)
    b = AsyncOnlineSubstitution(**kwargs).fit(source.matrix(), source.labels())
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.n_steps_ == b.n_steps_


def test_the_label_column_of_a_parquet_file_is_named_by_a_flag(tmp_path):
    d = make_regression(n_samples=150, n_features=40, n_informative=3, seed=2)
    table = pa.table({**{f"c{j}": d.X[:, j] for j in range(40)}, "target": d.y})
    pq.write_table(table, tmp_path / "t.parquet")
    def run(*extra):
        args = ["--data", str(tmp_path / "t.parquet"), "--budget", "3", "--output", str(tmp_path / "o"), *extra]
        return subprocess.CompletedProcess(args, *run_asyos(*args, cwd=REPO))

    done = run("--label-column", "target")
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "o" / "results.json").read_text())
    assert sorted(record["selected"]) == np.flatnonzero(d.true_coef).tolist()
    missing = run("--overwrite")                 # the same --output: the first run's files are replaced
    assert missing.returncode == 2 and "no label column 'y'" in missing.stderr


@pytest.mark.parametrize("fmt", ["dense", "csc", "parquet"])
def test_converted_files_read_back_through_the_column_readers(tmp_path, rng, fmt):
    """``asyos.convert`` then ``open_source``: the same matrix, labels and test split as the source,
    and OS learns the same model from the converted file as from the arrays."""
    from sklearn.datasets import dump_svmlight_file
    from asyos.cli.convert import convert
    d = make_regression(n_samples=90, n_features=30, n_informative=3, seed=6)
    X = np.round(d.X, 6)
    X[np.abs(X) < 0.5] = 0.0                         # sparse enough for a CSC file to mean something
    X_test = np.round(rng.normal(size=(20, 30)), 6)
    train, test = tmp_path / "train.svm", tmp_path / "test.svm"
    dump_svmlight_file(X, d.y, str(train), zero_based=True)
    dump_svmlight_file(X_test, np.arange(20.0), str(test), zero_based=True)
    dst = tmp_path / ("out" if fmt != "parquet" else "out_dir")
    convert(str(train), str(dst), fmt=fmt, test_data=str(test), index_base="0", n_features=30, memory_mb=1,
            quiet=True)
    from sklearn.datasets import load_svmlight_file           # the text as an independent parser reads it
    X, y = (np.asarray(a.toarray() if sp.issparse(a) else a) for a in load_svmlight_file(str(train), n_features=30))
    d.y = y
    source = open_source(str(dst))
    assert source.columnar and (source.n_train, source.n_features) == (90, 30)
    np.testing.assert_array_equal(_as_dense(source.matrix()[:, np.arange(30)]), X)
    np.testing.assert_array_equal(_as_dense(source.matrix("test")[:, np.arange(30)]), X_test)
    np.testing.assert_array_equal(source.labels(), d.y)
    np.testing.assert_array_equal(source.labels("test"), np.arange(20.0))
    a = OnlineSubstitution(budget=3).fit(X, d.y)
    b = OnlineSubstitution(budget=3).fit(source.matrix(), source.labels())
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("rows", [False, True])
def test_a_parquet_file_without_pyarrow_is_refused_with_a_hint(tmp_path, monkeypatch, rows):
    """pyarrow is the parquet extra: without it a Parquet path is one line naming the extra, for the column
    reader (OS) and the row stream (the sample-stream learners) alike."""
    X = np.arange(12.0).reshape(4, 3)
    path = write_parquet(tmp_path / "train.parquet", X, np.array([1.0, -1, 1, -1]))
    for name in [m for m in sys.modules if m == "pyarrow" or m.startswith("pyarrow.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pyarrow", None)             # import pyarrow raises ImportError
    from asyos.data.io import open_source
    with pytest.raises(InputError, match=r"reading Parquet needs pyarrow: pip install 'asyos\[parquet\]'"):
        open_source(str(path), rows=rows)
