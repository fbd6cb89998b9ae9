"""Discrete-event replay of Asy-OS on dedicated cores: what the MPI engine would do on a machine
with a core per rank, from costs measured on this one.

The replay runs the real ``Worker`` and ``Central`` objects, so the learning (which feature enters,
when the training error crosses a threshold) is the same arithmetic as under MPI; only time is
simulated. Each worker owns a core: a step takes ``Costs.step_time(m)`` at its current retained
size ``m``; a push or a reply takes ``Costs.transfer(n)``; the central rank serves pushes one at a
time in arrival order, each taking ``Costs.central_service_s``. The worker protocol is the MPI
engine's (``asyos.learners.protocol.links``):

* ``pipelined``: one push in flight; steps taken meanwhile are summed into the next push, sent as
  soon as the reply to the previous one is seen (between steps); after ``max_batch`` steps ahead
  the worker waits for its reply;
* ``each-step``: push, wait for the reply, step again.

Nothing here measures anything: ``asyos.benchmarking.speedup`` calibrates ``Costs`` and validates
the prediction against real runs.
"""
from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .links import EachStep, NodeExchange, Pipelined, SharedReads, count_staleness
from .loopback import run_loopback
from .threshold import GlobalThreshold


@dataclass(frozen=True)
class Costs:
    """Times in seconds, measured on the target machine."""

    step_base_s: float           # worker step (propose + commit) with nothing retained
    step_per_retained_s: float   # extra per retained feature (the two matrix-vector products grow with m)
    step_protocol_s: float       # pipelined bookkeeping per step (view and pending updates, a Test)
    push_send_s: float           # worker side of sending a push (buffers, Isend, Irecv)
    latency_s: float             # one-way message latency
    bandwidth_bytes_per_s: float
    central_service_s: float     # central rank, per push: apply, copy the reply, send it
    read_value_s: float = 0.0    # shared memory: reading one value of one worker's row of u_C
    shared_protocol_s: float = 0.0   # shared memory, per step: the counters, the read and write of one row
    wait_s: float = 0.0          # messages: how long after its arrival a worker waiting in back-off sees a reply
    quantum_s: float = 1e-3      # the scheduler's turn when more ranks are runnable than cores (Machine)
    # the compiled visits (``Worker.visit_batch`` / ``visit_view``), which sequential OS and the shared-memory
    # workers run in batches: a visit with ``m`` retained, and a compiled call's own cost
    visit_base_s: float = 0.0
    visit_per_retained_s: float = 0.0
    batch_call_s: float = 0.0

    def step_time(self, retained: int, pipelined: bool = True) -> float:
        return self.step_base_s + self.step_per_retained_s * retained + (self.step_protocol_s if pipelined else 0.0)

    def batch_time(self, visits: int, retained: int) -> float:
        """A compiled call of ``visits`` visits begun with ``retained`` features retained."""
        return self.batch_call_s + visits * (self.visit_base_s + self.visit_per_retained_s * retained)

    def transfer(self, n: int) -> float:
        return self.latency_s + 8.0 * (n + 3) / self.bandwidth_bytes_per_s

    def as_dict(self) -> dict:
        return dict(self.__dict__)


# What the default problem's steps and messages cost on the development machine (2 cores), measured
# by ``asyos.benchmarking.calibration.measure_costs()`` (the calibration of
# ``benchmarks/bench_simulator_mpi.py``, on an otherwise idle machine): a step 20.0 us + 0.31 us per
# retained feature; one-way messages 1.2 us (n = 1), 3.7 us (n = 1316); posting a push 1.1 us; the
# central rank's service 7.8 us per push; the pipelined loop's own cost 5.7 us and the shared-memory
# loop's 3.5 us per step; a worker waiting for a reply sees it 53 us late on average (its back-off
# sleep); the scheduler's turn when more processes spin than there are cores, 4.0 ms
# (``calibration.measure_quantum``). Reading one value of a shared row (0.4 ns) is timed with numpy.
# These are the simulator's defaults; that benchmark measures them again in its own run.
DEFAULT_COSTS = Costs(step_base_s=20.0e-6, step_per_retained_s=0.31e-6, step_protocol_s=5.7e-6, push_send_s=1.1e-6,
                      latency_s=1.2e-6, bandwidth_bytes_per_s=4.2e9, central_service_s=7.8e-6, read_value_s=0.41e-9,
                      shared_protocol_s=3.5e-6, wait_s=53e-6, quantum_s=4.0e-3)


