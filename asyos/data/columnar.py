"""Column-major data on disk: a reader of some columns reads only those columns' bytes.

Online Substitution visits features, not samples, and an Asy-OS worker owns a shard of the
columns: both want each column's bytes contiguous on disk. Layouts (chosen by what ``--data``
points at; ``python -m asyos.convert`` writes them from row-major files):

* **dense**: a directory holding ``X.npy``, an ``(n, p)`` array saved Fortran-ordered (column
  major; float32 or float64), and ``y.npy`` (optionally ``X_test.npy`` + ``y_test.npy``);
* **csc**: a directory holding a scipy sparse ``X.npz`` (or ``X_train.npz``, optionally
  ``X_test.npz``) in CSC format with its ``y*.npy``; stored uncompressed (``scipy.sparse.save_npz(...,
  compressed=False)``, what the converter writes) each column is read by two ``pread``; a
  compressed archive is streamed (every byte is decompressed, the kept columns only are held);
* **parquet**: a ``.parquet`` file with one column per feature and the label in a column named
  ``y`` (or a directory holding ``train.parquet`` and optionally ``test.parquet``); pyarrow reads
  only the column chunks asked for.

Reads go through ``os.preadv`` into the destination array (dense, stored csc), never through a
memory map: a mapped file's touched pages count in the process's resident memory, a read's do
not, and ``bytes_read`` counts exactly what was asked of the file. Columns come back
*feature-major* in the file's dtype (``block``: a ``(k, n)`` array, or a ``(k, n)`` CSR for sparse
files), the layout ``FeatureShard`` and ``ColumnShard`` learn on; converting to float64 and
checking values is left to the consumer, chunk by chunk, so that no ``n x p`` temporary exists.
"""
from __future__ import annotations

import mmap
import os
import struct
import zipfile
import zlib

import numpy as np

from ..errors import InputError
from .dataset import Dataset, as_label_vector, check_finite
from .source import ARCHIVE_ERRORS, FileSource, _row_range, check_size, check_npy_size, load_npy, reading
from .sparse import issparse

_MAX_READ = 1 << 30                      # bytes per preadv call (Linux caps one read near 2 GiB)
_ZIP_LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")


def _npy_header(fh, where):
    """``(shape, fortran_order, dtype, data_offset)`` of the .npy stream at ``fh``'s position."""
    try:
        version = np.lib.format.read_magic(fh)
        read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                else np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read(fh)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, struct.error) as exc:
        raise InputError(f"{where} is not a readable .npy array: {exc}") from None
    if any(int(s) < 0 for s in shape):
        raise InputError(f"{where}: corrupt header (shape {shape})")
    return shape, fortran, dtype, fh.tell()


def _pread_into(fd, out, offset, where):
    """Fill the contiguous array ``out`` from ``offset`` of ``fd``; returns the bytes read."""
    view = memoryview(out).cast("B")
    done = 0
    while done < view.nbytes:
        got = os.preadv(fd, [view[done:done + _MAX_READ]], offset + done)
        if got <= 0:
            raise InputError(f"{where} is truncated")
        done += got
    return done


def _runs(cols):
    """``(start_positions, lengths)`` of the runs of consecutive values in sorted ``cols``."""
    if cols.size == 0:
        return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.intp)
    breaks = np.flatnonzero(np.diff(cols) != 1) + 1
    starts = np.concatenate(([0], breaks))
    lengths = np.diff(np.concatenate((starts, [cols.size])))
    return starts, lengths


def _sorted(cols, n_cols, where):
    cols = np.asarray(cols, dtype=np.int64).ravel()
    if cols.size and (cols.min() < 0 or cols.max() >= n_cols):
        raise InputError(f"{where}: columns must be in 0..{n_cols - 1}")
    order = np.argsort(cols, kind="stable")
    return cols, cols[order], order


def _restore(block, order):
    """Rows of a feature-major block read in sorted order, put back in the caller's order."""
    if np.all(order[1:] > order[:-1]):
        return block
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    return block[inverse]


