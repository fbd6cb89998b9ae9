"""Feature sharding: which global columns a worker owns, and how the budget is split.

Shards are a pure function of ``(n_features, n_workers, index, scheme)``, so every rank computes
its own without communication.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError

SHARDING_SCHEMES = ("contiguous", "strided", "blocked", "hashed")
BLOCK = 16              # ``blocked``: columns a block, the columns a synthetic problem generates at once


def default_sharding(variant: str, generated: bool = False) -> str:
    """``strided`` for OS's exchange variant, ``contiguous`` for kdd16 (the layout its figures
    were reproduced with). Files order their columns by meaning (a vocabulary by frequency, sensors
    by group), and contiguous shards hand one worker a block of related columns, more good ones
    than its cap lets it keep: with 12 simulated workers at k = 10 (5-fold CV,
    ``benchmarks/bench_real_selection.py``) the test accuracy was 0.818 on basehock and 0.754 on
    farm_ads with contiguous shards, 0.886 and 0.791 with strided ones (sequential OS 0.888 and
    0.788).

    ``generated`` (a synthetic problem, whose columns are alike wherever they sit): ``blocked``
    under the exchange variant. A synthetic problem draws its columns ``BLOCK`` at a time from one
    stream (``data.synthetic.CHUNK``), so a strided shard drew every column of the problem and kept
    its share: at p = 20000 each of the two workers of ``mpiexec -n 3`` spent 0.46-0.52 s drawing
    columns (its 10000 would take half), loading 1.27 s against 1.01 s with whole blocks."""
    if variant == "kdd16":
        return "contiguous"
    return "blocked" if generated else "strided"


def shard_columns(n_features: int, n_workers: int, index: int, scheme: str = "contiguous") -> np.ndarray:
    """Sorted global column indices owned by worker ``index`` (0-based) of ``n_workers``.

    * ``contiguous``: ``np.array_split`` ranges (sizes differ by at most one);
    * ``strided``: columns ``index, index + q, index + 2q, ...``;
    * ``blocked``: strided by blocks of ``BLOCK`` columns: blocks ``index, index + q, ...``;
    * ``hashed``: columns whose 64-bit mix of the index falls in this worker's bucket.

    >>> shard_columns(10, 3, 0).tolist(), shard_columns(10, 3, 2, "strided").tolist()
    ([0, 1, 2, 3], [2, 5, 8])
    >>> shard_columns(40, 2, 1, "blocked").tolist()[:3], shard_columns(40, 2, 0, "blocked").size
    ([16, 17, 18], 24)
    """
    if scheme not in SHARDING_SCHEMES:
        raise InputError(f"unknown sharding {scheme!r}; choose one of: {', '.join(SHARDING_SCHEMES)}")
    if not 0 <= index < n_workers:
        raise ValueError(f"worker index {index} outside 0..{n_workers - 1}")
    if scheme == "contiguous":
        base, extra = divmod(n_features, n_workers)
        start = index * base + min(index, extra)
        stop = start + base + (1 if index < extra else 0)
        return np.arange(start, stop, dtype=np.intp)
    if scheme == "strided":
        return np.arange(index, n_features, n_workers, dtype=np.intp)
    if scheme == "blocked":
        columns = np.arange(n_features, dtype=np.intp)
        return columns[(columns // BLOCK) % n_workers == index]
    return np.flatnonzero(_mix64(np.arange(n_features, dtype=np.uint64)) % np.uint64(n_workers) == index)


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a fixed, well-spread hash of the column index."""
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)).astype(np.uint64)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def split_budget(budget: int, n_workers: int) -> list[int]:
    """Split the budget ``s`` over ``q`` workers as evenly as possible (the first ``s mod q``
    workers get one more).

    >>> split_budget(64, 12)
    [6, 6, 6, 6, 5, 5, 5, 5, 5, 5, 5, 5]
    """
    base, extra = divmod(budget, n_workers)
    return [base + (1 if w < extra else 0) for w in range(n_workers)]
