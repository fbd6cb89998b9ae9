"""Following the DFLS solution path in theta (Li & Gu, Secs. 3.2-3.3, App. B and E).

A block of columns *moves*: it is scaled by ``theta`` (``phi_theta = theta``, Sec. 4), so the
problem (eq. 2)

    min_w  1/(2n) ||X_old w_old + theta X_new w_new - y||^2 + alpha R(w)

is the old model at ``theta = 0`` and the model on all columns at ``theta = 1``. Adding features
follows its optimum from 0 to 1, removing them from 1 to 0. Everything is computed from the Gram
matrix ``G = X^T X / n`` and ``c = X^T y / n`` of all the columns involved, so one step of the
path costs ``O(|J|^3)`` for the ``|J|`` active columns, independent of ``n``.

The path is piecewise smooth; the pieces end at *transition points* where a group enters or
leaves the active set.

* **Phase I (eq. 7)**: while no moving group is active, ``w`` does not change with ``theta``;
  when adding, the first moving group ``g`` enters at ``theta = alpha sqrt(d_g) / ||C_g||``,
  ``C_g = X_g^T (y - X w) / n``, computed in closed form.
* **Phase II (eq. 8)**: on a piece with fixed active columns ``J``, ``K dw_J/dtheta = -dF/dtheta``
  where ``F(theta, w_J) = 0`` is the optimality condition (eqs. 11-12) and
  ``K = s G_JJ s + alpha Hess R`` (Theorem 1; ``s`` the column scales). ``K`` is symmetric
  (Theorem 3): it is factored by Cholesky, never inverted. ``scipy.integrate.solve_ivp``
  integrates the ODE; one event function, the smallest of all groups' margins, stops it at the
  next transition point: an active group whose ``w_g`` turns to point against where it pointed
  at the start of the piece (it passed through 0, App. B.1) leaves and is set to 0; an inactive
  group whose ``||s_g C_g||`` reaches ``alpha sqrt(d_g)`` enters with ``w_g = eps C_g`` (Alg. 1,
  line 12). Integration restarts there.

Numerical choices of ours (the paper leaves them open):

* The vector field carries a correction ``-gamma K^{-1} F`` (``correction=gamma``). On the exact
  path ``F = 0`` and it vanishes; off the path (integration error, the ``eps`` start of an
  entering group) it makes ``F`` decay like ``exp(-gamma |theta - theta_0|)`` instead of staying
  constant as it would under eq. 8 alone. ``correction=0`` is eq. 8 verbatim.
* At every transition point and at the end, a few Newton steps on the active columns
  (``polish``) bring ``F`` to rounding level. The residual before this last polish is kept as
  ``kkt_residual_path``, the ODE's own accuracy.
* l_p: at ``theta = 0`` the moving coefficients are 0 and ``K`` is singular there (their
  ``V`` block is ``theta^2 ... + alpha p (p-1) |0|^(p-2)``), while ``w_new`` grows like
  ``theta^(1/(p-1))``. Adding starts at ``theta_0 = start_theta`` from that asymptotic form,
  Newton-corrected; removing integrates down to ``start_theta``, then sets the moving
  coefficients to 0 and polishes the rest (Alg. 4, line 4).
* The lasso (every group a single column, partition I): on a piece the optimum is affine in
  ``lambda = 1 / theta`` (with ``v = s w`` the moving columns' penalty is ``alpha lambda |v_j|``, and the
  optimality conditions on the active columns are linear in ``v`` and ``lambda``), so the path is
  followed exactly from one transition point to the next, LARS-like, without the ODE
  (``follow="auto"``, the default; ``_lasso_kernel``). ``follow="ode"`` integrates eq. 8 as for the
  other penalties. Measured at
  n = 20,000, m = 20 + 5 equicorrelated columns (``bench_dfls.py``): 16 transitions and 596 evaluations
  of the ODE's right-hand side took 44 ms; the exact walk takes about 1 ms for the same end point.
* If the end point still violates optimality (a transition the event missed), the result is
  finished by warm-started FISTA on the Gram matrix and ``fallback`` is set. The tests require
  that this does not happen on their problems.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.integrate
import scipy.linalg
import scipy.linalg.lapack

from ...errors import ConvergenceWarning
from . import _lasso_kernel
from .batch_solvers import fista, lipschitz_constant
from .penalties import GroupLasso

_potrf, _potrs = scipy.linalg.lapack.dpotrf, scipy.linalg.lapack.dpotrs   # Cholesky without the wrappers' cost
MARGIN_TOL = 1e-7          # groups within this margin of a transition at an event change state


@dataclass
class PathOptions:
    method: str = "RK45"
    rtol: float = 1e-4
    atol: float = 1e-8
    correction: float = 10.0
    entry_step: float = 1e-8
    start_theta: float = 1e-3
    polish: bool = True
    max_transitions: int | None = None
    follow: str = "auto"                # "auto": the lasso's affine pieces walked exactly; "ode": eq. 8 for all


@dataclass
class PathSegment:
    theta_from: float
    theta_to: float
    columns: np.ndarray                 # the active columns J while the segment lasts
    kind: str                           # "constant" (Phase I), "ode" (Phase II), "start" (l_p near 0) or
    #                                     "affine" (the lasso: v_J = a + b / theta, v = s w)
    coef_from: np.ndarray               # the full w at theta_from
    coef_to: np.ndarray
    solution: object = None             # scipy OdeSolution of w_J (kind "ode")
    power: float = 1.0                  # the solution's variable is theta^(1/power)
    moving_columns: np.ndarray | None = None   # "affine": which of ``columns`` are scaled by theta

    def contains(self, theta) -> bool:
        lo, hi = sorted((self.theta_from, self.theta_to))
        return lo - 1e-15 <= theta <= hi + 1e-15

    def coef_at(self, theta) -> np.ndarray:
        if self.kind == "constant":
            return self.coef_from.copy()
        if self.kind == "start":
            span = self.theta_to - self.theta_from
            frac = 0.0 if span == 0 else (theta - self.theta_from) / span
            return self.coef_from + frac * (self.coef_to - self.coef_from)
        w = np.zeros_like(self.coef_from)
        if self.kind == "affine":
            a, b = self.solution
            v = a + b / theta if theta > 0 else a
            w[self.columns] = np.where(self.moving_columns, v / max(theta, 1e-300), v)
            return w
        w[self.columns] = self.solution(theta if self.power == 1.0 else theta ** (1.0 / self.power))
        return w


@dataclass
class SolutionPath:
    """The path of the last ``add_features`` / ``remove_features``; ``coef_at(theta)`` reads it.

    Coefficients are those of the standardized problem, over the columns *during* the change
    (old columns then added ones when adding; all columns before the removal when removing)."""
    direction: str                      # "add" or "remove"
    moving: np.ndarray                  # mask of the columns scaled by theta
    segments: list = field(default_factory=list)
    transitions: list = field(default_factory=list)   # dicts: theta, group, event, moving
    phase1_theta: float | None = None   # add: where Phase I ends (eq. 7, clipped to 1)
    n_rhs: int = 0                      # evaluations of the ODE's right-hand side
    n_newton: int = 0
    kkt_residual_path: float = np.nan   # at the end point, before the final polish
    kkt_residual: float = np.nan        # at the end point, after it
    fallback: bool = False
    seconds: float = 0.0

    @property
    def transition_thetas(self) -> np.ndarray:
        return np.array([t["theta"] for t in self.transitions])

    def coef_at(self, theta) -> np.ndarray:
        for seg in self.segments:
            if seg.contains(theta):
                return seg.coef_at(theta)
        raise ValueError(f"theta = {theta} is outside the path")

    def sample(self, n_points=201):
        """``(thetas, coefs)`` on a grid over the path plus every segment end."""
        lo = min(min(s.theta_from, s.theta_to) for s in self.segments)
        hi = max(max(s.theta_from, s.theta_to) for s in self.segments)
        ends = [s.theta_from for s in self.segments] + [s.theta_to for s in self.segments]
        thetas = np.unique(np.concatenate([np.linspace(lo, hi, n_points), ends]))
        return thetas, np.array([self.coef_at(t) for t in thetas])


class PathProblem:
    """The quadratic problem of eq. 2 on Gram form: ``1/2 u^T G u - c^T u + alpha R(w)``, ``u = s w``,
    ``s_j = theta`` on the moving columns and 1 elsewhere."""

    def __init__(self, gram, xty, moving, penalty, alpha, design=None):
        self.gram = gram
        self.xty = xty
        self.design = design          # the standardized n x m data behind gram, if known (used when n < m)
        self.moving = np.asarray(moving, dtype=bool)
        self.penalty = penalty
        self.alpha = float(alpha)
        self.sparse = isinstance(penalty, GroupLasso)
        self.group_moving = np.array([self.moving[m].any() for m in penalty.members])
        self.scale_ = max(1.0, float(np.max(np.abs(xty), initial=0.0)))   # units of the gradient

    def scale(self, theta) -> np.ndarray:
        return np.where(self.moving, theta, 1.0)

    def columns_of(self, groups) -> np.ndarray:
        if len(groups) == 0:
            return np.zeros(0, dtype=np.intp)
        return np.concatenate([self.penalty.members[g] for g in groups])

    def active_groups(self, w) -> list:
        return np.flatnonzero(self.group_norms_of(w) > 0).tolist()

    def loss_gradient(self, w, theta) -> np.ndarray:
        s = self.scale(theta)
        nz = np.flatnonzero(w)
        return s * (self.gram[:, nz] @ (s[nz] * w[nz]) - self.xty)

    def objective(self, w, theta) -> float:
        u = self.scale(theta) * w
        nz = np.flatnonzero(u)
        return 0.5 * u[nz] @ self.gram[np.ix_(nz, nz)] @ u[nz] - self.xty[nz] @ u[nz] \
            + self.alpha * self.penalty.value(w)

    def kkt_residual(self, w, theta) -> float:
        groups = self.penalty.stationarity(w, self.loss_gradient(w, theta), self.alpha)
        if theta == 0:          # moving columns do not exist at theta = 0
            groups = groups[~self.group_moving]
        return float(np.max(groups, initial=0.0))

    def group_norms_of(self, v) -> np.ndarray:
        if self.sparse:
            return self.penalty.group_norms(v)
        return np.abs(v)

    def piece(self, groups, reference=None) -> "Piece":
        return Piece(self, list(groups), reference)


class Piece:
    """The problem restricted to the columns ``J`` of fixed active ``groups`` (one smooth piece of
    the path): ``F``, ``dF/dtheta``, ``K`` and the transition margins as functions of ``w_J``,
    with the sub-matrices they need taken once."""

    def __init__(self, problem: PathProblem, groups, reference=None):
        pb = self.problem = problem
        self.reference = reference
        self.groups = groups
        self.columns = cols = pb.columns_of(groups)
        self.moving = pb.moving[cols]
        self.dscale = self.moving.astype(float)
        # l_p with fewer samples than active columns: work from the data (n x |J|), not the Gram
        self.data = pb.design[:, cols] if (pb.design is not None and not pb.sparse
                                           and 2 * pb.design.shape[0] <= cols.size) else None
        self.gram = pb.gram[np.ix_(cols, cols)] if self.data is None else None
        self.gram_all = pb.gram[:, cols]
        self.xty = pb.xty[cols]
        sizes = pb.penalty.sizes[groups] if len(groups) else np.zeros(0, dtype=np.intp)
        self.sizes = sizes
        self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp) if len(groups) else sizes
        self.weights = np.repeat(pb.penalty.weights[groups], sizes) if len(groups) else np.zeros(0)
        self.blocks = [(int(a), int(a + k), float(pb.penalty.weights[g]))
                       for a, k, g in zip(self.starts, sizes, groups) if k > 1]
        self.alpha = pb.alpha

    def _norms(self, wj):
        return np.sqrt(np.add.reduceat(wj * wj, self.starts))

    def _signed_norms(self, wj):
        """``rho_g = +-||w_g||``, negative once ``w_g`` points against the piece's reference: with
        ``w_g / rho_g`` in place of ``w_g / ||w_g||`` the vector field stays continuous where a
        group passes through 0 (there ``w_g ~ rho_g u_g``), so the integrator steps across it
        and the event finds the crossing."""
        norms = self._norms(wj)
        if self.reference is None:
            return norms
        return np.where(np.add.reduceat(wj * self.reference, self.starts) >= 0, norms, -norms)

    def penalty_gradient(self, wj):
        if not self.problem.sparse:
            return self.problem.penalty.gradient(wj)
        return self.weights * wj / np.repeat(self._signed_norms(wj), self.sizes)

    def penalty_hessian(self, wj):
        if not self.problem.sparse:
            return np.diag(self.problem.penalty.curvature(wj))
        H = np.zeros((wj.size, wj.size))
        for a, b, weight in self.blocks:        # a singleton's block is 0
            v = wj[a:b]
            norm = np.linalg.norm(v)
            rho = norm if self.reference is None or v @ self.reference[a:b] >= 0 else -norm
            H[a:b, a:b] = weight * (np.eye(b - a) / rho - np.outer(v, v) / (rho * norm * norm))
        return H

    def _gram_times(self, v):
        if self.data is None:
            return self.gram @ v
        return self.data.T @ (self.data @ v) / self.data.shape[0]

    def system(self, theta, wj):
        """``F`` (eqs. 11-12), ``dF/dtheta`` and ``K`` (Theorem 1) on the piece's columns. ``K`` is
        a matrix, or for l_p with fewer samples than columns a ``LowRankPlusDiagonal`` solved by
        the Woodbury identity (the paper's remark after Theorem 3)."""
        s = np.where(self.moving, theta, 1.0)
        r = self._gram_times(s * wj) - self.xty
        F = s * r + self.alpha * self.penalty_gradient(wj)
        dF = self.dscale * r + s * self._gram_times(self.dscale * wj)
        if self.data is not None:
            diagonal = self.alpha * self.problem.penalty.curvature(wj)
            if np.all(diagonal > 0) and np.all(np.isfinite(diagonal)):
                return F, dF, LowRankPlusDiagonal(self.data * (s / np.sqrt(self.data.shape[0])), diagonal)
            K = s[:, None] * (self.data.T @ self.data / self.data.shape[0]) * s[None, :] + np.diag(diagonal)
            return F, dF, K
        K = s[:, None] * self.gram * s[None, :] + self.alpha * self.penalty_hessian(wj)
        return F, dF, K

    def objective(self, theta, wj) -> float:
        u = np.where(self.moving, theta, 1.0) * wj
        if self.problem.sparse:
            reg = float(self.problem.penalty.weights[self.groups] @ self._norms(wj)) if wj.size else 0.0
        else:
            reg = float(np.sum(np.abs(wj) ** self.problem.penalty.exponent))
        return 0.5 * u @ self._gram_times(u) - self.xty @ u + self.alpha * reg

    def margins(self, theta, wj, reference):
        """Distance of every group from a transition: active ``g``: ``<w_g, w_g^0> / ||w_g^0||^2``
        (1 at the segment start, 0 where ``w_g`` passes through 0, App. B.1); inactive ``g``:
        ``1 - ||s_g C_g|| / (alpha sqrt(d_g))`` (0 where it reaches the threshold, eq. 16)."""
        pb = self.problem
        s_all = pb.scale(theta)
        grad = s_all * (self.gram_all @ (s_all[self.columns] * wj) - pb.xty)
        out = 1.0 - pb.group_norms_of(grad) / (self.alpha * pb.penalty.weights)
        if wj.size:
            out[self.groups] = np.add.reduceat(wj * reference, self.starts) \
                / np.add.reduceat(reference * reference, self.starts)
        return out


class LowRankPlusDiagonal:
    """``K = A^T A + diag(d)``, ``A`` of shape ``(n, m)`` with ``n < m``, ``d > 0``: solved through the
    ``n x n`` matrix ``I + A diag(1/d) A^T`` (Woodbury), ``O(n^2 m)`` instead of ``O(m^3)``."""

    def __init__(self, A, d):
        self.A, self.d = A, d

    def solve(self, b):
        A, d = self.A, self.d
        scaled = A / d
        capacitance = scaled @ A.T
        capacitance[np.diag_indices_from(capacitance)] += 1.0
        return b / d - (scaled.T @ solve_symmetric(capacitance, scaled @ b))


def solve_symmetric(K, b):
    """``K^{-1} b`` for the symmetric ``K`` (Theorem 3): Cholesky, never an inverse; a symmetric
    indefinite solve if ``K`` is not positive definite."""
    if isinstance(K, LowRankPlusDiagonal):
        return K.solve(b)
    factor, info = _potrf(K, lower=True, clean=False)
    if info == 0:
        return _potrs(factor, b, lower=True)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)   # near-singular K: the polish checks
        try:
            return scipy.linalg.solve(K, b, assume_a="sym", check_finite=False)
        except np.linalg.LinAlgError:                                 # singular: the least-norm solution
            return np.linalg.lstsq(K, b, rcond=1e-14)[0]


