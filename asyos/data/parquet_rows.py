"""Rows of a Parquet file, streamed by record batches (``open_source(..., rows=True)``).

Two layouts are read:

* **wide**: a label column (``label``, default ``y``) and every other numeric column a feature, in
  file order; the chunks are dense float64 ``(rows, features)`` arrays. Parquet stores a column per
  feature, so this suits data sets of up to some thousands of features;
* **sparse lists**: a label column and two list columns, ``indices`` (list of integers, 0-based
  feature indices) and ``values`` (list of numbers), one pair of lists per row; the chunks are CSR.
  This is the layout for wide sparse data (10^6 features cannot be 10^6 Parquet columns). The width
  is ``n_features`` when given, else the file's key-value metadata ``n_features`` (written by
  ``write_sparse_parquet``), else one more than the largest index (a scan of the ``indices`` column).

Only the label and feature columns are read (``ParquetFile.iter_batches(columns=...)``), one batch of
at most ``chunk_rows`` rows at a time; the row groups before ``start`` are skipped without being read.
This is the row-stream reader of the sample-stream learners; the column-per-shard reader of the
feature-parallel learners is a different module.
"""
from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from .dataset import Dataset, check_finite
from .source import FileSource, _check_columns, _row_range, check_inferred_width, check_size

N_FEATURES_KEY = b"n_features"


PARQUET_HINT = "reading Parquet needs pyarrow: pip install 'asyos[parquet]'"


def _parquet():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:                     # an extra: 170 MB that only Parquet files need
        raise InputError(PARQUET_HINT) from None
    return pa, pq


class ParquetRowSource(FileSource):
    """A Parquet file (and an optional Parquet test file of the same layout) as a row stream."""

    def __init__(self, path, test_path=None, label="y", n_features=None, indices="indices", values="values"):
        self.path, self.test_path, self.name = path, test_path, os.path.basename(path)
        self.label, self._indices, self._values = label, indices, values
        self._layout, self._columns = self._schema(path)
        self.n_train = self._open(path).metadata.num_rows
        if test_path is not None and self._schema(test_path) != (self._layout, self._columns):
            raise InputError(f"{test_path}: its columns differ from those of {path}")
        if self._layout == "wide":
            self.n_features = len(self._columns)
            if n_features is not None and int(n_features) != self.n_features:
                raise InputError(f"{path} has {self.n_features} feature columns; got --n-features {n_features}")
        else:
            self.n_features = self._sparse_width(n_features)
        if self.n_features < 1:
            raise InputError(f"{path}: no feature columns")
        check_size(path, self.n_train, self.n_features)

    # -- the file ----------------------------------------------------------------------------------
    def _open(self, path):
        """The file, read in 1 MB buffered pieces without pre-buffering (and batches decoded without
        threads): a 214 MB file of 50 000-row groups streamed with a peak RSS growth of 75 MB instead
        of 270 MB with pyarrow's defaults, and in 0.6 s instead of 1.4 s."""
        _, pq = _parquet()
        try:
            return pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
        except Exception as exc:            # pyarrow raises ArrowInvalid, OSError, ...
            raise InputError(f"cannot read {path!r} as Parquet: {exc}") from None

    def _schema(self, path):
        pa, _ = _parquet()
        schema = self._open(path).schema_arrow
        if self.label not in schema.names:
            raise InputError(f"{path}: no label column {self.label!r} (columns: {', '.join(schema.names[:8])})")
        if not _numeric(pa, schema.field(self.label).type):
            raise InputError(f"{path}: the label column {self.label!r} is not numeric")
        if self._indices in schema.names and self._values in schema.names:
            types = schema.field(self._indices).type, schema.field(self._values).type
            if all(pa.types.is_list(t) or pa.types.is_large_list(t) for t in types) and \
                    pa.types.is_integer(types[0].value_type) and _numeric(pa, types[1].value_type):
                return "sparse", (self._indices, self._values)
        features = tuple(f.name for f in schema if f.name != self.label and _numeric(pa, f.type))
        return "wide", features

    def _sparse_width(self, n_features):
        meta = self._open(self.path).schema_arrow.metadata or {}
        try:
            declared = int(meta[N_FEATURES_KEY]) if N_FEATURES_KEY in meta else None
        except ValueError:
            raise InputError(f"{self.path}: its n_features metadata {meta[N_FEATURES_KEY]!r} is not a number") from None
        if n_features is not None:
            width = int(n_features)
        elif declared is not None:
            width = declared
        else:
            width = 0
            for path in filter(None, (self.path, self.test_path)):
                for batch in self._open(path).iter_batches(columns=[self._indices], use_threads=False):
                    flat = batch.column(0).flatten().to_numpy(zero_copy_only=False)
                    if flat.size:
                        width = max(width, int(flat.max()) + 1)
            check_inferred_width(self.path, width - 1, width)
        return width

    # -- rows --------------------------------------------------------------------------------------
    def _iter_rows(self, start, stop, chunk_rows):
        yield from self._file_rows(self.path, start, stop, chunk_rows)

    def _file_rows(self, path, start, stop, chunk_rows):
        pf = self._open(path)
        sizes = [pf.metadata.row_group(g).num_rows for g in range(pf.num_row_groups)]
        first = np.cumsum([0] + sizes)
        groups = [g for g in range(len(sizes)) if first[g + 1] > start and first[g] < stop]
        if not groups:
            return
        row = int(first[groups[0]])
        columns = [self.label, *self._columns]
        for batch in pf.iter_batches(batch_size=chunk_rows, row_groups=groups, columns=columns, use_threads=False):
            lo, hi = max(start - row, 0), min(stop - row, batch.num_rows)
            row += batch.num_rows
            if lo < hi:
                yield self._convert(batch.slice(lo, hi - lo), path)
            if row >= stop:
                break

    def _convert(self, batch, path):
        y = _column(batch.column(0), f"{path}: {self.label}")
        if self._layout == "wide":
            X = np.empty((batch.num_rows, len(self._columns)))
            for j in range(len(self._columns)):
                X[:, j] = _column(batch.column(j + 1), f"{path}: {self._columns[j]}")
            check_finite(X, f"{path}: feature values")
        else:
            X = self._csr(batch.column(1), batch.column(2), path)
        check_finite(y, f"{path}: labels")
        return X, y

    def _csr(self, idx_col, val_col, path):
        pa, _ = _parquet()
        if idx_col.null_count or val_col.null_count:
            raise InputError(f"{path}: the {self._indices}/{self._values} lists hold nulls")
        idx_col, val_col = _combine(pa, idx_col), _combine(pa, val_col)
        offsets = idx_col.offsets.to_numpy().astype(np.int64)
        if not np.array_equal(offsets - offsets[0], val_col.offsets.to_numpy() - val_col.offsets.to_numpy()[0]):
            raise InputError(f"{path}: the {self._indices} and {self._values} lists differ in length")
        indices = idx_col.flatten().to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        data = val_col.flatten().to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        if indices.size and (indices.min() < 0 or indices.max() >= self.n_features):
            raise InputError(f"{path}: a feature index is outside 0..{self.n_features - 1}")
        check_finite(data, f"{path}: feature values")
        X = sp.csr_matrix((data, indices, offsets - offsets[0]), shape=(offsets.size - 1, self.n_features))
        X.sum_duplicates()
        return X

    # -- the FileSource face ---------------------------------------------------------------------
    def _all(self, path, cols):
        parts = list(self._file_rows(path, 0, self._open(path).metadata.num_rows, 65536))
        if not parts:
            raise InputError(f"{path}: no samples found")
        stack = sp.vstack if self._layout == "sparse" else np.vstack
        X = stack([p[0] for p in parts])
        if self._layout == "sparse":
            X = sp.csr_matrix(X)
        return (X if cols is None else X[:, cols]), np.concatenate([p[1] for p in parts])

    def labels(self, split="train"):
        path = self.path if split == "train" else self.test_path
        if path is None:
            return None
        parts = [_column(b.column(0), f"{path}: {self.label}")
                 for b in self._open(path).iter_batches(columns=[self.label], use_threads=False)]
        y = np.concatenate(parts) if parts else np.empty(0)
        check_finite(y, f"{path}: labels")
        return y

    def load(self, columns=None, with_test=True):
        cols = _check_columns(columns, self.n_features)
        X, y = self._all(self.path, cols)
        X_test = y_test = None
        if with_test and self.test_path:
            X_test, y_test = self._all(self.test_path, cols)
        return Dataset(X, y, self.n_features, X_test, y_test, columns=cols, name=self.name)

    def load_test(self):
        return None if not self.test_path else self._all(self.test_path, None)

    def iter_test_rows(self, chunk_rows=4096):
        if self.test_path:
            n = self._open(self.test_path).metadata.num_rows
            yield from self._file_rows(self.test_path, *_row_range(0, None, n), max(1, int(chunk_rows)))


