"""The staleness simulator: Asy-OS with ``q`` virtual workers in one process.

It drives the same ``Worker`` and ``Central`` objects as the MPI engine. At each event one worker
(chosen by the *schedule*) reads a snapshot of ``u_C`` that is at most ``max_staleness`` versions
old (chosen by the *policy*), takes its step, and the central node applies the push at once.
Everything is deterministic given ``seed``.

Causality is kept as on a real machine: a worker always sees its own previous push (the central
node answers a push with the state that includes it), so a worker's read is never older than the
version its own last push created. The staleness of a push is ``version at apply - version read``,
the same definition the MPI engine measures.

Policies (which version ``r`` in ``[lo, V]`` is read, ``lo = max(V - tau, own floor)``):

* ``max``: ``r = lo``, the stalest read allowed; with ``tau = q`` this is the KDD'16 Sec. 5.3
  simulation ("each worker uses the information from other workers #Workers iterations ago");
* ``uniform``: ``r`` uniform in ``[lo, V]``;
* ``fresh``: ``r = V`` (no staleness).

Schedules: ``round-robin`` over the workers that still have features, or ``random`` (uniform).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import InputError
from .wire import PUSH_STEPS

POLICIES = ("max", "uniform", "fresh")
SCHEDULES = ("round-robin", "random")


@dataclass
class SimulationReport:
    steps: int = 0
    staleness: dict = field(default_factory=dict)
    refused: int = 0
    max_staleness: int = 0
    policy: str = "max"
    schedule: str = "round-robin"


class _SnapshotHistory:
    """The last ``depth`` versions of ``u_C`` in a ring buffer (version ``v`` at row ``v % depth``)."""

    def __init__(self, u0: np.ndarray, depth: int):
        self.depth = depth
        self.rows = np.zeros((depth, u0.shape[0])) if depth > 1 else None

    def record(self, version: int, u: np.ndarray):
        if self.rows is not None:
            self.rows[version % self.depth] = u

    def read(self, version: int, current_version: int, u: np.ndarray) -> np.ndarray:
        if version == current_version or self.rows is None:
            return u
        return self.rows[version % self.depth]


def check_simulation_args(max_staleness, policy, schedule):
    if max_staleness is None or int(max_staleness) < 0:
        raise InputError(f"--max-staleness must be an integer >= 0 for the simulator; got {max_staleness}")
    if policy not in POLICIES:
        raise InputError(f"unknown staleness policy {policy!r}; choose one of: {', '.join(POLICIES)}")
    if schedule not in SCHEDULES:
        raise InputError(f"unknown schedule {schedule!r}; choose one of: {', '.join(SCHEDULES)}")


def simulate(workers, central, max_staleness: int, policy: str = "max", schedule: str = "round-robin",
             seed=0, threshold=None, between=None, resume=None) -> SimulationReport:
    """Run every worker to the end of its passes under bounded staleness; returns the report.

    With ``threshold`` (a ``GlobalThreshold``: the global budget), a worker reads the other
    workers' reported ``|w|`` as of the same version as ``u_C`` (they come with the pull, so they
    are exactly as stale) and the central node records the worker's retained weights after every
    push. ``between(simulation)``, when given, is called before every event and once at the end,
    where the ``Simulation`` (workers, central node, generator, snapshots) is consistent: a copy
    of it taken there (``asyos.records.checkpoint``) continues, as ``resume``, exactly as the run would
    have."""
    check_simulation_args(max_staleness, policy, schedule)
    sim = resume if resume is not None else Simulation(workers, central, int(max_staleness), policy, schedule,
                                                       seed, threshold)
    with np.errstate(over="ignore", invalid="ignore"):   # divergence is reported by the kernel
        sim.run(between)
    return SimulationReport(steps=sim.steps, staleness=sim.central.staleness_summary(), refused=sim.central.refused,
                            max_staleness=sim.tau, policy=policy, schedule=schedule)


class WorkerSchedule:
    """Which worker steps next: ``round-robin`` over the workers still active, or ``random``
    (uniform among them); ``retire(slot)`` removes a worker that has finished."""

    def __init__(self, active, schedule, rng):
        self.active, self.schedule, self.rng, self.turn = list(active), schedule, rng, 0

    def __bool__(self):
        return bool(self.active)

    def next(self):
        """``(slot, worker)``."""
        if self.schedule == "round-robin":
            slot = self.turn % len(self.active)
            self.turn += 1
        else:
            slot = int(self.rng.integers(len(self.active)))
        return slot, self.active[slot]

    def retire(self, slot):
        self.active.pop(slot)
        if self.schedule == "round-robin":
            self.turn = slot


def choose_version(policy, rng, current, tau, floor):
    """The version a worker reads: in ``[max(current - tau, floor), current]`` as ``policy`` says."""
    lo = max(current - tau, floor)
    if policy == "max":
        return lo
    if policy == "uniform":
        return int(rng.integers(lo, current + 1))
    return current


class Simulation:
    """The simulator's whole state: the workers and the central node, the generator, the
    snapshots of ``u_C`` (and of the reported ``|w|``) within the bound, each worker's floor (the
    version its own last push created) and the schedule."""

    def __init__(self, workers, central, tau, policy, schedule, seed, threshold=None):
        self.workers, self.central, self.tau, self.policy, self.threshold = workers, central, tau, policy, threshold
        self.rng = np.random.default_rng(seed)
        self.history = _SnapshotHistory(central.u, tau + 1)
        self.history.record(central.version, central.u)
        self.floors = [central.version] * len(workers)
        self.order = WorkerSchedule([i for i, w in enumerate(workers) if not w.done], schedule, self.rng)
        if threshold is not None:            # the reported |w| by version, like the snapshots of u_C
            self.pools = np.zeros((tau + 1,) + threshold.pool.shape)
            self.others = np.empty(threshold.budget)
        self.steps = 0

    def run(self, between=None):
        workers, central, tau, policy, threshold = self.workers, self.central, self.tau, self.policy, self.threshold
        rng, history, floors, order = self.rng, self.history, self.floors, self.order
        while order:
            if between is not None:
                between(self)
            slot, i = order.next()
            V = central.version
            r = choose_version(policy, rng, V, tau, floors[i])
            u = history.read(r, V, central.u)
            if threshold is None:
                push = workers[i].propose(u, r)
            else:
                pool = threshold.pool if r == V else self.pools[r % (tau + 1)]
                push = workers[i].propose(u, r, threshold.others_top(i, out=self.others, pool=pool))
            if push is None:
                order.retire(slot)
                continue
            if not central.apply(push.delta, r, steps=int(push.buffer[central.n + PUSH_STEPS])):
                raise AssertionError("simulator produced a push beyond the staleness bound")
            workers[i].commit()
            floors[i] = central.version
            history.record(central.version, central.u)
            if threshold is not None:
                threshold.update(i, workers[i].state.weights, central.version)
                self.pools[central.version % (tau + 1)] = threshold.pool
            self.steps += 1
        if between is not None:
            between(self)

    def progress(self) -> dict:
        mine = [w.progress() for w in self.workers]
        totals = [m["_total"] for m in mine]
        return {"steps": self.steps, "pass": max(w._pass for w in self.workers) + 1,
                "_done": sum(m["_done"] for m in mine), "_total": None if None in totals else sum(totals),
                "_unit": "feature visits"}
