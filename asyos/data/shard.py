"""``FeatureShard``: the columns of ``X`` one worker owns, stored feature-major.

Row ``j`` of ``XT`` is column ``columns[j]`` of ``X``, so a candidate feature is one contiguous
row. Dense shards hand out views (no copy); sparse shards (CSR of ``X.T``) densify the requested
column into a scratch buffer, which costs ``O(n)``, the same order as the dot product it feeds.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .dataset import as_float_matrix


class FeatureShard:
    def __init__(self, X, columns=None):
        X = as_float_matrix(X, "X")
        self.n_samples, self.n_local = X.shape
        self.columns = (np.arange(self.n_local, dtype=np.intp) if columns is None
                        else np.asarray(columns, dtype=np.intp))
        if self.columns.shape != (self.n_local,):
            raise ValueError(f"{self.columns.size} column indices for a shard of {self.n_local} columns")
        self.sparse = sp.issparse(X)
        if self.sparse:
            self.XT = sp.csr_matrix(X.T)
            self.XT.sort_indices()
            self._scratch = np.zeros(self.n_samples)
            self._dirty = np.empty(0, dtype=self.XT.indices.dtype)
        else:
            self.XT = np.ascontiguousarray(X.T)

    def column(self, j: int) -> np.ndarray:
        """Column ``j`` (local index) as a dense vector of length ``n_samples``.

        For sparse shards the returned buffer is reused by the next call.
        """
        if not self.sparse:
            return self.XT[j]
        out = self._scratch
        out[self._dirty] = 0.0
        lo, hi = self.XT.indptr[j], self.XT.indptr[j + 1]
        self._dirty = self.XT.indices[lo:hi]
        out[self._dirty] = self.XT.data[lo:hi]
        return out

    def squared_norms(self) -> np.ndarray:
        if self.sparse:
            return np.asarray(self.XT.multiply(self.XT).sum(axis=1)).ravel()
        return np.einsum("ij,ij->i", self.XT, self.XT)