def well_conditioned(K, rcond=1e-12) -> bool:
    """``K`` positive definite with a reciprocal condition number (LAPACK's estimate) above ``rcond``."""
    if isinstance(K, LowRankPlusDiagonal):
        return True
    factor, info = _potrf(K, lower=True, clean=False)
    if info != 0:
        return False
    estimate, info = scipy.linalg.lapack.dpocon(factor, float(np.max(np.sum(np.abs(K), axis=0))), uplo="L")
    return info == 0 and estimate > rcond


def newton_polish(problem: PathProblem, w, theta, groups, tol, max_iter=50):
    """Newton steps with backtracking on the smooth problem over ``groups``' columns at ``theta``.
    Returns ``(w, steps, converged)``; stops early if a group collapses to 0 (the active set is
    then wrong and the caller must not trust the result)."""
    piece = problem.piece(groups)
    if piece.columns.size == 0:
        return w.copy(), 0, True
    wj = w[piece.columns].copy()
    for it in range(max_iter):
        F, _, K = piece.system(theta, wj)
        if np.max(np.abs(F)) <= tol:
            break
        if not well_conditioned(K):       # a degenerate active set (as many columns as the data's rank):
            break                         # Newton has no reliable step; the caller falls back
        direction = -solve_symmetric(K, F)
        f0 = piece.objective(theta, wj)
        slope = min(float(F @ direction), 0.0)
        step = 1.0
        while step > 1e-12:
            trial = wj + step * direction
            if piece.objective(theta, trial) <= f0 + 1e-4 * step * slope + 1e-15 * abs(f0):
                break
            step *= 0.5
        else:                      # no decrease along the Newton direction: stop where we are
            break
        wj = trial
        if problem.sparse and np.min(piece._norms(wj)) <= 1e-12 * max(1.0, np.max(np.abs(wj))):
            break
    else:
        it = max_iter
    F, _, _ = piece.system(theta, wj)
    out = w.copy()
    out[piece.columns] = wj
    return out, it, bool(np.max(np.abs(F)) <= tol)


