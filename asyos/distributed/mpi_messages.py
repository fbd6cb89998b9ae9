"""``--transport messages``: the workers push ``Delta u`` to the central rank (any number of nodes).

Message protocol (buffer messages, no pickling on the hot path; ``asyos.learners.protocol.wire`` has the
layout):

* a worker sends ``[delta_u | version_read | steps | own_unseen | |w| ...]`` (``TAG_PUSH``) with
  the receive of the reply already posted;
* the central rank serves every push that has arrived (persistent receives polled with
  ``Testsome``, which is fair across workers; ``Central.serve``): it refuses a push older than
  ``--max-staleness`` versions, otherwise adds it into ``u_C``, and answers
  ``[u_C | version | status | others' top |w|]``: the pull rides on the push reply.

Push modes (``--push-mode``): ``each-step`` (``links.EachStep``: push, wait for the verdict, the
only mode that can refuse and redo a stale step) and ``pipelined`` (``links.Pipelined``: one push
in flight, steps summed meanwhile). A worker waits at most ``--watchdog-timeout`` seconds for a
reply: longer means the central rank froze or left, and the job ends.
"""
from __future__ import annotations

import time

from ..learners.protocol.links import EachStep, Pipelined
from ..learners.protocol.wire import TAG_PUSH, TAG_REPLY, push_buffer, reply_buffer
from .transport import wait_all
from .watch import patience


class MessagesTransport:
    """The messages transport (``driver.Transport``)."""

    name = "messages"
    refuses_stale_pushes = True        # the central rank refuses pushes staler than the bound

    def __init__(self, comm, plan, config, n_samples, backoff):
        self.comm, self.plan, self.n = comm, plan, int(n_samples)
        self.push_mode = config.resolved_push_mode
        self.max_batch = config.max_batch
        self.timeout = patience(config.watchdog_timeout, comm.Get_rank())      # waiting for a reply
        self.backoff = backoff

    # -- worker side ------------------------------------------------------------------------
    def run_worker(self, worker, between=None, u0=None):
        """Run ``worker`` to the end of its passes; returns ``(compute seconds, None)``.
        ``between()``: called where no push is in flight (checkpoints); ``u0``: ``u_C`` to start
        from (a resumed run)."""
        if self.push_mode == "pipelined":
            link = Pipelined(worker, self.plan.others, self.max_batch)
            if u0 is not None:
                link.view[:] = u0
            return self._pipelined(link, between), None
        link = EachStep(worker, self.plan.others)
        if u0 is not None:
            link.u[:] = u0
        return self._each_step(link, between), None

    def _each_step(self, link, between=None) -> float:
        comm, backoff, timeout = self.comm, self.backoff, self.timeout
        compute_s = 0.0
        while True:
            if between is not None:
                between()
            t0 = time.perf_counter()
            message = link.step()
            compute_s += time.perf_counter() - t0
            if message is None:
                return compute_s
            recv = comm.Irecv(link.reply, source=0, tag=TAG_REPLY)
            send = comm.Isend(message, dest=0, tag=TAG_PUSH)
            wait_all([send, recv], backoff, timeout)
            link.settle()

    def _pipelined(self, link, between=None) -> float:
        comm, backoff, timeout = self.comm, self.backoff, self.timeout
        send = recv = None
        compute_s = 0.0
        while not link.done:
            if send is not None and (link.must_wait or recv.Test()):
                if link.must_wait:
                    wait_all([recv], backoff, timeout)
                send.Wait()                                   # the central has it: it answered
                link.take_reply()
                send = recv = None
            if send is None and between is not None:
                between()
            message = link.outgoing()
            if message is not None:
                recv = comm.Irecv(link.reply, source=0, tag=TAG_REPLY)
                send = comm.Isend(message, dest=0, tag=TAG_PUSH)
            if link.finished:
                continue
            t0 = time.perf_counter()
            link.step()
            compute_s += time.perf_counter() - t0
        return compute_s

    # -- central side -----------------------------------------------------------------------
    def run_central(self, central, watch, trace=None):
        """Serve pushes until every worker has sent its final selection. Returns the time spent
        serving pushes and (global budget) the final threshold over all reported weights and the
        age of the others' weights sent with the replies (``mean`` over replies, ``max``; in
        versions of ``u_C``)."""
        q, plan = self.plan.n_workers, self.plan
        threshold = plan.new_threshold()
        busy_s = serve_pushes(self.comm, central, watch, self.backoff, [[w] for w in range(1, q + 1)],
                              plan.budgets, plan.others, threshold)
        theta = None if threshold is None else {"value": threshold.value, "age": threshold.age}
        return busy_s, theta

    def close(self):
        pass



def serve_pushes(comm, central, watch, backoff, groups, push_capacity, others, threshold) -> float:
    """The central rank's loop: serve every push that has arrived (``Central.serve``) until
    ``watch`` has every final selection. ``groups[k]``: the worker ranks whose pushes come from
    rank ``groups[k][0]`` (one worker each under messages; a node under node-aggregated: a push
    from its leader is a sign of life of every worker there); ``push_capacity[k]``: how many
    ``|w|`` its pushes hold. Returns the time spent serving pushes."""
    from mpi4py import MPI

    n, k_sources = central.n, len(groups)
    push_bufs = [push_buffer(n, push_capacity[k]) for k in range(k_sources)]
    reply_bufs = [reply_buffer(n, others) for _ in range(k_sources)]
    receives = [comm.Recv_init(push_bufs[k], source=groups[k][0], tag=TAG_PUSH) for k in range(k_sources)]
    MPI.Prequest.Startall(receives)
    replies = [None] * k_sources
    busy_s = 0.0                        # time spent serving pushes: the central rank's capacity
    while watch.running:
        progressed = False
        t_poll = time.perf_counter()
        ready = MPI.Request.Testsome(receives)
        if ready:
            now = time.monotonic()
            for k in ready:
                if replies[k] is not None:
                    replies[k].Wait()           # the sender got it before pushing again
                central.serve(k, push_bufs[k], reply_bufs[k], threshold)
                replies[k] = comm.Isend(reply_bufs[k], dest=groups[k][0], tag=TAG_REPLY)
                receives[k].Start()
                for rank in groups[k]:
                    watch.seen(rank - 1, now)
            progressed = True
            busy_s += time.perf_counter() - t_poll
        # pushes are matched at once by the persistent receives (a sender has at most one in
        # flight), so whatever a probe finds is an error report or a worker's final selection
        progressed |= watch.take_report()
        watch.check(lambda: f"{central.accepted} pushes applied",
                    lambda: {"pushes": central.accepted, "_done": central.steps, "_unit": "steps",
                             "_objective": watch.objective(central.u) if watch.objective else None})
        if progressed:
            backoff.reset()
            continue
        backoff.pause()
    for request in receives:
        request.Cancel()
        request.Wait()
        request.Free()
    MPI.Request.Waitall([r for r in replies if r is not None])
    return busy_s
