"""The in-process loopback: one worker and the central node in one loop, each push applied at
once. It is sequential OS (KDD'16 Alg. 1): the worker's gradient point is the central ``u``,
which only it changes, read in place (the central node's reply buffer is the worker's)."""
from __future__ import annotations

import numpy as np

from .links import EachStep


def run_loopback(worker, central, on_step=None, between=None) -> None:
    """Run ``worker`` to the end of its passes against ``central``. ``on_step()``, when given, is
    called for every step once it is proposed, before it is applied (simulated clocks, timing
    harnesses), and may return True to stop after that step. ``between()``, when given, is called
    before every step and once at the end, where the worker and the central node agree (a
    checkpoint taken there resumes exactly: ``asyos.checkpoint``)."""
    link = EachStep(worker, reply=central.u_ext)
    link.version = central.version              # a resumed run continues from the central node's version
    with np.errstate(over="ignore", invalid="ignore"):   # divergence is reported by the kernel
        while True:
            if between is not None:
                between()
            push = link.step()
            if push is None:
                return
            stop = on_step is not None and on_step()
            link.settle(central.apply(link.worker.delta, link.version))
            if stop:
                return
