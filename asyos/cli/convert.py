"""``python -m asyos.convert SRC DST``: write a data set column-major, in one streaming pass.

A worker of an MPI job owns a shard of the feature columns and should read only their bytes; sequential
Online Substitution reads the columns in chunks. Both need the columns stored contiguously, while every
source (libsvm text, a row-major dense ``.npz``, a CSR directory; see ``asyos.data.io``) stores rows.

Output formats (``--format``; default ``dense`` for a dense source, ``csc`` for a sparse one, ``parquet``
when DST ends in ``.parquet``):

* ``dense``: DST is a directory with ``X.npy``, an ``(n, p)`` array saved in Fortran order (columns
  ``[a, b)`` are one contiguous byte range; ``np.load(..., mmap_mode="r")`` reads it), float32 or float64
  (``--dtype``), and ``y.npy`` (float64 labels); a test split adds ``X_test.npy`` and ``y_test.npy``.
* ``csc``: DST is a directory with ``X.npz`` + ``y.npy``, or ``X_train.npz`` + ``y_train.npy`` +
  ``X_test.npz`` + ``y_test.npy`` when the source has a test split (the names ``asyos.data.io`` looks
  for). Each ``.npz`` is what ``scipy.sparse.save_npz(path, X.tocsc(), compressed=False)`` writes: the
  members ``indices, indptr, format, shape, data`` stored uncompressed (so that a reader can seek to a
  column's range), canonical (rows sorted within a column, no duplicates, no explicit zeros), index
  arrays int32 when ``n``, ``p`` and ``nnz`` fit, else int64.
* ``parquet``: one float column per feature (``f0`` ... ``f{p-1}``, or the ``feature_names`` of a dense
  ``.npz``) and a float64 column ``y``, one row group per streamed chunk. Without a test split DST is
  that file; with one, DST is a directory holding ``train.parquet`` and ``test.parquet`` (a DST ending
  in ``.parquet`` is then refused, since Parquet readers take such a directory for one table).
  Parquet keeps per-column metadata for every row group, so wide tables are refused
  (``PARQUET_MAX_FEATURES``; use ``dense`` or ``csc``).

How (an external transpose): the rows arrive in order, the output is column-major. While streaming row
chunks, the part of each chunk in column group ``g`` is appended to spill file ``g`` (at most
``MAX_SPILL_FILES`` groups) in a temporary directory beside DST; then each group's spill is read back in
blocks that fit ``--memory`` and written out column-major: dense columns at their byte offsets in
``X.npy``, sparse entries placed by a counting sort on the column (the per-column counts, i.e. the
``indptr``, are known after the pass; a group with more non-zeros than fit in memory is done in several
column ranges, re-reading its spill). Everything is written under a temporary name in DST's parent and
renamed into place at the end: an interrupted conversion leaves no DST. The source is read once (a
libsvm file's rows are first counted by ``asyos.data.io``).
"""
from __future__ import annotations

import io
import math
import os
import shutil
import sys
import tempfile
import time
import zipfile

import numpy as np
import scipy.sparse as sp

from ..errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, InputError
from ..utils.progress import Progress, wanted

MAX_SPILL_FILES = 256          # open spill files (one per column group) during the pass
PARQUET_MAX_FEATURES = 10000   # wider Parquet tables are refused (see ``_check_parquet``)
PARQUET_META_BYTES = 100       # footer bytes per column and row group (measured 82 without statistics)
SCAN_NOTE_BYTES = 1 << 26      # a libsvm file this large takes seconds to scan: say so before
_COPY_BYTES = 1 << 24          # block size of plain file copies

FORMATS = ("dense", "csc", "parquet")


