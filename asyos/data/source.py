"""``FileSource``: what every file source offers (sizes from headers, ``load(columns)``, row
streams, the test split), shared by the row-major readers (``asyos.data.io``), the column-major ones
(``asyos.data.columnar``) and the Parquet row stream (``asyos.data.parquet_rows``)."""
from __future__ import annotations

import lzma
import os
import struct
import zipfile
import zlib
from contextlib import contextmanager
from typing import Optional

import numpy as np

from ..errors import InputError
from .dataset import Dataset, available_memory_bytes


class FileSource:
    """Common interface with ``SyntheticSource``: sizes from headers, ``load(columns)``."""

    name: str
    n_features: int
    n_train: int

    def load(self, columns=None, with_test: bool = True) -> Dataset:
        raise NotImplementedError

    def labels(self, split: str = "train") -> Optional[np.ndarray]:
        raise NotImplementedError

    def true_coef(self):
        return None

    def iter_rows(self, start: int = 0, stop: Optional[int] = None, chunk_rows: int = 4096):
        """The training rows ``start:stop`` as ``(X_chunk, y_chunk)`` blocks of at most ``chunk_rows``
        rows (dense arrays, or CSR for sparse sources). Only that part of the file is parsed and at
        most one chunk is held, so files larger than memory can be streamed."""
        start, stop = _row_range(start, stop, self.n_train)
        yield from self._iter_rows(start, stop, max(1, int(chunk_rows)))

    def _iter_rows(self, start, stop, chunk_rows):
        raise NotImplementedError

    def load_test(self):
        """``(X_test, y_test)`` of the file's test split, or ``None`` when it has none."""
        raise NotImplementedError

    def test_source(self) -> Optional["FileSource"]:
        """The test split as a source of its own (its ``iter_rows`` streams the test rows), or ``None``."""
        raise NotImplementedError


def _row_range(start, stop, n):
    stop = n if stop is None else int(stop)
    start = int(start)
    if not 0 <= start <= stop <= n:
        raise InputError(f"rows {start}:{stop} are outside the {n} training rows")
    return start, stop


def check_size(where, n_rows, n_features):
    """``InputError`` for a training split without rows or without features (nothing can be learnt;
    an X of shape (60, 0) was reported as truncated, 0 rows ended in a ZeroDivisionError)."""
    if n_rows == 0:
        raise InputError(f"{where} has no samples (0 rows, {n_features} features)")
    if n_features == 0:
        raise InputError(f"{where} has no features ({n_rows} rows, 0 columns)")


def _check_columns(columns, n_features):
    if columns is None:
        return None
    cols = np.asarray(columns, dtype=np.intp)
    if cols.ndim != 1 or (cols.size and (cols.min() < 0 or cols.max() >= n_features)):
        raise ValueError(f"columns must be indices in 0..{n_features - 1}")
    return cols


ARCHIVE_ERRORS = (zipfile.BadZipFile, zlib.error, lzma.LZMAError, struct.error, EOFError, OSError, ValueError,
                  NotImplementedError, RuntimeError, OverflowError)
"""What ``zipfile`` and ``numpy.lib.format`` raise on a damaged archive or ``.npy`` file: a bad CRC-32
(``BadZipFile``), a damaged deflate stream (``zlib.error``), a cut stream (``EOFError``), an unknown
compression method (``NotImplementedError``), an encrypted member (``RuntimeError``), a bad header
(``ValueError``, ``struct.error``, ``OverflowError``)."""


@contextmanager
def reading(path, what="file"):
    """Turn an error of ``ARCHIVE_ERRORS`` raised while reading ``path`` into an ``InputError`` naming
    it ("corrupt"); an ``InputError`` passes through."""
    try:
        yield
    except InputError:
        raise
    except ARCHIVE_ERRORS as exc:
        raise InputError(f"cannot read {os.fspath(path)!r}: corrupt {what} ({type(exc).__name__}: {exc})") from None


def check_npy_size(shape, dtype, available, where):
    """``InputError`` unless a ``.npy`` header's ``shape`` is non-negative and its data
    (``prod(shape) * itemsize`` bytes) fits in the ``available`` bytes after the header: a damaged
    header must not make a reader allocate what the file cannot hold."""
    if any(int(s) < 0 for s in shape):
        raise InputError(f"{where}: corrupt header (shape {shape})")
    need = dtype.itemsize
    for s in shape:
        need *= int(s)
    if need > available:
        raise InputError(f"{where} is truncated: its header says {need} bytes of data, {max(available, 0)} follow")


def load_npy(path, what="array"):
    """A ``.npy`` file's array (no pickles), its header checked against the file's size first;
    ``InputError`` naming ``path`` for anything unreadable."""
    if not os.path.exists(path):
        raise InputError(f"{what} file {path!r} is missing")
    import numpy.lib.format as fmt
    with reading(path, f"{what} file"):
        with open(path, "rb") as fh:
            version = fmt.read_magic(fh)
            header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, _, dtype = header(fh)
            if dtype.hasobject:
                raise InputError(f"{path}: the {what} are Python objects, not numbers")
            check_npy_size(shape, dtype, os.fstat(fh.fileno()).st_size - fh.tell(), path)
        return np.load(path, allow_pickle=False)


BYTES_PER_FEATURE = 32
"""The least memory a run holds per feature of p (4 float64): every learner keeps per-feature arrays (the
sample-stream learners' records are 4 float64 a feature; sequential OS grew its peak RSS by 75 bytes a
feature at p = 10^7), and a CSC conversion an 8-byte pointer a column. A stray libsvm index of 10^9 made
p = 10^9: OS then peaked at 20 GB of RSS, ``asyos.convert`` at 22.5 GB, OFS failed allocating 29.8 GiB."""


def check_inferred_width(path, largest, p):
    """``InputError`` when ``p``, inferred from the ``largest`` index of a libsvm file (or of a Parquet
    file's index lists), needs more than the available memory at ``BYTES_PER_FEATURE`` a feature (the
    reader itself holds only the features that occur; the learners hold every one of the p)."""
    need, have = p * BYTES_PER_FEATURE, available_memory_bytes()
    if have is not None and need > have:
        raise InputError(f"{path}: its largest feature index, {largest}, makes p = {p:,} features (no --n-features "
                         f"given); a run holds at least {BYTES_PER_FEATURE} bytes a feature, {need / 2**30:.1f} GiB, "
                         f"more than the {have / 2**30:.1f} GiB available: check that index, or declare "
                         f"--n-features to use this width")