class ColumnFile:
    """One ``(n_rows, n_cols)`` matrix on disk read by columns; ``bytes_read`` counts the bytes
    read so far (headers included)."""

    n_rows: int
    n_cols: int
    dtype: np.dtype
    sparse: bool
    path: str

    def __init__(self):
        self.bytes_read = 0

    def block(self, cols):
        """Columns ``cols`` (any order), feature-major in the file's dtype: ``(k, n_rows)``."""
        raise NotImplementedError

    @property
    def column_bytes(self) -> float:
        """Mean bytes per column (what a shard of ``k`` columns is expected to read: ``k`` times it)."""
        raise NotImplementedError

    def close(self):
        pass


class FortranNpy(ColumnFile):
    """A Fortran-ordered (column-major) ``.npy`` file: column ``j`` is bytes
    ``[offset + j n b, offset + (j + 1) n b)``, ``b`` the item size."""

    sparse = False

    def __init__(self, path, geometry=None):
        """``geometry``: ``(shape, fortran_order, dtype, data_offset)`` of raw column-major data at
        ``path`` (a ``np.memmap``'s), instead of reading a .npy header."""
        super().__init__()
        self.path = path
        self._fd = -1
        try:
            self._fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise InputError(f"cannot open {path!r}: {exc.strerror}") from None
        if geometry is None:
            with open(path, "rb") as fh:
                geometry = _npy_header(fh, path)
            self.bytes_read += geometry[3]
        shape, fortran, dtype, self._offset = geometry
        if len(shape) != 2:
            raise InputError(f"{path} must be 2-D (n_samples, n_features); got shape {shape}")
        if not fortran and min(shape) > 1:
            raise InputError(f"{path} is stored row-major; the column reader needs it column-major: "
                             f"convert it with python -m asyos.convert")
        if dtype.hasobject or not (np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer)):
            raise InputError(f"{path} must hold real numbers; got dtype {dtype}")
        self.n_rows, self.n_cols = int(shape[0]), int(shape[1])
        self.dtype = dtype
        need = self._offset + self.n_rows * self.n_cols * dtype.itemsize
        if os.fstat(self._fd).st_size < need:
            raise InputError(f"{path} is truncated: {os.fstat(self._fd).st_size} bytes, the header says {need}")

    @property
    def column_bytes(self):
        return float(self.n_rows * self.dtype.itemsize)

    def block(self, cols):
        cols, ordered, order = _sorted(cols, self.n_cols, self.path)
        out = np.empty((cols.size, self.n_rows), dtype=self.dtype)
        if self.n_rows == 0:
            return out
        width = self.n_rows * self.dtype.itemsize
        starts, lengths = _runs(ordered)
        for at, length in zip(starts.tolist(), lengths.tolist()):
            self.bytes_read += _pread_into(self._fd, out[at:at + length], self._offset + int(ordered[at]) * width,
                                           self.path)
        return _restore(out, order)

    def column(self, j, out=None):
        """Column ``j`` (a 1-D array in the file's dtype; into ``out`` when given)."""
        out = np.empty(self.n_rows, dtype=self.dtype) if out is None else out
        width = self.n_rows * self.dtype.itemsize
        self.bytes_read += _pread_into(self._fd, out, self._offset + int(j) * width, self.path)
        return out

    def close(self):
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self):
        try:
            self.close()
        except (AttributeError, OSError):
            pass


