"""``ColumnShard``: ``FeatureShard``'s interface over columns kept in the file's form.

``FeatureShard`` holds its columns as float64, scaled in place: the fastest access, at 8 bytes per
value. Out of core that is too much, so ``ColumnShard`` keeps the columns as the file has them
and scales where a column is used (``column``, ``dot``, ``weighted_squares``, ``block``), giving
the same ``z_j = (x_j - offsets_j) * scales_j`` as ``FeatureShard`` (``asyos.data.shard``) up to
the summation order of a few products:

* ``hold=False`` (sequential OS on a file): nothing is held; every use reads the columns again from
  the ``ColumnMatrix`` (one read per visited column, blocks of ``chunk_bytes`` for the whole-shard
  products). Memory ``O(n * chunk)`` whatever ``p``; each pass of OS reads the shard once more
  (from the page cache when it fits there).
* ``hold=True`` (an Asy-OS worker): the shard's columns are read once, with each column's bytes
  read from the file exactly once, and held in the file's dtype (a float32 file: half of
  ``FeatureShard``'s memory).

The offsets and scales come from one pass over the columns when the shard is built, which also
checks every value (NaN or infinite: ``InputError`` naming the column), chunk by chunk, so no
``n x p`` temporary exists anywhere on the way.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from .dataset import check_scale_of, column_max_abs
from .shard import CONSTANT_TOLERANCE, CenteredRows, to_units

CHUNK_BYTES = 1 << 24          # float64 bytes of one block of columns in the whole-shard passes


class ColumnShard:
    def __init__(self, matrix, columns=None, standardize=False, center=None, hold=False, chunk_bytes=CHUNK_BYTES):
        self.n_samples, p = int(matrix.shape[0]), int(matrix.shape[1])
        self.columns = (np.arange(p, dtype=np.intp) if columns is None else np.asarray(columns, dtype=np.intp))
        self.n_local = int(self.columns.size)
        self.sparse = bool(matrix.sparse)
        self.standardized = bool(standardize)
        self._matrix = matrix
        self._name = getattr(matrix, "name", "X")
        self._chunk = max(1, int(chunk_bytes) // (8 * max(self.n_samples, 1)))
        self._held = matrix.block(self.columns) if hold else None
        self._scratch = np.zeros(self.n_samples)
        self._raw_scratch = None
        self._center = self.standardized and (True if center is None else bool(center))
        self.offsets = np.zeros(self.n_local)
        self.scales = np.ones(self.n_local)
        self._norms = self._statistics()
        self._shift = self.offsets * self.scales if self._center and self.sparse else None

    # -- raw columns ------------------------------------------------------------------------------
    def _raw(self, local):
        """Columns ``local`` (local indices) feature-major as the file has them."""
        if self._held is not None:
            return self._held[local]
        return self._matrix.block(self.columns[local])

    def _ranges(self):
        for lo in range(0, self.n_local, self._chunk):
            yield np.arange(lo, min(self.n_local, lo + self._chunk))

    def _checked(self, raw, local, check=True):
        """The raw block as float64 (dense) or float64 CSR, its values checked (``check``: the
        statistics pass reads every value first, so later passes need not)."""
        if self.sparse:
            import scipy.sparse as sp
            block = sp.csr_matrix(raw, dtype=np.float64)
            values = block.data
        else:
            block = np.asarray(raw, dtype=np.float64)
            values = block
        if check and not np.isfinite(values).all():
            rows = np.flatnonzero(~np.isfinite(block.toarray() if self.sparse else block).all(axis=1))
            raise InputError(f"{self._name}: column {int(self.columns[local[rows[0]]])} contains NaN or "
                             f"infinite values")
        return block

    def _statistics(self):
        """One pass: offsets and scales (``FeatureShard``'s rule) and the squared norms of ``z``."""
        n = max(self.n_samples, 1)
        norms = np.empty(self.n_local)
        colmax = np.zeros(self.n_local)
        for local in self._ranges():
            block = self._checked(self._raw(local), local)
            colmax[local] = column_max_abs(block.T)
            if not self.standardized:
                norms[local] = self._squares(block)
                continue
            if self._center:
                mean = np.asarray(block.sum(axis=1)).ravel() / n
                self.offsets[local] = mean
                if self.sparse:
                    spread = np.sqrt(np.maximum(self._squares(block) / n - mean ** 2, 0.0))
                else:
                    block -= mean[:, None]
                    spread = np.sqrt(np.einsum("ij,ij->i", block, block) / n)
                spread[spread <= CONSTANT_TOLERANCE * (np.abs(mean) + spread)] = 0.0
            else:
                spread = np.sqrt(self._squares(block) / n)
            scales = np.divide(1.0, spread, out=np.zeros_like(spread), where=spread > 0)
            self.scales[local] = scales
            norms[local] = self._squares(self._z(block, local, centred=not self.sparse and self._center))
            if self.sparse and self._center:
                shift = self.offsets[local] * scales
                norms[local] = np.maximum(norms[local] - self.n_samples * shift ** 2, 0.0)
        check_scale_of(colmax, self._name)
        return norms

    def _squares(self, block):
        if self.sparse:
            return np.asarray(block.multiply(block).sum(axis=1)).ravel()
        return np.einsum("ij,ij->i", block, block)

    def _z(self, block, local, centred=False):
        """``z`` of a float64 block (sparse: scaled only, the shift applied by the caller)."""
        if self.sparse:
            import scipy.sparse as sp
            return sp.diags(self.scales[local]) @ block if self.standardized else block
        if self.standardized:
            if self._center and not centred:
                block -= self.offsets[local][:, None]
            block *= self.scales[local][:, None]
        return block

    def _blocks(self):
        for local in self._ranges():
            yield local, self._z(self._checked(self._raw(local), local, check=False), local)

    # -- FeatureShard's interface -----------------------------------------------------------------
    def column(self, j: int) -> np.ndarray:
        """Column ``j`` (local index) of ``z`` as a dense vector; the buffer is reused by the next call."""
        out = self._scratch
        if self.sparse:                          # no scipy indexing per step: the held row, or the file's entries
            if self._held is not None:
                lo, hi = self._held.indptr[j], self._held.indptr[j + 1]
                rows, values = self._held.indices[lo:hi], self._held.data[lo:hi]
            elif hasattr(self._matrix.file, "entries"):
                rows, values = self._matrix.file.entries(self.columns[j])
            else:
                raw = self._raw(np.array([j]))
                rows, values = raw.indices, raw.data
            out.fill(-self._shift[j] if self._shift is not None else 0.0)
            np.add.at(out, rows, values * self.scales[j])          # a repeated row index adds up
            return out
        file = self._matrix.file
        if self._held is not None:
            out[:] = self._held[j]
        elif not hasattr(file, "column"):
            out[:] = self._raw(np.array([j]))[0]
        elif file.dtype == np.float64:
            file.column(self.columns[j], out)
        else:                                   # read in the file's dtype, then widened
            if self._raw_scratch is None:
                self._raw_scratch = np.empty(self.n_samples, dtype=file.dtype)
            out[:] = file.column(self.columns[j], self._raw_scratch)
        if self.standardized:
            if self._center:
                out -= self.offsets[j]
            out *= self.scales[j]
        return out

    def squared_norms(self) -> np.ndarray:
        return self._norms.copy()

    def dot(self, v) -> np.ndarray:
        """``Z^T v`` for every column."""
        v = np.asarray(v, dtype=np.float64)
        out = np.empty(self.n_local)
        for local, z in self._blocks():
            out[local] = np.asarray(z @ v).ravel()
        if self._shift is not None:
            out -= self._shift * float(np.sum(v))
        return out

    def weighted_squares(self, h) -> np.ndarray:
        """``z_j^T diag(h) z_j`` for every column."""
        h = np.asarray(h, dtype=np.float64)
        out = np.empty(self.n_local)
        for local, z in self._blocks():
            if self.sparse:
                out[local] = np.asarray(z.multiply(z) @ h).ravel()
                if self._shift is not None:
                    c = self._shift[local]
                    out[local] += c * (c * float(np.sum(h)) - 2.0 * np.asarray(z @ h).ravel())
            else:
                out[local] = np.einsum("ij,ij,j->i", z, z, h)
        return out

    def block(self, rows):
        """``Z[rows]`` feature-major (dense float64, or for sparse centred shards ``CenteredRows``)."""
        rows = np.asarray(rows, dtype=np.intp)
        z = self._z(self._checked(self._raw(rows), rows, check=False), rows)
        if self._shift is None:
            return z
        import scipy.sparse as sp
        return CenteredRows(sp.csr_matrix(z), self._shift[rows])

    def raw_columns(self, local) -> np.ndarray:
        """Columns ``local`` in the data's units, dense ``(n, k)`` float64."""
        local = np.asarray(local, dtype=np.intp)
        raw = self._raw(local)
        return (raw.toarray() if self.sparse else np.asarray(raw, dtype=np.float64)).T.copy()

    def to_units(self, local, weights, intercept=0.0):
        return to_units(weights, intercept, self.offsets[local], self.scales[local])

    @property
    def stored_bytes(self) -> int:
        """What the shard's columns take in the file (dense: ``n_local n`` items; sparse: values and
        row indices of its non-zeros)."""
        file = self._matrix.file
        if self.sparse and hasattr(file, "indptr"):
            nnz = int(np.sum(file.indptr[self.columns + 1] - file.indptr[self.columns]))
            return nnz * (file.dtype.itemsize + file.index_itemsize)
        return int(self.n_local * self.n_samples * file.dtype.itemsize)

    @property
    def bytes_read(self) -> int:
        return int(getattr(self._matrix.file, "bytes_read", 0))