class _Follower:
    """One walk along the path from ``theta_from`` to ``theta_to``."""

    def __init__(self, problem: PathProblem, options: PathOptions, direction: str):
        self.problem = problem
        self.opt = options
        self.path = SolutionPath(direction=direction, moving=problem.moving.copy())
        self.tol = 1e-10 * problem.scale_
        self.last = None                  # where the walk was before its current piece
        self.max_transitions = options.max_transitions if options.max_transitions is not None \
            else 10 * problem.penalty.n_groups + 50

    # -- pieces ---------------------------------------------------------------------------------
    def polish(self, w, theta, groups):
        if not self.opt.polish:
            return w
        w, steps, _ = newton_polish(self.problem, w, theta, groups, self.tol)
        self.path.n_newton += steps
        return w

    def integrate(self, w, theta, theta_to, groups, events=True, power=1.0):
        """One smooth piece; returns ``(w, theta_reached, (piece, reference, offset) or None)``.
        With ``power = q != 1`` the ODE is integrated in ``tau = theta^(1/q)`` (``dw/dtau =
        dw/dtheta q tau^(q-1)``), where a path that grows like ``theta^(1/q)`` is smooth."""
        pb, opt = self.problem, self.opt
        columns = pb.columns_of(groups)
        reference = w[columns].copy()
        piece = pb.piece(groups, reference)
        # a group that starts a piece a hair past its threshold (rounding at the last transition)
        # must not hide the others' crossings: each group's margin is measured from
        # min(0, its start value)
        offset = np.minimum(piece.margins(theta, reference, reference), 0.0) if pb.sparse else None

        # the correction pulls F to 0 in the direction of travel: dF/d|theta| = -gamma F
        gamma = opt.correction if theta_to > theta else -opt.correction

        def rhs(t, y):
            self.path.n_rhs += 1
            F, dF, K = piece.system(t, y)
            return -solve_symmetric(K, dF + gamma * F)

        def rhs_in_tau(tau, y):
            self.path.n_rhs += 1
            F, dF, K = piece.system(tau ** power, y)
            return -solve_symmetric(K, power * tau ** (power - 1.0) * dF + gamma * F)

        def event(t, y):
            return float(np.min(piece.margins(t, y, reference) - offset)) + MARGIN_TOL
        event.terminal = True
        event.direction = -1

        try:
            sol = self._solve_ivp(rhs, rhs_in_tau, event, theta, theta_to, w[columns], events, power)
        except (np.linalg.LinAlgError, FloatingPointError, ValueError) as exc:
            raise _PathBroken(f"the ODE could not be integrated from theta = {theta:.6g} ({exc})") from None
        if sol.status == -1:
            raise _PathBroken(f"the ODE solver failed at theta = {sol.t[-1]:.6g} ({sol.message})")
        stopped = sol.status == 1 and sol.t_events[0].size > 0
        t_end = float(sol.t_events[0][0]) if stopped else float(sol.t[-1])
        y_end = sol.y_events[0][0] if stopped else sol.y[:, -1]
        w_end = w.copy()
        w_end[columns] = y_end
        self.path.segments.append(PathSegment(theta, t_end, columns, "ode", w.copy(), w_end.copy(), sol.sol, power))
        return w_end, t_end, (piece, reference, offset) if stopped else None

    def _solve_ivp(self, rhs, rhs_in_tau, event, theta, theta_to, start, events, power):
        pb, opt = self.problem, self.opt
        if power != 1.0:
            sol = scipy.integrate.solve_ivp(rhs_in_tau, (theta ** (1 / power), theta_to ** (1 / power)), start,
                                            method=opt.method, rtol=opt.rtol, atol=opt.atol, dense_output=True)
            sol.t = sol.t ** power
        else:
            sol = scipy.integrate.solve_ivp(rhs, (theta, theta_to), start, method=opt.method, rtol=opt.rtol,
                                            atol=opt.atol, dense_output=True,
                                            events=event if (events and pb.sparse) else None)
        return sol

    def transition(self, w, theta, groups, piece):
        """At an event: move the groups at a transition, polish, start the entering ones."""
        pb = self.problem
        piece, reference, offset = piece
        margins = piece.margins(theta, w[piece.columns], reference) - offset
        changing = set(np.flatnonzero(margins <= MARGIN_TOL).tolist()) | {int(np.argmin(margins))}
        leaving = [g for g in changing if g in groups]
        entering = [g for g in changing if g not in groups]
        for g in leaving:
            w[pb.penalty.members[g]] = 0.0
            self.record(theta, g, "leave")
        staying = [g for g in groups if g not in leaving]
        w = self.polish(w, theta, staying)
        w = self.enter(w, theta, entering)
        return w, staying + entering

    def enter(self, w, theta, entering):
        """``w_g = eps C_g / ||C_g||`` for each entering group (Alg. 1, line 12)."""
        pb = self.problem
        grad = pb.loss_gradient(w, theta)
        eps = self.opt.entry_step * max(1.0, float(np.max(np.abs(w), initial=0.0)))
        for g in entering:
            m = pb.penalty.members[g]
            w[m] = -eps * grad[m] / np.linalg.norm(grad[m])
            self.record(theta, g, "enter")
        return w

    def record(self, theta, g, event):
        pb = self.problem
        label = pb.penalty.group_labels[g].item() if pb.sparse else g
        self.path.transitions.append(dict(theta=float(theta), group=label, event=event,
                                          moving=bool(pb.group_moving[g])))
        if len(self.path.transitions) > self.max_transitions:
            raise _PathBroken(f"the path crossed more than {self.max_transitions} transition points")

    def constant(self, w, theta_from, theta_to, groups):
        self.path.segments.append(PathSegment(theta_from, theta_to, self.problem.columns_of(groups), "constant",
                                              w.copy(), w.copy()))

    def next_entry(self, w):
        """Adding with no moving group active: ``w`` is constant in theta and moving group ``g``
        enters at ``alpha sqrt(d_g) / ||C_g||`` (eq. 7)."""
        pb = self.problem
        grad = pb.loss_gradient(w, 1.0)
        best, who = np.inf, []
        for g in np.flatnonzero(pb.group_moving):
            norm = np.linalg.norm(grad[pb.penalty.members[g]])
            if norm > 0:
                t = pb.alpha * pb.penalty.weights[g] / norm
                if t < best * (1 - 1e-12):
                    best, who = t, [g]
                elif t <= best * (1 + 1e-12):
                    who.append(g)
        return best, who


