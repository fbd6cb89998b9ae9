"""The Asy-OS worker (KDD'16 Alg. 3; Alg. 1 when alone) as a plain object with no I/O.

``Worker.propose(u, version) -> Push`` takes one step of Online Substitution on the worker's
shard at the (possibly stale) central state ``u``; ``commit``/``discard`` settle it once the
central node has accepted or refused the push. ``links`` wraps it for each way of reaching
``u_C``; the schedulers (loopback, simulators, replay, each MPI transport) drive the links.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ...errors import DivergenceError
from . import kernels as _kernels
from .substitution import ENTER, REJECT, SUBSTITUTE, SubstitutionState
from ..protocol.plan import DEFAULT_SLACK, check_slack
from ..protocol.wire import (PUSH_COUNT, PUSH_STEPS, PUSH_VERSION, push_buffer,
                       weights_section, write_weights)


@dataclass
class Push:
    """One worker step: ``delta`` (a view into ``buffer``, the wire message) and what it did."""

    delta: np.ndarray
    buffer: np.ndarray
    version_read: int
    feature: int          # global index of the new feature
    action: int           # ENTER, SUBSTITUTE or REJECT


class SelectionLog:
    """Which feature entered or left the retained set, and when (committed steps only)."""

    FIELDS = ("worker", "step", "pass", "feature", "event", "weight")

    def __init__(self, worker: int = 0):
        self.worker = worker
        self.rows: list[tuple] = []

    def record(self, step, pass_index, feature, event, weight):
        self.rows.append((self.worker, step, pass_index, feature, event, weight))

    def as_dicts(self):
        return [dict(zip(self.FIELDS, row)) for row in self.rows]


MIN_AUTO_PASSES, MAX_AUTO_PASSES = 2, 10
QUIET_FRACTION = 0.1            # see Worker._others_quiet
SETTLED_GRADIENT = 1e-6         # see Worker._others_quiet
QUIET_GAIN = 0.01               # see Worker._objective_settled
GUARD_GROWTH, MIN_SHARE = 2.0, 1.0 / 64     # see Worker._guard
EXPECTED_AUTO_PASSES = 3        # what "auto" usually takes (2-4 on the KDD'16 problems, up to 9 on text data)


class Worker:
    """Online Substitution on one feature shard (KDD'16 Alg. 3; Alg. 1 when alone).

    Features arrive in passes over the shard, in column order or in ``order`` (the exchange
    variant's: by decreasing marginal gain, ``asyos.learners.substitution.screening``); a feature currently
    retained is not offered again (the pool is the complement of ``S``). ``passes`` is a number of
    passes, or ``"auto"``: passes until one makes no entry and no substitution (at least
    ``MIN_AUTO_PASSES``, at most ``MAX_AUTO_PASSES``); with other workers, also until one moved the
    loss at ``u_C`` by at most ``QUIET_GAIN`` of itself (``_objective_settled``).

    ``owns_intercept``: the model has an unpenalised intercept (``u = Xw + b``) and this worker steps
    it, by one Newton step at its gradient point before each feature step
    (``Loss.intercept_step``), its change riding in the push as ``Delta b`` on every sample. Under
    Asy-OS exactly one worker owns it (worker 0, MPI rank 1), so ``b`` reaches every worker through
    ``u_C`` like any other weight's contribution.
    """

    def __init__(self, shard, y, loss, budget, step_size, *, passes=2, step_divisor=1.0,
                 decrease_check=True, decrease_constant=1.0, lipschitz=None, worker_id=0,
                 log_selection=True, slack=None, variant="kdd16", order=None, owns_intercept=False,
                 entry_scale=1.0, n_workers=1, ridge=0.0):
        self.shard = shard
        self.worker_id = worker_id
        self.auto_passes = passes == "auto"
        self.passes = MAX_AUTO_PASSES if self.auto_passes else int(passes)
        self.n = shard.n_samples
        self.state = SubstitutionState(
            self.n, budget, step_size, loss, y, step_divisor=step_divisor,
            decrease_check=decrease_check, decrease_constant=decrease_constant, lipschitz=lipschitz,
            expected_steps=self.expected_steps(shard, passes), variant=variant, entry_scale=entry_scale,
            ridge=ridge)
        _kernels.warm_up(self.state.kernels)
        self.order = np.arange(shard.n_local) if order is None else np.asarray(order)
        self.owns_intercept = bool(owns_intercept)
        self.intercept = 0.0
        self._intercept_step = 0.0                  # the pending step's Delta b
        if self.owns_intercept:
            self._intercept_kernel = _kernels.intercept_kernel() if self.state.kernels == "numba" else None
            self._hess = np.empty(self.n)
        self.buffer = push_buffer(self.n, self.state.budget)
        self.delta = self.buffer[:self.n]
        self._push = Push(self.delta, self.buffer, 0, -1, 0)   # reused: a push lives until the next step
        self._retained = np.zeros(shard.n_local, dtype=bool)
        self._pass, self._pos = 0, 0
        self._pass_changes = 0         # entries and substitutions in the current pass ("auto" stops at 0)
        self.passes_run = 0            # passes begun
        # exchange with other workers: the share halves when the loss at a read has doubled (_guard)
        self._guarded = variant == "exchange" and n_workers > 1
        self._guard_ref = np.inf
        self._share0 = float(entry_scale)
        self.share_halvings = 0
        # "auto" with other workers: a pass is quiet only if they moved u_C little meanwhile
        self._watch_others = self.auto_passes and n_workers > 1
        if self._watch_others:
            self._pass_origin = None                   # u_C at the first read of the pass
            self._own_moves = np.zeros(self.n)         # this worker's committed pushes since then
            empty = self.state.loss.dloss_raw(self.state.y, np.zeros(self.n))
            self._settled_sq = SETTLED_GRADIENT ** 2 * float(empty @ empty)
        self._cursor_before = None
        self._batch = None             # the compiled visits' counters, event buffers and scratch
        self._shared = None            # visit_view's working view and change
        self._gram = None              # visit_batch's Gram matrix of the retained columns (and whether built)
        self.steps = 0                 # committed steps
        self.proposals = 0             # including refused ones
        self.refused = 0               # proposals discarded (refused by the central node or the bound)
        self.log = SelectionLog(worker_id) if log_selection else None
        # global budget: features dropped below the central threshold, their -x_k w_k summed here
        # until a push carries it to the central node
        self.carry = np.zeros(self.n)
        self._carrying = False
        self._view = None
        self.dropped = 0
        self.slack = DEFAULT_SLACK if slack is None else check_slack(slack)
        self.threshold = 0.0           # the last threshold this worker computed (before the slack)
        self._union = None             # scratch: the others' top |w| and this worker's

    def __getstate__(self):
        """``delta`` is a view of the wire buffer, which pickling would cut: rebuilt on load."""
        transient = ("delta", "_push", "_intercept_kernel", "_batch", "_shared")
        return {k: v for k, v in self.__dict__.items() if k not in transient}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__dict__.setdefault("_gram", None)         # checkpoints written before the compiled visits
        self._batch = self._shared = None
        self.delta = self.buffer[:self.n]
        self._push = Push(self.delta, self.buffer, 0, -1, 0)
        if self.owns_intercept:
            self._intercept_kernel = _kernels.intercept_kernel() if self.state.kernels == "numba" else None

    def progress(self) -> dict:
        """How far the worker got: steps committed, the pass and the features offered in it (and,
        for progress lines, the features offered in all passes of the most there may be)."""
        n_local = self.shard.n_local
        return {"steps": self.steps, "pass": self._pass + 1, "features offered": f"{self._pos}/{n_local}",
                "_done": min(self._pass, self.passes) * n_local + self._pos,
                "_total": None if self.auto_passes else self.passes * n_local, "_unit": "feature visits",
                "_pass_left": n_local - self._pos if self.auto_passes else None}

    @staticmethod
    def expected_steps(shard, passes) -> int:
        """Steps a worker takes at most (retained features are skipped; ``"auto"`` passes counted
        as ``EXPECTED_AUTO_PASSES``): what decides whether the compiled step repays loading it."""
        return (EXPECTED_AUTO_PASSES if passes == "auto" else int(passes)) * shard.n_local

    @property
    def done(self) -> bool:
        return self._next_feature(advance=False) is None and not self._carrying

    def _next_feature(self, advance=True, u=None):
        """``(pass, local index)`` of the next feature to offer, ``None`` when the passes are done
        (``u``: the state just read, for ``_others_quiet``)."""
        p_local = self.shard.n_local
        order, retained = self.order, self._retained
        pass_index, pos, changes = self._pass, self._pos, self._pass_changes
        while pass_index < self.passes:
            while pos < p_local:
                j = order[pos]
                if not retained[j]:
                    if advance:
                        self._pass, self._pos, self._pass_changes = pass_index, pos + 1, changes
                        self.passes_run = max(self.passes_run, pass_index + 1)
                    return pass_index, j
                pos += 1
            if (self.auto_passes and pass_index + 1 >= MIN_AUTO_PASSES
                    and ((changes == 0 and (not self._watch_others or self._others_quiet(u)))
                         or (self._watch_others and self._objective_settled(u)))):
                pass_index = self.passes             # the selection is stable
                break
            pass_index, pos, changes = pass_index + 1, 0, 0
            if advance and self._watch_others and u is not None:
                self._start_watch(u)
        if advance:
            self._pass, self._pos, self._pass_changes = pass_index, pos, changes
        return None

    def _guard(self, u) -> None:
        """Exchange under Asy-OS: halve the share of the Newton weights and of the retained step
        (``SubstitutionState.set_share``) when the loss at this read is more than ``GUARD_GROWTH``
        times the lowest seen since the last halving, down to ``MIN_SHARE`` of where it started.
        ``entry_scale`` covers columns correlated like the data at large; columns that move
        together in one part of the data escape it: on dexter (480 documents, 20,000 words), 12
        simulated workers fitted the same hard documents with words that occur in them alone, the
        loss swung between 0.07 and 0.8 and then diverged (every one of 10 folds x budgets). The
        share never grows back: a run that needed it keeps it."""
        state = self.state
        loss = state.loss.value(state.y, u)
        if loss > GUARD_GROWTH * self._guard_ref and state.entry_scale > MIN_SHARE * self._share0:
            state.set_share(max(0.5 * state.entry_scale, MIN_SHARE * self._share0))
            self.share_halvings += 1
            self._guard_ref = loss
        else:
            self._guard_ref = min(self._guard_ref, loss)

    def _start_watch(self, u):
        if self._pass_origin is None:
            self._pass_origin = np.empty(self.n)
        np.copyto(self._pass_origin, u)
        self._own_moves.fill(0.0)
        self._pass_loss = self.state.loss.value(self.state.y, u)

    def _objective_settled(self, u) -> bool:
        """Whether the loss at ``u_C`` moved by at most ``QUIET_GAIN`` of itself since this pass began
        (every worker's changes and steps in that time included; a loss that rose more is not settled
        either): the selection has settled, whatever changes the pass still made. Without it the two
        workers of ``mpiexec -n 3`` (KDD'16 regression, p = 20000) kept exchanging features that fit
        the noise, each exchange worth about 0.08% of the loss, against each other's moves, and ran
        5-8 passes where one process needs 3: the exchanges of each worker's third pass gained 1.2-1.3%
        of the loss, of a fourth 0.24%, for the same recall and objective (the candidates reach the
        central rank's exchange either way)."""
        start = getattr(self, "_pass_loss", None)          # checkpoints written before it: no rule
        if u is None or start is None or not start > 0:
            return False
        return abs(self.state.loss.value(self.state.y, u) - start) <= QUIET_GAIN * start

    def _others_quiet(self, u) -> bool:
        """Whether the other workers moved ``u_C`` by less than ``QUIET_FRACTION`` of the loss's
        gradient (``n dL/du``, the residual for the squared loss) since this pass began. A worker
        whose pass changed nothing must not stop while the others are still fitting: its features
        were weighed against a residual that was still shrinking. Under ``mpiexec -n 13`` on 2 cores
        workers progress unevenly, and stopping on the pass alone left 1-7 of the default problem's
        100 true features (those with ``|w*|`` below 0.08) out of the candidates (5 seeds: recall
        0.93-0.99 against 0.99 with 10 passes each).

        A gradient below ``SETTLED_GRADIENT`` of the empty model's counts as quiet whatever the others
        do: the data are fitted (to 1e-12 of the empty model's squared gradient), no feature can make
        a gain worth an entry, and the others' moves, however large next to that gradient, only
        polish the fit. Without it the workers ran to the ``MAX_AUTO_PASSES`` cap on every problem
        they interpolate: on dexter (4 simulated workers, squared hinge) each pass from the second
        changed nothing, the gradient shrank about 1000 times a pass (8.6e-9 to 5e-26), and the
        others' moves stayed about 200 times larger than it (moves in the loss's flat region count)."""
        if u is None or self._pass_origin is None:
            return False
        gradient = self.state.loss.dloss_raw(self.state.y, u)
        squared = float(gradient @ gradient)
        if squared <= getattr(self, "_settled_sq", 0.0):       # checkpoints written before it: 0
            return True
        moved = u - self._pass_origin - self._own_moves
        return float(moved @ moved) <= QUIET_FRACTION ** 2 * squared

    def drop_below(self, threshold: float) -> int:
        """Global budget: drop the retained features with ``|w| < threshold``; their ``Delta u``
        waits in ``carry`` for the next push. Returns how many were dropped."""
        if not threshold > 0 or self.state.size == 0:
            return 0
        dropped = self.state.drop_below(threshold, self.carry)
        if dropped and self._gram is not None:
            self._gram[0][:] = 0
        for j in dropped:
            self._retained[j] = False
            if self.log is not None:
                self.log.record(self.steps, self._pass, int(self.shard.columns[j]), "drop", 0.0)
        if dropped:
            self._carrying = True
            self.dropped += len(dropped)
        return len(dropped)

    def _at_read(self, u, others_top) -> float:
        """What a read of ``u_C`` starts, before a step (``propose``) or a batch of them (``visit_view``):
        the watch of the other workers' moves (at the first read), the guard, and under the global budget
        (``others_top``) the threshold and the drops below it. Returns the level an entering weight must
        reach (0 without the global budget)."""
        if self._watch_others and self._pass_origin is None:
            self._start_watch(u)
        if self._guarded:
            self._guard(u)
        if others_top is None:
            return 0.0
        self.threshold, smallest = self._threshold(others_top)
        level = self.slack * self.threshold
        if smallest < level:
            self.drop_below(level)
        return level

    def propose(self, u: np.ndarray, version: int = 0, others_top: Optional[np.ndarray] = None) -> Optional[Push]:
        """One step at central state ``u`` (read at ``version``); ``None`` when the passes are done.
        The returned ``Push`` (and its buffer) is reused by the next call.

        With ``others_top`` (the global budget: the largest ``|w|`` the other workers reported, as
        of the same version as ``u``), the retained features below ``slack`` times the worker's
        threshold (``worker_threshold``: over its own current weights and ``others_top``) are
        dropped first, and a new feature whose weight is below that level is rejected (the next
        step would drop it);
        the step is then taken at the worker's view ``u + carry`` (the central state plus its own
        changes not yet pushed), and the push carries both (the driver adds the weights, see
        ``write_push_weights``). A worker done with its passes still returns one last push while it
        has something to carry."""
        self._cursor_before = (self._pass, self._pos, self._pass_changes, self.passes_run)
        level = self._at_read(u, others_top)
        nxt = self._next_feature(u=u)
        if nxt is None:
            if not self._carrying:
                return None
            self.delta[:] = self.carry                    # the last push: only the drops, no step
            self.buffer[self.n + PUSH_VERSION] = version
            self.buffer[self.n + PUSH_STEPS] = 0
            self._current = None
            push = self._push
            push.version_read, push.feature, push.action = int(version), -1, 0
            return push
        self._current = nxt
        j = nxt[1]
        if self._carrying or self.owns_intercept:
            if self._view is None:
                self._view = np.empty(self.n)
            if self._carrying:
                u = np.add(u, self.carry, out=self._view)
            if self.owns_intercept:
                self._intercept_step = step = self._newton_intercept(u)
                u = np.add(u, step, out=self._view)
        try:
            action = self.state.propose(j, self.shard.column(j), u, self.delta)
        except DivergenceError as exc:
            raise DivergenceError(f"{exc} (pass {nxt[0] + 1}, feature {int(self.shard.columns[j])})") from None
        if others_top is not None and self.state.refuse_small_entry(level, self.delta):
            action = REJECT
        if self._carrying:
            self.delta += self.carry
        if self.owns_intercept:
            self.delta += self._intercept_step
        self.buffer[self.n + PUSH_VERSION] = version
        self.buffer[self.n + PUSH_STEPS] = 1
        self.proposals += 1
        push = self._push
        push.version_read, push.feature, push.action = int(version), int(self.shard.columns[j]), action
        return push

    # -- the loopback's compiled visits ---------------------------------------------------------
    # the squared loss's visits on maintained products (``_compiled_step.gram_visit``); False: the
    # step-by-step arithmetic, to the last bit
    gram_visits = True

    def batchable(self, shared=False) -> bool:
        """Whether ``visit_batch`` can run this worker: sequential OS's exchange step on the compiled
        kernels, a float64 shard (dense, or CSR), no other workers (no watch, guard, carry or global
        budget); ``shared``: whether ``visit_view`` can (the same, with other workers)."""
        state, XT = self.state, getattr(self.shard, "XT", None)
        if self.shard.sparse:
            columns_ok = getattr(XT, "format", None) == "csr" and XT.data.dtype == np.float64
        else:
            columns_ok = isinstance(XT, np.ndarray) and XT.dtype == np.float64 and XT.flags.c_contiguous
        return (state.kernels == "numba" and state.variant == "exchange" and state._loss_code is not None
                and columns_ok and (shared or not (self._watch_others or self._guarded or self._carrying)))

    def visit_batch(self, central, visits: int) -> bool:
        """Up to ``visits`` steps against the in-process ``central`` node in one compiled call
        (``_compiled_step.loopback_visits``): what ``propose``, ``Central.apply`` and ``commit`` do
        one step at a time, the same arithmetic in the same order (``tests/test_loopback_batch.py``
        compares both), without their Python: 50-60 us of the 150 us that a feature visit took at
        n = 1715, s = 100 (KDD'16 regression, p = 20000). Returns False once the passes are done."""
        status, applied = self._visits(central.u, visits)
        central.applied_in_place(applied)
        return status != _kernels._module().DONE

    def visit_view(self, u: np.ndarray, visits: int, others_top: Optional[np.ndarray] = None):
        """A worker of Asy-OS on a shared window (``asyos.distributed.mpi_shared``): up to ``visits``
        steps taken one after the other at this worker's view, ``u`` (``u_C`` as just read) plus its own
        steps, in one compiled call. Returns ``(steps, change)``, ``change`` the sum of their ``Delta u``
        (with what ``carry`` held) to add to the worker's row, or ``None`` once the passes are done and
        nothing is carried.

        What ``propose`` does before each step is done once a batch, at the read: the guard
        (``_guard``), the global budget's threshold from ``others_top`` and the drops below it (the
        admission rule runs inside, at the threshold of the read), and the pass-end rules that watch the
        other workers (a batch ends where a pass does; the next read decides). Each step sees the other
        workers' changes as of the batch's read: a batch of ``K`` steps is a push of ``K`` steps."""
        level = self._at_read(u, others_top)
        nxt = self._next_feature(u=u)
        if nxt is None and not self._carrying:
            return 0, None
        if self._shared is None:
            self._shared = (np.empty(self.n), np.empty(self.n))
        work, change = self._shared
        np.copyto(work, u)
        if self._carrying:
            work += self.carry
            self.carry.fill(0.0)
            self._carrying = False
        applied = 0
        if nxt is not None:
            self._pos -= 1                       # _next_feature moved past the feature the visits start with
            _, applied = self._visits(work, visits, stop_at_pass_end=self._watch_others, entry_level=level)
        np.subtract(work, u, out=change)
        if self._watch_others:
            self._own_moves += change
        return applied, change

    def _visits(self, u, visits: int, stop_at_pass_end=False, entry_level=0.0):
        """``loopback_visits`` on this worker at ``u`` (updated in place); returns ``(status, steps)``."""
        module = _kernels._module()
        state = self.state
        cap = state.budget + 1
        if self._gram is None or len(self._gram) < 3:     # kept in checkpoints: a resumed run goes on with
            # the same G and row sums of X_S (checkpoints written before the row sums were kept: rebuilt)
            self._gram = (np.zeros(1 if self.gram_visits else 0, dtype=np.int64), np.zeros((cap, cap)),
                          np.zeros(cap))
        if self._batch is None or self._batch[1].size < 2 * visits:
            size = 2 * max(int(visits), 1)
            self._batch = (np.zeros(module.N_COUNTERS, dtype=np.int64), np.empty(size, dtype=np.int64),
                           np.empty(size, dtype=np.int64), np.empty(size, dtype=np.intp),
                           np.zeros(size, dtype=np.bool_), np.empty(size), np.empty(self.n), np.empty(self.n),
                           *(np.zeros(cap) for _ in range(3)), np.zeros((4, cap)), np.full(4, -1, dtype=np.int64))
        counters, ev_step, ev_pass, ev_local, ev_enter, ev_weight, view, column, R, W, Gdw, ahead, ahead_j = self._batch
        gram, G, colsum = self._gram
        XT = self.shard.XT
        if self.shard.sparse:
            shift = module.NO_CSR[3] if self.shard._shift is None else self.shard._shift
            columns = (module.NO_DENSE, True, XT.indptr, XT.indices, XT.data, shift, column)
        else:
            columns = (XT, False, *module.NO_CSR, column)
        module.set_counters(counters, pass_index=self._pass, pos=self._pos, changes=self._pass_changes,
                            passes_run=self.passes_run, size=state.size, steps=self.steps, checks=state.checks,
                            check_rejections=state.check_rejections)
        hess = self._hess if self.owns_intercept else view
        self.intercept = module.loopback_visits(
            state._loss_code, *columns, self.order, self._retained, counters, self.passes, self.auto_passes,
            MIN_AUTO_PASSES, int(visits), bool(stop_at_pass_end), float(entry_level), state.XS, state.w,
            state.curv, state.slots, u, state.y, state._retained_scale, state.budget, state.decrease_check,
            state.floor, state.entry_scale, state.ridge, self.owns_intercept, self.intercept, state._g, state._h,
            state._v, state._gS, state._dw, state._a, state._c, state._u_next, state._tmp, view, hess, self.delta,
            ev_step, ev_pass, ev_local, ev_enter, ev_weight, gram, G, R, W, colsum, Gdw, ahead, ahead_j)
        out = module.read_counters(counters)
        self._pass, self._pos, self._pass_changes = out["pass_index"], out["pos"], out["changes"]
        self.passes_run, state.checks = out["passes_run"], out["checks"]
        state.check_rejections = out["check_rejections"]
        events, status, last = out["events"], out["status"], out["last_j"]
        state._resize(out["size"])
        applied, self.steps = out["steps"] - self.steps, out["steps"]   # every step committed is applied
        self.proposals += applied + (status == module.STOPPED_DIVERGED)
        if self.log is not None:
            columns = self.shard.columns
            for e in range(events):
                self.log.record(int(ev_step[e]), int(ev_pass[e]), int(columns[ev_local[e]]),
                                "enter" if ev_enter[e] else "leave", float(ev_weight[e]))
        if status == module.STOPPED_DIVERGED:
            try:
                state._diverged()
            except DivergenceError as exc:
                raise DivergenceError(f"{exc} (pass {self._pass + 1}, feature {int(self.shard.columns[last])})") \
                    from None
        return status, applied

    def _newton_intercept(self, u) -> float:
        """The intercept's Newton step at ``u`` (``Loss.intercept_step``; compiled when the step is)."""
        state = self.state
        if self._intercept_kernel is not None:
            return float(self._intercept_kernel(state._loss_code, state.y, u, state._g, self._hess))
        return state.loss.intercept_step(state.y, u, grad=state._g, hess=self._hess)

    def _threshold(self, others_top):
        """``(worker_threshold, smallest own |w|)`` on preallocated scratch (it runs before every
        step)."""
        s = others_top.size
        if self._union is None or self._union.size < s + self.state.budget:
            self._union = np.empty(s + self.state.budget)
        m = self.state.size
        union = self._union[:s + m]
        union[:s] = others_top
        own = np.abs(self.state.w[:m], out=union[s:])
        smallest = float(np.minimum.reduce(own)) if m else np.inf     # (ndarray.min costs twice as much)
        union.partition(m)
        return float(union[m]), smallest

    def write_push_weights(self) -> None:
        """Global budget, a push sent at once (each-step): the ``|w|`` the proposed step leaves
        into its weight section (the pipelined driver sends the current ones with its sums)."""
        if self._current is None:                         # the last push: only the drops
            write_weights(self.buffer, self.n, self.state.weights)
        else:
            self.buffer[self.n + PUSH_COUNT] = self.state.write_proposed_abs(weights_section(self.buffer, self.n))

    def commit(self):
        if self._watch_others:
            self._own_moves += self.delta
        if self._carrying:
            self.carry.fill(0.0)
            self._carrying = False
        if self._current is None:                         # the last push carried only drops
            return 0
        action, j, left, slot = self.state.commit()
        if self._gram is not None:
            self._gram[0][:] = 0                          # X_S changed outside visit_batch: its G is stale
        self.steps += 1
        self.intercept += self._intercept_step
        self._intercept_step = 0.0
        if action in (ENTER, SUBSTITUTE):
            self._pass_changes += 1
            self._retained[j] = True
            if left >= 0:
                self._retained[left] = False
            if self.log is not None:
                pass_index = self._current[0]
                columns = self.shard.columns
                if left >= 0:
                    self.log.record(self.steps, pass_index, int(columns[left]), "leave", 0.0)
                self.log.record(self.steps, pass_index, int(columns[j]), "enter", float(self.state.w[slot]))
        return action

    def discard(self):
        """The push was refused: forget the step and offer the same feature again (features
        dropped stay dropped; their ``Delta u`` stays in ``carry`` for the next push)."""
        self.refused += 1
        if self._current is not None:
            self.state.discard()
        self._intercept_step = 0.0
        self._pass, self._pos, self._pass_changes, self.passes_run = self._cursor_before

    # -- results ----------------------------------------------------------------------------
    def selection(self):
        """``(global indices, weights)`` of the retained features, sorted by index."""
        local = self.state.retained
        order = np.argsort(self.shard.columns[local], kind="stable")
        return self.shard.columns[local][order], self.state.weights[order]

    def selection_in_units(self):
        """``(global indices, coefficients, intercept)`` in the data's own units (the shard's
        scaling undone; the intercept is this worker's share: ``b`` for its owner, then less
        ``sum coef * offset`` over its features)."""
        local = self.state.retained
        order = np.argsort(self.shard.columns[local], kind="stable")
        coef, intercept = self.shard.to_units(local[order], self.state.weights[order], self.intercept)
        return self.shard.columns[local][order], coef, intercept

    def contribution(self) -> np.ndarray:
        """This worker's share of ``u_C``: ``X_S w_S`` (+ ``b`` for the intercept's owner),
        recomputed from scratch (for checks; the engine never needs it)."""
        return self.state.contribution() + self.intercept

    def selected_columns(self):
        """Training columns of the retained features (rows, sorted like ``selection``)."""
        local = self.state.retained
        order = np.argsort(self.shard.columns[local], kind="stable")
        return self.state.XS[:self.state.size][order].copy()
