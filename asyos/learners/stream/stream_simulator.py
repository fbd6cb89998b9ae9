"""Sample-stream learners as asynchronous data-parallel workers, simulated in one process.

``q`` workers each read their own part of the stream (every pass draws a fresh permutation of the
samples and splits it into ``q`` contiguous parts, worker ``i`` taking part ``i``). At each event one
worker (chosen by the *schedule*) takes its next sample (its next mini-batch for SFSA/TSGD), computes
its prediction ``u = w.x`` -- and hence its loss gradient -- at a model up to ``tau`` updates old
(chosen by the *policy*, as in ``asyos.learners.protocol.simulator``), and the central model applies the
update at once: every push is applied, none waits. Only the data term sees the stale model; the
learner's own bookkeeping (AdaGrad's ``H``, the truncation, the regularizer, AROW's variances) acts
on the central state, as it would on a parameter server. A worker always sees its own previous
update. The staleness of an update is ``version at apply - version read``.

With one worker and ``tau = 0`` this is exactly the sequential ``fit`` (same permutations).
Everything is deterministic given ``random_state``.
"""
from __future__ import annotations

import contextlib

import numpy as np
from sklearn.base import clone
from sklearn.utils._param_validation import HasMethods

from ...errors import InputError
from ..base import BudgetedSelector
from ..params import SEED, StrOptions, count
from ..protocol.simulator import POLICIES, SCHEDULES, WorkerSchedule, check_simulation_args, choose_version
from ..protocol.central import staleness_summary

CHECKPOINT_KIND = "sample-stream-simulator"


def worker_streams(n_samples, n_passes, n_workers, rng):
    """Each worker's parts of the stream, one array of sample indices per pass."""
    parts = [[] for _ in range(n_workers)]
    for _ in range(n_passes):
        for w, part in enumerate(np.array_split(rng.permutation(n_samples), n_workers)):
            parts[w].append(part.astype(np.int64))
    return parts


class AsyncSampleStream(BudgetedSelector):
    """Run ``learner`` (a sample-stream learner, not fitted) as ``n_workers`` asynchronous workers.

    Each pass draws a permutation of the samples and splits it into ``n_workers`` parts; at each event
    the worker the schedule picks takes its next sample (its next mini-batch for SFSA/TSGD), computes
    its prediction at a model up to ``max_staleness`` updates old, and the central model applies the
    update at once (module docstring). With one worker and ``max_staleness=0`` this is ``learner.fit``.

    Parameters
    ----------
    learner : SampleStreamLearner
        The learner to run (``BudgetedARDA``, ``OFS``, ``SFSA`` ...); cloned by ``fit``. With
        ``lam="auto"`` (the l1 learners) the l1 weight is first searched by a sequential ``fit``.
    n_workers : int, default=4
        Simulated workers ``q``.
    max_staleness : int or None, default=None
        The bound ``tau`` on how many updates old a worker's model may be; ``None``: ``n_workers``.
    policy : {"max", "uniform", "fresh"}, default="max"
        The version a worker reads within the bound: the oldest allowed, one drawn uniformly, or the
        current one (``asyos.learners.protocol.simulator.choose_version``). A worker always sees its own
        previous update.
    schedule : {"round-robin", "random"}, default="round-robin"
        Which worker takes the next event.
    random_state : int or None, default=0
        Seeds the schedule and the policy; the pass orders come from ``learner.random_state``.

    Attributes
    ----------
    learner_ : SampleStreamLearner
        The central model. Its fitted attributes (``coef_``, ``support_``, ``n_samples_seen_``,
        ``classes_`` ...) are read through this estimator too, and ``predict`` uses it.
    staleness_ : dict
        ``mean``, ``median``, ``p95``, ``p99`` and ``max`` of the staleness of the updates (version at
        apply minus version read), and ``histogram`` ``{staleness: count}``.
    n_events_ : int
        Updates applied (one per sample, or per mini-batch).

    Examples
    --------
    >>> from asyos import AsyncSampleStream, BudgetedARDA, make_classification
    >>> data = make_classification(n_features=50, n_informative=5, n_samples=500, seed=0)
    >>> model = AsyncSampleStream(BudgetedARDA(budget=5), n_workers=4).fit(data.X, data.y)
    >>> model.support_.tolist()
    [7, 13, 24, 27, 49]
    >>> model.n_events_
    500
    >>> model.staleness_["max"]
    3
    """

    _reported = ("n_steps_", "n_samples_seen_", "n_updates_", "lam_", "online_accuracy_", "raw_intercept_",
                 "refitted_")

    _parameter_constraints = {"learner": [HasMethods(["start", "step_rows", "weights"])], "n_workers": [count(1)],
                              "max_staleness": [count(0), None], "policy": [StrOptions(set(POLICIES))],
                              "schedule": [StrOptions(set(SCHEDULES))], "random_state": SEED}

    def __init__(self, learner, n_workers=4, max_staleness=None, policy="max", schedule="round-robin",
                 random_state=0):
        self.learner = learner
        self.n_workers = n_workers
        self.max_staleness = max_staleness
        self.policy = policy
        self.schedule = schedule
        self.random_state = random_state

    def fit(self, X, y, checkpoint=None):
        """Simulate the workers. ``checkpoint`` (an ``asyos.records.checkpoint.Checkpointer``) saves the
        simulation between events (the central learner, the bounded history of its weights, each
        worker's place in its stream, the generator and the schedule; the streams are drawn again
        from ``learner.random_state``) and, holding a saved state, continues from it: the result
        is the uninterrupted run's, bit for bit. The l1 weight search of ``lam="auto"``, run before
        the simulation, is not saved: a stop there saves nothing."""
        self._validate_params()
        tau = self.n_workers if self.max_staleness is None else self.max_staleness
        check_simulation_args(tau, self.policy, self.schedule)
        saved = checkpoint.take(CHECKPOINT_KIND) if checkpoint is not None else None
        learner = clone(self.learner)
        if saved is not None:
            learner.set_params(**saved["params"])
        elif getattr(learner, "lam", None) == "auto":      # the l1 weight is searched sequentially first
            learner.set_params(lam=learner.fit(X, y).lam_)
        rows = learner.start(X, y)                        # the learner's public step API only
        n = rows.n_rows
        if self.n_workers > n:
            raise InputError(f"{self.n_workers} workers but only {n} samples: every worker needs a sample")
        rng = np.random.default_rng(learner.random_state)
        streams = worker_streams(n, rows.passes, self.n_workers, rng)
        if saved is None:
            run = _Run(learner, streams, int(tau), self.schedule, np.random.default_rng(self.random_state))
        else:
            run = saved["run"]
            learner.__dict__.update(run.learner)
            learner._cache = None
            run.learner = learner
        run.simulate(rows, streams, self.policy, checkpoint, {"params": learner.get_params()})
        self.staleness_, self.n_events_ = _summary(run.counts), run.version
        self.learner_ = learner
        return self

    def _finish_fit(self, X, y):
        """The central learner's end of fit (its refit on the kept features), as a sequential fit ends."""
        finish = getattr(self.learner_, "_finish_fit", None)
        if finish is not None:
            finish(X, y)

    def __getattr__(self, name):
        if name.endswith("_") and not name.startswith("_") and "learner_" in self.__dict__:
            return getattr(self.__dict__["learner_"], name)
        raise AttributeError(name)

    def _task(self):
        return self.learner._task()

    def __sklearn_is_fitted__(self):
        return "learner_" in vars(self)