class _PathBroken(Exception):
    pass


def follow_path(problem: PathProblem, w_start, direction: str, options: PathOptions | None = None):
    """Follow the optimum of eq. 2 from ``theta = 0`` to 1 (``"add"``) or 1 to 0 (``"remove"``),
    starting from the optimum ``w_start``. Returns ``(w, SolutionPath)``; ``w`` is optimal at the
    end (its moving coefficients are 0 after a removal)."""
    options = options or PathOptions()
    t0 = time.perf_counter()
    walker = _Follower(problem, options, direction)
    w = np.array(w_start, dtype=float)
    try:
        if problem.sparse and options.follow == "auto" and np.all(problem.penalty.sizes == 1):
            w = _lasso_walk(walker, w, direction)
        elif problem.sparse:
            w = _group_lasso_walk(walker, w, direction)
        else:
            w = _lp_walk(walker, w, direction)
    except _PathBroken as exc:
        warnings.warn(f"{exc}; the change was finished by FISTA from where the path stopped",
                      ConvergenceWarning, stacklevel=2)
        walker.path.fallback = True
        w = walker.last if walker.last is not None else w
    theta_end = 1.0 if direction == "add" else 0.0
    if direction == "remove":
        w[problem.moving] = 0.0
    path = walker.path
    path.kkt_residual_path = problem.kkt_residual(w, theta_end)
    groups = [g for g in problem.active_groups(w) if not (theta_end == 0 and problem.group_moving[g])]
    w = walker.polish(w, theta_end, groups)
    path.kkt_residual = problem.kkt_residual(w, theta_end)
    if path.fallback or path.kkt_residual > 1e3 * walker.tol:
        w = _finish_by_fista(problem, w, theta_end, walker)
        path.fallback = True
        path.kkt_residual = problem.kkt_residual(w, theta_end)
    path.seconds = time.perf_counter() - t0
    return w, path


