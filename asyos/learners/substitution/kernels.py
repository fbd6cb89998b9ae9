"""The numerical part of one Online Substitution step, compiled (numba), in one call.

``SubstitutionState.propose`` written in numpy makes about fifteen small calls per step around its
two matrix-vector products, and their dispatch cost as much time as the products themselves at
``n`` = 1000, ``s`` = 64 (``benchmarks/bench_core_cost.py``). ``propose_step`` performs the same
arithmetic, in the same order, as the numpy path of ``SubstitutionState.propose`` (which stays the
reference the tests compare against): the gradient ``n dL/du`` (KDD'16 eqs. 4-5), ``X_S^T g`` and
``X_S dw`` through BLAS, ``w_j`` (Alg. 1 line 7), the weakest retained weight (line 11), the
decrease check (line 12) and ``delta``; ``exchange_step`` is the same for the exchange variant
(``substitution.py``), and ``intercept_step`` the Newton step of the intercept. ``loopback_visits`` runs
many steps of sequential OS (the exchange variant) in one call, its Python loop compiled
(``Worker.visit_batch``); under the squared loss its visits keep ``X_S (u - y)`` and the retained
columns' Gram matrix up to date instead of recomputing them (``gram_visit``): one product with
``X_S`` a visit instead of three.

Backends: ``ASYOS_KERNELS=numba|numpy|auto``. ``auto`` (the default) takes the compiled step when
numba is installed and the learner has at least ``AUTO_MIN_STEPS`` steps to take (passes x its
features): loading the compiled step costs 0.7-1.0 s per process (importing numba, reading its
cache), which the 40-45 us it saves per exchange step (``benchmarks/bench_core_cost.py``: 98 against
54 us at n = 1000, s = 64) repay after about 20,000 steps; 12 workers loading it on 2 cores added
3 s to the 4.6 s default job (500 steps each). The bound was 50,000, which left the two workers of
``mpiexec -n 3`` at p = 20000 (30,000 steps each) on the numpy step. Results
agree with the numpy path to rounding (the logistic loss's mean is summed in another order, and
BLAS may fuse multiply-adds differently), so decisions that hinge on a tie at the last bit can
differ; the tests compare both paths.
"""
from __future__ import annotations

import contextlib
import os

from ...losses import LOSS_CODES as _ALL_CODES, SMOOTH_LOSSES

LOSS_CODES = {name: code for name, code in _ALL_CODES.items() if name in SMOOTH_LOSSES}   # what OS can use
BACKENDS = ("auto", "numba", "numpy")
DIVERGED = -1
AUTO_MIN_STEPS = 20_000

_compiled = None
_many_runs = 0          # > 0 inside ``many_runs``: ``auto`` counts every learner as long


@contextlib.contextmanager
def many_runs(total_steps: int):
    """Within it, ``auto`` takes the compiled step for short learners too, when ``total_steps`` (the
    steps of all the learners the caller will run in this process) repay its load: ``ridge="auto"``'s
    cross-validation fits 12 learners of a few thousand steps each."""
    global _many_runs
    engaged = total_steps >= AUTO_MIN_STEPS
    _many_runs += engaged
    try:
        yield
    finally:
        _many_runs -= engaged


def backend(requested: str | None = None, expected_steps: int | None = None) -> str:
    """The kernel backend to use, ``numba`` or ``numpy``, for a learner that will take about
    ``expected_steps`` steps (``None``: unknown, counted as long)."""
    choice = requested or os.environ.get("ASYOS_KERNELS", "auto")
    if choice not in BACKENDS:
        raise ValueError(f"unknown kernel backend {choice!r} (ASYOS_KERNELS); choose one of: {', '.join(BACKENDS)}")
    if choice == "numpy":
        return "numpy"
    if choice == "auto":
        import importlib.util
        short = expected_steps is not None and expected_steps < AUTO_MIN_STEPS and not _many_runs
        if short or importlib.util.find_spec("numba") is None:
            return "numpy"
    if propose_kernel() is None:
        raise ImportError("ASYOS_KERNELS=numba but numba is not installed: pip install numba")
    return "numba"


def _module():
    """``_compiled_step`` (its functions are compiled on first use, then loaded from numba's
    cache), or ``None`` without numba."""
    global _compiled
    if _compiled is None:
        try:
            from . import _compiled_step
            _compiled = _compiled_step
        except ImportError:
            _compiled = False
    return _compiled or None


def propose_kernel():
    """The compiled ``propose_step`` (KDD'16's step), or ``None`` without numba."""
    module = _module()
    return module.propose_step if module else None


def exchange_kernel():
    """The compiled ``exchange_step`` (the exchange variant's step), or ``None`` without numba."""
    module = _module()
    return module.exchange_step if module else None


def intercept_kernel():
    """The compiled ``intercept_step``, or ``None`` without numba."""
    module = _module()
    return module.intercept_step if module else None


def visits_kernel():
    """The compiled ``loopback_visits`` (sequential OS's visits in one call), or ``None`` without numba."""
    module = _module()
    return module.loopback_visits if module else None


def warm_up(chosen: str, visits: bool = False) -> None:
    """With ``chosen == "numba"``: compile the step, or load it from numba's cache (a few tenths of
    a second), now rather than inside a timed run; call it during set-up. ``visits``: also
    ``loopback_visits``, which sequential OS and the workers of the shared-memory transports run
    (sequential OS loads it at its first batch)."""
    if chosen != "numba":
        return
    import numpy as np
    n, cap = 4, 3
    XS, w, y, x = np.zeros((cap, n)), np.zeros(cap), np.ones(n), np.ones(n)
    scratch = [np.empty(k) for k in (n, cap, cap, cap, n, n, n)]
    exchange_scratch = [np.empty(k) for k in (n, n, n, cap, cap, cap, cap, n, n, n)]
    for code in LOSS_CODES.values():
        propose_kernel()(code, XS, 0, w, np.zeros(n), y, x, -0.1, -0.1, 2, True, 0.0, *scratch)
        exchange_kernel()(code, XS, 0, w, w, np.zeros(n), y, x, -0.1, 2, True, 0.0, 1.0, 0.0,
                          *exchange_scratch)
        intercept_kernel()(code, y, np.zeros(n), scratch[0], scratch[4])
    if not visits:
        return
    module = _module()
    counters = np.zeros(module.N_COUNTERS, dtype=np.int64)
    order, events = np.arange(2), np.zeros(2, dtype=np.int64)
    visits_kernel()(LOSS_CODES["squared"], np.ones((2, n)), False, *module.NO_CSR, np.empty(n), order,
                    np.zeros(2, dtype=np.bool_), counters, 1, False, 2, 0, False, 0.0,
                    XS, w, w.copy(), np.zeros(cap, dtype=np.intp), np.zeros(n), y, -0.1, 2, True, 0.0, 1.0, 0.0,
                    True, 0.0,
                    *exchange_scratch[:-1], np.empty(n), np.empty(n), exchange_scratch[-1],
                    events, events, events, np.zeros(2, dtype=np.bool_), np.zeros(2), np.zeros(1, dtype=np.int64),
                    np.zeros((cap, cap)), *(np.zeros(cap) for _ in range(4)), np.zeros((4, cap)),
                    np.full(4, -1, dtype=np.int64))
