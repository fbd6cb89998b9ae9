"""Large arrays this package allocates and fills itself (a generated problem, a worker's scaled copy of
its columns), taken without numpy's transparent-hugepage advice.

numpy advises the kernel to back every array of 4 MiB or more with 2 MiB pages. Where the memory is
new to the process that costs more than it saves: filling a fresh 274 MB array (the p = 20000 KDD'16
problem) took 0.58-0.61 s with the advice and 0.12-0.13 s without on this project's 2-core machines
(transparent hugepages in ``madvise`` mode, a virtual machine), and the arrays here are read a row at
a time, where 4 KiB pages cost the reads nothing measurable (sequential OS's visits 0.74 against
0.77 s at p = 20000). ``NUMPY_MADVISE_HUGEPAGE=0`` turns the advice off for a whole process (our
commands set it, ``asyos._env``); a library must not change the process it is imported into, so the
arrays it fills come from an anonymous mapping of their own, which numpy never advises.
"""
from __future__ import annotations

import mmap

import numpy as np

ADVISED_BYTES = 4 << 20          # numpy advises hugepages from this size on


def empty(shape, dtype=np.float64) -> np.ndarray:
    """``np.empty(shape, dtype)`` (C order); from 4 MiB on, in an anonymous mapping of its own
    (released with the last array that views it)."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    if count * dtype.itemsize < ADVISED_BYTES:
        return np.empty(shape, dtype)
    return np.frombuffer(mmap.mmap(-1, count * dtype.itemsize), dtype=dtype, count=count).reshape(shape)


def copy(a, dtype=None) -> np.ndarray:
    """A C-ordered copy of ``a`` (``a.T`` copies as fast as ``np.array(a.T, order="C")``)."""
    a = np.asarray(a)
    out = empty(a.shape, a.dtype if dtype is None else dtype)
    np.copyto(out, a, casting="unsafe" if dtype is not None else "same_kind")
    return out