def _group_lasso_walk(walker: _Follower, w, direction):
    pb = walker.problem
    theta, theta_to = (0.0, 1.0) if direction == "add" else (1.0, 0.0)
    theta_stop = 1.0 if direction == "add" else walker.opt.start_theta
    groups = pb.active_groups(w)
    while theta != theta_to:
        moving_active = any(pb.group_moving[g] for g in groups)
        if not moving_active:
            if direction == "remove":            # w_E = 0: the rest is optimal all the way to 0 (App. E.1)
                walker.constant(w, theta, theta_to, groups)
                return w
            entry, who = walker.next_entry(w)    # Phase I (eq. 7)
            if walker.path.phase1_theta is None:
                walker.path.phase1_theta = float(min(entry, 1.0))
            if entry >= theta_to:
                walker.constant(w, theta, theta_to, groups)
                return w
            walker.constant(w, theta, entry, groups)
            theta = entry
            w = walker.enter(w, theta, who)
            groups = groups + who
            continue
        walker.last = w
        w, theta, piece = walker.integrate(w, theta, theta_stop, groups)
        if piece is not None:
            w, groups = walker.transition(w, theta, groups, piece)
        elif theta == theta_stop != theta_to:
            # removing, and a moving group is still active this close to 0 (where K turns
            # singular): stop following; the end point is finished by FISTA
            raise _PathBroken(f"moving features were still active at theta = {theta:g}")
    return w


