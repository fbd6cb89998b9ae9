"""``FeatureShard``: the columns of ``X`` one worker owns, stored feature-major.

Row ``j`` of ``XT`` is column ``columns[j]`` of ``X``, so a candidate feature is one contiguous
row. Dense shards hand out views (no copy); sparse shards (CSR of ``X.T``) densify the requested
column into a scratch buffer, which costs ``O(n)``, the same order as the dot product it feeds.

With ``standardize`` every column is scaled when the shard is built, as a streamed feature would
be when it arrives (a whole column, so its moments are known, at ``O(n)`` per column): centred
(with ``center``, which a model with an intercept can absorb) and scaled to unit variance, or,
without centring, scaled to unit root mean square. A learner then works on
``z_j = (x_j - offsets_j) * scales_j``; a weight ``w_j`` on ``z_j`` is ``w_j * scales_j`` on
``x_j``, with ``-sum_j w_j scales_j offsets_j`` moving into the intercept. Sparse columns stay
sparse: ``XT`` holds ``x_j * scales_j`` and the centring is applied where a column is densified
(``column``) and in the few products taken over the whole shard (``squared_norms``, ``gram``,
``dot``), so dense and sparse input give the same ``z`` up to rounding. A constant (or all-zero)
column gets scale 0: it becomes the zero column, which no learner selects.
"""
from __future__ import annotations

import numpy as np

from . import memory
from .dataset import as_float_matrix, check_scale
from .sparse import issparse

# a column whose spread is below this fraction of its magnitude is constant up to rounding
CONSTANT_TOLERANCE = 1e-10


