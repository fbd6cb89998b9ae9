"""Discrete-event replay of Asy-OS on dedicated cores: what the MPI engine would do on a machine
with a core per rank, from costs measured on this one.

The replay runs the real ``Worker`` and ``Central`` objects, so the learning (which feature enters,
when the training error crosses a threshold) is the same arithmetic as under MPI; only time is
simulated. Each worker owns a core: a step takes ``Costs.step_time(m)`` at its current retained
size ``m``; a push or a reply takes ``Costs.transfer(n)``; the central rank serves pushes one at a
time in arrival order, each taking ``Costs.central_service_s``. The worker protocol is the MPI
engine's (``asyos.protocol.links``):

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

from .links import EachStep, Pipelined
from .wire import reply_buffer


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
    others = threshold.budget if threshold is not None else 0
    links = [Pipelined(w, others, max_batch) if mode == "pipelined" else EachStep(w, others) for w in workers]
    waiting = [False] * len(workers)        # blocked until its reply arrives
    arrived = [False] * len(workers)        # a reply is there, not yet taken
    events = []                             # (time, sequence, kind, worker, payload)
    sequence = itertools.count()

    def schedule(t, kind, w, payload=None):
        heapq.heappush(events, (t, next(sequence), kind, w, payload))

    queue = []                              # pushes waiting at the central rank
    central_free_at = 0.0
    busy = 0.0
    clock.now = 0.0
    reply = reply_buffer(n, others)

    def start_service(t):
        nonlocal central_free_at, busy
        start = max(t, central_free_at)
        central_free_at = start + costs.central_service_s
        busy += costs.central_service_s
        schedule(central_free_at, "served", queue[0][0])

    def send(t, w, message):
        schedule(t + costs.push_send_s + costs.transfer(n), "arrive", w, message.copy())

    for w in range(len(workers)):
        schedule(0.0, "free", w)
    while events:
        t, _, kind, w, payload = heapq.heappop(events)
        clock.now = t
        link = links[w]
        if kind == "arrive":                       # a push reaches the central rank
            queue.append((w, payload))
            if len(queue) == 1:
                start_service(t)
        elif kind == "served":                     # the central applies it and answers
            w_push, message = queue.pop(0)
            central.serve(w_push, message, reply, threshold)
            schedule(t + costs.transfer(n), "reply", w_push, reply.copy())
            if queue:
                start_service(t)
        elif kind == "reply":
            links[w].reply[:] = payload
            arrived[w] = True
            if waiting[w]:
                waiting[w] = False
                schedule(t, "free", w)
        elif mode == "pipelined":                  # "free": the worker finished what it was doing
            _pipelined_turn(t, w, link, costs, arrived, waiting, schedule, send)
        else:
            _each_step_turn(t, w, link, costs, arrived, waiting, schedule, send)
    return ReplayReport(clock.now, central.steps, central.accepted, busy, central.staleness_summary())


def _pipelined_turn(t, w, link, costs, arrived, waiting, schedule, send):
    if link.in_flight and arrived[w]:              # the reply is seen between steps
        arrived[w] = False
        link.take_reply()
    message = link.outgoing()
    if message is not None:
        send(t, w, message)
        t += costs.push_send_s
    if link.must_wait:
        waiting[w] = True                          # woken by the reply
        return
    if link.finished:
        return
    retained = link.worker.state.size
    if link.step():
        schedule(t + costs.step_time(retained, pipelined=True), "free", w)
    else:
        schedule(t, "free", w)                     # the last push still goes


def _each_step_turn(t, w, link, costs, arrived, waiting, schedule, send):
    if arrived[w]:
        arrived[w] = False
        link.settle()
    retained = link.worker.state.size
    message = link.step()
    if message is None:
        return
    t += costs.step_time(retained, pipelined=False)
    send(t, w, message)
    waiting[w] = True


def sequential_time(worker, central, costs: Costs, clock: SimulatedClock) -> float:
    """Sequential OS in simulated time: the loopback, each step costing ``step_time(m)`` without
    the protocol; ``central.monitor`` sees each step at its simulated time."""
    clock.now = 0.0
    link = EachStep(worker, reply=central.u_ext)
    while True:
        retained = worker.state.size
        if link.step() is None:
            return clock.now
        clock.now += costs.step_time(retained, pipelined=False)
        link.settle(central.apply(worker.delta, link.version))
