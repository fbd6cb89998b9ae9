"""The central side of Asy-OS (KDD'16 Alg. 2) as a plain object with no I/O.

``Central.apply`` adds a push into ``u_C`` unless it is staler than ``max_staleness``;
``Central.serve`` does that for a push message and writes the reply message (the pull riding on
the push reply), with the global budget's bookkeeping. Every scheduler that moves pushes (the MPI
messages and node-aggregated transports, the replay, the event simulator) calls ``serve``.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .wire import (PUSH_OWN_UNSEEN, PUSH_STEPS, PUSH_VERSION, REPLY_HEADER, REPLY_STATUS, REPLY_STEPS, REPLY_VERSION,
                   STATUS_ACCEPTED, STATUS_REFUSED, others_section, read_weights)


class Central:
    """The central node (KDD'16 Alg. 2): ``u_C += delta`` for every accepted push.

    ``u_ext`` is the reply message ``[u_C | version | status]``. With ``max_staleness`` set, a
    push read more than that many versions ago is refused (counted, not applied). Every accepted
    push's staleness goes into a histogram.
    """

    def __init__(self, n_samples: int, max_staleness: Optional[int] = None, monitor=None):
        self.n = int(n_samples)
        self.u_ext = np.zeros(self.n + REPLY_HEADER)
        self.u = self.u_ext[:self.n]
        self.version = 0
        self.steps = 0                  # worker steps applied (a push may sum several)
        self.max_staleness = max_staleness
        self.refused = 0
        self.accepted = 0
        self._hist = [0] * 16
        self.monitor = monitor
        self.push_staleness = None

    def __getstate__(self):
        """``u`` is a view of the reply buffer ``u_ext``, which pickling would cut: rebuilt on load."""
        return {k: v for k, v in self.__dict__.items() if k != "u"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.u = self.u_ext[:self.n]

    def apply(self, delta: np.ndarray, version_read: int, steps: int = 1, own_unseen: int = 0) -> bool:
        """Add a push (``steps`` worker steps summed) unless it is too stale; True if applied.

        Staleness counts the updates of *other* workers that the push's steps did not see:
        ``version - version_read``, less the worker's own pushes that were in flight when it
        stepped (its view held them; see ``links.Pipelined``)."""
        staleness = self.version - int(version_read) - int(own_unseen)
        if staleness < 0:
            raise ValueError(f"push read version {version_read} but the central is at {self.version}")
        if self.max_staleness is not None and staleness > self.max_staleness:
            self.refused += 1
            return False
        self.u += delta
        self.version += 1
        self.accepted += 1
        self.steps += steps
        self.u_ext[self.n + REPLY_VERSION] = self.version
        self.u_ext[self.n + REPLY_STEPS] = self.steps
        hist = self._hist
        if staleness >= len(hist):
            hist.extend([0] * (staleness + 1 - len(hist)))
        hist[staleness] += 1
        if self.monitor is not None:
            self.monitor(self)
        return True

    def applied_in_place(self, count: int) -> None:
        """Count ``count`` one-step pushes that were added to ``u`` in place, each read at the version
        before it (staleness 0), as ``apply`` counts its own: the loopback's compiled visits
        (``Worker.visit_batch``) apply their steps themselves. The monitor is called once for them."""
        if count <= 0:
            return
        self.version += count
        self.accepted += count
        self.steps += count
        self.u_ext[self.n + REPLY_VERSION] = self.version
        self.u_ext[self.n + REPLY_STEPS] = self.steps
        self._hist[0] += count
        if self.monitor is not None:
            self.monitor(self)

    def serve(self, worker: int, push: np.ndarray, reply: np.ndarray, threshold=None) -> bool:
        """Take the push message ``push`` of worker ``worker`` (``wire.push_buffer``) and write the
        answer into ``reply`` (``wire.reply_buffer``): ``u_C``, its version, whether the push was
        applied and, with ``threshold`` (the global budget), the other workers' top ``|w|`` after
        recording this worker's. Returns whether it was applied."""
        n = self.n
        accepted = self.apply(push[:n], int(push[n + PUSH_VERSION]), int(push[n + PUSH_STEPS]),
                              int(push[n + PUSH_OWN_UNSEEN]))
        if threshold is not None and accepted:
            threshold.update(worker, read_weights(push, n), self.version)
        reply[:n + REPLY_HEADER] = self.u_ext
        reply[n + REPLY_STATUS] = STATUS_ACCEPTED if accepted else STATUS_REFUSED
        if threshold is not None:
            threshold.others_top(worker, out=others_section(reply, n))
        return accepted

    def use_histogram(self, histogram, refused: int = 0) -> None:
        """Staleness measured by the workers themselves (node-aggregated: the steps each step did
        not see), and the steps they redid (``refused``), replace the pushes'; those stay in
        ``push_staleness`` (node-aggregated: the other nodes' pushes between a node's pull and its
        next push, the lag that aggregation adds)."""
        self.push_staleness = self.staleness_summary()
        self._hist = [int(c) for c in histogram] or [0]
        self.refused += int(refused)

    def set_counts(self, steps: int, pushes: int, refused: int, histogram) -> None:
        """Counts gathered elsewhere (the shared-memory transport, where the workers write ``u_C``
        themselves: ``pushes`` writes of one or more steps; ``histogram`` counts steps)."""
        self.steps = self.version = int(steps)
        self.accepted = int(pushes)
        self.u_ext[self.n + REPLY_VERSION] = self.version
        self.refused = int(refused)
        self._hist = [int(c) for c in histogram] or [0]

    @property
    def staleness_histogram(self) -> np.ndarray:
        hist = np.asarray(self._hist, dtype=np.int64)
        nz = np.flatnonzero(hist)
        return hist[: nz[-1] + 1] if nz.size else np.zeros(1, dtype=np.int64)

    def staleness_summary(self) -> dict:
        return staleness_summary(self.staleness_histogram)


def staleness_summary(hist) -> dict:
    """Mean, median, 95th and 99th percentiles, max and the histogram (``counts[k]`` = pushes or
    steps of staleness ``k``). The mean can exceed the 95th percentile: a few very stale steps (a
    worker descheduled for a while on oversubscribed cores) pull it up, so summaries print the
    percentiles first (``asyos.runs.summary.staleness_line``)."""
    hist = np.asarray(hist, dtype=np.int64)
    total = int(hist.sum())
    if total == 0:
        return {"mean": 0.0, "median": 0, "p95": 0, "p99": 0, "max": 0, "histogram": [0]}
    values = np.arange(hist.size)
    cdf = np.cumsum(hist)
    return {
        "mean": float(values @ hist / total),
        "median": int(np.searchsorted(cdf, 0.5 * total)),
        "p95": int(np.searchsorted(cdf, 0.95 * total)),
        "p99": int(np.searchsorted(cdf, 0.99 * total)),
        "max": int(np.flatnonzero(hist)[-1]),
        "histogram": hist.tolist(),
    }