# The spread of a step's time around its cost (standard deviation of its logarithm), measured with
# ``asyos.benchmarking.speedup.timed_full_steps`` on the default problem: 0.23, 0.22 and 0.27 at 8,
# 32 and 100 retained features. Without it the simulated workers move in lock step, which no real
# machine does: with every cost exact, 12 each-step workers under --max-staleness 2 were refused
# in the same order again and again and ended at a loss of 4.4 (0.0024 with the spread; the MPI
# engine reached recall 0.99).
DEFAULT_JITTER = 0.25


@dataclass(frozen=True)
class Machine:
    """The machine the ranks share. ``cores=None``: a core per rank (the replay's assumption).
    Otherwise, while more ranks are runnable than there are cores, each runs in turns of
    ``quantum_s`` out of every ``quantum_s * runnable / cores`` (a time-sliced scheduler), its turns
    offset by a random phase; and every piece of work lasts its cost times a log-normal factor of
    spread ``jitter`` (mean 1). Both draw from the simulation's seeded generator."""

    cores: Optional[int] = None
    quantum_s: float = 1e-3
    jitter: float = 0.0


class _Cpu:
    """When each rank's work ends on a ``Machine`` (its class docstring)."""

    def __init__(self, machine: Machine, n_ranks: int, rng):
        self.machine, self.rng = machine, rng
        self.phase = rng.random(n_ranks) if machine.cores is not None else None

    def finish(self, rank: int, t: float, work: float, runnable: int) -> float:
        m = self.machine
        if m.jitter > 0:
            work *= float(np.exp(m.jitter * self.rng.standard_normal() - 0.5 * m.jitter ** 2))
        if m.cores is None or runnable <= m.cores:
            return t + work
        period = m.quantum_s * runnable / m.cores
        start = self.phase[rank] * period                  # this rank's turns: [start + k period, + quantum)
        k = np.floor((t - start) / period)
        while True:
            turn = start + k * period
            begin, end = max(t, turn), turn + m.quantum_s
            if end > begin:
                if work <= end - begin:
                    return begin + work
                work -= end - begin
            k += 1


@dataclass
class ReplayReport:
    time_s: float
    steps: int
    pushes: int
    central_busy_s: float
    staleness: dict

    @property
    def central_utilization(self) -> float:
        return self.central_busy_s / self.time_s if self.time_s > 0 else 0.0


