"""Loading data sets from files, whole or restricted to a shard of columns.

Layouts understood (those of ``../shared/datasets``, plus libsvm text):

* a dense ``.npz`` file with ``X_train, y_train[, X_test, y_test]`` or ``X, y``;
* a directory with sparse CSR files ``X_train.npz`` + ``y_train.npy`` (``X_test.npz`` +
  ``y_test.npy`` optional), or ``X.npz`` + ``y.npy``; a directory holding a single dense ``.npz``;
* libsvm / svmlight text (``label idx:val ...``, ``#`` comments, ``qid:`` ignored), with an
  optional separate test file; indices 0- or 1-based, detected (a 0 index means 0-based) or
  declared; gzip-compressed (``.gz``) or on standard input (``-``); parsed by the compiled block
  reader ``asyos.data.libsvm``;
* column-major layouts (``asyos.data.columnar``): a directory with a Fortran-ordered ``X.npy``, a
  directory whose ``X.npz`` is CSC, a ``.parquet`` file (one column per feature) or a directory with
  ``train.parquet``; with ``open_source(..., rows=True)`` a ``.parquet`` file is read as a stream of
  row groups instead (``asyos.data.parquet_rows``).

A ``FileSource`` reads only headers when asked for sizes, and ``load(columns)`` keeps only the
requested columns: a dense ``.npz`` member is decompressed as a stream in row chunks, the
``indices``/``data`` of a CSR ``.npz`` are streamed in chunks, and libsvm blocks are filtered as they
are parsed, so a worker holds its shard plus one chunk, never the whole matrix.
"""
from __future__ import annotations

import os
import warnings
import zipfile

import numpy as np

from ..errors import InputError, InputWarning
from .dataset import Dataset, as_float_matrix, as_label_vector, check_finite
from .npz_member import _NpyMember, _sparse_format
from .source import FileSource, _check_columns, check_inferred_width, check_size, load_npy, reading



def load_dataset(path, columns=None, test_path=None, index_base="auto", n_features=None) -> Dataset:
    """Load a data set (see the module docstring for layouts); ``columns`` restricts to a shard."""
    return open_source(path, test_path, index_base, n_features).load(columns)


def open_source(path, test_path=None, index_base="auto", n_features=None, rows=False, label="y") -> "FileSource":
    """The source of ``path`` (``-``: libsvm text on standard input). ``rows=True`` asks for a
    source that streams rows: a ``.parquet`` file is then read by row groups (``ParquetRowSource``).
    ``label``: the label column of a Parquet file."""
    path = os.fspath(path)
    if path == "-":
        if test_path is not None and not os.path.exists(test_path):
            raise InputError(f"test data path {test_path!r} does not exist")
        return LibsvmSource(path, test_path, index_base, n_features)
    if not os.path.exists(path):
        raise InputError(f"data path {path!r} does not exist")
    if test_path is not None and not os.path.exists(test_path):
        raise InputError(f"test data path {test_path!r} does not exist")
    if os.path.isdir(path):
        if test_path is not None:
            raise InputError("--test-data goes with a libsvm file; a directory carries its own test split")
        return _directory_source(path, label)
    if not os.access(path, os.R_OK):
        raise InputError(f"data file {path!r} is not readable")
    if path.endswith(".parquet"):
        if rows:
            from .parquet_rows import ParquetRowSource
            return ParquetRowSource(path, test_path, label=label, n_features=n_features)
        from .columnar import parquet_source
        return parquet_source(path, test_path, label=label)
    if path.endswith(".npz"):
        if test_path is not None:
            raise InputError("--test-data goes with a libsvm file; an .npz file carries its own test split")
        return _dense_npz_source(path)
    return LibsvmSource(path, test_path, index_base, n_features)


# --------------------------------------------------------------------------------------- npz
def _npz_keys(path):
    with reading(path, ".npz archive"):
        with zipfile.ZipFile(path) as zf:
            return {name[:-4] for name in zf.namelist() if name.endswith(".npy")}


