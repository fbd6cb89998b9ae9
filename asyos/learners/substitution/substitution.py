"""One Online Substitution step on a set of retained features (KDD'16 Alg. 1 and Alg. 3).

``SubstitutionState`` holds the retained set ``S`` (at most ``budget`` features), their weights
``w_S`` and a contiguous copy of their columns ``X_S`` (feature-major, one row per slot). Given a
new feature ``x_j`` and the point ``u`` at which the gradient is taken, ``propose`` computes

* ``g = dL/du (u)``                                  (eqs. 4-5),
* ``w_S <- w_S - (eta/m) X_S^T g``                   (Alg. 1 line 6, Alg. 3 line 6),
* ``w_j  = -eta x_j^T g``                            (line 7),
* when ``|S u {j}| > budget``: ``k* = argmin |w_k|`` over ``S u {j}`` (line 11), and, with the
  decrease check on, the substitution is kept only if
  ``f(w_next) - f(w_prev) <= c (L_F/2 - 1/(2 eta)) ||w_next - w_prev||^2`` (lines 12-16);
  otherwise the new feature is rejected (``w_j = 0``) and ``w_S`` keeps its step,

and writes ``delta = X_S' w_S' - X_S w_S`` (the ``Delta u`` of Alg. 3 line 13) into the caller's
buffer. ``commit`` makes the proposal the state; ``discard`` forgets it (a refused push), so no
undo log is needed.

In sequential OS ``u`` is the state's own ``X_S w_S`` (Alg. 1 line 4); in Asy-OS it is the
central ``u_C``, possibly stale (Alg. 3 line 4). Alg. 3 omits the decrease check; here it is an
option evaluated at the worker's snapshot ``u`` (no extra communication).

When ``k* = j`` both branches of line 12 reject ``j`` with the same result, so the check is skipped;
ties in ``|w|`` reject the new feature (the retained one stays).

That is ``variant="kdd16"``, the paper's step. ``variant="exchange"`` (the default of the
estimators) keeps line 6 and changes how a newcomer is weighed against the retained features:

* the new weight is the 1-D Newton step ``w_j = -x_j^T g / c_j`` with ``c_j = x_j^T H x_j`` and
  ``H = n d^2L/du^2`` (1 for the squared loss, the margin violators for the squared hinge,
  ``p(1-p)`` for the logistic), instead of line 7's ``-eta x_j^T g``;
* while ``|S| < budget`` the feature enters with that weight; once full, each retained ``k`` is
  scored by the change of the loss's quadratic model at ``u`` if ``k`` left and ``j`` came in at its
  best weight given that: ``-w_k g_k + w_k^2 c_k / 2 - (g_j - w_k a_jk)^2 / (2 c_j)`` (``g_k =
  x_k^T g``, ``a_jk = x_k^T H x_j``, all ``n`` times the loss). The most negative score names
  ``k*``; ``j`` replaces it only if the score is negative and, with the check on, the loss after
  the substitution is below the loss without it (both with the retained features' step).

Why: KDD'16's rule compares a newcomer's single gradient step (``eta`` times its gradient, with
``eta = 0.5 / L_F`` set by the stiffest block) with weights that have grown over many steps, so
substitution stops almost at once and the selection is the first columns of the file (dexter,
k = 10: the last substitution at step 40 of 59,980, test accuracy 0.50); under the squared hinge
the active samples thin out, gradients shrink and the stall is complete (KDD'16 synthetic
classification recall 0.33-0.49). The exchange score compares like with like (objective changes),
and lifted that recall to 0.58-0.66, against the L1 path's 0.57-0.64 and Proj-GD's 0.55-0.64
(``benchmarks/bench_kdd_synthetic.py``, 5 seeds), and dexter's accuracy to 0.91
(``benchmarks/bench_real_selection.py``). A column with no curvature on the samples (``c_j`` at
most ``floor``) is rejected.

``entry_scale`` (exchange; 1 in sequential OS): under Asy-OS a feature enters with that share of
its Newton weight (the decisions use the whole weight), and the retained features step by that
share of line 6's step. Asynchronous workers all fit the same residual from stale reads: q workers
entering Newton weights on correlated columns overshoot ``u_C`` about q-fold, the next round fits a
residual q - 1 times as large the other way, and ``u_C`` diverges (satellite_image at q = 4 and 12
in the simulator: a final objective of 1e16 and 2e5 against 0.77 sequentially; digits 2e17); their
retained steps, taken together on the union of their features from stale reads, do the same more
slowly (36 columns of correlation 0.9, q = 4, ten passes: 2.8e3 against an empty model's 3.1).
``make_worker`` sets it to ``1 / (1 + (q - 1) rho)``, ``rho`` the columns' correlation implied by
``L_F``: about 1 for the KDD'16 problems' independent columns, 0.1 for satellite_image's.

``ridge`` (exchange; ``alpha`` of ``OnlineSubstitution(ridge=alpha)``, held here as ``lambda = alpha n`` in
the raw gradient's units): the objective is ``n L(u) + (lambda / 2) ||w||^2`` on the scaled columns (the
L0L2 problem of L0Learn). Its gradient ``lambda w_S`` joins line 6's step (whose ``eta`` is then
``0.5 / (L_F + alpha)``), its curvature ``lambda`` joins ``c_j`` in the newcomer's weight and ``c_k`` in
the scores (``-w_k (g_k + lambda w_k) + w_k^2 (c_k + lambda) / 2 - (g_j - w_k a_jk)^2 / (2 (c_j + lambda))``),
and the decrease check compares the penalised losses. Why: with few samples (62-300 rows, 2,000-100,000
features) the unpenalised exchange fits the training rows exactly and keeps features that fit a few of them;
the ridge keeps the residual spread over the rows (as ``alpha`` grows the scores tend to the marginal
gains, ``SelectKBest``'s ranking). Measured on ``benchmarks/bench_real_selection.py --small-n``'s generators
(docs/results.md, "Few samples, many features"): ``alpha = 10`` raised the mean test accuracy on gene-expression-like
sets from 0.69 to 0.73 (18 cells), and on sparse fingerprints with 10% positives made it predict the majority
class (0.900 against 0.971), so it is off by default.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import DivergenceError
from . import kernels as _kernels

ENTER, SUBSTITUTE, REJECT = 1, 2, 3
ACTION_NAMES = {ENTER: "enter", SUBSTITUTE: "substitute", REJECT: "reject"}
VARIANTS = ("exchange", "kdd16")
# a column whose curvature x^T H x is below this fraction of n is flat on the samples that count
CURVATURE_FLOOR = 1e-10


def _axpy(x, y, a) -> None:
    """``y += a x`` in place (BLAS's daxpy, which scipy.linalg would give at 0.3 s of start-up: the
    numpy path runs small problems, where a process's start-up is most of its time)."""
    y += a * x


class SubstitutionState:
    """Retained features, weights and columns of one OS learner (or one Asy-OS worker)."""

    def __init__(self, n_samples, budget, step_size, loss, y, *, step_divisor=1.0,
                 decrease_check=True, decrease_constant=1.0, lipschitz=None, kernels=None, expected_steps=None,
                 variant="kdd16", entry_scale=1.0, ridge=0.0):
        if budget < 1:
            raise ValueError(f"budget must be at least 1; got {budget}")
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; choose one of: {', '.join(VARIANTS)}")
        self.variant = variant
        self.entry_scale = float(entry_scale)
        self.n = int(n_samples)
        if ridge and variant != "exchange":
            raise ValueError("a ridge is part of the exchange variant's step")
        self.ridge = float(ridge) * self.n          # the ridge's weight in the raw gradient's units (n dL/du)
        self.budget = int(budget)
        self.step_size = float(step_size)
        self.step_divisor = float(step_divisor)
        self.loss = loss
        self.y = y
        self.decrease_check = bool(decrease_check)
        self.decrease_constant = float(decrease_constant)
        self.lipschitz = 0.5 / self.step_size if lipschitz is None else float(lipschitz)
        # c (L_F/2 - 1/(2 eta)): the right-hand side factor of Alg. 1 line 12
        self.decrease_factor = self.decrease_constant * (0.5 * self.lipschitz - 0.5 / self.step_size)

        cap = self.budget + 1
        self.XS = np.zeros((cap, self.n))          # rows 0..size-1 are the retained columns
        self.w = np.zeros(cap)
        self.slots = np.full(cap, -1, dtype=np.intp)  # local feature index held by each slot
        self.size = 0
        # scratch
        self._g = np.empty(self.n)
        self._gS = np.empty(cap)
        self._dw = np.empty(cap)
        self._new_w = np.empty(cap)
        self._abs_w = np.empty(cap)
        self._u_next = np.empty(self.n)
        self._tmp = np.empty(self.n)
        if variant == "exchange":
            self._h = np.empty(self.n)
            self._v = np.empty(self.n)
            self._a = np.empty(cap)
            self._c = np.empty(cap)
            self.curv = np.zeros(cap)               # x_k^T x_k of each slot (the squared loss's c_k)
            self.floor = CURVATURE_FLOOR * self.n
        self._pending = None
        # the compiled step (kernels.py) when numba is there, unless ASYOS_KERNELS / kernels= say numpy
        self.kernels = _kernels.backend(kernels, expected_steps)
        self._loss_code = _kernels.LOSS_CODES.get(getattr(loss, "name", None))
        if self._loss_code is None:
            self.kernels = "numpy"          # a loss the kernel does not know
        if self.y is not None:
            self.y = np.ascontiguousarray(self.y, dtype=np.float64)
        self._kernel = self._compiled_step()
        # the gradient is taken raw (n dL/du), so the 1/n goes into the step scalars
        self._new_scale = -self.step_size / self.n
        self._retained_scale = self._new_scale / self.step_divisor
        if variant == "exchange":
            self.set_share(self.entry_scale)
        self._resize(0)
        self.checks = 0            # decrease checks evaluated
        self.check_rejections = 0  # substitutions the check turned down

    _VIEWS = ("_XSm", "_wm", "_dwm", "_gSm", "_new_wm", "_abs_wm", "_kernel")

    def __getstate__(self):
        """Views do not survive pickling (they come back as copies): rebuild them instead."""
        return {k: v for k, v in self.__dict__.items() if k not in self._VIEWS}

    def __setstate__(self, state):
        state.setdefault("ridge", 0.0)              # checkpoints written before the ridge
        self.__dict__.update(state)
        self._resize(self.size)
        self._kernel = self._compiled_step()

    def _compiled_step(self):
        """The compiled step (``None`` on the numpy path)."""
        if self.kernels != "numba":
            return None
        return _kernels.exchange_kernel() if self.variant == "exchange" else _kernels.propose_kernel()

    def _resize(self, m):
        """Views of the first ``m`` slots (they change only while the retained set fills)."""
        self.size = m
        self._XSm, self._wm, self._dwm, self._gSm = self.XS[:m], self.w[:m], self._dw[:m], self._gS[:m]
        self._new_wm, self._abs_wm = self._new_w[:m], self._abs_w[:m]

    # ------------------------------------------------------------------------------------------
    def propose(self, j: int, xj: np.ndarray, u: np.ndarray, delta: np.ndarray) -> int:
        """Compute the step for new feature ``j`` (column ``xj``) at gradient point ``u``.

        Writes ``Delta u`` into ``delta`` and returns ``ENTER``, ``SUBSTITUTE`` or ``REJECT``.
        """
        if self.variant == "exchange":
            return self._propose_exchange(j, xj, u, delta)
        m = self.size
        kernel = self._kernel
        if kernel is not None:
            action, k, wj, checked = kernel(self._loss_code, self.XS, m, self.w, u, self.y, xj, self._retained_scale,
                                            self._new_scale, self.budget, self.decrease_check,
                                            self.decrease_factor, self._g, self._gS, self._dw, self._new_w,
                                            self._u_next, self._tmp, delta)
            if action == _kernels.DIVERGED:
                self._diverged()
            self._record_check(checked, action)
            self._pending = (action, j, xj, wj, k)
            return action
        g = self.loss.dloss_raw(self.y, u, out=self._g)   # n dL/du
        XS, dw, gS = self._XSm, self._dwm, self._gSm
        self._retained_step(g, delta)
        wj = self._new_scale * float(np.dot(xj, g))         # -eta x_j^T dL/du
        if not math.isfinite(wj * wj + float(np.dot(gS, gS))):   # squares overflow long before inf/NaN
            self._diverged()

        if m < self.budget:
            action, k = ENTER, m
        else:
            new_w = np.add(self._wm, dw, out=self._new_wm)
            k = int(np.argmin(np.abs(new_w, out=self._abs_wm)))
            if abs(wj) <= abs(new_w[k]):
                action = REJECT
            elif self.decrease_check:
                # delta of the substitution: add x_j w_j, remove x_k* (w_k* + dw_k*)
                u_next = self._u_next
                np.add(u, delta, out=u_next)
                _axpy(xj, u_next, wj)
                _axpy(XS[k], u_next, -new_w[k])
                f_prev = self.loss.value(self.y, u)
                f_next = self.loss.value(self.y, u_next)
                w_k = self.w[k]
                diff_sq = float(dw @ dw) - dw[k] * dw[k] + w_k * w_k + wj * wj
                action = SUBSTITUTE if f_next - f_prev <= self.decrease_factor * diff_sq else REJECT
                self.checks += 1
                self.check_rejections += action == REJECT
            else:
                action = SUBSTITUTE
            if action == SUBSTITUTE:
                _axpy(xj, delta, wj)
                _axpy(XS[k], delta, -new_w[k])
        if action == ENTER:
            _axpy(xj, delta, wj)
        self._pending = (action, j, xj, wj, k)
        return action

    def _propose_exchange(self, j, xj, u, delta):
        """The exchange variant's step (module docstring); ``_compiled_step.exchange_step`` is the
        same arithmetic, compiled."""
        m = self.size
        kernel = self._kernel
        if kernel is not None:
            action, k, wj, checked = kernel(self._loss_code, self.XS, m, self.w, self.curv, u, self.y, xj,
                                            self._retained_scale, self.budget, self.decrease_check, self.floor,
                                            self.entry_scale, self.ridge,
                                            self._g, self._h, self._v, self._gS, self._dw, self._a, self._c,
                                            self._u_next, self._tmp, delta)
            if action == _kernels.DIVERGED:
                self._diverged()
            self._record_check(checked, action)
            self._pending = (action, j, xj, wj, k)
            return action
        squared = self._loss_code == 0
        g = self.loss.dloss_raw(self.y, u, out=self._g)               # n dL/du
        h = None if squared else self.loss.d2loss_raw(self.y, u, out=self._h)
        XS, dw, gS = self._XSm, self._dwm, self._gSm
        self._retained_step(g, delta)
        gj = float(np.dot(xj, g))
        v = xj if squared else np.multiply(h, xj, out=self._v)      # H x_j
        cj = float(np.dot(xj, v))
        if not math.isfinite(gj * gj + float(np.dot(gS, gS))):
            self._diverged()
        if not cj > self.floor:
            self._pending = (REJECT, j, xj, 0.0, m)
            return REJECT
        ridge = self.ridge
        cj += ridge
        wj = -gj / cj
        if m < self.budget:
            wj *= self.entry_scale
            _axpy(xj, delta, wj)
            self._pending = (ENTER, j, xj, wj, m)
            return ENTER
        a = np.dot(XS, v, out=self._a[:m])                          # a_jk = x_k^T H x_j
        c = self.curv[:m] if squared else np.einsum("ki,ki,i->k", XS, XS, h, out=self._c[:m])
        w = self._wm
        gp = gj - w * a
        net = -w * gS + 0.5 * w * w * (c + ridge) - 0.5 * gp * gp / cj       # gS includes ridge * w
        k = int(np.argmin(net))
        action = REJECT
        if net[k] < 0.0:
            wj = -float(gp[k]) / cj
            wk = -(w[k] + dw[k])
            action = SUBSTITUTE
            if self.decrease_check:
                u_keep = np.add(u, delta, out=self._tmp)
                f_keep = self.loss.value(self.y, u_keep)
                u_next = self._u_next
                np.copyto(u_next, u_keep)
                _axpy(xj, u_next, wj)
                _axpy(XS[k], u_next, wk)
                f_next = self.loss.value(self.y, u_next) + 0.5 * ridge / self.n * (wj * wj - wk * wk)
                action = SUBSTITUTE if f_next < f_keep else REJECT
                self._record_check(True, action)
            if action == SUBSTITUTE:
                wj *= self.entry_scale
                _axpy(xj, delta, wj)
                _axpy(XS[k], delta, wk)
        self._pending = (action, j, xj, wj, k)
        return action

    def _retained_step(self, g, delta):
        """Alg. 1 line 6 from ``g = n dL/du``: ``dw = -(eta/m) (X_S^T dL/du + ridge w_S / n)`` into the
        scratch (``_gS`` holds the gradient with the ridge's), and ``X_S dw`` into ``delta``
        (``_compiled_step.retained_step`` compiled)."""
        if self.size:
            np.dot(self._XSm, g, out=self._gSm)
            if self.ridge:
                self._gSm += self.ridge * self._wm
            np.multiply(self._gSm, self._retained_scale, out=self._dwm)
            np.dot(self._dwm, self._XSm, out=delta)
        else:
            delta.fill(0.0)

    def set_share(self, share: float) -> None:
        """Exchange under Asy-OS: enter features at ``share`` of their Newton weight and step the
        retained ones by ``share`` of line 6's step (module docstring)."""
        self.entry_scale = float(share)
        self._retained_scale = self._new_scale / self.step_divisor * self.entry_scale

    def _record_check(self, checked, action):
        if checked:
            self.checks += 1
            self.check_rejections += action == REJECT

    def _diverged(self):
        raise DivergenceError(
            f"the weights became non-finite: the step size {self.step_size:.4g} is too large for these "
            f"data (L_F estimated {self.lipschitz:.4g}); pass a smaller --step-size")

    def commit(self):
        """Make the last proposal the state. Returns ``(action, j, left, slot)``: the feature that
        left (``-1`` if none) and the slot now holding ``j`` (``-1`` if rejected)."""
        action, j, xj, wj, k = self._pending
        self._pending = None
        self._wm += self._dwm
        left = -1
        if action == REJECT:
            return action, j, left, -1
        if action == SUBSTITUTE:
            left = int(self.slots[k])
        else:
            self._resize(self.size + 1)
        self.XS[k] = xj
        self.w[k] = wj
        self.slots[k] = j
        if self.variant == "exchange":
            self.curv[k] = float(np.dot(xj, xj))
        return action, j, left, k

    def refuse_small_entry(self, level: float, delta: np.ndarray) -> bool:
        """Turn a pending ``ENTER`` whose new weight is below ``level`` into a ``REJECT`` (its
        ``x_j w_j`` taken out of ``delta``; the retained weights keep their step). The global
        budget's admission rule: a feature that the next step would drop does not enter. The
        weight compared is the decision's (before ``entry_scale``)."""
        action, j, xj, wj, k = self._pending
        if action != ENTER or abs(wj) >= level * self.entry_scale:
            return False
        _axpy(xj, delta, -wj)
        self._pending = (REJECT, j, xj, wj, k)
        return True

    def write_proposed_abs(self, out: np.ndarray) -> int:
        """``|w|`` as ``commit`` would leave them (slot order, the new feature in its slot) into
        ``out``; returns how many."""
        action, j, xj, wj, k = self._pending
        m = self.size
        np.add(self._wm, self._dwm, out=out[:m])
        if action == SUBSTITUTE:
            out[k] = wj
        elif action == ENTER:
            out[m] = wj
            m += 1
        np.abs(out[:m], out=out[:m])
        return m

    def discard(self):
        """Forget the last proposal (the state is unchanged)."""
        self._pending = None

    def drop_below(self, threshold: float, delta: np.ndarray) -> list:
        """Drop every retained feature with ``|w| < threshold`` (the global budget's rule): its
        contribution ``-w_k x_k`` is added to ``delta``; the last slots move into the holes.
        Returns the local indices dropped."""
        dropped = []
        k = 0
        while k < self.size:
            if abs(self.w[k]) < threshold:
                _axpy(self.XS[k], delta, -self.w[k])
                dropped.append(int(self.slots[k]))
                last = self.size - 1
                if k != last:
                    self.XS[k] = self.XS[last]
                    self.w[k] = self.w[last]
                    self.slots[k] = self.slots[last]
                    if self.variant == "exchange":
                        self.curv[k] = self.curv[last]
                self.w[last] = 0.0
                self.slots[last] = -1
                self._resize(last)
            else:
                k += 1
        return dropped

    # ------------------------------------------------------------------------------------------
    @property
    def retained(self) -> np.ndarray:
        """Local indices of the retained features, in slot order."""
        return self.slots[:self.size].copy()

    @property
    def weights(self) -> np.ndarray:
        return self.w[:self.size].copy()

    def contribution(self) -> np.ndarray:
        """``X_S w_S`` recomputed from scratch (for checks; the engine never needs it)."""
        return self.w[:self.size] @ self.XS[:self.size]