class SimulatedClock:
    """The replay's time; call it to read it (``ObjectiveTrace(clock=clock)`` records simulated time)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


MODES = ("pipelined", "each-step", "shared-memory", "node-aggregated")
RUNNING, BLOCKED, FINISHED = 0, 1, 2
SHARED_POLL_S = 1e-3           # a node leader done with its passes looks at its node this often


def replay(workers, central, costs: Costs, clock: SimulatedClock, mode: str = "pipelined",
           max_batch: int = 16, threshold=None, *, machine: Optional[Machine] = None, seed=0,
           max_staleness=None, nodes: int = 1, batch: int = 1) -> ReplayReport:
    """Run ``workers`` against ``central`` in simulated time kept by ``clock``; ``central.monitor``
    (e.g. an ``ObjectiveTrace`` reading ``clock``) sees every applied push (shared memory: every
    step) at its simulated time.

    ``mode``: the transport, as the MPI engine runs it (``asyos.distributed``): messages with
    ``pipelined`` or ``each-step`` pushes (``max_batch``; ``max_staleness``: the central node
    refuses staler pushes, each-step only), ``shared-memory`` (every step reads ``u_C`` and writes
    its change; ``max_staleness``: the worker redoes a staler step), ``node-aggregated`` (the
    workers spread round-robin over ``nodes`` nodes as MPICH's virtual nodes place them, shared
    memory within a node, its leader exchanging with the central node). With ``threshold`` (a
    ``GlobalThreshold`` sized for the senders: workers, or nodes) the global budget runs as under
    MPI. ``machine``: the cores the ranks share and the spread of the costs (default: a core per
    rank, exact costs); with ``seed`` everything is deterministic.

    ``batch`` (shared memory and node-aggregated, without ``max_staleness``): steps a worker takes
    between two reads of ``u_C`` in one compiled call, as the MPI engine's ``mpi_shared.shared_batches``
    does (``SHARED_BATCH``) where the worker is compiled (``Worker.batchable(shared=True)``); a batch
    costs ``Costs.batch_time`` plus the read. 1: a step per read, each costing ``step_time``."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of: {', '.join(MODES)}")
    sim = _Simulation(workers, central, costs, clock, machine or Machine(), np.random.default_rng(seed))
    batched = (int(batch) > 1 and mode in ("shared-memory", "node-aggregated") and max_staleness is None
               and all(w.batchable(shared=True) for w in workers))
    if mode in ("pipelined", "each-step"):
        _run_messages(sim, mode, max_batch, threshold)
    elif batched:
        _run_batches(sim, threshold, int(batch), nodes if mode == "node-aggregated" else None)
    elif mode == "shared-memory":
        _run_shared(sim, max_staleness, threshold)
    else:
        _run_nodes(sim, max_staleness, threshold, nodes)
    return ReplayReport(clock.now, central.steps, central.accepted, sim.busy, central.staleness_summary())


class _Simulation:
    """The event queue, the clock, the machine and the central node's service queue."""

    def __init__(self, workers, central, costs, clock, machine, rng):
        self.workers, self.central, self.costs, self.clock = workers, central, costs, clock
        self.cpu = _Cpu(machine, len(workers) + 1, rng)      # rank 0 is the central node
        self.events = []
        self.sequence = itertools.count()
        self.queue = []                                     # pushes waiting at the central node
        self.central_free_at = 0.0
        self.busy = 0.0
        self.state = [RUNNING] * len(workers)              # RUNNING, BLOCKED (on a reply), FINISHED
        self.working = len(workers)                         # runnable workers
        clock.now = 0.0

    def schedule(self, t, kind, who, payload=None):
        heapq.heappush(self.events, (t, next(self.sequence), kind, who, payload))

    def run(self, handle):
        while self.events:
            t, _, kind, who, payload = heapq.heappop(self.events)
            self.clock.now = t
            handle(t, kind, who, payload)

    def runnable(self, central_busy=False) -> int:
        return self.working + (1 if central_busy else 0)

    def set_state(self, w, state):
        """Worker ``w`` runs, waits for a reply (asleep in its back-off: it leaves the cores to the
        others) or has finished."""
        if (self.state[w] == RUNNING) != (state == RUNNING):
            self.working += 1 if state == RUNNING else -1
        self.state[w] = state

    def noticed(self, t) -> float:
        """When a worker asleep in its back-off notices a reply that arrived at ``t``: uniformly
        within twice the measured mean delay ``Costs.wait_s``."""
        return t + 2.0 * self.costs.wait_s * float(self.cpu.rng.random())

    def work(self, rank, t, cost, central_busy=False) -> float:
        """When ``cost`` seconds of work begun at ``t`` by ``rank`` (0: central) end."""
        return self.cpu.finish(rank, t, cost, self.runnable(central_busy))

    def arrive(self, t, sender, message, reply, threshold):
        """A push reaches the central node; it is served in arrival order, answered into
        ``reply`` (a copy goes back to the sender)."""
        self.queue.append((sender, message.copy(), reply, threshold))
        if len(self.queue) == 1:
            self._start_service(t)

    def _start_service(self, t):
        start = max(t, self.central_free_at)
        end = self.work(0, start, self.costs.central_service_s, central_busy=True)
        self.busy += end - start
        self.central_free_at = end
        self.schedule(end, "served", -1)

    def served(self, t):
        sender, message, reply, threshold = self.queue.pop(0)
        self.central.serve(sender, message, reply, threshold)
        if self.queue:
            self._start_service(t)
        return sender, reply.copy()


