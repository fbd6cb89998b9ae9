"""The ``Dataset`` container shared by loaders, generators and drivers."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..errors import InputError
from .sparse import issparse


@dataclass
class Dataset:
    """Training (and optional test) data, possibly restricted to some feature columns.

    ``X`` has shape ``(n_samples, len(columns))`` (dense ``ndarray`` or a scipy sparse matrix);
    ``columns`` are the global indices of its columns (``None`` means all ``n_features``).
    ``true_coef`` (length ``n_features``) is known for synthetic data only.
    """

    X: object
    y: np.ndarray
    n_features: int
    X_test: object = None
    y_test: Optional[np.ndarray] = None
    columns: Optional[np.ndarray] = None
    true_coef: Optional[np.ndarray] = None
    name: str = ""

    @property
    def n_samples(self) -> int:
        return int(self.y.shape[0])

    @property
    def has_test(self) -> bool:
        return self.X_test is not None and self.y_test is not None

    @property
    def true_support(self) -> Optional[np.ndarray]:
        if self.true_coef is None:
            return None
        return np.flatnonzero(self.true_coef)


def check_sparse_structure(X, where: str) -> None:
    """``InputError`` when a CSR/CSC matrix's arrays do not describe its shape (an index beyond it,
    pointers that decrease or do not match the arrays): scipy's full check, O(nnz), before any
    compiled code indexes with them (a column index beyond the shape crashed the OS step)."""
    if issparse(X) and X.format in ("csr", "csc"):
        try:
            X.check_format(full_check=True)
            if np.any(np.diff(X.indptr) < 0):        # scipy checks this only when indptr[-1] > 0
                raise ValueError("indptr must be non-decreasing")
        except ValueError as exc:
            raise InputError(f"{where} is not a valid {X.format.upper()} matrix: {exc}") from None


def as_float_matrix(X, where: str):
    """``X`` as float64 (dense C/F array or CSR), with a clear error for bad shapes or values."""
    if issparse(X):
        check_sparse_structure(X, where)
        import scipy.sparse as sp
        X = sp.csr_matrix(X, dtype=np.float64)
        X.sum_duplicates()
        values = X.data
    else:
        X = np.asarray(X)
        if X.ndim != 2:
            raise InputError(f"{where} must be a 2-D matrix (n_samples, n_features); got shape {X.shape}")
        if not np.issubdtype(X.dtype, np.number) or np.iscomplexobj(X):
            raise InputError(f"{where} must be real-valued numbers; got dtype {X.dtype}")
        X = X.astype(np.float64, copy=False)
        values = X
    check_finite(values, where)
    return X


def as_label_vector(y, n_samples: int, where: str) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim == 2 and 1 in y.shape:
        y = y.ravel()
    if y.ndim != 1:
        raise InputError(f"{where} must be a vector of length n_samples; got shape {y.shape}")
    if y.shape[0] != n_samples:
        raise InputError(f"{where} has {y.shape[0]} labels but X has {n_samples} rows")
    if not np.issubdtype(y.dtype, np.number) or np.iscomplexobj(y):      # complex: the imaginary part was dropped
        raise InputError(f"{where} must be real numbers; got dtype {y.dtype}")
    y = y.astype(np.float64)
    check_finite(y, where)
    return y


_CHECK_ITEMS = 1 << 22          # values checked at a time: no temporary as large as the array


def check_finite(values, where: str) -> None:
    """``InputError`` when ``values`` holds NaN or infinities, checked in blocks of rows so that the
    check allocates at most ``_CHECK_ITEMS`` booleans whatever the array's size."""
    values = np.asarray(values)
    if values.size == 0:
        return
    if values.ndim == 2 and values.flags.f_contiguous and not values.flags.c_contiguous:
        values = values.T               # blocks of contiguous rows: 0.04 s instead of 0.19 s for 800 MB
    rows = values.reshape(values.shape[0], -1) if values.ndim > 1 else values.reshape(-1, 1)
    step = max(1, _CHECK_ITEMS // max(rows.shape[1], 1))
    bad = 0
    for lo in range(0, rows.shape[0], step):
        block = rows[lo:lo + step]
        bad += int(block.size - np.count_nonzero(np.isfinite(block)))
    if bad:
        raise InputError(f"{where} contains {bad} NaN or infinite value{'s' if bad > 1 else ''}")


# float64 squares overflow above ~1.3e154 and underflow below ~1.5e-154 (sqrt of the largest and of the
# smallest normal number); the bounds leave room for sums of up to 1e8 squares
HUGE_VALUE = 1e150
TINY_VALUE = 1e-150


def check_scale(X, where: str) -> None:
    """The scale of a finite ``X`` that OS and the step size square (column norms, Gram blocks):
    ``InputError`` when a value exceeds ``HUGE_VALUE`` (X x 1e300 overflowed to inf and ended in
    LinAlgError in the step size, or silently selected nothing when the columns were scaled);
    ``ConvergenceWarning`` when X is all zeros (KDD'16's variant "selected" zero columns) or when
    columns hold no value above ``TINY_VALUE`` (X x 1e-300: the squares underflow to 0, the columns
    look constant and nothing was selected, with no message). One pass over X, in blocks of rows."""
    check_scale_of(column_max_abs(X), where)


def column_max_abs(X) -> np.ndarray:
    """The largest ``|value|`` of each column of ``X`` (dense or sparse, finite), in blocks of rows."""
    if issparse(X):
        return np.asarray(abs(X).max(axis=0).todense()).ravel() if X.nnz else np.zeros(X.shape[1])
    X = np.asarray(X)
    if X.flags.f_contiguous and not X.flags.c_contiguous:     # column-major: a column's values are contiguous
        return _column_max_abs_f(X)
    colmax = np.zeros(X.shape[1])
    step = max(1, _CHECK_ITEMS // max(X.shape[1], 1))
    for lo in range(0, X.shape[0], step):       # max and -min: no temporary |X| (measured 1.4x faster)
        block = X[lo:lo + step]
        np.maximum(colmax, block.max(axis=0, initial=0.0), out=colmax)
        np.maximum(colmax, -block.min(axis=0, initial=0.0), out=colmax)
    return colmax


def _column_max_abs_f(X) -> np.ndarray:
    """``column_max_abs`` of a column-major ``X``, in blocks of its columns: 0.06 s instead of 0.55 s
    for the 800 MB of a worker's generated shard at p = 100000 (blocks of rows stride across every
    column)."""
    XT = X.T
    colmax = np.empty(XT.shape[0])
    step = max(1, _CHECK_ITEMS // max(XT.shape[1], 1))
    for lo in range(0, XT.shape[0], step):
        block = XT[lo:lo + step]
        np.maximum(block.max(axis=1, initial=0.0), -block.min(axis=1, initial=0.0), out=colmax[lo:lo + step])
    return colmax


def check_scale_of(colmax, where: str) -> None:
    """``check_scale`` from the columns' largest ``|value|`` (a reader that sees the columns in
    blocks gathers them first)."""
    import warnings
    from ..errors import ConvergenceWarning
    if colmax.size == 0:                   # no columns (a shard of none): nothing to say about them
        return
    largest = float(colmax.max(initial=0.0))
    if largest > HUGE_VALUE:
        raise InputError(f"{where} holds values up to {largest:.3g} in magnitude: their squares overflow float64 "
                         f"(above {HUGE_VALUE:.0e}); rescale the data (divide it by about {largest:.0e})")
    if largest == 0.0:
        warnings.warn(f"{where} is all zeros: no feature carries information, so any selection is meaningless",
                      ConvergenceWarning, stacklevel=4)
        return
    tiny = int(np.count_nonzero((colmax > 0) & (colmax < TINY_VALUE)))
    if tiny:
        which = "every nonzero column" if tiny == np.count_nonzero(colmax) else f"{tiny} of {colmax.size} columns"
        warnings.warn(f"{where}: {which} has no value above {TINY_VALUE:.0e} in magnitude, so their "
                      f"squares underflow float64 (column norms, step size) and the fit is unreliable (OS may "
                      f"select nothing); rescale the data", ConvergenceWarning, stacklevel=4)


def available_memory_bytes():
    """Memory this process could still allocate: ``MemAvailable`` of ``/proc/meminfo`` (free
    memory plus the caches the kernel can drop), else the free physical pages, bounded by the
    cgroup's ``memory.max`` less its ``memory.current`` when one is set; ``None`` if unknown."""
    found = None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    found = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if found is None:
        try:
            found = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, AttributeError):
            found = None
    try:
        with open("/sys/fs/cgroup/memory.max") as fh:
            limit = fh.read().strip()
        with open("/sys/fs/cgroup/memory.current") as fh:
            used = int(fh.read().strip())
        if limit != "max":
            room = max(int(limit) - used, 0)
            found = room if found is None else min(found, room)
    except (OSError, ValueError):
        pass
    return found


def check_fits_in_memory(nbytes, what: str) -> None:
    """``InputError`` saying how much memory ``what`` needs when ``nbytes`` exceeds what is
    available (checked before allocating: numpy's MemoryError came as a traceback, and an
    allocation the kernel granted lazily ended in the out-of-memory killer, with no message)."""
    available = available_memory_bytes()
    if available is not None and nbytes > available:
        raise InputError(f"{what}: about {_gib(nbytes)} of memory needed, {_gib(available)} available")


def _gib(nbytes) -> str:
    return f"{nbytes / 2 ** 30:.3g} GiB" if nbytes >= 2 ** 30 else f"{nbytes / 2 ** 20:.3g} MiB"