# ------------------------------------------------------------------------------------ npy output
def _npy_header(shape, dtype, fortran=False) -> bytes:
    """The bytes of a .npy header (version 1.0 when it fits, as ``np.save`` writes it)."""
    d = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": bool(fortran),
         "shape": tuple(int(s) for s in shape)}
    buf = io.BytesIO()
    try:
        np.lib.format.write_array_header_1_0(buf, d)
    except ValueError:                          # header longer than 65535 bytes
        buf = io.BytesIO()
        np.lib.format.write_array_header_2_0(buf, d)
    return buf.getvalue()


def _write_all(fh, buf):
    view = memoryview(buf).cast("B")
    while view.nbytes:
        view = view[fh.write(view) or 0:]


def _pwrite_all(fd, buf, offset):
    view = memoryview(buf).cast("B")
    while view.nbytes:
        done = os.pwrite(fd, view, offset)
        view, offset = view[done:], offset + done


class _VectorFile:
    """A 1-D .npy file of known length, written in order."""

    def __init__(self, path, n, dtype=np.float64):
        self.path, self.n, self.dtype, self.written = path, int(n), np.dtype(dtype), 0
        self.fh = open(path, "wb")
        self.fh.write(_npy_header((self.n,), self.dtype))

    def add(self, values):
        values = np.ascontiguousarray(values, dtype=self.dtype)
        self.written += values.size
        if self.written > self.n:
            raise InputError(f"the source gave more than the {self.n} rows it announced")
        _write_all(self.fh, values)

    def close(self):
        self.fh.close()
        if self.written != self.n:
            raise InputError(f"the source gave {self.written} rows, not the {self.n} it announced")


