"""``fit(X, y, checkpoint=...)`` of the sample-stream learners: saved between row chunks, resumed bit for bit.

``SampleStreamLearner.fit`` given an ``asyos.records.checkpoint.Checkpointer`` runs its passes in chunks of
rows and polls the checkpointer before each chunk. A saved state is the learner's attributes
(``__getstate__``: its ``StreamState`` arrays and counters, the scale, the labels; never ``X``),
the pass and the row position in that pass's order, and the generator's state *before* that pass
drew its permutation: resuming draws the same permutation again and continues at the row. The row
loops learn one row after the other whatever the rows of a call (SFSA and TSGD: one mini-batch
after the other, so a chunk is a whole number of mini-batches), hence a fit in chunks, stopped
anywhere and resumed, is the plain ``fit`` bit for bit (``tests/test_resume_learners.py``).

**Chunk size.** A poll costs a counter and the clock, a chunk a call of the compiled loop. The
chunk grows (doubling) while a call takes less than ``POLL_SECONDS / 2`` and shrinks when it takes
more than ``2 POLL_SECONDS``, so a stop request is answered within about ``2 POLL_SECONDS``
whatever the rows cost (a dense row of 10^5 values, or SFSA's ``O(p)`` thresholding per
mini-batch), and the calls stay long enough that the polls cost nothing measurable. Measured by
``benchmarks/bench_stream_checkpoint.py`` (300000 rows, p = 10^4, 50 values a row, 2 passes; 2 shared
cores): B-ARDA in chunks 0.997x the plain ``fit``'s time, 0.999x saving every 0.25 s (3 saves, 22 ms);
SFSA 0.967x and 1.098x (13 saves, 79 ms; the rest is the shared machine's noise); the longest
chunk, the longest a stop request waits, 49 ms (B-ARDA) and 101 ms (SFSA).

**The l1 weight search** (``lam="auto"``: up to 43 fits, ``l1.L1Learner``) is resumed by replay:
the state also holds the fits already finished (their ``lam``, number of non-zeros, or the
divergence message) and the models of the search's current ``under``/``over`` candidates; on
resume those fits are answered from the record (no work), the search takes the same path to the
interrupted fit, which continues from its chunk, and then goes on.
"""
from __future__ import annotations

import time

import numpy as np

from ...errors import DivergenceError, InputError
from ..trace import StreamTrace
from ..budget_search import BudgetSearch, _consider

CHECKPOINT_KIND = "sample-stream"
POLL_SECONDS = 0.05          # target duration of one call of the row loop between two polls
FIRST_CHUNK = 256            # rows of the first call (then adapted to POLL_SECONDS)