GUESS_FROM_FEW = 3         # index 0 seen this many times or fewer: the 0-based reading is a guess worth a warning


def _unread(path, keys, used) -> None:
    """A warning naming the members of an ``.npz`` the reader leaves out (an ``X_test`` without its
    ``y_test``, a second matrix): they were ignored without a word."""
    left = sorted(keys - used)
    if left:
        warnings.warn(f"{path}: member{'s' if len(left) > 1 else ''} {', '.join(left)} not read (this reader takes "
                      f"{', '.join(sorted(used))}; a test split needs both X_test and y_test)", InputWarning,
                      stacklevel=3)


class DenseNpzSource(FileSource):
    def __init__(self, path, x_key, y_key, x_test_key=None, y_test_key=None):
        self.path, self.name = path, os.path.basename(path)
        self._x = _NpyMember(path, x_key)
        self._y_key, self._y_test_key = y_key, y_test_key
        self._x_test = _NpyMember(path, x_test_key) if x_test_key else None
        shape, _, _ = self._x.header()
        if len(shape) != 2:
            raise InputError(f"{path}: {x_key} must be 2-D (n_samples, n_features); got shape {shape}")
        self.n_train, self.n_features = int(shape[0]), int(shape[1])
        check_size(f"{path}: {x_key}", self.n_train, self.n_features)
        if self._x_test is not None:
            tshape, _, _ = self._x_test.header()
            if len(tshape) != 2 or tshape[1] != self.n_features:
                raise InputError(f"{path}: {x_test_key} has shape {tshape}, expected (*, {self.n_features})")

    def labels(self, split="train"):
        key = self._y_key if split == "train" else self._y_test_key
        if key is None:
            return None
        member = self._x if split == "train" else self._x_test
        n = member.header()[0][0]
        return as_label_vector(_NpyMember(self.path, key).read(), n, f"{self.path}: {key}")

    def load(self, columns=None, with_test=True):
        cols = _check_columns(columns, self.n_features)
        X = self._x.read_columns(cols)
        check_finite(X, f"{self.path}: {self._x.key}")
        y = as_label_vector(_NpyMember(self.path, self._y_key).read(), X.shape[0], f"{self.path}: {self._y_key}")
        X_test = y_test = None
        if with_test and self._x_test is not None:
            X_test = self._x_test.read_columns(cols)
            check_finite(X_test, f"{self.path}: {self._x_test.key}")
            y_test = as_label_vector(_NpyMember(self.path, self._y_test_key).read(), X_test.shape[0],
                                     f"{self.path}: {self._y_test_key}")
        return Dataset(X, y, self.n_features, X_test, y_test, columns=None if columns is None else cols,
                       name=self.name)


    def load_test(self):
        if self._x_test is None:
            return None
        X = self._x_test.read_columns(None)
        check_finite(X, f"{self.path}: {self._x_test.key}")
        return X, self.labels("test")

    def test_source(self):
        if self._x_test is None:
            return None
        return DenseNpzSource(self.path, self._x_test.key, self._y_test_key)

    def _iter_rows(self, start, stop, chunk_rows):
        xs = self._x.iter_rows(start, stop, chunk_rows)
        ys = _NpyMember(self.path, self._y_key).iter_rows(start, stop, chunk_rows)
        for X, y in zip(xs, ys):
            check_finite(X, f"{self.path}: {self._x.key}")
            check_finite(y, f"{self.path}: {self._y_key}")
            yield X, y


def _dense_npz_source(path):
    keys = _npz_keys(path)
    if {"X_train", "y_train"} <= keys:
        test = ("X_test", "y_test") if {"X_test", "y_test"} <= keys else (None, None)
        _unread(path, keys, {"X_train", "y_train", *(k for k in test if k)})
        return DenseNpzSource(path, "X_train", "y_train", *test)
    if {"X", "y"} <= keys:
        _unread(path, keys, {"X", "y"})
        return DenseNpzSource(path, "X", "y")
    if {"data", "indices", "indptr", "shape"} <= keys:
        raise InputError(f"{path} is a sparse matrix without labels: pass the directory that holds it "
                         f"and its y_*.npy file")
    raise InputError(f"{path} has arrays {sorted(keys)}; expected X_train/y_train[/X_test/y_test] or X/y")