def _run_messages(sim, mode, max_batch, threshold):
    n, costs = sim.central.n, sim.costs
    others = threshold.budget if threshold is not None else 0
    links = [Pipelined(w, others, max_batch) if mode == "pipelined" else EachStep(w, others) for w in sim.workers]
    waiting = [False] * len(links)          # blocked until its reply arrives
    arrived = [False] * len(links)          # a reply is there, not yet taken
    reply = np.zeros_like(links[0].reply)

    def send(t, w, message):
        t = sim.work(w + 1, t, costs.push_send_s)
        sim.schedule(t + costs.transfer(n), "arrive", w, message.copy())
        return t

    def handle(t, kind, w, payload):
        if kind == "arrive":
            sim.arrive(t, w, payload, reply, threshold)
        elif kind == "served":
            sender, answer = sim.served(t)
            sim.schedule(t + costs.transfer(n), "reply", sender, answer)
        elif kind == "reply":
            links[w].reply[:] = payload
            arrived[w] = True
            if waiting[w]:
                waiting[w] = False
                if sim.state[w] == BLOCKED:
                    sim.set_state(w, RUNNING)
                sim.schedule(sim.noticed(t), "free", w)
        elif mode == "pipelined":
            _pipelined_turn(sim, t, w, links[w], arrived, waiting, send)
        else:
            _each_step_turn(sim, t, w, links[w], arrived, waiting, send)

    for w in range(len(links)):
        sim.schedule(0.0, "free", w)
    sim.run(handle)


def _pipelined_turn(sim, t, w, link, arrived, waiting, send):
    if link.in_flight and arrived[w]:              # the reply is seen between steps
        arrived[w] = False
        link.take_reply()
    message = link.outgoing()
    if message is not None:
        t = send(t, w, message)
    if link.must_wait:
        waiting[w] = True                          # woken by the reply
        if sim.state[w] == RUNNING:
            sim.set_state(w, BLOCKED)
        return
    if link.finished:
        return
    retained = link.worker.state.size
    if link.step():
        sim.schedule(sim.work(w + 1, t, sim.costs.step_time(retained, pipelined=True)), "free", w)
    else:
        sim.set_state(w, FINISHED)
        sim.schedule(t, "free", w)                 # the last push still goes


def _each_step_turn(sim, t, w, link, arrived, waiting, send):
    if arrived[w]:
        arrived[w] = False
        link.settle()
    retained = link.worker.state.size
    message = link.step()
    if message is None:
        sim.set_state(w, FINISHED)
        return
    t = sim.work(w + 1, t, sim.costs.step_time(retained, pipelined=False))
    send(t, w, message)
    waiting[w] = True
    sim.set_state(w, BLOCKED)


def _others_top(keeper, workers, members, me, remote_top):
    """The global budget's pull within a node: the top ``|w|`` of the node's other workers and of
    the other nodes (``remote_top``), from ``keeper`` (a ``GlobalThreshold`` with a row per member
    and one for the other nodes)."""
    pool = keeper.pool
    pool.fill(0.0)
    for k, w in enumerate(members):
        state = workers[w].state
        np.abs(state.w[:state.size], out=pool[k, :state.size])
    pool[len(members), :remote_top.size] = remote_top
    return keeper.others_top(members.index(me))


def _run_shared(sim, max_staleness, threshold):
    """Every worker reads ``u_C`` (the central node's ``u``, which holds every committed step),
    steps, and writes its change when the step's time is up; the central node only counts."""
    central, costs, workers = sim.central, sim.costs, sim.workers
    q, n = len(workers), central.n
    links = [SharedReads(w, max_staleness, threshold.budget if threshold is not None else 0) for w in workers]
    read_cost = costs.shared_protocol_s + costs.read_value_s * (q - 1) * n     # one row is in the protocol cost

    def handle(t, kind, w, payload):
        link = links[w]
        if kind == "commit":
            seen = payload
            if link.settle(central.version - link.own):
                central.apply(link.worker.delta, seen + link.own - 1)
                if threshold is not None:         # its |w| in the window, as of this write
                    threshold.update(w, link.worker.state.weights, central.version)
            sim.schedule(t, "free", w)
            return
        np.copyto(link.view, central.u)
        seen = central.version - link.own
        if threshold is not None:
            threshold.others_top(w, out=link.others_top)
        retained = link.worker.state.size
        if link.step(seen) is None:
            sim.set_state(w, FINISHED)
            return
        sim.schedule(sim.work(w + 1, t, read_cost + costs.step_time(retained, pipelined=False)), "commit", w, seen)

    for w in range(q):
        sim.schedule(0.0, "free", w)
    sim.run(handle)
    central.refused += sum(link.refused for link in links)      # steps the workers redid


