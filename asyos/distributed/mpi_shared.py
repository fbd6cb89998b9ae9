"""``u_C`` in node-shared memory: the single-node transport of Asy-OS (``--transport shared-memory``).

When every rank runs on one node, the workers need not send their changes to the central rank: each
worker ``k`` owns one row ``c_k = X_{S_k} w_{S_k}`` of an MPI shared-memory window and adds its
``delta_u`` into that row after every committed step, so that ``u_C = sum_k c_k`` at all times
(KDD'16 Alg. 2's ``u_C += delta_u``, with the sum taken by the reader). A worker reads ``u_C`` before
every step by summing the rows, exactly where Alg. 3 pulls it from the central node. Every row has a
single writer, so no update is ever lost and no lock is needed; the central rank stays out of the
loop (it only samples ``u_C`` for the training trace and watches the workers' counters).

A worker on the compiled step (``Worker.batchable``) reads and writes once per batch of
``SHARED_BATCH`` steps instead (``shared_batches``): its steps in between are taken at its view, the
read plus its own changes, so each one misses the other workers' changes since the batch's read.
Measured (``mpiexec -n 3`` against one process, KDD'16 regression, quiet 2-core machine, whole
commands): at p = 20000 10.3-10.7 s sequential against 6.1-7.0 s (10.6-12.4 s one step a write), at
p = 100000 37.0 s against 18.7 s (46.9 s), the same recall (0.99) and objective (to 0.05%).

Counters, one int64 per worker each, in the same window:

* ``started[k]``: steps whose write into ``c_k`` has begun (incremented before the write),
* ``steps[k]``: steps whose write has finished (incremented after it),
* ``proposals[k]``: steps proposed, refused ones included (the central rank's heartbeat),
* ``refused[k]``: steps redone because they were staler than ``--max-staleness``,
* ``finished[k]``: 1 once the worker's passes are done,
* ``writes[k]``: changes written into ``c_k`` (one a step, or one a batch of steps: ``shared_batches``);

and one more, ``beat``, that the central rank increments every time it looks at the state: a
worker that sees it stand still for ``--watchdog-timeout`` seconds ends the job (the central rank
froze or left), as the central rank does for a worker whose ``proposals`` stand still.

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

from ..learners.protocol.links import SharedReads, count_staleness
from ..learners.protocol.threshold import GlobalThreshold, kth_largest, write_abs
from .transport import Deadline
from .watch import patience

CACHE_LINE_DOUBLES = 8          # rows start on their own 64-byte line: no false sharing between writers
SHARED_BATCH = 32               # steps a worker takes between two reads of u_C (``shared_batches``)
COUNTERS = ("started", "steps", "proposals", "refused", "finished", "writes")
SHARED_POLL_S = 1e-3            # the central rank's sleep between looks at the shared state


def ranks_share_one_node(comm) -> bool:
    """True when every rank of ``comm`` can map the same shared memory."""
    from mpi4py import MPI
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_size() == comm.Get_size()
    finally:
        node.Free()


def _lines(count: int) -> int:
    return -(-count // CACHE_LINE_DOUBLES) * CACHE_LINE_DOUBLES


class SharedState:
    """The window: ``rows`` (workers x n, ``u_C = rows.sum(0)``), the per-worker counters, the
    ``beat`` of the rank the workers wait for and (global budget) the workers' ``|w|``.

    Collective over ``comm`` (all ranks on one node; rank 0 allocates). Worker ``k`` (0-based)
    writes ``rows[k]`` and its own counters only.

    ``others`` > 0 adds what the node-aggregated transport (``mpi_node``) needs: ``base``, the
    part of ``u_C`` that is not this node's (the other nodes' changes, as of the leader's last
    exchange with the central rank), double-buffered under the counter ``sequence`` with how many
    remote steps it holds and (global budget) the other nodes' top ``|w|``. Then ``u_C`` as this
    node sees it is ``base + rows.sum(0)``.
    """

    def __init__(self, comm, n_samples: int, n_workers: int, cap: int = 0, others: int = 0, aggregated=False):
        from mpi4py import MPI
        self.n, self.q, self.cap, self.aggregated = int(n_samples), int(n_workers), int(cap), bool(aggregated)
        self.remote_read = 0
        stride, counter_stride, weight_stride = _lines(self.n), _lines(self.q), _lines(self.cap)
        n_counters = len(COUNTERS) * counter_stride + 2 * CACHE_LINE_DOUBLES
        top_stride = _lines(int(others)) if self.aggregated else 0
        n_base = 2 * (stride + CACHE_LINE_DOUBLES + top_stride) if self.aggregated else 0
        n_doubles = self.q * stride + n_counters + self.q * weight_stride + n_base
        self._win = MPI.Win.Allocate_shared(8 * n_doubles if comm.Get_rank() == 0 else 0, 8, comm=comm)
        buffer, _ = self._win.Shared_query(0)
        comm.Barrier()                  # every rank of the node has mapped the window: its file can go
        from .supervisor import shared_memory_segments, unlink_segments
        unlink_segments(shared_memory_segments())   # no segment outlives the job, however it ends
        memory = np.ndarray(buffer=buffer, dtype=np.float64, shape=(n_doubles,))
        if comm.Get_rank() == 0:
            memory[:] = 0.0
        at = self.q * stride
        self.rows = memory[:at].reshape(self.q, stride)[:, :self.n]
        counters = memory[at:at + n_counters].view(np.int64)
        per_worker = counters[:len(COUNTERS) * counter_stride].reshape(len(COUNTERS), counter_stride)[:, :self.q]
        self.started, self.steps, self.proposals, self.refused, self.finished, self.writes = per_worker
        tail = counters[len(COUNTERS) * counter_stride:]
        self.beat = tail[:1]
        self.sequence = tail[CACHE_LINE_DOUBLES:CACHE_LINE_DOUBLES + 1]
        at += n_counters
        self.weights = memory[at:at + self.q * weight_stride].reshape(self.q, weight_stride)[:, :self.cap]
        at += self.q * weight_stride
        if self.aggregated:       # two buffers of [base (n) | remote steps | others' top |w|]
            block = memory[at:at + n_base].reshape(2, -1)
            self.base = block[:, :self.n]
            self.remote_steps = block[:, stride:stride + 1].view(np.int64)
            self.remote_top = block[:, stride + CACHE_LINE_DOUBLES:stride + CACHE_LINE_DOUBLES + int(others)]
        comm.Barrier()                    # zeroed before anyone writes

    def read(self, out: np.ndarray) -> np.ndarray:
        """``u_C`` into ``out``; ``remote_read`` is then how many steps of other nodes it holds (0
        on one node)."""
        rows = self.rows
        if self.aggregated:
            self.remote_read = self._read_base(out)
            for row in rows:
                out += row
            return out
        if self.q == 1:
            np.copyto(out, rows[0])
        elif self.q == 2:
            np.add(rows[0], rows[1], out=out)
        else:
            np.add.reduce(rows, axis=0, out=out)
        return out

    def _read_base(self, out) -> int:
        """The newest complete ``base`` into ``out``; returns the remote steps it holds."""
        return self._stable(lambda k: (np.copyto(out, self.base[k]), int(self.remote_steps[k, 0]))[1])

    def read_remote_top(self, out) -> None:
        """The other nodes' top ``|w|`` as of the newest ``base``."""
        self._stable(lambda k: np.copyto(out, self.remote_top[k]))

    def _stable(self, copy):
        """``copy(k)`` of buffer ``k`` of the newest ``base``, retried if the leader rewrote that
        buffer meanwhile (it writes the other one, then moves ``sequence`` on)."""
        sequence = memoryview(self.sequence)
        while True:
            k = sequence[0]
            value = copy(k % 2)
            if sequence[0] - k < 2:
                return value

    def latest_remote_steps(self) -> int:
        return int(self.remote_steps[int(self.sequence[0]) % 2, 0])

    def publish_base(self, base, remote_steps: int, remote_top=None) -> None:
        """The leader: a new ``base`` into the buffer not being read, then flip ``sequence``."""
        k = int(self.sequence[0]) + 1
        np.copyto(self.base[k % 2], base)
        self.remote_steps[k % 2, 0] = remote_steps
        if remote_top is not None:
            np.copyto(self.remote_top[k % 2], remote_top)
        self.sequence[0] = k

    def total_steps(self) -> int:
        return int(self.steps.sum())

    def total_writes(self) -> int:
        return int(self.writes.sum())

    def sum_rows(self, out: np.ndarray) -> np.ndarray:
        """This node's changes, ``sum_k c_k``, into ``out``."""
        np.sum(self.rows, axis=0, out=out)
        return out

    def free(self):
        """Collective: every rank releases the window."""
        if self._win is not None:
            self._win.Free()
            self._win = None