# ------------------------------------------------------------------------------ sparse directory
class SparseDirectorySource(FileSource):
    def __init__(self, directory, prefix_train, prefix_test=None):
        self.directory, self.name = directory, os.path.basename(os.path.normpath(directory))
        self._train = prefix_train
        self._test = prefix_test
        self.n_train, self.n_features = self._shape(prefix_train)
        check_size(self._file(prefix_train, "X"), self.n_train, self.n_features)
        if prefix_test is not None:
            n_test, p_test = self._shape(prefix_test)
            if p_test != self.n_features:
                raise InputError(f"{directory}: X_{prefix_test}.npz has {p_test} columns, "
                                 f"X_{prefix_train}.npz has {self.n_features}")

    def _file(self, prefix, kind):
        name = f"X_{prefix}.npz" if kind == "X" else f"y_{prefix}.npy"
        if prefix == "":
            name = "X.npz" if kind == "X" else "y.npy"
        return os.path.join(self.directory, name)

    def _shape(self, prefix):
        shape = _NpyMember(self._file(prefix, "X"), "shape").read()
        if shape.shape != (2,) or shape.dtype.kind not in "iu" or shape.min() < 0:
            raise InputError(f"{self._file(prefix, 'X')} is not a scipy sparse matrix file (shape {shape!r})")
        return int(shape[0]), int(shape[1])

    def _read(self, prefix, cols):
        fname = self._file(prefix, "X")
        if cols is not None and _sparse_format(fname) == "csr":
            X = _csr_columns(fname, cols)
        else:
            X = as_float_matrix(_load_sparse(fname), fname)
            if cols is not None:
                X = X[:, cols]
        ypath = self._file(prefix, "y")
        return X, as_label_vector(load_npy(ypath, "labels"), X.shape[0], ypath)

    def labels(self, split="train"):
        prefix = self._train if split == "train" else self._test
        if prefix is None:
            return None
        ypath = self._file(prefix, "y")
        n = self._shape(prefix)[0]
        return as_label_vector(load_npy(ypath, "labels"), n, ypath)

    def load(self, columns=None, with_test=True):
        cols = _check_columns(columns, self.n_features)
        X, y = self._read(self._train, None if columns is None else cols)
        X_test = y_test = None
        if with_test and self._test is not None:
            X_test, y_test = self._read(self._test, None if columns is None else cols)
        return Dataset(X, y, self.n_features, X_test, y_test, columns=None if columns is None else cols,
                       name=self.name)


    def load_test(self):
        return None if self._test is None else self._read(self._test, None)

    def test_source(self):
        return None if self._test is None else SparseDirectorySource(self.directory, self._test)

    def _iter_rows(self, start, stop, chunk_rows):
        fname = self._file(self._train, "X")
        if _sparse_format(fname) != "csr":
            raise InputError(f"{fname} is not in CSR format; rows cannot be streamed")
        indptr = _check_indptr(_NpyMember(fname, "indptr").read(), self.n_train, fname)
        ypath = self._file(self._train, "y")
        y_all = as_label_vector(load_npy(ypath, "labels"), self.n_train, ypath)
        first, last = int(indptr[start]), int(indptr[stop])
        for key, kinds in (("indices", "iu"), ("data", "fiub")):
            size, _, dtype = _NpyMember(fname, key).header()
            if size != (int(indptr[-1]),) or dtype.kind not in kinds:
                raise InputError(f"{fname}: indptr says {int(indptr[-1])} values; {key} has shape {size}, "
                                 f"dtype {dtype}")
        # one chunk of rows at a time: the members are read forward, chunk by chunk
        idx_reader = _Forward(_NpyMember(fname, "indices"), first, last)
        val_reader = _Forward(_NpyMember(fname, "data"), first, last)
        import scipy.sparse as sp
        for lo in range(start, stop, chunk_rows):
            hi = min(stop, lo + chunk_rows)
            count = int(indptr[hi] - indptr[lo])
            idx, val = idx_reader.take(count).astype(np.int64), val_reader.take(count)
            if idx.size and (idx.min() < 0 or idx.max() >= self.n_features):
                raise InputError(f"{fname}: column index out of range in rows {lo}:{hi}")
            check_finite(val, fname)
            X = sp.csr_matrix((val, idx, indptr[lo:hi + 1] - indptr[lo]), shape=(hi - lo, self.n_features))
            yield X, y_all[lo:hi]
        idx_reader.close()
        val_reader.close()


