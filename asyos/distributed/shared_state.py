"""``u_C`` in node-shared memory: the single-node transport of Asy-OS (``--transport shared-memory``).

When every rank runs on one node, the workers need not send their changes to the central rank: each
worker ``k`` owns one row ``c_k = X_{S_k} w_{S_k}`` of an MPI shared-memory window and adds its
``delta_u`` into that row after every committed step, so that ``u_C = sum_k c_k`` at all times
(KDD'16 Alg. 2's ``u_C += delta_u``, with the sum taken by the reader). A worker reads ``u_C`` before
every step by summing the rows, exactly where Alg. 3 pulls it from the central node. Every row has a
single writer, so no update is ever lost and no lock is needed; the central rank stays out of the
loop (it only samples ``u_C`` for the training trace and watches the workers' counters).

Counters, one int64 per worker each, in the same window:

* ``started[k]``: steps whose write into ``c_k`` has begun (incremented before the write),
* ``steps[k]``: steps whose write has finished (incremented after it),
* ``proposals[k]``: steps proposed, refused ones included (the central rank's heartbeat),
* ``refused[k]``: steps redone because they were staler than ``--max-staleness``.

Under the global budget (``cap`` > 0) the window also holds one row of ``cap`` values per worker:
its retained ``|w|``, written after every committed step. A worker reads the other rows before each
step and takes the top ``s`` of them (``GlobalThreshold.others_top``), exactly what the central rank
sends with its replies under the messages transport.

Staleness of a step = the other workers' steps that its read of ``u_C`` may have missed:
``sum(started) - sum(steps)`` over the other workers, the first sum taken just before the step is
written, the second just before ``u_C`` was read. A concurrent write caught half-way by the read
(the rows are read without a lock, as in Hogwild-style asynchronous methods) therefore always counts
as unseen, so ``--max-staleness 0`` means every step was taken at an exact ``u_C``. This relies on
the stores of one process becoming visible to the others in program order, which x86 guarantees
(TSO); the final ``u_C`` does not depend on it (it is read after every worker has reported).
"""
from __future__ import annotations

import time

import numpy as np

from .roles import write_abs

CACHE_LINE_DOUBLES = 8          # rows start on their own 64-byte line: no false sharing between writers
COUNTERS = ("started", "steps", "proposals", "refused")


def ranks_share_one_node(comm) -> bool:
    """True when every rank of ``comm`` can map the same shared memory."""
    from mpi4py import MPI
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_size() == comm.Get_size()
    finally:
        node.Free()


class SharedState:
    """The window: ``rows`` (workers x n, ``u_C = rows.sum(0)``) and the per-worker counters.

    Collective over ``comm`` (all ranks on one node; rank 0, the central rank, allocates). Worker ``k``
    (0-based) writes ``rows[k]`` and its own counters only.
    """

    def __init__(self, comm, n_samples: int, n_workers: int, cap: int = 0):
        from mpi4py import MPI
        self.n, self.q, self.cap = int(n_samples), int(n_workers), int(cap)
        stride = -(-self.n // CACHE_LINE_DOUBLES) * CACHE_LINE_DOUBLES
        counter_stride = -(-self.q // CACHE_LINE_DOUBLES) * CACHE_LINE_DOUBLES
        weight_stride = -(-self.cap // CACHE_LINE_DOUBLES) * CACHE_LINE_DOUBLES
        n_counters = len(COUNTERS) * counter_stride
        n_doubles = self.q * stride + n_counters + self.q * weight_stride
        self._win = MPI.Win.Allocate_shared(8 * n_doubles if comm.Get_rank() == 0 else 0, 8, comm=comm)
        buffer, _ = self._win.Shared_query(0)
        memory = np.ndarray(buffer=buffer, dtype=np.float64, shape=(n_doubles,))
        if comm.Get_rank() == 0:
            memory[:] = 0.0
        self.rows = memory[:self.q * stride].reshape(self.q, stride)[:, :self.n]
        counters = memory[self.q * stride:self.q * stride + n_counters].view(np.int64)
        self.started, self.steps, self.proposals, self.refused = counters.reshape(len(COUNTERS),
                                                                                  counter_stride)[:, :self.q]
        weights = memory[self.q * stride + n_counters:]
        self.weights = weights.reshape(self.q, weight_stride)[:, :self.cap]   # global budget: |w| per worker
        comm.Barrier()                    # zeroed before anyone writes

    def read(self, out: np.ndarray) -> np.ndarray:
        """``u_C`` into ``out`` (one or two rows without the general reduction's overhead)."""
        rows = self.rows
        if self.q == 1:
            np.copyto(out, rows[0])
        elif self.q == 2:
            np.add(rows[0], rows[1], out=out)
        else:
            np.add.reduce(rows, axis=0, out=out)
        return out

    def total_steps(self) -> int:
        return int(self.steps.sum())

    def free(self):
        """Collective: every rank releases the window."""
        if self._win is not None:
            self._win.Free()
            self._win = None


def shared_steps(state: SharedState, index: int, worker, max_staleness=None, monitor=None, threshold=None):
    """Run ``worker`` (a ``roles.Worker``, shard ``index``) to the end of its passes on ``state``.

    Returns ``(compute seconds, staleness histogram)``. With ``max_staleness`` a step that may have
    missed more than that many steps of the other workers is discarded and redone from a fresh read
    (counted in ``refused``). ``monitor`` (tests) is called after every committed step. With
    ``threshold`` (a ``GlobalThreshold`` over ``state.weights``: the global budget) the worker reads
    the others' top ``|w|`` with ``u_C`` and publishes its own after every step.
    """
    row = state.rows[index]
    others = np.empty(threshold.budget) if threshold is not None else None
    weight_row = state.weights[index]
    # memoryviews: a counter read or increment costs a tenth of numpy's scalar indexing
    started, steps, proposals, refused = (memoryview(c) for c in
                                          (state.started, state.steps, state.proposals, state.refused))
    view = np.empty(state.n)
    hist = [0] * 16
    compute_s = 0.0
    own = 0                               # this worker's committed steps (= steps[index])
    while True:
        seen = sum(steps) - own           # other workers' finished steps, read before u_C
        state.read(view)
        t0 = time.perf_counter()
        if threshold is None:
            push = worker.propose(view, seen)
        else:
            push = worker.propose(view, seen, threshold.others_top(index, out=others, pool=state.weights))
        compute_s += time.perf_counter() - t0
        proposals[index] += 1
        if push is None:
            return compute_s, hist
        staleness = sum(started) - own - seen
        if max_staleness is not None and staleness > max_staleness:
            worker.discard()
            refused[index] += 1
            continue
        t0 = time.perf_counter()
        worker.commit()
        started[index] += 1
        np.add(row, push.delta, out=row)
        if threshold is not None:
            write_abs(weight_row, worker.state.w[:worker.state.size])     # a view: no copy per step
        own += 1
        steps[index] = own
        compute_s += time.perf_counter() - t0
        if staleness >= len(hist):
            hist.extend([0] * (staleness + 1 - len(hist)))
        hist[staleness] += 1
        if monitor is not None:
            monitor(state)