class RowChunks:
    """Chunks of a pass's order: ``multiple`` rows at least (a mini-batch), adapted to ``POLL_SECONDS``."""

    def __init__(self, multiple: int):
        self.multiple = max(1, int(multiple))
        self.rows = self.multiple * max(1, FIRST_CHUNK // self.multiple)

    def run(self, step, order, pos):
        """``step(order[pos:end])`` for the next chunk; returns ``end``."""
        end = min(order.shape[0], pos + self.rows)
        started = time.perf_counter()
        step(order[pos:end])
        elapsed = time.perf_counter() - started
        if elapsed < POLL_SECONDS / 2 and end - pos == self.rows:
            self.rows *= 2
        elif elapsed > 2 * POLL_SECONDS:
            self.rows = max(self.multiple, self.multiple * (self.rows // (2 * self.multiple)))
        return end


def fit_in_chunks(learner, X, y, checkpoint, saved=None, outer=None):
    """``learner``'s ``fit(X, y)`` polling ``checkpoint`` between chunks of rows, from ``saved`` (a
    state this function saved) when given. ``outer()`` adds the caller's own entries to a state."""
    rows = learner.start(X, y)
    if saved is None:
        rng = np.random.default_rng(learner.random_state)
        first, pos = 0, 0
    else:
        learner.__dict__.update(saved["model"])
        learner._cache = None
        rng = np.random.default_rng()
        rng.bit_generator.state = saved["rng"]
        first, pos = saved["pass"], saved["row"]
    chunks = RowChunks(getattr(learner, "batch_size", 1))      # SFSA, TSGD: whole mini-batches
    trace = StreamTrace()           # rows, mistakes, support between chunks (asyos.learners.trace): reads, never writes
    where = {"pass": first, "row": pos, "rng": None}

    def capture():
        state = {"model": learner.__getstate__(), **where}
        if outer is not None:
            state.update(outer())
        return state

    def progress():
        return {"pass": f"{where['pass'] + 1} of {rows.passes}", "rows": where["row"],
                "_done": where["pass"] * rows.n_rows + where["row"], "_total": rows.passes * rows.n_rows,
                "_unit": "rows"}

    def step(order):
        learner.step_rows(rows, order)

    with checkpoint.watching():
        for k in range(first, rows.passes):
            where["rng"] = rng.bit_generator.state          # before this pass's permutation
            order = rng.permutation(rows.n_rows).astype(np.int64)
            where["pass"], where["row"] = k, pos if k == first else 0
            while where["row"] < rows.n_rows:
                checkpoint.poll(CHECKPOINT_KIND, capture, progress)
                where["row"] = chunks.run(step, order, where["row"])
                trace.after_chunk(learner, k)
    learner._fitted_coef()
    learner.trace_ = trace.finish(learner, where["pass"])
    learner.selection_log_ = trace.log()
    return learner


def fit(learner, X, y, checkpoint):
    """``SampleStreamLearner.fit`` with a checkpointer (module docstring)."""
    return fit_in_chunks(learner, X, y, checkpoint, checkpoint.take(CHECKPOINT_KIND))


def search_lam(learner, X, y, checkpoint, fit_once, strict=False):
    """``learner._search_lam`` (``lam="auto"``) with every fit in chunks, resumed by replay (module
    docstring). ``fit_once(saved, outer)`` is one fit at ``learner.lam_``. The record also holds the
    step the search runs with (``eta_`` / ``gamma_``, which ``eta="auto"`` may have reduced,
    ``auto_step``): a resumed search continues with it."""
    step = getattr(learner, "step_parameter", "eta") + "_"
    saved = checkpoint.take(CHECKPOINT_KIND)
    record = {"done": [], "candidates": BudgetSearch(budget=learner.budget), "step": learner.__dict__.get(step)}
    replay = []
    if saved is not None:
        if "search" not in saved:
            raise InputError(f"checkpoint {checkpoint.path} holds a fit at a fixed l1 weight, not a search")
        record = saved.pop("search")
        replay = list(record["done"])
        record["done"] = []
        if record.get("step") is not None:
            setattr(learner, step, record["step"])

    def outer():
        return {"search": record}

    def run():
        nonlocal saved
        lam = learner.lam_
        if replay:                                   # a fit that finished before the interruption
            weight, nnz, message = replay.pop(0)
            if weight != lam:
                raise InputError(f"checkpoint {checkpoint.path} does not follow this search (l1 weight {lam!r} "
                                 f"where it had {weight!r}); rerun without --resume")
            record["done"].append((weight, nnz, message))
            if message is not None:
                raise DivergenceError(message)
            model = _candidate_model(record["candidates"], weight)
            learner._state, learner._cache = model if model is not None else (None, (np.ones(nnz), None))
            return
        resumed, saved = saved, None
        try:
            fit_once(resumed, outer)
        except DivergenceError as exc:
            record["done"].append((lam, None, str(exc)))
            raise
        learner._fitted_coef()                       # a diverged fit raises DivergenceError here
        nnz = learner._online_nnz()
        record["done"].append((lam, nnz, None))
        _consider(record["candidates"], lam, nnz, (learner._state, learner._cache))

    return learner._search_lam(run, strict=strict)


def _candidate_model(candidates, weight):
    """The model of the search's ``under`` or ``over`` candidate fitted at ``weight`` (``None``: the
    fit at ``weight`` is no longer a candidate, so it is never the one chosen)."""
    for best in (candidates.under, candidates.over):
        if best is not None and best.weight == weight:
            return best.model
    return None