class _StoredMember:
    """A 1-D ``.npy`` member of an uncompressed zip archive, read by element ranges with ``pread``.

    Reads that follow each other from the member's start (a whole-file load, a pass over the columns in
    order) extend a CRC-32 of what was read, compared with the archive's when the member's end is
    reached: a damaged stored member is then an ``InputError`` as in a compressed one. Other reads (a
    worker's shard) cannot be checked without reading bytes they do not need, so they are not. The
    check costs a CRC-32 of the bytes read, 1.6 GB/s measured (zlib.crc32, one core)."""

    def __init__(self, fd, fh, info, archive, owner):
        fh.seek(info.header_offset)
        head = fh.read(_ZIP_LOCAL_HEADER.size)
        if len(head) != _ZIP_LOCAL_HEADER.size or head[:4] != b"PK\x03\x04":
            raise InputError(f"{archive}: member {info.filename} has a damaged header")
        fields = _ZIP_LOCAL_HEADER.unpack(head)
        fh.seek(info.header_offset + _ZIP_LOCAL_HEADER.size + fields[9] + fields[10])
        shape, _, dtype, self.offset = _npy_header(fh, f"{archive}: {info.filename}")
        owner.bytes_read += self.offset - info.header_offset
        if len(shape) != 1 or dtype.hasobject:
            raise InputError(f"{archive}: {info.filename} must be a 1-D numeric array; got shape {shape}")
        data_start = info.header_offset + _ZIP_LOCAL_HEADER.size + fields[9] + fields[10]
        check_npy_size(shape, dtype, info.file_size - (self.offset - data_start), f"{archive}: {info.filename}")
        self.size, self.dtype, self.fd, self.where, self.owner = int(shape[0]), dtype, fd, archive, owner
        fh.seek(data_start)
        self._crc, self._next = zlib.crc32(fh.read(self.offset - data_start)), self.offset
        self._end, self._expected, self._name = data_start + info.file_size, info.CRC, info.filename

    def _extend_crc(self, offset, values):
        """Extend the running CRC-32 with ``values`` read at ``offset`` when they follow what was read."""
        if offset != self._next or not values.nbytes:
            return
        self._crc = zlib.crc32(memoryview(values).cast("B"), self._crc)
        self._next = offset + values.nbytes
        if self._next == self._end and self._crc != self._expected:
            raise InputError(f"cannot read {self.where!r}: corrupt member {self._name} (bad CRC-32)")

    def ranges(self, starts, stops):
        """The elements ``[starts[i], stops[i])`` concatenated (ranges sorted, not overlapping)."""
        starts, stops = np.asarray(starts, dtype=np.int64), np.asarray(stops, dtype=np.int64)
        out = np.empty(int((stops - starts).sum()), dtype=self.dtype)
        at, item = 0, self.dtype.itemsize
        # ranges that touch are one read
        i, k = 0, len(starts)
        while i < k:
            j = i
            while j + 1 < k and starts[j + 1] == stops[j]:
                j += 1
            count = int(stops[j] - starts[i])
            if count:
                offset = self.offset + int(starts[i]) * item
                self.owner.bytes_read += _pread_into(self.fd, out[at:at + count], offset, self.where)
                self._extend_crc(offset, out[at:at + count])
            at += count
            i = j + 1
        return out


def _streamed_ranges(zf, name, starts, stops, archive, owner):
    """``_StoredMember.ranges`` for a compressed member: the member is decompressed as a stream,
    only the ranges are kept (every byte is read: the format allows no seek)."""
    with reading(archive, f"member {name}"), zf.open(name) as stream:
        shape, _, dtype, _ = _npy_header(stream, f"{archive}: {name}")
        item = dtype.itemsize
        lengths = stops - starts
        out = np.empty(int(lengths.sum()), dtype=dtype)
        position, at = 0, 0
        for lo, hi in zip(starts.tolist(), stops.tolist()):
            if lo > position:
                skip = (lo - position) * item
                while skip:
                    got = len(stream.read(min(skip, 1 << 24)))
                    if not got:
                        raise InputError(f"{archive}: {name} is truncated")
                    skip -= got
                position = lo
            raw = stream.read((hi - lo) * item)
            if len(raw) != (hi - lo) * item:
                raise InputError(f"{archive}: {name} is truncated")
            out[at:at + hi - lo] = np.frombuffer(raw, dtype=dtype)
            at += hi - lo
            position = hi
    owner.bytes_read += os.path.getsize(archive)
    return out


