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
"""
from __future__ import annotations

import math

import numpy as np
from scipy.linalg.blas import daxpy

from ..errors import DivergenceError
from . import kernels as _kernels

ENTER, SUBSTITUTE, REJECT = 1, 2, 3
ACTION_NAMES = {ENTER: "enter", SUBSTITUTE: "substitute", REJECT: "reject"}


class SubstitutionState:
    """Retained features, weights and columns of one OS learner (or one Asy-OS worker)."""

    def __init__(self, n_samples, budget, step_size, loss, y, *, step_divisor=1.0,
                 decrease_check=True, decrease_constant=1.0, lipschitz=None, kernels=None, expected_steps=None):
        if budget < 1:
            raise ValueError(f"budget must be at least 1; got {budget}")
        self.n = int(n_samples)
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
        self._resize(0)
        self.checks = 0            # decrease checks evaluated
        self.check_rejections = 0  # substitutions the check turned down

    _VIEWS = ("_XSm", "_wm", "_dwm", "_gSm", "_new_wm", "_abs_wm", "_kernel")

    def __getstate__(self):
        """Views do not survive pickling (they come back as copies): rebuild them instead."""
        return {k: v for k, v in self.__dict__.items() if k not in self._VIEWS}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._resize(self.size)
        self._kernel = self._compiled_step()

    def _compiled_step(self):
        """The compiled step (``None`` on the numpy path)."""
        return _kernels.propose_kernel() if self.kernels == "numba" else None

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
        m = self.size
        kernel = self._kernel
        if kernel is not None:
            action, k, wj, checked = kernel(self._loss_code, self.XS, m, self.w, u, self.y, xj, self._retained_scale,
                                            self._new_scale, self.budget, self.decrease_check,
                                            self.decrease_factor, self._g, self._gS, self._dw, self._new_w,
                                            self._u_next, self._tmp, delta)
            if action == _kernels.DIVERGED:
                self._diverged()
            if checked:
                self.checks += 1
                self.check_rejections += action == REJECT
            self._pending = (action, j, xj, wj, k)
            return action
        g = self.loss.dloss_raw(self.y, u, out=self._g)   # n dL/du
        XS, dw, gS = self._XSm, self._dwm, self._gSm
        if m:
            np.dot(XS, g, out=gS)
            np.multiply(gS, self._retained_scale, out=dw)   # -(eta/m) X_S^T dL/du
            np.dot(dw, XS, out=delta)                       # X_S (w_S' - w_S)
        else:
            delta.fill(0.0)
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
                daxpy(xj, u_next, a=wj)
                daxpy(XS[k], u_next, a=-new_w[k])
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
                daxpy(xj, delta, a=wj)
                daxpy(XS[k], delta, a=-new_w[k])
        if action == ENTER:
            daxpy(xj, delta, a=wj)
        self._pending = (action, j, xj, wj, k)
        return action

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
        return action, j, left, k

    def refuse_small_entry(self, level: float, delta: np.ndarray) -> bool:
        """Turn a pending ``ENTER`` whose new weight is below ``level`` into a ``REJECT`` (its
        ``x_j w_j`` taken out of ``delta``; the retained weights keep their step). The global
        budget's admission rule: a feature that the next step would drop does not enter."""
        action, j, xj, wj, k = self._pending
        if action != ENTER or abs(wj) >= level:
            return False
        daxpy(xj, delta, a=-wj)
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
                daxpy(self.XS[k], delta, a=-self.w[k])
                dropped.append(int(self.slots[k]))
                last = self.size - 1
                if k != last:
                    self.XS[k] = self.XS[last]
                    self.w[k] = self.w[last]
                    self.slots[k] = self.slots[last]
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