def _lasso_walk(walker: _Follower, w, direction):
    """The lasso's path, exactly (``_lasso_kernel``): with ``v = s w`` and ``lam = 1 / theta`` each piece
    is affine in ``lam``, from one transition point to the next. Adding walks ``lam`` from infinity
    down to 1 (its first piece is Phase I, eq. 7), removing from 1 up until no moving column is
    active (the rest is then optimal all the way to ``theta = 0``, App. E.1)."""
    pb = walker.problem
    moving = pb.moving
    group = np.empty(moving.size, dtype=np.intp)
    group[pb.penalty.order] = np.arange(pb.penalty.n_groups)         # singletons: one group a column
    bound = pb.alpha * pb.penalty.weights[group]                       # alpha omega_j
    adding = direction == "add"
    v = np.where(moving, 0.0, w) if adding else w.copy()
    status, v_end, lam, pieces, columns, a, b, events = _lasso_kernel.lasso_walk(
        np.ascontiguousarray(pb.gram), pb.xty, bound, moving, v, adding, walker.max_transitions + 1, 1e-10)
    for index, (lam_from, lam_to, offset, size) in enumerate(pieces):
        part = slice(int(offset), int(offset + size))
        _record_piece(walker, lam_from, lam_to, columns[part], a[part], b[part],
                      start=_w_of(v, moving, lam_from) if index == 0 else None)
        for _, column, kind in events[events[:, 0] == index]:
            walker.record(1.0 / lam_to, group[column], "enter" if kind else "leave")
    if len(pieces):
        walker.last = walker.path.segments[-1].coef_from       # where the last piece began
    if adding:
        entered = events[events[:, 2] == 1]
        walker.path.phase1_theta = float(1.0 / pieces[int(entered[0, 0]), 1]) if entered.size else 1.0
    if status == _lasso_kernel.TOO_MANY:
        raise _PathBroken(f"the path crossed more than {walker.max_transitions} transition points")
    if status == _lasso_kernel.SINGULAR:
        raise _PathBroken(f"the active columns' Gram matrix is singular at theta = {1.0 / lam:.6g}")
    if status == _lasso_kernel.STUCK:
        raise _PathBroken("moving features stayed active all the way to theta = 0")
    w_end = _w_of(v_end, moving, lam)
    if not adding:
        walker.constant(w_end, 1.0 / lam, 0.0, np.flatnonzero(v_end))
    return w_end