class BeatWatch:
    """A worker's watch on the central rank's ``beat``: ``alive()`` is True when it moved since
    the last look; ``check()`` raises ``Deadline`` when it has stood still for ``timeout`` s."""

    def __init__(self, beat, timeout):
        self.beat, self.timeout = memoryview(beat), timeout
        self.last, self.since = self.beat[0], time.monotonic()

    def alive(self) -> bool:
        value = self.beat[0]
        if value == self.last:
            return False
        self.last, self.since = value, time.monotonic()
        return True

    def check(self) -> None:
        if not self.alive() and time.monotonic() - self.since > self.timeout:
            raise Deadline(f"the central rank's heartbeat stood still for {self.timeout:g} s")


def shared_steps(state: SharedState, index: int, worker, max_staleness=None, monitor=None, threshold=None,
                 central=None, between=None):
    """Run ``worker`` (a ``Worker``, shard ``index``) to the end of its passes on ``state``
    through a ``links.SharedReads``. Returns ``(compute seconds, staleness histogram)``.

    With ``max_staleness`` a step that may have missed more than that many steps of the other
    workers is discarded and redone from a fresh read (counted in ``refused``). ``monitor``
    (tests) is called after every committed step. With ``threshold`` the global budget is kept:
    the worker reads the others' top ``|w|`` with ``u_C`` (``threshold(index, out)``) and
    publishes its own after every step. ``central``: a ``BeatWatch`` checked before every step;
    ``between()``: called before every step (the node leader's exchange with the central rank).
    On a node-aggregated window the steps of other nodes count too: those in the ``base`` read
    against those in the newest ``base`` when the step is written.
    """
    if max_staleness is None and monitor is None and worker.batchable(shared=True):
        return shared_batches(state, index, worker, threshold=threshold, central=central, between=between)
    link = SharedReads(worker, max_staleness, threshold.size if threshold is not None else 0)
    row = state.rows[index]
    weight_row = state.weights[index]
    # memoryviews: a counter read or increment costs a tenth of numpy's scalar indexing
    started, steps, proposals, refused, writes = (memoryview(c) for c in (state.started, state.steps, state.proposals,
                                                                          state.refused, state.writes))
    compute_s = 0.0
    while True:
        own = link.own
        seen = _read(state, index, link.view, own, steps, central, between, threshold, link.others_top)
        t0 = time.perf_counter()
        push = link.step(seen)
        compute_s += time.perf_counter() - t0
        proposals[index] += 1
        if push is None:
            state.finished[index] = 1
            return compute_s, link.histogram
        t0 = time.perf_counter()
        if not link.settle(_begun(state, started, own)):
            refused[index] += 1
            continue
        started[index] += 1
        np.add(row, push.delta, out=row)
        writes[index] += 1
        if threshold is not None:
            write_abs(weight_row, worker.state.w[:worker.state.size])     # a view: no copy per step
        steps[index] = link.own
        compute_s += time.perf_counter() - t0
        if monitor is not None:
            monitor(state)


