"""Large arrays this package allocates and fills itself (a generated problem, a worker's scaled copy of
its columns), taken without numpy's transparent-hugepage advice.

numpy advises the kernel to back every array of 4 MiB or more with 2 MiB pages. Where the memory is
new to the process that costs more than it saves: filling a fresh 274 MB array (the p = 20000 KDD'16
problem) took 0.58-0.61 s with the advice and 0.12-0.13 s without on this project's 2-core machines
(transparent hugepages in ``madvise`` mode, a virtual machine), and the arrays here are read a row at
a time, where 4 KiB pages cost the reads nothing measurable (sequential OS's visits 0.74 against
0.77 s at p = 20000). ``NUMPY_MADVISE_HUGEPAGE=0`` turns the advice off for a whole process (our
commands set it, ``asyos._env``); a library must not change the process it is imported into, so the
arrays it fills come from an anonymous mapping of their own, which numpy never advises. The mapping is
populated when it is made (``MAP_POPULATE``): the kernel maps the pages in one call instead of one
fault at a time, 0.62-0.68 s instead of 0.93-0.99 s for a 1.6 GB array filled here (p = 100000), which
every caller fills at once anyway.
"""
from __future__ import annotations

import mmap

import numpy as np

ADVISED_BYTES = 4 << 20          # numpy advises hugepages from this size on


def empty(shape, dtype=np.float64) -> np.ndarray:
    """``np.empty(shape, dtype)`` (C order); from 4 MiB on, in an anonymous mapping of its own, its pages
    mapped at once (released with the last array that views it): for arrays filled right away."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    if count * dtype.itemsize < ADVISED_BYTES:
        return np.empty(shape, dtype)
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0)
    try:
        buffer = mmap.mmap(-1, count * dtype.itemsize, flags=flags)
    except OSError as exc:                  # ENOMEM: the MemoryError numpy's own allocation raises
        raise MemoryError(f"unable to allocate {count * dtype.itemsize / 2 ** 30:.3g} GiB for an array with shape "
                          f"{tuple(shape)} and data type {dtype}: {exc.strerror}") from None
    return np.frombuffer(buffer, dtype=dtype, count=count).reshape(shape)


TILE = (32, 512)                 # rows x columns of the output copied at a time from a transposed array


def copy(a) -> np.ndarray:
    """A C-ordered copy of ``a``. A transposed 2-D array (``X.T`` of a C-ordered ``X``) is copied in tiles
    of ``TILE``, each read and written within the caches: 0.30-0.31 s instead of ``np.copyto``'s 0.47 s
    for the 1.6 GB of p = 100000 into mapped memory here (64 x 256 tiles 0.31 s, 128 x 128 0.37 s)."""
    a = np.asarray(a)
    out = empty(a.shape, a.dtype)
    if a.ndim == 2 and a.T.flags.c_contiguous and not a.flags.c_contiguous:
        rows, cols = TILE
        for i in range(0, a.shape[0], rows):
            for j in range(0, a.shape[1], cols):
                out[i:i + rows, j:j + cols] = a[i:i + rows, j:j + cols]
    else:
        np.copyto(out, a)
    return out