class _Forward:
    """Reads consecutive runs of elements from a 1-D ``.npz`` member, starting at ``first``."""

    def __init__(self, member, first, last):
        self._member = member
        self._blocks = member.iter_rows(first, last, 1 << 20)
        self._buffer = np.empty(0)

    def take(self, count):
        parts, have = [], 0
        while have < count:
            if self._buffer.size == 0:
                self._buffer = next(self._blocks, None)
                if self._buffer is None:
                    raise InputError(f"{self._member.archive}: {self._member.key} holds fewer values than indptr says")
            use = min(count - have, self._buffer.size)
            parts.append(self._buffer[:use])
            self._buffer = self._buffer[use:]
            have += use
        return np.concatenate(parts) if parts else np.empty(0)

    def close(self):
        self._blocks.close()


def _check_indptr(indptr, n, fname):
    """``indptr`` as int64 once it is ``n + 1`` non-decreasing integers from 0 (else ``InputError``)."""
    if indptr.shape != (n + 1,) or indptr.dtype.kind not in "iu":
        raise InputError(f"{fname}: indptr has shape {indptr.shape} and dtype {indptr.dtype} for {n} rows")
    indptr = indptr.astype(np.int64)
    if indptr[0] != 0 or np.any(np.diff(indptr) < 0):
        raise InputError(f"{fname}: indptr does not start at 0 or decreases")
    return indptr


def _load_sparse(fname):
    """The CSR or CSC matrix of a scipy ``.npz`` file, its members read through ``_NpyMember``
    (headers checked against the members' sizes, corruption an ``InputError``); the structure is
    checked by ``as_float_matrix`` before anything indexes with it."""
    fmt = _sparse_format(fname)
    if fmt not in ("csr", "csc"):
        raise InputError(f"{fname} holds a {fmt!r} matrix; expected CSR or CSC")
    shape = _NpyMember(fname, "shape").read()
    if shape.shape != (2,) or shape.dtype.kind not in "iu" or shape.min() < 0:
        raise InputError(f"{fname}: shape must be two non-negative integers; got {shape!r}")
    parts = [_NpyMember(fname, key).read() for key in ("data", "indices", "indptr")]
    if parts[0].ndim != 1 or parts[0].dtype.kind not in "fiub" or any(a.ndim != 1 or a.dtype.kind not in "iu"
                                                                        for a in parts[1:]):
        raise InputError(f"{fname}: data must be real numbers and indices/indptr integers, all 1-D")
    import scipy.sparse as sp
    make = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
    try:
        return make(tuple(parts), shape=tuple(int(v) for v in shape))
    except (ValueError, TypeError, OverflowError) as exc:
        raise InputError(f"{fname} is not a valid {fmt.upper()} matrix: {exc}") from None