def _read(state, index, view, own, steps, central, between, threshold, others_top) -> int:
    """Before a step (or a batch): the central rank's beat checked, ``between()``, then ``u_C`` into
    ``view`` (and the others' top ``|w|`` into ``others_top``); returns how many of the other
    workers' steps had finished before the read (``steps``: the counters' memoryview)."""
    if central is not None:
        central.check()
    if between is not None:
        between()
    seen = sum(steps) - own           # other workers' finished steps, read before u_C
    state.read(view)
    if state.aggregated:
        seen += state.remote_read
    if threshold is not None:
        threshold(index, others_top)
    return seen


def _begun(state, started, own) -> int:
    """The other workers' steps whose write has begun (``started``: the counters' memoryview), those
    of other nodes in the newest ``base`` included: what a read before them missed."""
    return sum(started) - own + (state.latest_remote_steps() if state.aggregated else 0)


def shared_batches(state: SharedState, index: int, worker, batch=None, threshold=None, central=None, between=None):
    """``shared_steps`` in batches: after each read of ``u_C`` the worker takes up to ``batch``
    (``SHARED_BATCH``) steps at its view in one compiled call (``Worker.visit_view``) and writes their
    sum into its row once. Returns ``(compute seconds, staleness histogram)``; a batch's steps count
    in the histogram at the staleness of its write (every one of them read ``u_C`` at the batch's
    start).

    One step at a time, a worker's step under ``mpiexec`` cost 60 us against a sequential visit's
    14 us (``benchmarks/bench_core_cost.py``: n = 1000, s = 64): the read, the Python of ``propose``
    and ``commit`` and the counters, per step. Not used with ``--max-staleness`` (a step staler than
    the bound must be redone, one step at a time) nor under a ``monitor``."""
    batch = SHARED_BATCH if batch is None else int(batch)
    row = state.rows[index]
    weight_row = state.weights[index]
    view = np.empty(state.n)
    others_top = np.empty(threshold.size) if threshold is not None else None
    started, steps, proposals, writes = (memoryview(c) for c in (state.started, state.steps, state.proposals,
                                                                 state.writes))
    histogram = [0] * 16
    own = 0
    compute_s = 0.0
    while True:
        seen = _read(state, index, view, own, steps, central, between, threshold, others_top)
        t0 = time.perf_counter()
        count, change = worker.visit_view(view, batch, others_top)
        proposals[index] += 1
        if change is None:
            state.finished[index] = 1
            compute_s += time.perf_counter() - t0
            return compute_s, histogram
        staleness = _begun(state, started, own) - seen
        started[index] += count
        np.add(row, change, out=row)
        writes[index] += 1
        if threshold is not None:
            write_abs(weight_row, worker.state.w[:worker.state.size])
        own += count
        steps[index] = own
        compute_s += time.perf_counter() - t0
        if count:
            count_staleness(histogram, staleness, count)