class CscNpz(ColumnFile):
    """A scipy sparse ``.npz`` in CSC format: column ``j``'s row indices and values are
    ``indices[indptr[j]:indptr[j + 1]]`` and ``data[...]``, read with two ``pread`` when the archive
    is stored uncompressed. ``indptr`` (``p + 1`` integers) is read whole when the file is opened."""

    sparse = True

    def __init__(self, path):
        super().__init__()
        self.path = path
        with reading(path, ".npz archive"):
            self._zf = zipfile.ZipFile(path)
        with reading(path, "sparse matrix file"):
            self._open(path)

    def _open(self, path):
        infos = {info.filename: info for info in self._zf.infolist()}
        missing = {"indices.npy", "indptr.npy", "data.npy", "shape.npy", "format.npy"} - set(infos)
        if missing:
            raise InputError(f"{path} is not a scipy sparse matrix file (missing {sorted(missing)})")
        from .npz_member import _sparse_format
        fmt = _sparse_format(path)
        if fmt != "csc":
            raise InputError(f"{path} is a {fmt.upper()} matrix; columns are read from CSC files "
                             f"(python -m asyos.convert writes one)")
        shape = self._small("shape")
        if shape.shape != (2,) or shape.dtype.kind not in "iu" or shape.min() < 0:
            raise InputError(f"{path}: shape must hold two non-negative integers; got {shape!r}")
        self.n_rows, self.n_cols = int(shape[0]), int(shape[1])
        self.indptr = self._small("indptr")
        if self.indptr.dtype.kind not in "iu":
            raise InputError(f"{path}: indptr must hold integers; got dtype {self.indptr.dtype}")
        self.indptr = self.indptr.astype(np.int64)
        if self.indptr.shape != (self.n_cols + 1,) or self.indptr[0] != 0 or np.any(np.diff(self.indptr) < 0):
            raise InputError(f"{path}: indptr does not describe {self.n_cols} columns")
        self.bytes_read += self.indptr.nbytes
        self.stored = all(infos[m + ".npy"].compress_type == zipfile.ZIP_STORED for m in ("indices", "data"))
        with self._zf.open("indices.npy") as stream:
            index_type = _npy_header(stream, f"{path}: indices")[2]
        if index_type.kind not in "iu":
            raise InputError(f"{path}: indices must be integers; got dtype {index_type}")
        self._fd = os.open(path, os.O_RDONLY)
        if self.stored:
            with open(path, "rb") as fh:
                self._indices = _StoredMember(self._fd, fh, infos["indices.npy"], path, self)
                self._data = _StoredMember(self._fd, fh, infos["data.npy"], path, self)
            nnz = int(self.indptr[-1])
            if self._indices.size != nnz or self._data.size != nnz:
                raise InputError(f"{path}: indptr says {nnz} values, indices/data hold "
                                 f"{self._indices.size}/{self._data.size}")
            self.dtype = self._data.dtype
        else:
            with self._zf.open("data.npy") as stream:
                self.dtype = _npy_header(stream, f"{path}: data")[2]
        if self.dtype.hasobject or not np.issubdtype(self.dtype, np.number) or np.issubdtype(self.dtype,
                                                                                               np.complexfloating):
            raise InputError(f"{path} must hold real numbers; got dtype {self.dtype}")

    def _small(self, name):
        from .npz_member import _NpyMember
        return _NpyMember(self.path, name).read()

    @property
    def index_itemsize(self) -> int:
        return self._indices.dtype.itemsize if self.stored else 4

    @property
    def column_bytes(self):
        return float(self.indptr[-1]) * (self.dtype.itemsize + self.index_itemsize) / max(self.n_cols, 1)

    def block(self, cols):
        cols, ordered, order = _sorted(cols, self.n_cols, self.path)
        starts, stops = self.indptr[ordered], self.indptr[ordered + 1]
        if self.stored:
            indices = self._indices.ranges(starts, stops)
            data = self._data.ranges(starts, stops)
        else:
            indices = _streamed_ranges(self._zf, "indices.npy", starts, stops, self.path, self)
            data = _streamed_ranges(self._zf, "data.npy", starts, stops, self.path, self)
        if indices.size and (indices.min() < 0 or indices.max() >= self.n_rows):
            raise InputError(f"{self.path}: a row index is outside 0..{self.n_rows - 1}")
        indptr = np.concatenate(([0], np.cumsum(stops - starts)))
        if indptr[-1] < np.iinfo(np.int32).max and self.n_rows < np.iinfo(np.int32).max:
            # 32-bit pointers keep 32-bit row indices as read (scipy widens indices to the pointers' type)
            indptr, indices = indptr.astype(np.int32), indices.astype(np.int32, copy=False)
        import scipy.sparse as sp
        block = sp.csr_matrix((data, indices, indptr), shape=(cols.size, self.n_rows))
        block.sum_duplicates()
        return _restore(block, order)

    def entries(self, j):
        """``(row indices, values)`` of column ``j``: two ``pread`` on a stored archive (what one OS
        step reads), no scipy matrix built."""
        lo, hi = self.indptr[j:j + 2]
        if not self.stored:
            block = self.block(np.array([j]))
            return block.indices, block.data
        rows, values = self._indices.ranges([lo], [hi]), self._data.ranges([lo], [hi])
        if rows.size and (rows.min() < 0 or rows.max() >= self.n_rows):
            raise InputError(f"{self.path}: a row index is outside 0..{self.n_rows - 1}")
        return rows, values

    def close(self):
        self._zf.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class ParquetColumns(ColumnFile):
    """A Parquet file, one column per feature, the label in ``label`` (read apart). pyarrow
    reads the chunks of the asked columns only; ``bytes_read`` adds their compressed sizes from
    the file's metadata."""

    sparse = False

    def __init__(self, path, label="y"):
        super().__init__()
        try:
            import pyarrow.parquet as pq
        except ImportError:           # the parquet extra: 170 MB that only Parquet files need
            from .parquet_rows import PARQUET_HINT
            raise InputError(PARQUET_HINT) from None
        self.path, self.label = path, label
        try:
            self._file = pq.ParquetFile(path)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds for a bad file
            raise InputError(f"cannot read {path!r} as Parquet: {exc}") from None
        meta = self._file.metadata
        self.bytes_read += meta.serialized_size
        names = list(self._file.schema_arrow.names)
        self.has_label = label in names
        self.names = [name for name in names if name != label]
        self.n_rows, self.n_cols = int(meta.num_rows), len(self.names)
        schema = self._file.schema_arrow
        kinds = {str(schema.field(name).type) for name in self.names}
        bad = kinds - {"float", "double", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                       "halffloat"}
        if bad:
            raise InputError(f"{path}: feature columns must be numbers; found types {sorted(bad)}")
        self.dtype = np.dtype(np.float32) if kinds <= {"float", "halffloat", "int8", "int16", "uint8", "uint16"} \
            else np.dtype(np.float64)
        self._position = {name: i for i, name in enumerate(names)}
        self._chunk_sizes = np.zeros(len(names))
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for c in range(group.num_columns):
                self._chunk_sizes[c] += group.column(c).total_compressed_size

    @property
    def column_bytes(self):
        sizes = [self._chunk_sizes[self._position[name]] for name in self.names]
        return float(np.mean(sizes)) if sizes else 0.0

    def _read(self, names):
        table = self._file.read(columns=names)
        self.bytes_read += int(sum(self._chunk_sizes[self._position[name]] for name in names))
        return table

    def block(self, cols):
        cols, _, _ = _sorted(cols, self.n_cols, self.path)
        names = [self.names[c] for c in cols.tolist()]
        out = np.empty((cols.size, self.n_rows), dtype=self.dtype)
        if names:
            table = self._read(names)
            for i, column in enumerate(table.columns):
                if column.null_count:
                    raise InputError(f"{self.path}: column {names[i]!r} has {column.null_count} missing values")
                out[i] = column.to_numpy()
        return out

    def labels(self):
        if not self.has_label:
            raise InputError(f"{self.path} has no label column {self.label!r}")
        column = self._read([self.label]).column(0)
        if column.null_count:
            raise InputError(f"{self.path}: the label column has {column.null_count} missing values")
        return column.to_numpy()