# ------------------------------------------------------------------------------ column groups
def _group_bounds(p, groups):
    """The column boundaries of at most ``groups`` non-empty equal-width groups (the last may be narrower)."""
    width = -(-p // groups)
    return np.append(np.arange(0, p, width), p), width


class _DenseWriter:
    """Row chunks in, a Fortran-ordered ``X.npy`` out (see the module docstring)."""

    def __init__(self, path, spill_dir, n, p, dtype, budget):
        self.path, self.n, self.p, self.dtype = path, n, p, np.dtype(dtype)
        self.budget = budget
        isz = self.dtype.itemsize
        # a group that fits a quarter of the budget (its transposed copy takes another) is transposed in
        # one block and written with one call; otherwise in row blocks, one write per column and block
        groups = min(MAX_SPILL_FILES, p, max(1, math.ceil(n * p * isz / (budget / 4))))
        self.bounds, _ = _group_bounds(p, groups)
        self.spills = [os.path.join(spill_dir, f"dense{g}.bin") for g in range(len(self.bounds) - 1)]
        self.files = [open(f, "wb", buffering=1 << 16) for f in self.spills]
        self.nnz = 0

    def add(self, X):
        X = X.toarray() if sp.issparse(X) else X
        X = np.asarray(X, dtype=self.dtype)
        self.nnz += int(np.count_nonzero(X))
        for g, fh in enumerate(self.files):
            _write_all(fh, np.ascontiguousarray(X[:, self.bounds[g]:self.bounds[g + 1]]))

    def finish(self, progress):
        for fh in self.files:
            fh.close()
        n, isz = self.n, self.dtype.itemsize
        header = _npy_header((n, self.p), self.dtype, fortran=True)
        base = len(header)
        progress.phase("convert: wrote columns", self.p, "columns")
        with open(self.path, "wb") as out:
            out.write(header)
            out.truncate(base + n * self.p * isz)
            fd = out.fileno()
            # two buffers reused by every block: fresh arrays would page-fault on every block, which
            # measured 3x slower (340 MB/s against 1.1 GB/s for a 1000 x 16667 float32 transpose)
            widest = int(np.diff(self.bounds).max())
            rows = max(1, min(n, int(self.budget / 4) // max(widest * isz, 1)))
            buf_in = np.empty(rows * widest, dtype=self.dtype)
            buf_out = np.empty_like(buf_in)
            for g, spill in enumerate(self.spills):
                a, b = int(self.bounds[g]), int(self.bounds[g + 1])
                with open(spill, "rb") as fh:
                    for r0 in range(0, n, rows):
                        r1 = min(n, r0 + rows)
                        block = buf_in[:(r1 - r0) * (b - a)]
                        if fh.readinto(memoryview(block).cast("B")) != block.nbytes:
                            raise OSError(f"spill file {spill} is short")
                        cols = buf_out[:block.size].reshape(b - a, r1 - r0)
                        np.copyto(cols, block.reshape(r1 - r0, b - a).T)
                        if r1 - r0 == n:        # the whole group: one contiguous range
                            _pwrite_all(fd, cols, base + a * n * isz)
                        else:
                            for j in range(b - a):
                                _pwrite_all(fd, cols[j], base + ((a + j) * n + r0) * isz)
                os.remove(spill)
                progress.advance(b - a)
        return self.nnz


class _CscWriter:
    """CSR row chunks in, a CSC ``.npz`` out (see the module docstring)."""

    def __init__(self, path, spill_dir, n, p, dtype, budget, est_nnz):
        self.path, self.spill_dir, self.n, self.p, self.dtype = path, spill_dir, n, p, np.dtype(dtype)
        self.budget = budget
        self.record = np.dtype([("row", "<i8"), ("col", "<i4"), ("val", self.dtype)])
        per_entry = self.record.itemsize + 8 + self.dtype.itemsize   # spill + output index and value
        groups = min(MAX_SPILL_FILES, p, max(1, math.ceil(est_nnz * per_entry / (budget / 2))))
        self.bounds, self.width = _group_bounds(p, groups)
        self.groups = len(self.bounds) - 1
        self.spills = [os.path.join(spill_dir, f"csc{g}.bin") for g in range(self.groups)]
        self.files = [open(f, "wb", buffering=1 << 16) for f in self.spills]
        self.counts = np.zeros(p, dtype=np.int64)
        self.row0 = 0

    def add(self, X):
        X = sp.csr_matrix(X)
        X.sum_duplicates()
        vals = X.data.astype(self.dtype)
        rows = np.repeat(np.arange(self.row0, self.row0 + X.shape[0], dtype=np.int64), np.diff(X.indptr))
        self.row0 += X.shape[0]
        keep = vals != 0
        cols = X.indices.astype(np.int64)
        if not keep.all():
            vals, rows, cols = vals[keep], rows[keep], cols[keep]
        self.counts += np.bincount(cols, minlength=self.p)
        group = cols // self.width
        order = np.argsort(group, kind="stable")      # keeps the row order within a group
        cuts = np.searchsorted(group[order], np.arange(self.groups + 1))
        rec = np.empty(cols.size, dtype=self.record)
        rec["row"], rec["col"], rec["val"] = rows[order], cols[order] - group[order] * self.width, vals[order]
        for g in np.flatnonzero(np.diff(cuts)):
            _write_all(self.files[g], rec[cuts[g]:cuts[g + 1]])

    def finish(self, progress):
        for fh in self.files:
            fh.close()
        nnz = int(self.counts.sum())
        index = np.dtype(np.int32 if max(self.n, self.p, nnz) < 2 ** 31 else np.int64)
        indptr = np.zeros(self.p + 1, dtype=index)
        np.cumsum(self.counts, out=indptr[1:])
        data_tmp = os.path.join(self.spill_dir, "data.bin")
        progress.phase("convert: wrote columns", self.p, "columns")
        with zipfile.ZipFile(self.path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            with zf.open("indices.npy", "w", force_zip64=True) as out, open(data_tmp, "wb") as data_out:
                out.write(_npy_header((nnz,), index))
                for g in range(self.groups):
                    self._group(g, index, out, data_out)
                    progress.advance(int(self.bounds[g + 1] - self.bounds[g]))
            _zip_array(zf, "indptr", indptr)
            _zip_array(zf, "format", np.asarray(b"csc"))
            _zip_array(zf, "shape", np.asarray((self.n, self.p)))
            with zf.open("data.npy", "w", force_zip64=True) as out, open(data_tmp, "rb") as src:
                out.write(_npy_header((nnz,), self.dtype))
                shutil.copyfileobj(src, out, _COPY_BYTES)
        os.remove(data_tmp)
        return nnz

    def _group(self, g, index, out_indices, out_data):
        """Group ``g``'s columns, sorted by a counting sort, in column ranges that fit the budget."""
        a, b = int(self.bounds[g]), int(self.bounds[g + 1])
        counts = self.counts[a:b]
        per_entry = index.itemsize + self.dtype.itemsize
        limit = max(1, int(self.budget / 2) // per_entry)
        ends = np.cumsum(counts)
        lo = 0
        while lo < b - a:                       # columns [lo, hi) of the group, at least one
            base = ends[lo - 1] if lo else 0
            hi = max(lo + 1, int(np.searchsorted(ends, base + limit, side="right")))
            width = hi - lo
            cursor = np.zeros(width, dtype=np.int64)
            np.cumsum(counts[lo:hi - 1], out=cursor[1:])
            total = int(ends[hi - 1] - base)
            rows_out = np.empty(total, dtype=index)
            vals_out = np.empty(total, dtype=self.dtype)
            chunk = max(1, int(self.budget / 4) // self.record.itemsize)
            with open(self.spills[g], "rb") as fh:
                while True:
                    rec = np.fromfile(fh, dtype=self.record, count=chunk)
                    if not rec.size:
                        break
                    c = rec["col"].astype(np.int64) - lo
                    sel = (c >= 0) & (c < width)
                    if not sel.all():
                        rec, c = rec[sel], c[sel]
                    order = np.argsort(c, kind="stable")
                    cs = c[order]
                    per_col = np.bincount(cs, minlength=width)
                    first = np.cumsum(per_col) - per_col
                    pos = cursor[cs] + np.arange(cs.size) - first[cs]
                    rows_out[pos] = rec["row"][order]
                    vals_out[pos] = rec["val"][order]
                    cursor += per_col
            _write_all(out_indices, rows_out)
            _write_all(out_data, vals_out)
            lo = hi
        os.remove(self.spills[g])


def _zip_array(zf, name, arr):
    with zf.open(name + ".npy", "w", force_zip64=True) as out:
        np.lib.format.write_array(out, arr, allow_pickle=False)


class _ParquetWriter:
    """Row chunks in, one Parquet row group per chunk out."""

    def __init__(self, path, p, dtype, names):
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise InputError("--format parquet needs pyarrow: pip install 'asyos[parquet]'") from None
        self.pa = pa
        ftype = pa.float32() if np.dtype(dtype) == np.float32 else pa.float64()
        self.dtype = np.dtype(dtype)
        self.schema = pa.schema([pa.field(nm, ftype) for nm in names] + [pa.field("y", pa.float64())])
        # statistics only for y: on the features they cost 35% more footer and 20% more time (p = 10000)
        self.writer = pq.ParquetWriter(path, self.schema, write_statistics=["y"])
        self.nnz = 0

    def add(self, X, y):
        X = X.toarray() if sp.issparse(X) else X
        X = np.asfortranarray(X, dtype=self.dtype)       # each column contiguous: no copy into Arrow
        self.nnz += int(np.count_nonzero(X))
        arrays = [self.pa.array(X[:, j]) for j in range(X.shape[1])] + [self.pa.array(np.asarray(y, np.float64))]
        self.writer.write_batch(self.pa.RecordBatch.from_arrays(arrays, schema=self.schema),
                                row_group_size=X.shape[0])

    def close(self):
        self.writer.close()


# --------------------------------------------------------------------------------- conversion
def _source_kind(source):
    from ..data.io import DenseNpzSource
    return "dense" if isinstance(source, DenseNpzSource) else "sparse"


def _nnz_per_row(source):
    """Non-zeros per row: exact for a CSR directory, an over-estimate for libsvm text, ``p`` if dense."""
    from ..data.io import LibsvmSource, SparseDirectorySource, _NpyMember
    n = max(source.n_train, 1)
    if isinstance(source, SparseDirectorySource):
        return _NpyMember(source._file(source._train, "X"), "indices").header()[0][0] / n
    if isinstance(source, LibsvmSource):        # >= 4 characters per entry ("1:1 "); gzip ~ 4x smaller
        return os.path.getsize(source.path) * (4 if source.path.endswith(".gz") else 1) / n / 4
    return float(source.n_features)


def _row_bytes(source, fmt, nnz_row):
    """An over-estimate of the memory a streamed row takes while converted (chunks are sized from it)."""
    sparse = 400 + 64.0 * nnz_row               # parsed entries and their CSR, triplets and spill records
    dense = 24.0 * source.n_features            # a float64 row, its cast and its per-group copies
    if fmt == "csc":
        return sparse if _source_kind(source) == "sparse" else dense + sparse
    return dense if _source_kind(source) == "dense" else max(sparse, dense)


def _feature_names(source, p):
    """The ``feature_names`` of a dense ``.npz`` when it has ``p`` distinct ones, else ``f0`` ...."""
    from ..data.io import DenseNpzSource, _npz_keys
    if isinstance(source, DenseNpzSource) and "feature_names" in _npz_keys(source.path):
        with np.load(source.path, allow_pickle=False) as z:
            names = [str(s) for s in np.asarray(z["feature_names"]).ravel()]
        if len(names) == p and len(set(names)) == p and "y" not in names:
            return names
    return [f"f{j}" for j in range(p)]


def _check_parquet(splits, budget):
    """Parquet keeps per-column state and, until the file is closed, the metadata of every row group (~100
    bytes per column and row group). Measured with pyarrow 26 on a 2-core machine, writing float64 tables of
    200 MB in 15 row groups: p = 1000 at 15 M values/s (peak RSS 246 MB), p = 10000 at 3.9 M values/s
    (432 MB), p = 50000 at 0.9 M values/s (1.6 GB), p = 100000 at 0.3 M values/s (3.2 GB). So p is limited to
    ``PARQUET_MAX_FEATURES``, and a footer (which grows as n p^2 / memory, since row groups must fit in
    memory) larger than a quarter of ``--memory`` is refused."""
    p = splits[0][1].n_features
    if p > PARQUET_MAX_FEATURES:
        raise InputError(f"{p} features are too many for Parquet (at most {PARQUET_MAX_FEATURES}: every row group "
                         f"stores metadata per column); use --format dense or --format csc")
    groups = sum(math.ceil(src.n_train / _chunk_rows(src, "parquet", budget)) for _, src in splits)
    footer = groups * (p + 1) * PARQUET_META_BYTES
    if footer > budget / 4:
        raise InputError(f"Parquet would hold {footer / 2 ** 20:.1f} MB of row-group metadata in memory ({groups} "
                         f"row groups of {p} columns); raise --memory or use --format dense or --format csc")


def _outputs(fmt, has_test):
    """``[(split, X name, y name)]`` inside the output directory (parquet: file names, y unused)."""
    if fmt == "dense":
        names = [("train", "X.npy", "y.npy"), ("test", "X_test.npy", "y_test.npy")]
    elif fmt == "csc":
        names = ([("train", "X_train.npz", "y_train.npy"), ("test", "X_test.npz", "y_test.npy")] if has_test
                 else [("train", "X.npz", "y.npy")])
    else:
        names = [("train", "train.parquet", None), ("test", "test.parquet", None)]
    return names if has_test else names[:1]


def convert(src, dst, fmt=None, dtype="float64", test_data=None, index_base="auto", n_features=None,
            memory_mb=512, overwrite=False, quiet=False, stream=None) -> dict:
    """Convert ``src`` to ``dst`` (see the module docstring); returns the summary as a dict."""
    from ..data.io import open_source
    t0 = time.perf_counter()
    stream = stream or sys.stderr
    src, dst = os.fspath(src), os.path.normpath(os.fspath(dst))
    if dtype not in ("float32", "float64"):
        raise InputError(f"--dtype must be float32 or float64; got {dtype!r}")
    if memory_mb is None or not memory_mb > 0:
        raise InputError(f"--memory must be a positive number of MB; got {memory_mb}")
    if os.path.lexists(dst) and not overwrite:
        raise InputError(f"{dst} exists; pass --overwrite to replace it")
    parent = os.path.dirname(os.path.abspath(dst))
    if not os.path.isdir(parent):
        raise InputError(f"the directory {parent} (where {os.path.basename(dst)} goes) does not exist")
    if os.path.exists(dst) and os.path.exists(src) and os.path.samefile(dst, src):
        raise InputError("the source and the destination are the same path")
    if not quiet and os.path.isfile(src) and not src.endswith(".npz") and os.path.getsize(src) > SCAN_NOTE_BYTES:
        stream.write(f"asyos: convert: counting the rows and features of {src} first\n")
        stream.flush()
    source = open_source(src, test_data, index_base, n_features)
    test = _test_source(source)
    if fmt is None:
        fmt = "parquet" if dst.endswith(".parquet") else ("dense" if _source_kind(source) == "dense" else "csc")
    if fmt not in FORMATS:
        raise InputError(f"--format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    n, p = source.n_train, source.n_features
    if p < 1:
        raise InputError(f"{src} has no features")
    budget = int(memory_mb * (1 << 20))
    splits = [("train", source)] + ([("test", test)] if test is not None else [])
    if fmt == "parquet":
        if test is not None and dst.endswith(".parquet"):
            raise InputError(f"{src} has a test split: give a directory DST (not ending in .parquet) to get "
                             f"DST/train.parquet and DST/test.parquet")
        _check_parquet(splits, budget)
    progress = Progress(enabled=not quiet and wanted())
    try:
        work = tempfile.mkdtemp(prefix=f".{os.path.basename(dst)}.convert-", dir=parent)
    except OSError as exc:
        raise InputError(f"cannot write in {parent}: {exc.strerror}") from None
    try:
        staged = os.path.join(work, "out")
        single_file = fmt == "parquet" and test is None
        if not single_file:
            os.mkdir(staged)
        nnz = 0
        for (split, src_split), (_, x_name, y_name) in zip(splits, _outputs(fmt, test is not None)):
            x_path = staged if single_file else os.path.join(staged, x_name)
            y_path = None if y_name is None else os.path.join(staged, y_name)
            nnz += _convert_split(src_split, fmt, dtype, x_path, y_path, work, budget, progress, split,
                                  len(splits) > 1)
        written = _size(staged)
        if os.path.lexists(dst):                # --overwrite: the old one goes only now
            os.rename(dst, os.path.join(work, "old"))
        os.rename(staged, dst)
    except OSError as exc:                      # a full disk, a file that went away, ...
        raise InputError(f"converting to {dst} failed: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n_test = test.n_train if test is not None else 0
    summary = {"n": n, "n_test": n_test, "p": p, "nnz": nnz, "format": fmt, "dtype": dtype,
               "bytes": written, "seconds": time.perf_counter() - t0, "path": dst}
    if not quiet:
        tail = f" + {n_test} test rows" if n_test else ""
        stream.write(f"asyos: convert: {dst} ({fmt}, {dtype}): n={n}{tail}, p={p}, nnz={nnz}, "
                     f"{written} bytes written in {summary['seconds']:.1f} s\n")
        stream.flush()
    return summary


def _convert_split(source, fmt, dtype, x_path, y_path, work, budget, progress, split, several):
    """One split (train or test) from ``source``'s rows to ``x_path`` (and ``y_path``); returns its nnz."""
    n, p = source.n_train, source.n_features
    chunk_rows = _chunk_rows(source, fmt, budget)
    spill = os.path.join(work, f"spill-{split}")
    os.mkdir(spill)
    if fmt == "dense":
        writer = _DenseWriter(x_path, spill, n, p, dtype, budget)
    elif fmt == "csc":
        writer = _CscWriter(x_path, spill, n, p, dtype, budget, n * _nnz_per_row(source))
    else:
        writer = _ParquetWriter(x_path, p, dtype, _feature_names(source, p))
    labels = _VectorFile(y_path, n) if y_path else None
    what = f"convert: read {split} rows" if several else "convert: read rows"
    progress.phase(what, n, "rows")
    for X, y in source.iter_rows(0, n, chunk_rows):
        if fmt == "parquet":
            writer.add(X, y)
        else:
            writer.add(X)
            labels.add(y)
        progress.advance(X.shape[0])
    if fmt == "parquet":
        writer.close()
        nnz = writer.nnz
    else:
        labels.close()
        nnz = writer.finish(progress)
    shutil.rmtree(spill, ignore_errors=True)
    return nnz


class _InMemory:
    """A test split that its source cannot stream, held whole (test splits are the small part)."""

    def __init__(self, X, y):
        self.X, self.y = X.tocsr() if sp.issparse(X) else np.asarray(X), np.asarray(y, dtype=np.float64)
        self.n_train, self.n_features = self.X.shape

    def iter_rows(self, start, stop, chunk_rows):
        for lo in range(start, stop, chunk_rows):
            yield self.X[lo:min(stop, lo + chunk_rows)], self.y[lo:min(stop, lo + chunk_rows)]


def _test_source(source):
    try:
        return source.test_source()
    except NotImplementedError:
        test = source.load_test()
        return None if test is None else _InMemory(*test)


def _chunk_rows(source, fmt, budget):
    """Rows per streamed chunk: a sixth of the budget (the chunk, its cast and its pieces)."""
    row_bytes = _row_bytes(source, fmt, _nnz_per_row(source))
    return int(max(1, min(source.n_train, (budget / 6) // row_bytes)))


def _size(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


# ------------------------------------------------------------------------------------------ CLI
def _parser():
    from .run import _Parser
    parser = _Parser(prog="python -m asyos.convert",
                     description="Write a data set column-major (dense Fortran-ordered .npy, CSC .npz or Parquet) "
                                 "in one streaming pass with bounded memory.")
    parser.add_argument("src", metavar="SRC", help="libsvm text (.gz too), a dense .npz, or a CSR directory")
    parser.add_argument("dst", metavar="DST", help="output directory (dense, csc) or .parquet file")
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="default: dense for a dense source, csc for a sparse one, parquet for DST *.parquet")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float64",
                        help="feature values (labels stay float64); float32 halves dense files but rounds the "
                             "values to float32 (default float64: exact)")
    parser.add_argument("--test-data", default=None, help="a libsvm test file to convert with SRC")
    parser.add_argument("--index-base", default="auto", help="libsvm feature indices: auto, 0 or 1")
    parser.add_argument("--n-features", type=int, default=None, help="libsvm: the number of features")
    parser.add_argument("--memory", type=float, default=512.0, metavar="MB",
                        help="memory for buffers, in MB (default 512)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing DST")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines and no summary")
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = _parser().parse_args(argv)
        from ..utils.logs import configure
        configure(quiet=args.quiet, verbose=1)      # progress lines unless -q, in a log file too
        convert(args.src, args.dst, args.format, args.dtype, args.test_data, args.index_base, args.n_features,
                args.memory, args.overwrite, args.quiet)
    except InputError as exc:
        print(f"asyos: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("asyos: interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