def _csr_columns(fname, cols):
    """Columns ``cols`` of a CSR ``.npz`` file, streaming ``indices``/``data`` so that only the
    kept non-zeros (plus one chunk) are ever held."""
    n, p = (int(v) for v in _NpyMember(fname, "shape").read())
    indptr = _check_indptr(_NpyMember(fname, "indptr").read(), n, fname)
    position = np.full(p, -1, dtype=np.int64)
    position[cols] = np.arange(cols.size)
    kept_rows, kept_cols, kept_vals = [], [], []
    offset = 0
    for idx, val in zip(_NpyMember(fname, "indices").iter_chunks(), _NpyMember(fname, "data").iter_chunks()):
        if idx.dtype.kind not in "iu" or val.dtype.kind not in "fiub" or idx.size != val.size or \
                (idx.size and (idx.min() < 0 or idx.max() >= p)):
            raise InputError(f"{fname}: indices and data do not form a valid {n} x {p} matrix")
        new_col = position[idx]
        keep = new_col >= 0
        kept_rows.append(np.searchsorted(indptr, offset + np.flatnonzero(keep), side="right") - 1)
        kept_cols.append(new_col[keep])
        kept_vals.append(val[keep].astype(np.float64))
        offset += idx.size
    if offset != indptr[-1]:
        raise InputError(f"{fname}: {offset} stored values, but indptr says {indptr[-1]}")
    cat = (lambda parts, dt: np.concatenate(parts) if parts else np.empty(0, dtype=dt))  # noqa: E731
    import scipy.sparse as sp
    X = sp.csr_matrix((cat(kept_vals, np.float64), (cat(kept_rows, np.int64), cat(kept_cols, np.int64))),
                      shape=(n, cols.size))
    X.sum_duplicates()
    check_finite(X.data, fname)
    return X


def _directory_source(path, label="y"):
    from . import columnar
    have = set(os.listdir(path))
    if "X.npy" in have:
        return columnar.dense_directory(path)
    if "train.parquet" in have:
        return columnar.parquet_source(path, label=label)
    for train, test in (("train", "test"), ("", None)):
        name = f"X_{train}.npz" if train else "X.npz"
        if name in have:
            test = test if test and f"X_{test}.npz" in have else None
            if columnar.is_csc_file(os.path.join(path, name)):
                return columnar.csc_directory(path, train, test)
            return SparseDirectorySource(path, train, test)
    dense = sorted(f for f in have if f.endswith(".npz"))
    if len(dense) == 1:
        return _dense_npz_source(os.path.join(path, dense[0]))
    raise InputError(f"{path}: no data set found (expected X_train.npz + y_train.npy, X.npz + y.npy, X.npy + y.npy, "
                     f"train.parquet, or one dense .npz file); found {sorted(have)[:8]}")