class _Nodes:
    """Node-aggregated bookkeeping (``_run_nodes``, ``_run_batches``): worker ``w`` (MPI rank
    ``w + 1``) on node ``(w + 1) % n_nodes``, as MPICH's virtual nodes place it; per node its
    committed changes (``rows``), its ``steps``, the ``base`` its leader last received, the other
    nodes' steps in it (``remote``) and their top ``|w|``; its leader's exchange with the central
    node (``links.NodeExchange``) between its steps and, once done, every ``SHARED_POLL_S`` until its
    node is (``before_step``). ``threshold`` (sized for the workers) keeps recording every worker's ``|w|``
    for the final value; the central node keeps its own, per node (``self.threshold``)."""

    def __init__(self, sim, n_nodes, threshold):
        workers, n = sim.workers, sim.central.n
        q = len(workers)
        self.sim, self.n = sim, n
        self.groups = [g for g in ([w for w in range(q) if (w + 1) % n_nodes == k] for k in range(n_nodes)) if g]
        self.node_of = {w: k for k, g in enumerate(self.groups) for w in g}
        self.others = others = threshold.budget if threshold is not None else 0
        cap = max(w.state.budget for w in workers)
        node_cap = max(len(g) for g in self.groups) * cap
        count = len(self.groups)
        self.threshold = GlobalThreshold(threshold.budget, count, node_cap) if threshold is not None else None
        self.exchanges = [NodeExchange(n, node_cap, others) for _ in self.groups]
        self.rows = [np.zeros(n) for _ in self.groups]
        self.base = [np.zeros(n) for _ in self.groups]
        self.steps, self.done, self.remote, self.arrived = [0] * count, [0] * count, [0] * count, [False] * count
        self.writes = [0] * count
        self.remote_top = [np.zeros(others) if others else None for _ in self.groups]
        self.keepers = ([GlobalThreshold(others, len(g) + 1, max(cap, others)) for g in self.groups]
                        if others else None)
        self.reply = np.zeros_like(self.exchanges[0].reply)

    def exchange(self, t, k):
        """The leader of node ``k`` between two of its steps; returns when it may go on."""
        sim, link = self.sim, self.exchanges[k]
        if link.in_flight and self.arrived[k]:
            self.arrived[k] = False
            new_base, self.remote[k], top = link.take_reply()
            np.copyto(self.base[k], new_base)
            if top is not None:
                self.remote_top[k][:] = top
        weights = None
        if self.threshold is not None:
            weights = np.concatenate([np.abs(sim.workers[w].state.w[:sim.workers[w].state.size])
                                      for w in self.groups[k]])
        message = link.outgoing(self.rows[k], self.steps[k], self.writes[k], weights)
        if message is None:
            return t
        t = sim.work(self.groups[k][0] + 1, t, sim.costs.push_send_s)
        sim.schedule(t + sim.costs.transfer(self.n), "arrive", k, message.copy())
        return t

    def message(self, t, kind, k, payload) -> bool:
        """A push reaching the central node, its service, a reply reaching node ``k``: True if
        ``kind`` was one of them (handled)."""
        sim = self.sim
        if kind == "arrive":
            sim.arrive(t, k, payload, self.reply, self.threshold)
        elif kind == "served":
            sender, answer = sim.served(t)
            sim.schedule(t + sim.costs.transfer(self.n), "reply", sender, answer)
        elif kind == "reply":
            self.exchanges[k].reply[:] = payload
            self.arrived[k] = True
        else:
            return False
        return True

    def before_step(self, t, kind, k, w):
        """Worker ``w`` of node ``k`` before a step (``kind`` "free") or, its passes done, at a look
        at its node (``kind`` "drain"): a leader exchanges; a look comes again until every worker of
        the node is done and its last push answered. Returns ``(t, whether the event ends here)``."""
        if self.groups[k][0] == w:
            t = self.exchange(t, k)
        if kind != "drain":
            return t, False
        if not (self.done[k] == len(self.groups[k]) and self.exchanges[k].all_sent(self.writes[k])):
            self.sim.schedule(t + SHARED_POLL_S, "drain", w)
        return t, True

    def others_top(self, k, w):
        return _others_top(self.keepers[k], self.sim.workers, self.groups[k], w, self.remote_top[k])


