"""Discrete-event replay of Asy-OS on dedicated cores: what the MPI engine would do on a machine
with a core per rank, from costs measured on this one.

The replay runs the real ``Worker`` and ``Central`` objects, so the learning (which feature enters,
when the training error crosses a threshold) is the same arithmetic as under MPI; only time is
simulated. Each worker owns a core: a step takes ``Costs.step_time(m)`` at its current retained
size ``m``; a push or a reply takes ``Costs.transfer(n)``; the central rank serves pushes one at a
time in arrival order, each taking ``Costs.central_service_s``. The worker protocol is the MPI
engine's (``driver.py``):

* ``pipelined``: one push in flight; steps taken meanwhile are summed into the next push, sent as
  soon as the reply to the previous one is seen (between steps); after ``max_batch`` steps ahead
  the worker waits for its reply;
* ``each-step``: push, wait for the reply, step again.

Nothing here measures anything: ``asyos.benchmarking.speedup`` calibrates ``Costs`` and validates
the prediction against real runs.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np


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

    def step_time(self, retained: int, pipelined: bool = True) -> float:
        return self.step_base_s + self.step_per_retained_s * retained + (self.step_protocol_s if pipelined else 0.0)

    def transfer(self, n: int) -> float:
        return self.latency_s + 8.0 * (n + 3) / self.bandwidth_bytes_per_s

    def as_dict(self) -> dict:
        return dict(self.__dict__)


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


class _WorkerState:
    __slots__ = ("view", "pending", "steps_pending", "pending_version", "pending_own_unseen", "in_flight",
                 "reply", "waiting", "finished", "version", "others")

    def __init__(self, n, others=0):
        self.view = np.zeros(n)
        self.pending = np.zeros(n)
        self.steps_pending = 0
        self.pending_version = 0
        self.pending_own_unseen = 0
        self.in_flight = False
        self.reply = None
        self.waiting = False
        self.finished = False
        self.version = 0
        self.others = np.zeros(others) if others else None    # global budget: the others' top |w|


class SimulatedClock:
    """The replay's time; call it to read it (``ObjectiveTrace(clock=clock)`` records simulated time)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def replay(workers, central, costs: Costs, clock: SimulatedClock, mode: str = "pipelined",
           max_batch: int = 16, threshold=None) -> ReplayReport:
    """Run ``workers`` against ``central`` in simulated time kept by ``clock``; ``central.monitor``
    (e.g. an ``ObjectiveTrace`` reading ``clock``) sees every applied push at its simulated time.
    With ``threshold`` (a ``GlobalThreshold``) the global budget runs as under MPI: a push carries
    the worker's retained weights, a reply the other workers' top ``|w|``."""
    if mode not in ("pipelined", "each-step"):
        raise ValueError(f"unknown mode {mode!r}")
    n = central.n
    limit = (max_batch if max_batch > 0 else float("inf")) if mode == "pipelined" else 0
    pipelined = mode == "pipelined"
    states = [_WorkerState(n, threshold.budget if threshold is not None else 0) for _ in workers]
    events = []          # (time, sequence, kind, worker, payload)
    seq = [0]

    def schedule(t, kind, w, payload=None):
        seq[0] += 1
        heapq.heappush(events, (t, seq[0], kind, w, payload))

    queue = []                      # pushes waiting at the central rank
    central_free_at = 0.0
    busy = 0.0
    clock.now = 0.0
    for w in range(len(workers)):
        schedule(0.0, "free", w)

    def start_service(t):
        nonlocal central_free_at, busy
        start = max(t, central_free_at)
        central_free_at = start + costs.central_service_s
        busy += costs.central_service_s
        schedule(central_free_at, "served", queue[0][0], None)

    while events:
        t, _, kind, w, payload = heapq.heappop(events)
        clock.now = t
        st = states[w]
        if kind == "arrive":                       # a push reaches the central rank
            queue.append((w, payload))
            if len(queue) == 1:
                start_service(t)
        elif kind == "served":                     # the central applies it and answers
            w_push, (delta, version, steps, own_unseen, weights) = queue.pop(0)
            central.apply(delta, version, steps, own_unseen)
            others = None
            if threshold is not None:
                threshold.update(w_push, weights, central.version)
                others = threshold.others_top(w_push)
            schedule(t + costs.transfer(n), "reply", w_push, (central.u.copy(), central.version, others))
            if queue:
                start_service(t)
        elif kind == "reply":
            st.reply = payload
            if st.waiting:
                st.waiting = False
                schedule(t, "free", w)
        elif kind == "free":                       # the worker finished what it was doing
            _worker_turn(t, w, workers[w], st, costs, n, limit, pipelined, schedule)
    return ReplayReport(clock.now, central.steps, central.accepted, busy, central.staleness_summary())


def _worker_turn(t, w, worker, st, costs, n, limit, pipelined, schedule):
    if st.in_flight and st.reply is not None:      # the reply is seen between steps
        u, version, others = st.reply
        st.reply = None
        st.view[:] = u
        st.view += st.pending
        st.version = version
        if others is not None:
            st.others = others
        st.in_flight = False
    if not st.in_flight and st.steps_pending:
        payload = (st.pending.copy(), st.pending_version, st.steps_pending, st.pending_own_unseen,
                   worker.state.weights if st.others is not None else None)
        st.pending[:] = 0.0
        st.steps_pending = 0
        st.in_flight = True
        t += costs.push_send_s
        schedule(t + costs.transfer(n), "arrive", w, payload)
    if st.in_flight and (st.finished or st.steps_pending >= limit):
        st.waiting = True                          # woken by the reply
        return
    if st.finished:
        return
    retained = worker.state.size
    push = (worker.propose(st.view, st.version, st.others) if st.others is not None
            else worker.propose(st.view, st.version))
    if push is None:
        st.finished = True
        schedule(t, "free", w)
        return
    worker.commit()
    st.view += push.delta
    st.pending += push.delta
    if st.steps_pending == 0:
        st.pending_version = st.version
        st.pending_own_unseen = 1 if st.in_flight else 0
    st.steps_pending += 1
    schedule(t + costs.step_time(retained, pipelined), "free", w)


def sequential_time(worker, central, costs: Costs, clock: SimulatedClock) -> float:
    """Sequential OS in simulated time: the loopback, each step costing ``step_time(m)`` without
    the protocol; ``central.monitor`` sees each step at its simulated time."""
    clock.now = 0.0
    while True:
        retained = worker.state.size
        push = worker.propose(central.u, central.version)
        if push is None:
            return clock.now
        clock.now += costs.step_time(retained, pipelined=False)
        central.apply(push.delta, push.version_read)
        worker.commit()