# ------------------------------------------------------------------------------------- libsvm
class LibsvmSource(FileSource):
    """libsvm/svmlight text (a path, a ``.gz`` path, or ``-`` for standard input), parsed by the
    compiled block reader ``asyos.data.libsvm``; ``index_base`` is ``"auto"`` (0-based if any index
    is 0), 0 or 1.

    A file is scanned once when opened (rows, values, smallest and largest index: the sizes and the
    index base). Standard input cannot be read twice, so it is not scanned: ``n_features`` must be
    declared (``--n-features``), ``"auto"`` means 1-based (libsvm's convention; a 0 index is then an
    error naming the line, to be declared with ``--index-base 0``), ``n_train`` is ``None`` until it has
    been read, and its rows can be streamed once (``iter_rows()`` from the start to the end) or
    loaded once (``load`` keeps what it read, so later ``load``/``labels`` calls reuse it)."""

    def __init__(self, path, test_path=None, index_base="auto", n_features=None):
        if index_base not in ("auto", 0, 1, "0", "1"):
            raise InputError(f"--index-base must be auto, 0 or 1; got {index_base!r}")
        self.path, self.test_path = path, test_path
        self.name = "stdin" if path == "-" else os.path.basename(path)
        self._nnz, self._labels = {}, {}
        self._zeros = 0                 # values at index 0 in the files scanned (how sure a 0-based guess is)
        self._stdin = None
        if path == "-":
            if n_features is None:
                raise InputError("--data - (standard input) needs --n-features: the input is read once, so its "
                                 "width cannot be found first")
            self.index_base = 1 if index_base == "auto" else int(index_base)
            self.n_features, self.n_train = int(n_features), None
            if test_path is not None:
                self._scan(test_path)
            return
        stats = [self._scan(path)] + ([self._scan(test_path)] if test_path else [])
        lo = min(s[1] for s in stats)
        hi = max(s[2] for s in stats)
        if index_base == "auto":
            self.index_base = 0 if lo == 0 else 1
            if lo == 0 and self._zeros <= GUESS_FROM_FEW:
                warnings.warn(f"{path}: read as 0-based (column j is index j) because index 0 appears {self._zeros} "
                              f"time{'s' if self._zeros > 1 else ''} in {sum(s[0] for s in stats)} rows; if the file "
                              f"is 1-based with a stray 0, every column is shifted by one: pass --index-base 1 (or 0 "
                              f"to say it is meant)", InputWarning, stacklevel=2)
        else:
            self.index_base = int(index_base)
            if lo < self.index_base:
                raise InputError(f"{path}: feature index {lo} found, but --index-base is {self.index_base}")
        inferred = max(hi - self.index_base + 1, 0)
        if n_features is not None:
            if n_features < inferred:
                raise InputError(f"{path}: feature index {hi} needs n_features >= {inferred}; "
                                 f"got --n-features {n_features}")
            inferred = int(n_features)
        else:
            check_inferred_width(path, hi, inferred)
        self.n_features = inferred
        self.n_train = stats[0][0]
        if self.n_features < 1:
            raise InputError(f"{path}: no features found")

    def _scan(self, path):
        n, nnz, lo, hi, y, zeros = _libsvm_scan(path)
        self._nnz[path] = nnz
        self._labels[path] = y
        self._zeros += zeros
        return n, lo, hi

    def _blocks(self, path, store=True, progress=None):
        from .libsvm import iter_blocks
        return iter_blocks(path, store, self.index_base, self.n_features + self.index_base, progress=progress)

    def labels(self, split="train"):
        path = self.path if split == "train" else self.test_path
        if path is None:
            return None
        if path == "-":
            return self._read_stdin()[1]
        return self._labels[path].copy()

    def _read_stdin(self):
        if self._stdin is None:
            self._stdin = self._parse_blocks("-", None)
            self.n_train = self._stdin[0].shape[0]
        return self._stdin

    def _parse(self, path, cols):
        """``(X restricted to cols, y)`` with ``cols`` global 0-based columns (``None`` = all). Each
        block keeps only its entries in ``cols`` (found by ``np.searchsorted`` in the sorted columns),
        so memory follows the shard and the features that occur, never the largest index."""
        if path == "-":
            X, y = self._read_stdin()
            return (X, y) if cols is None else (X[:, cols], y)
        return self._parse_blocks(path, cols)

    def _parse_blocks(self, path, cols):
        """The CSR of ``path`` (restricted to ``cols``) with the index type scipy would pick (32 bits
        when they fit: scipy's own downcast of int64 arrays was one more copy of the matrix)."""
        base = self.index_base
        width = self.n_features if cols is None else cols.size
        if cols is not None:
            order = np.argsort(cols, kind="stable")
            ordered = cols[order]
        total = self._nnz.get(path) if cols is None else None
        index_type = np.int32 if max(width, self._nnz.get(path, 0)) < 2 ** 31 else np.int64
        if total is not None:            # the scan counted the values: fill the matrix in place
            indices, data = np.empty(total, dtype=index_type), np.empty(total)
        labels, ptrs, idx_parts, val_parts = [], [], [], []
        offset = 0
        for b in self._blocks(path, progress=_reading("reading", path)):
            ind, val, ptr = b.indices, b.data, b.indptr
            ind -= base
            if cols is not None:
                pos = np.minimum(np.searchsorted(ordered, ind), max(ordered.size - 1, 0))
                keep = ordered[pos] == ind if ordered.size else np.zeros(ind.size, dtype=bool)
                ptr = np.concatenate(([0], np.cumsum(keep)))[ptr]
                ind, val = order[pos[keep]], val[keep]
            if total is not None:
                indices[offset:offset + ind.size] = ind
                data[offset:offset + ind.size] = val
            else:
                idx_parts.append(ind)
                val_parts.append(val)
            labels.append(b.labels)
            ptrs.append(ptr[1:] + offset)
            offset += ind.size
        if total is None:
            indices = np.concatenate(idx_parts).astype(index_type) if idx_parts else np.empty(0, dtype=index_type)
            data = np.concatenate(val_parts) if val_parts else np.empty(0)
        elif offset != total:
            raise InputError(f"{path} changed while it was read ({offset} values, {total} when scanned)")
        indptr = np.concatenate([np.zeros(1, dtype=np.int64)] + ptrs).astype(index_type, copy=False)
        y = np.concatenate(labels) if labels else np.empty(0)
        if y.size == 0:
            raise InputError(f"{path}: no samples found")
        import scipy.sparse as sp
        X = sp.csr_matrix((data, indices, indptr), shape=(y.size, width))
        X.sum_duplicates()
        return X, y

    def load(self, columns=None, with_test=True):
        cols = _check_columns(columns, self.n_features)
        X, y = self._parse(self.path, None if columns is None else cols)
        X_test = y_test = None
        if with_test and self.test_path:
            X_test, y_test = self._parse(self.test_path, None if columns is None else cols)
        return Dataset(X, y, self.n_features, X_test, y_test, columns=None if columns is None else cols,
                       name=self.name)

    def load_test(self):
        return None if not self.test_path else self._parse(self.test_path, None)

    def test_source(self):
        """The test file as a source with this one's index base and width (its rows are counted again)."""
        if not self.test_path:
            return None
        return LibsvmSource(self.test_path, None, self.index_base, self.n_features)

    def iter_rows(self, start=0, stop=None, chunk_rows=4096):
        """As ``FileSource.iter_rows``; standard input streams once, from its first row to its last."""
        if self.path != "-" or self._stdin is not None:     # a file, or standard input already read
            yield from super().iter_rows(start, stop, chunk_rows)
            return
        if start != 0 or stop is not None:
            raise InputError("standard input streams from its first row to its last (rows cannot be skipped)")
        yield from self._iter_rows(0, None, max(1, int(chunk_rows)))

    def iter_test_rows(self, chunk_rows=4096):
        """The rows of the test file in chunks (nothing when there is none)."""
        if self.test_path:
            yield from self._chunks(self.test_path, 0, None, chunk_rows)

    def _iter_rows(self, start, stop, chunk_rows):
        if self._stdin is not None:
            X, y = self._stdin
            for lo in range(start, stop, chunk_rows):
                yield X[lo:min(stop, lo + chunk_rows)], y[lo:min(stop, lo + chunk_rows)]
            return
        yield from self._chunks(self.path, start, stop, chunk_rows)

    def _chunks(self, path, start, stop, chunk_rows):
        import scipy.sparse as sp
        from .libsvm import rechunk
        for labels, indptr, indices, data in rechunk(self._blocks(path), start, stop, chunk_rows):
            if self.index_base:
                indices = indices - self.index_base
            X = sp.csr_matrix((data, indices, indptr), shape=(labels.size, self.n_features))
            X.sum_duplicates()
            yield X, labels


def _reading(what, path):
    """A progress reporter (``asyos.utils.progress``) of the MB of text of ``path`` read (the total known
    for an uncompressed file)."""
    from ..utils.progress import Progress
    from .libsvm import MB
    plain = path != "-" and not str(path).endswith(".gz") and os.path.isfile(path)
    return Progress(f"{what} {'<stdin>' if path == '-' else path}", os.path.getsize(path) / MB if plain else None,
                    "MB")


def _libsvm_scan(path):
    """``(n_rows, n_values, min_index, max_index, labels)`` of a libsvm file; errors name the line."""
    from .libsvm import scan
    stats = scan(path, progress=_reading("scanning", path))
    if stats[0] == 0:
        raise InputError(f"{path}: no samples found")
    return stats