def _run_nodes(sim, max_staleness, threshold, n_nodes):
    """Node-aggregated (``_Nodes``), a step at a time: within a node as ``_run_shared`` against
    ``base + rows``."""
    central, costs, workers = sim.central, sim.costs, sim.workers
    nodes = _Nodes(sim, n_nodes, threshold)
    groups, rows, steps, remote = nodes.groups, nodes.rows, nodes.steps, nodes.remote
    links = [SharedReads(w, max_staleness, nodes.others) for w in workers]
    read_cost = costs.shared_protocol_s + costs.read_value_s * central.n * max(len(g) for g in groups)

    def handle(t, kind, w, payload):
        if nodes.message(t, kind, w, payload):
            return
        k = nodes.node_of[w]
        leader = groups[k][0] == w
        link = links[w]
        if kind == "commit":
            local_others = steps[k] - link.own
            if link.settle(local_others + remote[k]):
                rows[k] += link.worker.delta
                steps[k] += 1
                nodes.writes[k] += 1
                if threshold is not None:
                    threshold.update(w, link.worker.state.weights)
            sim.schedule(t, "free", w)
            return
        t, ended = nodes.before_step(t, kind, k, w)
        if ended:
            return
        np.add(nodes.base[k], rows[k], out=link.view)
        seen = steps[k] - link.own + remote[k]
        if threshold is not None:
            link.others_top[:] = nodes.others_top(k, w)
        retained = link.worker.state.size
        if link.step(seen) is None:
            sim.set_state(w, FINISHED)
            nodes.done[k] += 1
            if leader:
                sim.schedule(t, "drain", w)
            return
        sim.schedule(sim.work(w + 1, t, read_cost + costs.step_time(retained, pipelined=False)), "commit", w, seen)

    for w in range(len(workers)):
        sim.schedule(0.0, "free", w)
    sim.run(handle)
    # the workers measured the staleness of every step; the central node's pushes were per node
    central.use_histogram(_merged([link.histogram for link in links]), refused=sum(link.refused for link in links))


def _merged(histograms):
    """The sum of staleness histograms (lists of counts) of different lengths."""
    merged = np.zeros(max(len(h) for h in histograms), dtype=np.int64)
    for h in histograms:
        merged[:len(h)] += h
    return merged