# ------------------------------------------------------------------------------------ sources
class ColumnSource(FileSource):
    """A data set in a column-major layout (module docstring): sizes from headers, any columns
    read on their own, and the ``FileSource`` interface (``load``, ``labels``, ``iter_rows``,
    ``load_test``) for consumers that want the matrix."""

    columnar = True

    def __init__(self, name, train, y_train, test=None, y_test=None):
        self.name = name
        self.files = {"train": train, "test": test}
        self._labels = {"train": y_train, "test": y_test}
        self.n_train, self.n_features = train.n_rows, train.n_cols
        check_size(train.path, self.n_train, self.n_features)
        if test is not None and test.n_cols != train.n_cols:
            raise InputError(f"{name}: the test split has {test.n_cols} columns, the training split "
                             f"{train.n_cols}")

    @property
    def sparse(self) -> bool:
        return self.files["train"].sparse

    @property
    def has_test(self) -> bool:
        return self.files["test"] is not None

    @property
    def bytes_read(self) -> int:
        return sum(f.bytes_read for f in self.files.values() if f is not None)

    def file(self, split="train") -> ColumnFile:
        found = self.files[split]
        if found is None:
            raise InputError(f"{self.name} has no {split} split")
        return found

    def labels(self, split="train"):
        reader = self._labels[split]
        if reader is None:
            return None
        return as_label_vector(reader(), self.file(split).n_rows, f"{self.name}: {split} labels")

    def matrix(self, split="train") -> "ColumnMatrix":
        return ColumnMatrix(self.file(split), self.name)

    def lazy(self) -> Dataset:
        """The data set with ``X`` (and ``X_test``) as ``ColumnMatrix``: nothing is read but labels."""
        return Dataset(self.matrix("train"), self.labels("train"), self.n_features,
                       self.matrix("test") if self.has_test else None, self.labels("test"), name=self.name)

    def load(self, columns=None, with_test=True) -> Dataset:
        cols = np.arange(self.n_features) if columns is None else np.asarray(columns, dtype=np.intp)
        X = self.matrix("train")[:, cols]
        X_test = y_test = None
        if with_test and self.has_test:
            X_test, y_test = self.matrix("test")[:, cols], self.labels("test")
        return Dataset(X, self.labels("train"), self.n_features, X_test, y_test,
                       columns=None if columns is None else cols, name=self.name)

    def load_test(self):
        if not self.has_test:
            return None
        return self.matrix("test")[:, np.arange(self.n_features)], self.labels("test")

    def _iter_rows(self, start, stop, chunk_rows):
        """Rows from a column-major file cost a read of every column per chunk: chunks are made as
        tall as 64 MB of float64 allow (at least ``chunk_rows``) and the matrix is read in column
        blocks, so memory stays bounded; a row format is the faster source for row streams."""
        X_all = self.matrix("train")
        y = self.labels("train")
        width = max(1, (1 << 26) // (8 * max(self.n_train, 1)))
        for lo in range(start, stop, max(chunk_rows, 1)):
            hi = min(stop, lo + chunk_rows)
            parts = [X_all.block(np.arange(c, min(c + width, self.n_features)))[:, lo:hi]
                     for c in range(0, self.n_features, width)]
            if self.sparse:
                import scipy.sparse as sp
                block = sp.vstack(parts).T.tocsr()
                check_finite(block.data, f"{self.name}: rows {lo}:{hi}")
                block = block.astype(np.float64)
            else:
                block = np.concatenate(parts).T.astype(np.float64)
                check_finite(block, f"{self.name}: rows {lo}:{hi}")
            yield block, y[lo:hi]

    def iter_rows(self, start=0, stop=None, chunk_rows=4096):
        start, stop = _row_range(start, stop, self.n_train)
        yield from self._iter_rows(start, stop, max(1, int(chunk_rows)))


class ArrayColumns(ColumnFile):
    """A matrix in memory (or memory-mapped) read by columns, for ``ColumnMatrix``."""

    def __init__(self, X, name="X"):
        super().__init__()
        self.X, self.path = X, name
        self.sparse = issparse(X)
        if self.sparse:
            import scipy.sparse as sp
            self.X = sp.csc_matrix(X)
        self.n_rows, self.n_cols = (int(v) for v in X.shape)
        self.dtype = np.dtype(X.dtype)

    @property
    def column_bytes(self):
        return float(self.n_rows * self.dtype.itemsize)

    def block(self, cols):
        cols = np.asarray(cols, dtype=np.intp)
        if self.sparse:
            return self.X[:, cols].T.tocsr()
        return np.ascontiguousarray(self.X[:, cols].T)


class ColumnMatrix:
    """A lazy ``(n, p)`` matrix over a ``ColumnFile``: what the estimators take in place of an
    array to learn out of core (``OnlineSubstitution.fit(source.matrix(), y)``). ``M[:, cols]``
    reads those columns (float64, dense or CSC); ``block(cols)`` gives them feature-major in the
    file's dtype."""

    ndim = 2

    def __init__(self, file, name=""):
        self.file = file
        self.name = name or os.path.basename(file.path)
        self.shape = (file.n_rows, file.n_cols)
        self.sparse = file.sparse
        self.dtype = np.dtype(np.float64)

    def block(self, cols):
        return self.file.block(cols)

    def __getitem__(self, key):
        if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], slice) and key[0] == slice(None)):
            raise TypeError("a ColumnMatrix is read by columns: use M[:, columns]")
        cols = np.arange(self.shape[1])[key[1]] if isinstance(key[1], slice) else np.asarray(key[1])
        if cols.dtype == bool:
            cols = np.flatnonzero(cols)
        block = self.file.block(cols.astype(np.int64))
        if self.sparse:
            import scipy.sparse as sp
            out = sp.csc_matrix(block.T, dtype=np.float64)
            check_finite(out.data, self.name)
            return out
        out = np.asarray(block.T, dtype=np.float64)
        check_finite(out, self.name)
        return out

    def __repr__(self):
        return f"ColumnMatrix({self.file.path!r}, shape={self.shape}, dtype={self.file.dtype})"


