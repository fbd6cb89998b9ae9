"""The in-process loopback: one worker and the central node in one loop, each push applied at
once. It is sequential OS (KDD'16 Alg. 1): the worker's gradient point is the central ``u``,
which only it changes, read in place (the central node's reply buffer is the worker's).

Where the worker allows it (``Worker.batchable``: the exchange step compiled, a dense shard) and
no ``on_step`` watches each step, ``BATCH_VISITS`` steps at a time run in one compiled call
(``Worker.visit_batch``) with the same results; ``between`` and the central node's monitor are
then called between batches, and a batch ends where the monitor (an ``ObjectiveTrace`` counting
steps) wants its next row, so the trace holds the same rows."""
from __future__ import annotations

import numpy as np

from .links import EachStep

# Steps per compiled call: at n = 1715 (KDD'16 regression) 256 steps take about 25 ms, so a
# checkpoint, a progress line, a stop request or a time limit waits that long at most.
BATCH_VISITS = 256


def run_loopback(worker, central, on_step=None, between=None, batch=None) -> None:
    """Run ``worker`` to the end of its passes against ``central``. ``on_step()``, when given, is
    called for every step once it is proposed, before it is applied (simulated clocks, timing
    harnesses), and may return True to stop after that step. ``between()``, when given, is called
    before every step (every batch of steps) and once at the end, where the worker and the central
    node agree (a checkpoint taken there resumes exactly: ``asyos.records.checkpoint``). ``batch``: steps per
    compiled call where the worker allows it (default ``BATCH_VISITS``; 1: one Python call per step)."""
    batch = BATCH_VISITS if batch is None else int(batch)
    link = EachStep(worker, reply=central.u_ext)
    link.version = central.version              # a resumed run continues from the central node's version
    monitor = central.monitor
    until_due = None if monitor is None else getattr(monitor, "steps_until_due", None)
    batched = (batch > 1 and on_step is None and (monitor is None or until_due is not None)
               and worker.batchable())
    with np.errstate(over="ignore", invalid="ignore"):   # divergence is reported by the kernel
        while True:
            if between is not None:
                between()
            if batched:
                due = None if until_due is None else until_due(central.steps)
                visits = batch if due is None else max(1, min(batch, due))
                going = worker.visit_batch(central, visits)
                link.version = central.version
                if not going:
                    if between is not None:
                        between()
                    return
                continue
            push = link.step()
            if push is None:
                return
            stop = on_step is not None and on_step()
            link.settle(central.apply(link.worker.delta, link.version))
            if stop:
                return
