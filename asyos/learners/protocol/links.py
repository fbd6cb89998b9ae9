"""The worker side of Asy-OS, one object per way of reaching ``u_C`` (KDD'16 Alg. 3).

A link holds what a worker knows of the central state and what it has sent, and turns the
scheduler's inputs (a reply arrived, ``u_C`` was read) into the worker's next output (a push
message, a verdict). It does no I/O and never loops: schedulers (``loopback``, ``simulator``,
``replay``, ``asyos.distributed.mpi_*``) move the bytes and decide when each call happens.

* ``EachStep``: step at the last reply, push, wait for the verdict (Alg. 3 literally; the only
  mode that can refuse a stale push and redo it);
* ``Pipelined``: one push in flight; steps taken meanwhile are committed at the worker's *view*
  (the last reply plus its own steps the reply did not include) and summed into the next push;
* ``SharedReads``: ``u_C`` is read from memory before every step and the worker writes its own
  change (``asyos.distributed.mpi_shared``); staleness is counted from the other workers' step
  counters;
* ``NodeExchange``: a node leader's exchange with the central rank under node aggregation.
"""
from __future__ import annotations

import numpy as np

from .wire import (PUSH_OWN_UNSEEN, PUSH_STEPS, PUSH_VERSION, REPLY_STATUS, REPLY_STEPS, REPLY_VERSION,
                   STATUS_ACCEPTED, others_section, push_buffer, reply_buffer, write_weights)


class EachStep:
    """Push every step and wait for the verdict. ``reply``: the buffer the answers arrive in (by
    default one of its own; the loopback passes the central node's ``u_ext``, so nothing is
    copied)."""

    mode = "each-step"

    def __init__(self, worker, others: int = 0, reply=None):
        n = worker.n
        self.worker = worker
        self.reply = reply_buffer(n, others) if reply is None else reply
        self.u = self.reply[:n]
        self.others_top = others_section(self.reply, n) if others else None
        self.version = 0

    def step(self):
        """The next push message, or ``None`` when the worker's passes are done."""
        worker = self.worker
        push = worker.propose(self.u, self.version, self.others_top)
        if push is None:
            return None
        if self.others_top is not None:
            worker.write_push_weights()
        return push.buffer

    def settle(self, accepted=None) -> bool:
        """The answer is in ``reply``: commit the step or, if refused, discard it (the same
        feature is offered again from the fresh state). ``accepted`` overrides the reply's
        status (the loopback's central node answers in place)."""
        n = self.worker.n
        self.version = int(self.reply[n + REPLY_VERSION])
        if accepted is None:
            accepted = self.reply[n + REPLY_STATUS] == STATUS_ACCEPTED
        if accepted:
            self.worker.commit()
        else:
            self.worker.discard()
        return bool(accepted)


class Pipelined:
    """One push in flight, the steps taken meanwhile summed into the next.

    Each step is taken at the worker's *view*: the last ``u_C`` received plus this worker's own
    changes not yet in it (its own information is always current; the other workers' is as old as
    the last reply). When the central node answers quickly every push carries one step, exactly as
    in Alg. 3; when it lags, pushes carry more steps, so its load stays bounded by the number of
    workers over the round-trip time. A push's ``version_read`` is the version of the snapshot its
    first step was taken at, so its measured staleness includes the time it waited;
    ``own_unseen`` (1 when a push of this worker was in flight then) keeps the worker's own push
    out of that count.

    ``max_batch`` (> 0) bounds how far a worker runs ahead: after that many steps with its push
    still in flight it must wait for the reply (``must_wait``). Without a bound, 12 workers on 2
    cores left the central rank so little CPU that pushes summed ~60 steps and recall fell from
    0.67 to 0.42; a bound of 16 kept each-step recall at several times each-step speed. Under the
    global budget a push carries the weights the worker holds when it is sent.
    """

    mode = "pipelined"

    def __init__(self, worker, others: int = 0, max_batch: int = 16):
        n = worker.n
        self.worker = worker
        self.n = n
        self.reply = reply_buffer(n, others)
        self.others_top = others_section(self.reply, n).copy() if others else None   # as of the last reply
        self.view = np.zeros(n)
        self.version = 0
        self.pending = push_buffer(n, worker.state.budget)        # steps not yet pushed
        self.sending = push_buffer(n, worker.state.budget)        # the push in flight
        self.steps_pending = 0
        self.in_flight = False
        self.finished = False
        self.limit = max_batch if max_batch > 0 else float("inf")

    @property
    def must_wait(self) -> bool:
        """A push is in flight and the worker may not step again before its reply."""
        return self.in_flight and (self.finished or self.steps_pending >= self.limit)

    @property
    def done(self) -> bool:
        return self.finished and not self.in_flight and not self.steps_pending

    def take_reply(self) -> None:
        """The reply to the push in flight is in ``reply``."""
        n = self.n
        np.copyto(self.view, self.reply[:n])
        self.view += self.pending[:n]                      # own steps it has not seen yet
        self.version = int(self.reply[n + REPLY_VERSION])
        if self.others_top is not None:
            self.others_top[:] = others_section(self.reply, n)
        self.in_flight = False

    def outgoing(self):
        """The next push message if one may go now (nothing in flight, steps pending), else
        ``None``; the buffer stays untouched until its reply is taken."""
        if self.in_flight or not self.steps_pending:
            return None
        n = self.n
        self.pending, self.sending = self.sending, self.pending
        self.sending[n + PUSH_STEPS] = self.steps_pending
        if self.others_top is not None:
            write_weights(self.sending, n, self.worker.state.weights)
        self.pending[:n] = 0.0
        self.steps_pending = 0
        self.in_flight = True
        return self.sending

    def step(self) -> bool:
        """One step at the view, committed at once; False when the passes are done."""
        if self.finished:
            return False
        worker = self.worker
        push = worker.propose(self.view, self.version, self.others_top)
        if push is None:
            self.finished = True
            return False
        worker.commit()
        n = self.n
        self.view += push.delta
        self.pending[:n] += push.delta
        if self.steps_pending == 0:
            self.pending[n + PUSH_VERSION] = self.version
            self.pending[n + PUSH_OWN_UNSEEN] = 1 if self.in_flight else 0
        self.steps_pending += 1
        return True