def is_column_matrix(X) -> bool:
    return isinstance(X, ColumnMatrix)


def as_column_matrix(X) -> ColumnMatrix:
    """``X`` read by columns: a ``ColumnMatrix`` as it is; a memory-mapped column-major array
    (``np.load(path, mmap_mode="r")`` of a Fortran-ordered ``.npy``) read from its file with
    ``pread``, so that its pages do not stay resident; any other 2-D array or sparse matrix in memory."""
    if isinstance(X, ColumnMatrix):
        return X
    if isinstance(X, np.memmap) and X.ndim == 2 and X.flags.f_contiguous and getattr(X, "filename", None) \
            and isinstance(X.base, mmap.mmap) and X.dtype.kind in "fiu":     # not a view of one
        start = int(getattr(X, "offset", 0))
        return ColumnMatrix(FortranNpy(X.filename, (X.shape, True, X.dtype, start)))
    return ColumnMatrix(ArrayColumns(X))


def _npy_labels(path):
    if not os.path.exists(path):
        raise InputError(f"labels file {path!r} is missing")
    return lambda: load_npy(path, "labels")


def dense_directory(path) -> ColumnSource:
    """A directory with a Fortran-ordered ``X.npy`` + ``y.npy`` (optional ``X_test.npy`` + ``y_test.npy``)."""
    join = lambda name: os.path.join(path, name)  # noqa: E731
    test = FortranNpy(join("X_test.npy")) if os.path.exists(join("X_test.npy")) else None
    return ColumnSource(os.path.basename(os.path.normpath(path)), FortranNpy(join("X.npy")), _npy_labels(join("y.npy")),
                        test, _npy_labels(join("y_test.npy")) if test is not None else None)


