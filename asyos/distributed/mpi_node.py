"""``--transport node-aggregated``: shared memory within each node, one message per node and round.

The ranks of a node (``Split_type(COMM_TYPE_SHARED)``) share a window (``mpi_shared.SharedState``
with ``aggregated``): every worker owns one row ``c_k`` of its node's changes, as on one node, and
steps at ``u_C = base + sum_k c_k``, where ``base`` is the part of ``u_C`` that is not this node's.
One worker per node, its *leader* (the lowest worker rank there), exchanges with the central rank
between its own steps, one push in flight at a time (``NodeLeader``):

* push: ``Delta = sum_k c_k - sent`` (the node's changes since its last push), ``sent += Delta``,
  with the node's steps and, under the global budget, its workers' ``|w|``;
* reply: ``u_C`` and the other nodes' top ``|w|``; the leader publishes ``base = u_C - sent`` for
  its node (double-buffered, ``SharedState.publish_base``).

So the central rank serves one push per node and round trip, and its load grows with the number of
nodes, not of workers. The last push of a node goes after every worker of the node has finished
(all rows final), so the central rank's final ``u_C`` is exact.

Staleness of a step: the steps of other workers it did not see, those of its node as on one node
(``mpi_shared``) plus those of other nodes that had reached this node's ``base`` when the step was
written but not when ``u_C`` was read. The lag of ``base`` itself shows at the central rank, which
records per node push how many pushes of other nodes came since that node's last pull
(``push_staleness`` in the results).

Watching: the leader beats in the window; the other workers of the node end the job when it stands
still for ``--watchdog-timeout`` seconds; the leader ends it when a worker of its node stops
proposing steps for as long, or when the central rank does not answer. The central rank counts
every worker of a node as alive while their leader pushes.
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import EXIT_WORKER_LOST
from ..learners.protocol.threshold import GlobalThreshold
from ..learners.protocol.links import NodeExchange
from ..learners.protocol.wire import TAG_PUSH, TAG_REPLY
from .mpi_messages import serve_pushes
from .mpi_shared import SHARED_POLL_S, BeatWatch, OthersTop, SharedState, shared_steps
from .transport import Backoff, Deadline, abort_job
from .watch import patience


def node_layout(comm):
    """``(node communicator, node index of every rank)``; nodes are numbered in the order of their
    lowest rank. Collective."""
    from mpi4py import MPI
    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    first = comm.allgather(node.allreduce(comm.Get_rank(), op=MPI.MIN))
    labels = {r: i for i, r in enumerate(sorted(set(first)))}
    return node, [labels[r] for r in first]


class NodeAggregatedTransport:
    """The node-aggregated transport (``driver.Transport``)."""

    name = "node-aggregated"
    refuses_stale_pushes = False        # the workers enforce the staleness bound step by step

    def __init__(self, comm, plan, config, n_samples, backoff):
        self.comm, self.plan, self.n = comm, plan, int(n_samples)
        self.backoff = backoff
        self.timeout = config.watchdog_timeout                      # a worker of the node silent
        self.patience = patience(config.watchdog_timeout, comm.Get_rank())   # the central rank or the leader
        self.max_staleness = config.max_staleness
        self.node, nodes = node_layout(comm)
        rank = comm.Get_rank()
        # the workers of every node (world ranks), nodes without a worker left out
        members = {}
        for r in range(1, comm.Get_size()):
            members.setdefault(nodes[r], []).append(r)
        self.groups = [members[k] for k in sorted(members)]
        self.my_group = members.get(nodes[rank], [])     # the workers sharing this rank's window
        # the largest node fixes the sizes of the messages' weight sections
        self.node_cap = max(len(g) for g in self.groups) * plan.cap
        q_window = max(1, len(self.my_group))
        self.state = SharedState(self.node, self.n, q_window, plan.cap, others=plan.others, aggregated=True)
        self._beat = None

    # -- worker side ------------------------------------------------------------------------
    def run_worker(self, worker, between=None, u0=None):
        """(Node aggregation is not checkpointed: ``between`` and ``u0`` stay ``None``.)"""
        if between is not None or u0 is not None:
            raise ValueError("the node-aggregated transport does not save or resume its state")
        rank = self.comm.Get_rank()
        index = self.my_group.index(rank)
        state = self.state
        threshold = OthersTop(state, self.plan.threshold_rank) if self.plan.keeps_threshold else None
        if index == 0:
            leader = NodeLeader(self.comm, state, self.my_group, self.plan, self.node_cap, self.timeout,
                                self.patience)
            compute_s, histogram = shared_steps(state, index, worker, self.max_staleness, threshold=threshold,
                                                between=leader.between_steps)
            leader.drain()
            return compute_s, histogram
        self._beat = BeatWatch(state.beat, self.patience)
        compute_s, histogram = shared_steps(state, index, worker, self.max_staleness, threshold=threshold,
                                            central=self._beat)
        return compute_s, histogram

    def central_alive(self) -> bool:
        return self._beat is not None and self._beat.alive()

    # -- central side -----------------------------------------------------------------------
    def run_central(self, central, watch, trace=None):
        """Serve the leaders' pushes until every worker has sent its final selection; then the
        exact final state (every node's last push is in). Returns the time spent serving and
        (global budget) the final threshold."""
        groups = self.groups
        watch.watched = [g[0] - 1 for g in groups]     # a leader speaks for its node; it watches the others
        threshold = (GlobalThreshold(self.plan.threshold_rank, len(groups), self.node_cap)
                     if self.plan.keeps_threshold else None)
        busy_s = serve_pushes(self.comm, central, watch, self.backoff, groups, [self.node_cap] * len(groups),
                              self.plan.others, threshold)
        histograms = [np.asarray(f["staleness_histogram"], dtype=np.int64) for f in watch.finals]
        merged = np.zeros(max(h.size for h in histograms), dtype=np.int64)
        for h in histograms:
            merged[:h.size] += h
        central.use_histogram(merged, refused=sum(f["refused"] for f in watch.finals))
        theta = None if threshold is None else {"value": threshold.value, "age": threshold.age}
        return busy_s, theta

    def close(self):
        self.state.free()
        self.node.Free()


class NodeLeader:
    """A node's exchange with the central rank (``links.NodeExchange`` over MPI), run between the
    leader's own steps (``between_steps``) and, once its passes are done, until every worker of the
    node has finished and the node's last push is answered (``drain``). It also watches the node's
    other workers (their ``proposals`` counters) and beats for them."""

    def __init__(self, comm, state, group, plan, node_cap, timeout, patience):
        self.comm, self.state, self.group, self.timeout, self.patience = comm, state, group, timeout, patience
        self.link = NodeExchange(state.n, node_cap, plan.others)
        self.total = np.zeros(state.n)
        self.global_budget = plan.keeps_threshold
        self.send = self.recv = None
        self.beat = memoryview(state.beat)
        self.proposals = state.proposals.copy()
        self.last_seen = [time.monotonic()] * state.q
        self.waiting_since = None

    def between_steps(self) -> bool:
        """Take a reply if one has come, push the node's new changes if none is in flight.
        Returns whether anything moved."""
        self.beat[0] += 1
        self._watch_node()
        if self.send is not None:
            if not self.recv.Test():
                if time.monotonic() - self.waiting_since > self.patience:
                    raise Deadline(f"no reply to the node's push within {self.patience:g} s")
                return False
            self.send.Wait()
            self.send = self.recv = None
            self.state.publish_base(*self.link.take_reply())
        state = self.state
        steps = state.total_steps()
        weights = None
        if self.global_budget:
            weights = state.weights[:state.q].ravel()
            weights = weights[weights > 0]
        message = self.link.outgoing(state.sum_rows(self.total), steps, state.total_writes(), weights)
        if message is None:
            return False
        self.recv = self.comm.Irecv(self.link.reply, source=0, tag=TAG_REPLY)
        self.send = self.comm.Isend(message, dest=0, tag=TAG_PUSH)
        self.waiting_since = time.monotonic()
        return True

    def _watch_node(self):
        """A worker of this node that stopped proposing steps for ``timeout`` seconds (and has
        not finished) ends the job."""
        now = time.monotonic()
        beats, finished = self.state.proposals, self.state.finished
        for i in range(1, self.state.q):
            if beats[i] != self.proposals[i]:
                self.proposals[i] = beats[i]
                self.last_seen[i] = now
            elif not finished[i] and now - self.last_seen[i] > self.timeout:
                abort_job(self.comm, EXIT_WORKER_LOST,
                          f"asyos: worker rank(s) [{self.group[i]}] proposed no step for more than {self.timeout:g} s "
                          f"(hung, or exited without finishing); aborting the job")

    def drain(self):
        """After the leader's own passes: exchange until the node's workers are all done and its
        last push is answered."""
        backoff = Backoff(max_sleep=SHARED_POLL_S)
        state = self.state
        while True:
            if self.between_steps():
                backoff.reset()
            elif self.send is None and state.finished.all() and self.link.all_sent(state.total_writes()):
                return
            else:
                backoff.pause()