class _Run:
    """The simulation's state between two events: what a checkpoint holds (the learner as its
    attributes, ``__getstate__``)."""

    def __init__(self, learner, streams, tau, schedule, rng):
        self.learner = learner
        self.tau = tau
        self.history = np.zeros((tau + 1, learner.n_features_in_)) if tau > 0 else None
        self.version = 0
        if self.history is not None:
            self.history[0] = learner.weights()
        self.floors = [0] * len(streams)
        self.cursor = [(0, 0)] * len(streams)             # (pass, offset): batches never straddle passes
        self.rng = rng
        self.schedule = WorkerSchedule([i for i, s in enumerate(streams) if sum(map(len, s))], schedule, rng)
        self.counts = np.zeros(tau + 1, dtype=np.int64)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["learner"] = self.learner.__getstate__()
        return state

    def simulate(self, rows, streams, policy, checkpoint=None, extra=None):
        learner, history, tau, rng, schedule = self.learner, self.history, self.tau, self.rng, self.schedule
        indptr, indices, data = rows.indptr, rows.indices, rows.data
        batch = getattr(learner, "batch_size", 1)
        total = sum(sum(map(len, s)) for s in streams)

        def capture():
            return {"run": self, **(extra or {})}

        def progress():
            done = sum(sum(map(len, s[:part])) + offset for s, (part, offset) in zip(streams, self.cursor))
            return {"events": self.version, "samples": f"{done} of {total}", "_done": done, "_total": total,
                    "_unit": "samples"}

        with checkpoint.watching() if checkpoint is not None else contextlib.nullcontext():
            while schedule:
                if checkpoint is not None:
                    checkpoint.poll(CHECKPOINT_KIND, capture, progress)
                slot, i = schedule.next()
                part, offset = self.cursor[i]
                order = streams[i][part][offset:offset + batch]
                offset += order.shape[0]
                while part < len(streams[i]) and offset >= len(streams[i][part]):
                    part, offset = part + 1, 0
                self.cursor[i] = (part, offset)
                read = choose_version(policy, rng, self.version, tau, self.floors[i])
                margins = None
                if read != self.version:
                    w = history[read % (tau + 1)]
                    margins = np.array([data[indptr[r]:indptr[r + 1]] @ w[indices[indptr[r]:indptr[r + 1]]]
                                        for r in order])
                learner.step_rows(rows, order, margins)
                self.counts[self.version - read] += 1
                self.version += 1
                self.floors[i] = self.version
                if history is not None:
                    history[self.version % (tau + 1)] = learner.weights()
                if part == len(streams[i]):
                    schedule.retire(slot)


def _summary(counts):
    """``asyos.learners.protocol.central.staleness_summary`` with the histogram as ``{staleness: count}``."""
    summary = staleness_summary(counts)
    summary["histogram"] = {int(v): int(c) for v, c in enumerate(np.asarray(counts)) if c}
    return summary
