"""The loss table of ``losses.py`` made callable from numba-compiled code (imported only by the
kernel modules, and only when they compile: importing numba costs a few tenths of a second).

``losses.value1(code, y, u)``, ``losses.dloss1`` and ``losses.d2loss1`` are plain Python (they look
the loss up in ``TABLE``); here each gets a numba overload that is a chain of branches, one per entry
of ``TABLE``, calling that loss's scalar function, generated from the table so that a new loss needs
no edit here. numba inlines the branch into the kernel's loop, so a kernel costs what it cost with
the loss written into it (``benchmarks/bench_core_cost.py``, ``bench_stream_throughput.py``).

numba's on-disk cache keys a kernel on its own file and bytecode, not on the functions it calls, so
after an edit of a loss in ``losses.py`` the cached kernels would keep the old one: ``refresh_cache``
empties the kernel modules' cache when the table's fingerprint (the bytecode and constants of every
scalar function, and the codes) differs from the one recorded beside that cache.
"""
from __future__ import annotations

import hashlib
import math
import os

from numba.extending import overload, register_jitable

from .. import losses

KINDS = ("value1", "dloss1", "d2loss1")


def _chain(kind):
    """``dispatch(code, y, u)``: ``if code == c: return TABLE[c].<kind>(y, u)`` for every ``c``."""
    namespace = {"math": math}
    lines = ["def dispatch(code, y, u):"]
    for loss in losses.TABLE:
        name = f"{kind}_{loss.code}"
        namespace[name] = register_jitable(getattr(loss, kind))
        lines.append(f"    if code == {loss.code}:\n        return {name}(y, u)")
    lines.append("    return math.nan")
    exec("\n".join(lines), namespace)                                   # noqa: S102 - source built above
    return namespace["dispatch"]


def _typer(dispatch):
    def typer(code, y, u):
        return dispatch
    return typer


def _register():
    for kind in KINDS:
        overload(getattr(losses, kind))(_typer(_chain(kind)))


def fingerprint() -> str:
    """A hash of everything the compiled kernels take from the table."""
    digest = hashlib.sha256()
    for loss in losses.TABLE:
        digest.update(f"{loss.code}:{loss.name};".encode())
        for kind in KINDS:
            code = getattr(loss, kind).__code__
            digest.update(code.co_code + repr(code.co_consts).encode() + repr(code.co_names).encode())
    return digest.hexdigest()


def refresh_cache(namespace) -> None:
    """Empty numba's cache of the compiled kernels in ``namespace`` (a module's globals, called at
    its end) when the loss table changed since they were cached; the fingerprint is kept beside them."""
    from numba.core.dispatcher import Dispatcher
    kernels = [f for f in namespace.values() if isinstance(f, Dispatcher) and f.__module__ == namespace["__name__"]]
    if not kernels:
        return
    stamp = os.path.join(kernels[0]._cache._cache_path, namespace["__name__"].rsplit(".", 1)[-1] + ".losses")
    current = fingerprint()
    try:
        with open(stamp) as f:
            if f.read() == current:
                return
    except OSError:
        pass
    for kernel in kernels:
        kernel._cache.flush()
    try:
        with open(stamp, "w") as f:
            f.write(current)
    except OSError:
        pass                        # not writable: numba then compiles in memory anyway


_register()