def _numeric(pa, t):
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)


def _combine(pa, col):
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _column(col, where):
    if col.null_count:
        raise InputError(f"{where} holds {col.null_count} missing value(s)")
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)


def write_sparse_parquet(path, X, y, row_group_rows=65536, label="y"):
    """Write CSR ``X`` and labels ``y`` in the sparse-lists layout (``indices``, ``values``, ``label``;
    ``n_features`` in the metadata), ``row_group_rows`` rows per row group."""
    X = sp.csr_matrix(X)
    y = np.asarray(y, dtype=np.float64)
    blocks = ((X[lo:lo + row_group_rows], y[lo:lo + row_group_rows]) for lo in range(0, X.shape[0], row_group_rows))
    write_sparse_parquet_blocks(path, blocks, X.shape[1], label)


def write_sparse_parquet_blocks(path, blocks, n_features, label="y"):
    """Write ``(X_block CSR, y_block)`` pairs as consecutive row groups of the sparse-lists layout,
    so that a file larger than memory can be written block by block."""
    pa, pq = _parquet()
    schema = pa.schema([(label, pa.float64()), ("indices", pa.list_(pa.int64())), ("values", pa.list_(pa.float64()))],
                       metadata={N_FEATURES_KEY: str(int(n_features)).encode()})
    with pq.ParquetWriter(path, schema) as writer:
        for X, y in blocks:
            X = sp.csr_matrix(X)
            offsets = pa.array(X.indptr.astype(np.int64) - X.indptr[0], type=pa.int32())
            table = pa.table({label: pa.array(np.asarray(y, dtype=np.float64)),
                              "indices": pa.ListArray.from_arrays(offsets, pa.array(X.indices.astype(np.int64))),
                              "values": pa.ListArray.from_arrays(offsets, pa.array(X.data.astype(np.float64)))},
                             schema=schema)
            writer.write_table(table, row_group_size=max(1, X.shape[0]))