class FeatureShard:
    """``copy=False``: with ``standardize``, scale a C-contiguous, writeable float64 ``X.T`` in place instead
    of a copy of it (the caller gives ``X`` up: a generated shard, which nothing else reads; at p = 100000
    the copy took 1.1 s and 526 MB of each worker of ``mpiexec -n 3``)."""

    def __init__(self, X, columns=None, standardize=False, center=None, copy=True):
        X = as_float_matrix(X, "X")
        check_scale(X, "X")
        self.n_samples, self.n_local = X.shape
        self.columns = (np.arange(self.n_local, dtype=np.intp) if columns is None
                        else np.asarray(columns, dtype=np.intp))
        if self.columns.shape != (self.n_local,):
            raise ValueError(f"{self.columns.size} column indices for a shard of {self.n_local} columns")
        self.sparse = issparse(X)
        self.standardized = bool(standardize)
        self.offsets = np.zeros(self.n_local)       # what was subtracted from each column
        self.scales = np.ones(self.n_local)         # then what it was multiplied by
        self._shift = None                          # sparse, centred: offsets * scales, subtracted on access
        n = max(self.n_samples, 1)
        if self.sparse:
            import scipy.sparse as sp
            self.XT = sp.csr_matrix(X.T)
            self.XT.sort_indices()
            self._scratch = np.zeros(self.n_samples)
            self._dirty = np.empty(0, dtype=self.XT.indices.dtype)
        elif self.standardized:                    # scaled in place: a copy unless the caller gave X up
            XT = X.T
            given = not copy and XT.flags.c_contiguous and XT.flags.writeable and XT.dtype == np.float64
            self.XT = XT if given else memory.copy(XT)
        else:
            self.XT = X.T if X.T.flags.c_contiguous else memory.copy(X.T)
        if not self.standardized:
            return
        center = True if center is None else bool(center)
        if center:
            self.offsets = np.asarray(self.XT.sum(axis=1)).ravel() / n
            if self.sparse:                          # var = mean(x^2) - mean(x)^2
                spread = np.sqrt(np.maximum(self.squared_norms() / n - self.offsets ** 2, 0.0))
            else:                                    # centred first: no cancellation
                self.XT -= self.offsets[:, None]
                spread = np.sqrt(self.squared_norms() / n)
            spread[spread <= CONSTANT_TOLERANCE * (np.abs(self.offsets) + spread)] = 0.0
        else:
            spread = np.sqrt(self.squared_norms() / n)
        self.scales = np.divide(1.0, spread, out=np.zeros_like(spread), where=spread > 0)
        if self.sparse:
            self.XT.data = self.XT.data * np.repeat(self.scales, np.diff(self.XT.indptr))
            if center:
                self._shift = self.offsets * self.scales
        else:
            self.XT *= self.scales[:, None]

    def column(self, j: int) -> np.ndarray:
        """Column ``j`` (local index) as a dense vector of length ``n_samples``.

        For sparse shards the returned buffer is reused by the next call.
        """
        if not self.sparse:
            return self.XT[j]
        out = self._scratch
        if self._shift is not None:
            out.fill(-self._shift[j])
        else:
            out[self._dirty] = 0.0
        lo, hi = self.XT.indptr[j], self.XT.indptr[j + 1]
        self._dirty = self.XT.indices[lo:hi]
        out[self._dirty] += self.XT.data[lo:hi]
        return out

    def squared_norms(self) -> np.ndarray:
        if self.sparse:
            norms = np.asarray(self.XT.multiply(self.XT).sum(axis=1)).ravel()
            if self._shift is not None:               # ||x s - c 1||^2 = ||x s||^2 - n c^2 (c = mean(x s))
                norms = np.maximum(norms - self.n_samples * self._shift ** 2, 0.0)
            return norms
        return np.einsum("ij,ij->i", self.XT, self.XT)

    def dot(self, v) -> np.ndarray:
        """``Z^T v`` for every column (length ``n_local``)."""
        out = np.asarray(self.XT @ v).ravel()
        if self._shift is not None:
            out -= self._shift * float(np.sum(v))
        return out

    def weighted_squares(self, h) -> np.ndarray:
        """``z_j^T diag(h) z_j`` for every column."""
        if not self.sparse:
            return np.einsum("ij,ij,j->i", self.XT, self.XT, h)
        out = np.asarray(self.XT.multiply(self.XT) @ h).ravel()
        if self._shift is not None:
            c = self._shift
            out += c * (c * float(np.sum(h)) - 2.0 * np.asarray(self.XT @ h).ravel())
        return out

    def block(self, rows):
        """The feature-major block ``Z[rows]`` as an operator with ``@`` and ``.T`` (a dense array,
        or for sparse centred shards ``CenteredRows``)."""
        block = self.XT[rows]
        if self._shift is None:
            return block
        return CenteredRows(block, self._shift[rows])

    def to_units(self, local, weights, intercept=0.0):
        """Weights on the shard's columns ``local`` (and the intercept) in the data's own units:
        ``(coef, intercept)``."""
        return to_units(weights, intercept, self.offsets[local], self.scales[local])


def to_units(weights, intercept, offsets, scales):
    """``(coef, intercept)`` in the data's units of a model on columns ``(x - offsets) * scales``."""
    coef = np.asarray(weights, dtype=float) * scales
    return coef, float(intercept) - float(coef @ offsets)


class CenteredRows:
    """``B - c 1^T`` for a sparse feature-major block ``B`` and shifts ``c``, without densifying:
    ``@`` and ``.T`` as a matrix would have them (enough for a Gram matrix and its eigenvalue)."""

    def __init__(self, rows, shift):
        self.rows, self.shift = rows, np.asarray(shift, dtype=float)
        self.shape = rows.shape

    def gram(self) -> np.ndarray:
        """``(B - c 1^T)(B - c 1^T)^T`` as a dense k x k matrix."""
        gram = (self.rows @ self.rows.T).toarray()
        sums = np.asarray(self.rows.sum(axis=1)).ravel()
        n = self.shape[1]
        gram -= np.outer(self.shift, sums) + np.outer(sums, self.shift) - n * np.outer(self.shift, self.shift)
        return gram

    def matvec(self, v) -> np.ndarray:
        """``(B - c 1^T)(B - c 1^T)^T v``."""
        t = np.asarray(self.rows.T @ v).ravel() - float(self.shift @ v)
        return np.asarray(self.rows @ t).ravel() - self.shift * float(t.sum())