def csc_directory(path, train_prefix, test_prefix=None) -> ColumnSource:
    """A sparse directory (``X[_train].npz`` + ``y[_train].npy`` ...) whose matrices are CSC."""
    def names(prefix):
        tail = f"_{prefix}" if prefix else ""
        return os.path.join(path, f"X{tail}.npz"), os.path.join(path, f"y{tail}.npy")
    x_train, y_train = names(train_prefix)
    test = y_test = None
    if test_prefix is not None:
        x_test, y_path = names(test_prefix)
        test, y_test = CscNpz(x_test), _npy_labels(y_path)
    return ColumnSource(os.path.basename(os.path.normpath(path)), CscNpz(x_train), _npy_labels(y_train), test, y_test)


def parquet_source(path, test_path=None, label="y") -> ColumnSource:
    """A Parquet file (one column per feature, labels in ``label``), or a directory holding
    ``train.parquet`` (and optionally ``test.parquet``)."""
    if os.path.isdir(path):
        test = os.path.join(path, "test.parquet")
        test_path = test if os.path.exists(test) else None
        path = os.path.join(path, "train.parquet")
    train = ParquetColumns(path, label)
    test = ParquetColumns(test_path, label) if test_path else None
    if test is not None and test.names != train.names:
        raise InputError(f"{test_path}: its feature columns differ from {path}'s")
    return ColumnSource(os.path.basename(path), train, train.labels, test, test.labels if test else None)


def is_csc_file(path) -> bool:
    """Whether a sparse ``.npz`` holds a CSC matrix (reads the ``format`` member only)."""
    try:
        with zipfile.ZipFile(path) as zf, zf.open("format.npy") as stream:
            fmt = np.lib.format.read_array(stream, allow_pickle=False).item()
    except (KeyError,) + ARCHIVE_ERRORS:
        return False
    return (fmt.decode() if isinstance(fmt, bytes) else str(fmt)) == "csc"