class SharedReads:
    """Read ``u_C`` before every step, write the change after it (``mpi_shared``).

    The scheduler reads ``u_C`` into ``view`` (and, under the global budget, the others' top
    ``|w|`` into ``others_top``) after noting ``seen``, how many steps of the other workers had
    finished; ``step(seen)`` proposes there. Before writing, the scheduler counts ``started``, the
    other workers' steps whose write had begun; ``settle(started)`` measures the staleness
    ``started - seen`` (a write caught half-way by the read counts as unseen) and commits the step,
    or with ``max_staleness`` exceeded discards it (the scheduler reads again and redoes it).
    """

    mode = "shared-memory"

    def __init__(self, worker, max_staleness=None, others: int = 0):
        self.worker = worker
        self.view = np.empty(worker.n)
        self.others_top = np.empty(others) if others else None
        self.max_staleness = max_staleness
        self.histogram = [0] * 16
        self.refused = 0
        self.own = 0                   # committed steps
        self._seen = 0

    def step(self, seen: int):
        """The step at ``view`` (read after ``seen`` of the others' steps had finished): its push,
        or ``None`` when the passes are done."""
        self._seen = int(seen)
        return self.worker.propose(self.view, self._seen, self.others_top)

    def settle(self, started: int) -> bool:
        """Commit (True: the scheduler writes the push's ``delta``) or refuse the step."""
        staleness = int(started) - self._seen
        if self.max_staleness is not None and staleness > self.max_staleness:
            self.worker.discard()
            self.refused += 1
            return False
        self.worker.commit()
        self.own += 1
        count_staleness(self.histogram, staleness)
        return True


def count_staleness(histogram: list, staleness: int, steps: int = 1) -> None:
    """Add ``steps`` steps read ``staleness`` versions behind to ``histogram`` (grown as needed)."""
    if staleness >= len(histogram):
        histogram.extend([0] * (staleness + 1 - len(histogram)))
    histogram[staleness] += steps


class NodeExchange:
    """A node leader's side of the node-aggregated transport (``asyos.distributed.mpi_node``): the
    node's workers write their changes into shared rows as on one node; the leader sends their sum
    since its last push, one push in flight, and turns each reply into ``base``, the part of
    ``u_C`` that is not this node's (``u_C - sent``), which the node's workers add to their rows.

    ``outgoing(total, steps, writes, weights)``: the push message if one may go (nothing in flight
    and writes not yet sent), from ``total``, the sum of the node's rows, which holds ``steps`` steps
    in ``writes`` writes; ``take_reply()``: the reply is in ``reply``; returns ``(base, remote steps
    in it, the other nodes' top |w| or None)``; ``all_sent(writes)``: nothing in flight and nothing
    left to send.

    Writes, not steps, say whether there is something to send: a worker on the compiled batches
    (``mpi_shared.shared_batches``) that drops features below the global threshold after its last
    step writes their change with no step, and a node that pushed only new steps left it out of
    ``u_C`` (8 workers on 4 nodes: ``u_C`` 0.28 away from the workers' model at the end, 16 on 8
    nodes: 0.82).
    """

    def __init__(self, n: int, node_cap: int = 0, others: int = 0):
        self.n = int(n)
        self.sent = np.zeros(self.n)
        self.sent_steps = 0
        self.sent_writes = 0                # every step is in a write, and a write may hold none
        self.push = push_buffer(self.n, node_cap)
        self.reply = reply_buffer(self.n, others)
        self.base = np.zeros(self.n)
        self.others = int(others)
        self.version = 0
        self.in_flight = False

    def outgoing(self, total, steps: int, writes: int, weights=None):
        if self.in_flight or writes <= self.sent_writes:
            return None
        n = self.n
        np.subtract(total, self.sent, out=self.push[:n])
        np.copyto(self.sent, total)
        self.push[n + PUSH_VERSION] = self.version
        self.push[n + PUSH_STEPS] = steps - self.sent_steps
        self.push[n + PUSH_OWN_UNSEEN] = 0
        self.sent_steps, self.sent_writes = int(steps), int(writes)
        if weights is not None:
            write_weights(self.push, n, weights)
        self.in_flight = True
        return self.push

    def all_sent(self, writes: int) -> bool:
        return not self.in_flight and writes == self.sent_writes

    def take_reply(self):
        n = self.n
        self.version = int(self.reply[n + REPLY_VERSION])
        np.subtract(self.reply[:n], self.sent, out=self.base)
        remote_steps = int(self.reply[n + REPLY_STEPS]) - self.sent_steps      # the other nodes' steps in u_C
        self.in_flight = False
        return self.base, remote_steps, (others_section(self.reply, n) if self.others else None)