def _spread(columns, values, size):
    out = np.zeros(size)
    out[columns] = values
    return out


def _w_of(v, moving, lam):
    """``w = v / s`` (``s = theta = 1 / lam`` on the moving columns; they are 0 at ``lam = inf``)."""
    if not np.isfinite(lam):
        return np.where(moving, 0.0, v)
    return np.where(moving, v * lam, v)


def _record_piece(walker, lam_from, lam_to, columns, a, b, start=None):
    """The piece from ``lam_from`` to ``lam_to`` as a segment in theta (constant while no moving column
    is active: ``w`` does not change then); ``start``: the walk's own first point, which the piece's
    solve reproduces to rounding only."""
    moving = walker.problem.moving
    size = moving.size
    theta_from = 0.0 if not np.isfinite(lam_from) else 1.0 / lam_from
    w_from = _w_of(_spread(columns, a + lam_from * b if np.isfinite(lam_from) else a, size), moving, lam_from) \
        if start is None else start
    if not moving[columns].any():
        walker.path.segments.append(PathSegment(theta_from, 1.0 / lam_to, columns.copy(), "constant", w_from,
                                                w_from.copy()))
        return
    w_to = _w_of(_spread(columns, a + lam_to * b, size), moving, lam_to)
    walker.path.segments.append(PathSegment(theta_from, 1.0 / lam_to, columns.copy(), "affine", w_from, w_to,
                                            solution=(a.copy(), b.copy()), moving_columns=moving[columns].copy()))


