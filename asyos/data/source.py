"""``FileSource``: what every file source offers (sizes from headers, ``load(columns)``, row
streams, the test split), shared by the row-major readers (``asyos.data.io``), the column-major ones
(``asyos.data.columnar``) and the Parquet row stream (``asyos.data.parquet_rows``)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..errors import InputError
from .dataset import Dataset


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


def _check_columns(columns, n_features):
    if columns is None:
        return None
    cols = np.asarray(columns, dtype=np.intp)
    if cols.ndim != 1 or (cols.size and (cols.min() < 0 or cols.max() >= n_features)):
        raise ValueError(f"columns must be indices in 0..{n_features - 1}")
    return cols