class OthersTop:
    """The global budget on a shared window: the others' top ``|w|`` for worker ``index``, from the
    window's rows (``GlobalThreshold.others_top`` over them) and, on a node-aggregated window, the
    other nodes' top ``|w|`` that came with the newest ``base``."""

    def __init__(self, state, rank_theta):
        self.state, self.size = state, int(rank_theta)
        if state.aggregated:
            width = max(state.cap, self.size)
            self.pool = np.zeros((state.q + 1, width))
            self.threshold = GlobalThreshold(self.size, state.q + 1, width)
        else:
            self.threshold = GlobalThreshold(self.size, state.q, state.cap)

    def __call__(self, index, out):
        state = self.state
        if not state.aggregated:
            return self.threshold.others_top(index, out=out, pool=state.weights)
        pool = self.pool
        pool[:state.q, :state.cap] = state.weights
        state.read_remote_top(pool[state.q, :self.size])
        return self.threshold.others_top(index, out=out, pool=pool)


class SharedMemoryTransport:
    """The shared-memory transport (``driver.Transport``): one node, every worker writes its own
    row of ``u_C``; the central rank watches and traces."""

    name = "shared-memory"
    refuses_stale_pushes = False        # the workers enforce the staleness bound step by step

    def __init__(self, comm, plan, config, n_samples, backoff):
        self.comm, self.plan = comm, plan
        self.state = SharedState(comm, n_samples, plan.n_workers, plan.cap)
        self.max_staleness = config.max_staleness
        self.timeout = patience(config.watchdog_timeout, comm.Get_rank())      # the central rank's beat
        self._beat = None

    # -- worker side ------------------------------------------------------------------------
    def run_worker(self, worker, between=None, u0=None):
        """``between()``: called before every step (checkpoints); ``u0`` (a resumed run): the worker's
        row starts as its own contribution ``X_S w_S + b``, so the rows still sum to ``u_C``."""
        threshold = OthersTop(self.state, self.plan.threshold_rank) if self.plan.keeps_threshold else None
        self._beat = BeatWatch(self.state.beat, self.timeout)
        if u0 is not None:
            index = worker.worker_id
            self.state.rows[index][:] = worker.contribution()
            if threshold is not None:
                write_abs(self.state.weights[index], worker.state.w[:worker.state.size])
        return shared_steps(self.state, worker.worker_id, worker, self.max_staleness, threshold=threshold,
                            central=self._beat, between=between)

    def central_alive(self) -> bool:
        """For a finished worker waiting for its release: the central rank's beat moved."""
        return self._beat is not None and self._beat.alive()

    # -- central side -----------------------------------------------------------------------
    def run_central(self, central, watch, trace=None):
        """Wake every millisecond to beat, trace ``u_C``, watch the workers' counters and take
        reports, then sleep; at the end set ``central`` to the exact final state. Returns the time
        spent tracing and (global budget) the final threshold."""
        state = self.state
        beat = memoryview(state.beat)
        heartbeat = state.proposals.copy()
        busy_s = 0.0
        while watch.running:
            beat[0] += 1
            if watch.take_report():
                continue
            if trace is not None:
                steps = state.total_steps()
                if trace.due(steps):
                    t0 = time.perf_counter()
                    central.steps = central.version = steps
                    state.read(central.u)
                    trace.record(central)
                    busy_s += time.perf_counter() - t0
            now = time.monotonic()
            beats = state.proposals.copy()
            for i in np.flatnonzero(beats != heartbeat):
                watch.seen(i, now)
            heartbeat = beats
            watch.check(lambda: f"{state.total_steps()} steps taken",
                        lambda: {"_done": state.total_steps(), "_unit": "steps",
                                 "_objective": watch.objective(state.read(central.u)) if watch.objective else None})
            time.sleep(SHARED_POLL_S)
        # every worker has reported, so every write is done: the exact final state
        histograms = [np.asarray(f["staleness_histogram"], dtype=np.int64) for f in watch.finals]
        merged = np.zeros(max(h.size for h in histograms), dtype=np.int64)
        for h in histograms:
            merged[:h.size] += h
        state.read(central.u)
        central.set_counts(steps=state.total_steps(), refused=int(state.refused.sum()), histogram=merged,
                           pushes=int(state.writes.sum()))
        # every worker publishes its |w| after every step: they are as stale as its read of u_C
        theta = ({"value": kth_largest(state.weights.ravel(), self.plan.threshold_rank), "age": None}
                 if state.cap else None)
        return busy_s, theta

    def close(self):
        self.state.free()