def _lp_walk(walker: _Follower, w, direction):
    pb, opt = walker.problem, walker.opt
    everything = list(range(pb.penalty.n_groups))
    fixed = [g for g in everything if not pb.group_moving[g]]
    theta0 = opt.start_theta
    power = max(1.0, pb.penalty.exponent - 1.0)           # w_new grows like theta^(1/(p-1)) near 0
    walker.last = w.copy()
    if direction == "add":
        start = w.copy()
        grad = pb.loss_gradient(w, 1.0)                   # -C on the moving columns, w_new = 0
        p = pb.penalty.exponent
        m = pb.moving
        w[m] = -np.sign(grad[m]) * (theta0 * np.abs(grad[m]) / (pb.alpha * p)) ** (1.0 / (p - 1.0))
        w, steps, _ = newton_polish(pb, w, theta0, everything, walker.tol)
        walker.path.n_newton += steps
        walker.path.segments.append(PathSegment(0.0, theta0, pb.columns_of(everything), "start", start, w.copy()))
        walker.last = w.copy()
        w, _, _ = walker.integrate(w, theta0, 1.0, everything, events=False, power=power)
    else:
        w, _, _ = walker.integrate(w, 1.0, theta0, everything, events=False, power=power)
        end = w.copy()
        end[pb.moving] = 0.0
        walker.path.segments.append(PathSegment(theta0, 0.0, pb.columns_of(fixed), "start", w.copy(), end))
    return w


def _finish_by_fista(problem: PathProblem, w, theta, walker: _Follower):
    """Where the path could not be followed to the end: FISTA from where it stopped, each run
    finished by Newton on its active set, with a tighter tolerance until the KKT residual is met."""
    s = problem.scale(theta)
    keep = ~problem.moving if theta == 0 else np.ones_like(problem.moving)
    c = problem.xty * s
    Z = problem.design
    if Z is not None and Z.shape[0] < Z.shape[1]:
        Z = Z * s

        def gradient(v):
            return Z.T @ (Z @ v) / Z.shape[0] - c
        lipschitz = lipschitz_constant(Z)
    else:
        G = problem.gram * s[:, None] * s[None, :]

        def gradient(v):
            return G @ v - c
        lipschitz = float(scipy.linalg.eigvalsh(G, subset_by_index=[G.shape[0] - 1, G.shape[0] - 1])[0])
    w = np.where(keep, w, 0.0)
    for tol in (1e-6, 1e-9, 1e-12, 1e-15):
        if problem.sparse:
            w, _, _ = fista(gradient, lipschitz, problem.penalty, problem.alpha, w, tol=tol, max_iter=100_000)
        groups = [g for g in problem.active_groups(w) if not (theta == 0 and problem.group_moving[g])]
        w = np.where(keep, walker.polish(w, theta, groups), 0.0)
        if problem.kkt_residual(w, theta) <= 10 * walker.tol or not problem.sparse:
            break
    return w