def _run_batches(sim, threshold, batch, n_nodes=None):
    """Shared memory (``n_nodes=None``) or node-aggregated (``_Nodes``), the workers on the compiled
    step as the MPI engine runs them (``mpi_shared.shared_batches``): a worker reads ``u_C`` (its
    node's ``base + rows``) and the others' top ``|w|``, takes up to ``batch`` steps at that view in
    one compiled call (``Worker.visit_view``), and writes their sum when the call's time is up; the
    batch's steps count at the staleness of that write. A batch costs ``Costs.batch_time`` at the
    retained size it began with, plus ``shared_protocol_s`` and the read of the window's rows
    (``read_value_s`` a value)."""
    central, costs, workers = sim.central, sim.costs, sim.workers
    q, n = len(workers), central.n
    others = threshold.budget if threshold is not None else 0
    nodes = _Nodes(sim, n_nodes, threshold) if n_nodes is not None else None
    if nodes is not None:
        groups, rows, node_steps, writes, base, remote, done = (nodes.groups, nodes.rows, nodes.steps, nodes.writes,
                                                                nodes.base, nodes.remote, nodes.done)
    else:                                               # one node: its rows sum to u_C itself
        groups, rows, node_steps, writes, base, remote, done = ([list(range(q))], [central.u], [0], [0],
                                                                [np.zeros(n)], [0], [0])
    views = [np.empty(n) for _ in workers]
    tops = [np.empty(others) if others else None for _ in workers]
    own, seen, began = [0] * q, [0] * q, [0] * q
    histograms = [[0] * 16 for _ in workers]
    read_cost = costs.shared_protocol_s + costs.read_value_s * n * max(len(g) for g in groups)

    def handle(t, kind, w, payload):
        if nodes is not None and nodes.message(t, kind, w, payload):
            return
        k = nodes.node_of[w] if nodes is not None else 0
        worker = workers[w]
        if kind == "commit":
            count, change = payload
            rows[k] += change
            node_steps[k] += count
            writes[k] += 1
            count_staleness(histograms[w], node_steps[k] - own[w] - count - seen[w] + remote[k] - began[w], count)
            own[w] += count
            if threshold is not None:                   # every worker's |w| (the run's final threshold)
                threshold.update(w, worker.state.weights, node_steps[k])
            if nodes is None:
                central.applied_in_place(count)
            sim.schedule(t, "free", w)
            return
        leader = nodes is not None and groups[k][0] == w
        if nodes is not None:
            t, ended = nodes.before_step(t, kind, k, w)
            if ended:
                return
        np.add(base[k], rows[k], out=views[w])
        seen[w], began[w] = node_steps[k] - own[w], remote[k]
        if others:
            if nodes is not None:
                tops[w][:] = nodes.others_top(k, w)
            else:
                threshold.others_top(w, out=tops[w])
        retained = worker.state.size
        count, change = worker.visit_view(views[w], batch, tops[w])
        if change is None:
            sim.set_state(w, FINISHED)
            done[k] += 1
            if leader:
                sim.schedule(t, "drain", w)
            return
        cost = read_cost + costs.batch_time(count, retained)
        sim.schedule(sim.work(w + 1, t, cost), "commit", w, (count, change.copy()))

    for w in range(q):
        sim.schedule(0.0, "free", w)
    with np.errstate(over="ignore", invalid="ignore"):      # divergence is reported by the kernel
        sim.run(handle)
    if nodes is not None:
        central.use_histogram(_merged(histograms))
    else:
        central.set_counts(central.steps, writes[0], 0, _merged(histograms))


def sequential_time(worker, central, costs: Costs, clock: SimulatedClock, compiled: bool = False) -> float:
    """Sequential OS in simulated time: the loopback, each step costing ``step_time(m)`` (``m``
    retained when it began) without the protocol; ``central.monitor`` sees each step at its
    simulated time. ``compiled``: as ``OnlineSubstitution`` runs it where the worker allows
    (``Worker.batchable``), ``loopback.BATCH_VISITS`` visits a compiled call, each call costing
    ``Costs.batch_time``."""
    clock.now = 0.0
    if compiled and worker.batchable():
        monitor = central.monitor
        begun = [central.steps, worker.state.size]

        def batch_done(c):          # a call's visits applied: its time passes, then the monitor looks
            clock.now += costs.batch_time(c.steps - begun[0], begun[1])
            begun[:] = [c.steps, worker.state.size]
            if monitor is not None:
                monitor(c)

        # a trace counting steps keeps its rows where they were (run_loopback ends a call where one is due)
        batch_done.steps_until_due = (getattr(monitor, "steps_until_due", None) if monitor is not None
                                      else (lambda steps: None))
        central.monitor = batch_done
        try:
            run_loopback(worker, central, batch=None)
        finally:
            central.monitor = monitor
        return clock.now

    def on_step():                  # proposed, not yet committed: the size it began with
        clock.now += costs.step_time(worker.state.size, pipelined=False)

    run_loopback(worker, central, on_step)
    return clock.now
