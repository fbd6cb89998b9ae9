"""Losses written on ``u = Xw`` (KDD'16 eqs. 2-5).

Every loss is an average over samples of an elementwise function of ``u``, so a worker that owns
the columns ``S`` needs only ``X_S.T @ loss.dloss(y, u)`` for its partial gradient. Each loss gives

* ``value(y, u)``      the objective ``L(u, y)`` (a scalar),
* ``dloss(y, u)``      the vector ``dL/du`` (the ``1/n`` is included); ``dloss_raw`` is ``n dL/du``,
                       for kernels that fold the ``1/n`` into their own scalars,
* ``d2loss(y, u)``     the diagonal of ``d^2 L / du^2`` (the ``1/n`` is included); ``d2loss_raw`` is
                       ``n d^2L/du^2``,
* ``curvature``        an upper bound of ``n * d2loss``: the Hessian of ``L`` in ``w`` is bounded by
                       ``curvature * X.T @ X / n``, which is how Lipschitz constants are estimated,
* ``predict(u)`` and ``error(y, u)``: prediction and the task's error metric (RMSE or
  misclassification rate),
* ``intercept_step(y, u)``: the Newton step of an unpenalised intercept ``b`` (``u = Xw + b``),
  ``-sum(dloss_raw) / sum(d2loss_raw)`` (0 where the loss has no curvature), and
  ``best_intercept(y)``: the intercept of the empty model ``u = b``.

Classification losses require labels in ``{-1, +1}`` and say so when they are not.

**One definition per loss.** Each class below is the only place its loss is written: the per-sample
scalar functions ``value1(y, u)``, ``dloss1(y, u)`` and ``d2loss1(y, u)`` (plain ``math``, so that
numba compiles them), and, next to them, the numpy vector forms behind the methods above (one call
per vector: a Python loop over the scalar functions costs ~1 us per sample, 100x the numpy form).
``TABLE`` is the one table of loss codes (``code`` = position); the compiled kernels
(``learners/_compiled_step.py``, ``learners/_stream_kernels.py``) call the module-level
``value1(code, y, u)``, ``dloss1(code, y, u)`` and ``d2loss1(code, y, u)``, which numba compiles
into a branch per loss of ``TABLE`` (``asyos/losses/compiled.py``); without numba they run as written
here. ``tests/test_losses.py`` checks every entry of ``TABLE``: derivatives against finite
differences, the curvature bound, vector forms against scalar ones, compiled against plain.

``hinge`` (``max(0, 1 - y u)``, the margin rule of OFS and SOFS) is in the table but not smooth:
``get_loss`` gives it only to callers that accept a non-smooth loss (``smooth=False``, the
sample-stream learners); Online Substitution and the other solvers need a second derivative.

Adding a loss: a subclass here, added to ``TABLE`` (its aliases, if any, in ``aliases``).

scipy's ``expit`` is imported where the logistic loss uses it, not at the top: ``scipy.special``
takes 0.5 s to import, and every rank of an ``mpiexec`` job imports this module (13 ranks on 2
cores: 3 s of the job's start-up for a loss most runs do not use).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InputError


class Loss:
    name: str = ""
    task: str = ""          # "regression" or "classification"
    curvature: float = 1.0
    smooth: bool = True     # False: no second derivative (d2loss1 is 0 a.e.); refused where one is needed
    kink: float | None = None   # the margin ``y u`` at which a derivative jumps (checked around in the tests)
    aliases: tuple = ()
    code: int = -1          # the position in ``TABLE``, set there

    # -- the definition: one sample (n = 1), compiled by numba in the kernels ----------------------
    @staticmethod
    def value1(y, u):
        raise NotImplementedError

    @staticmethod
    def dloss1(y, u):
        raise NotImplementedError

    @staticmethod
    def d2loss1(y, u):
        raise NotImplementedError

    # -- vector forms (numpy); the defaults loop over the scalar functions, subclasses write them in numpy
    def values(self, y, u):
        """The per-sample losses (``value`` is their mean)."""
        return np.array([self.value1(a, b) for a, b in zip(np.asarray(y, dtype=float), np.asarray(u, dtype=float))])

    def value(self, y, u) -> float:
        return float(np.mean(self.values(y, u)))

    def dloss(self, y, u, out=None):
        out = self.dloss_raw(y, u, out=out)
        out *= 1.0 / out.shape[0]
        return out

    def dloss_raw(self, y, u, out=None):
        return _elementwise(self.dloss1, y, u, out)

    def d2loss(self, y, u):
        out = self.d2loss_raw(y, u)
        out *= 1.0 / out.shape[0]
        return out

    def d2loss_raw(self, y, u, out=None):
        return _elementwise(self.d2loss1, y, u, out)

    def intercept_step(self, y, u, grad=None, hess=None) -> float:
        """Newton step of the intercept at ``u`` (``grad``, ``hess``: scratch of length n)."""
        curvature = float(self.d2loss_raw(y, u, out=hess).sum())
        if not curvature > 0.0:
            return 0.0
        return -float(self.dloss_raw(y, u, out=grad).sum()) / curvature

    def best_intercept(self, y, max_steps: int = 50) -> float:
        """The minimiser of ``L(b 1, y)`` over ``b``, by Newton steps from 0 (one for the squared
        loss; the others converge in a few)."""
        b, u = 0.0, np.zeros(np.shape(y)[0])
        for _ in range(max_steps):
            step = self.intercept_step(y, u)
            b += step
            u.fill(b)
            if abs(step) <= 1e-12 * max(1.0, abs(b)):
                break
        return b

    def check_labels(self, y, where: str = "y") -> None:
        """Raise ``InputError`` when ``y`` cannot be used with this loss."""

    def predict(self, u):
        return np.asarray(u, dtype=float)

    def error(self, y, u) -> float:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _elementwise(scalar, y, u, out):
    if out is None:
        out = np.empty(np.shape(u))
    for i, (a, b) in enumerate(zip(np.asarray(y, dtype=float), np.asarray(u, dtype=float))):
        out[i] = scalar(a, b)
    return out


class Squared(Loss):
    """``L = 1/(2n) ||u - y||^2`` (KDD'16 eq. 2); ``dL/du = (u - y)/n`` (eq. 4)."""

    name = "squared"
    task = "regression"
    curvature = 1.0
    aliases = ("squared_loss", "least_squares")

    @staticmethod
    def value1(y, u):
        r = u - y
        return 0.5 * r * r

    @staticmethod
    def dloss1(y, u):
        return u - y

    @staticmethod
    def d2loss1(y, u):
        return 1.0

    def values(self, y, u):
        r = np.subtract(u, y)
        return 0.5 * r * r

    def value(self, y, u):
        r = u - y
        return 0.5 * float(r @ r) / r.shape[0]

    def dloss_raw(self, y, u, out=None):
        return np.subtract(u, y, out=out)

    def d2loss_raw(self, y, u, out=None):
        if out is None:
            return np.ones(np.shape(u))
        out.fill(1.0)
        return out

    def error(self, y, u):
        r = np.asarray(u) - y
        return float(np.sqrt(np.mean(r * r)))


class _BinaryLoss(Loss):
    task = "classification"

    def check_labels(self, y, where="y"):
        y = np.asarray(y)
        bad = ~((y == 1) | (y == -1))
        if bad.any():
            found = np.unique(y[bad])[:5]
            shown = ", ".join(f"{v:g}" for v in found)
            raise InputError(
                f"labels in {where} must be -1 or +1 for the {self.name} loss; found {shown}"
                f"{' ...' if np.unique(y[bad]).size > 5 else ''} "
                f"(map them to -1/+1, or use --loss squared for regression)"
            )

    def predict(self, u):
        return np.where(np.asarray(u) >= 0, 1.0, -1.0)

    def error(self, y, u):
        return float(np.mean(self.predict(u) != y))


class SquaredHinge(_BinaryLoss):
    """``L = 1/(2n) sum max(0, 1 - y_i u_i)^2`` (KDD'16 eq. 3);
    ``dL/du = -(1/n) max(0, 1 - u o y) o y`` (eq. 5)."""

    name = "squared_hinge"
    curvature = 1.0
    kink = 1.0
    aliases = ("hinge_squared", "squared-hinge")

    @staticmethod
    def value1(y, u):
        slack = 1.0 - y * u
        return 0.5 * slack * slack if slack > 0.0 else 0.0

    @staticmethod
    def dloss1(y, u):
        slack = 1.0 - y * u
        return -y * slack if slack > 0.0 else 0.0

    @staticmethod
    def d2loss1(y, u):
        return 1.0 if y * u < 1.0 else 0.0

    def values(self, y, u):
        slack = np.maximum(0.0, 1.0 - y * u)
        return 0.5 * slack * slack

    def value(self, y, u):
        slack = np.maximum(0.0, 1.0 - y * u)
        return 0.5 * float(slack @ slack) / slack.shape[0]

    def dloss_raw(self, y, u, out=None):
        out = np.multiply(y, u, out=out)
        np.subtract(1.0, out, out=out)
        np.maximum(out, 0.0, out=out)
        out *= y
        return np.negative(out, out=out)

    def d2loss_raw(self, y, u, out=None):
        out = np.multiply(y, u, out=out)
        return np.less(out, 1.0, out=out, casting="unsafe")


class Logistic(_BinaryLoss):
    """``L = 1/n sum log(1 + exp(-y_i u_i))``, evaluated with ``logaddexp`` and ``expit`` (and, per
    sample, with ``exp`` of minus ``|y u|`` only) so that it neither overflows nor loses precision
    for large ``|u|``."""

    name = "logistic"
    curvature = 0.25
    aliases = ("log", "log_loss")

    @staticmethod
    def value1(y, u):
        t = -y * u
        return max(t, 0.0) + math.log1p(math.exp(-abs(t)))             # logaddexp(0, t)

    @staticmethod
    def dloss1(y, u):
        z = y * u                                                       # -y expit(-z), with exp(-|z|) only
        e = math.exp(-abs(z))
        p = 1.0 / (1.0 + e)
        return -y * (e * p if z > 0.0 else p)     # a select, not a branch: a branch on the sign of z cost OS 8%

    @staticmethod
    def d2loss1(y, u):
        e = math.exp(-abs(y * u))                                       # expit(z) expit(-z)
        return e / ((1.0 + e) * (1.0 + e))

    def values(self, y, u):
        return np.logaddexp(0.0, -y * u)

    def dloss_raw(self, y, u, out=None):
        from scipy.special import expit     # here, not at the top (module docstring)
        out = np.multiply(y, u, out=out)
        np.negative(out, out=out)
        expit(out, out=out)
        out *= y
        return np.negative(out, out=out)

    def d2loss_raw(self, y, u, out=None):
        from scipy.special import expit
        z = np.multiply(y, u, out=out)
        expit(z, out=z)
        np.subtract(1.0, z, out=z)
        z *= 1.0 - z                    # z (1 - z) is symmetric: expit(-yu) gives the same value
        return z


class Hinge(_BinaryLoss):
    """``L = 1/n sum max(0, 1 - y_i u_i)``: the margin rule of OFS (Wang et al. 2014) and SOFS;
    ``dloss1`` is the subgradient ``-y [y u < 1]`` (0 at the kink). Not smooth: no curvature."""

    name = "hinge"
    curvature = 0.0
    smooth = False
    kink = 1.0

    @staticmethod
    def value1(y, u):
        return max(0.0, 1.0 - y * u)

    @staticmethod
    def dloss1(y, u):
        return -y if y * u < 1.0 else 0.0

    @staticmethod
    def d2loss1(y, u):
        return 0.0

    def values(self, y, u):
        return np.maximum(0.0, 1.0 - y * u)

    def dloss_raw(self, y, u, out=None):
        out = np.multiply(y, u, out=out)
        np.less(out, 1.0, out=out, casting="unsafe")
        out *= y
        return np.negative(out, out=out)

    def d2loss_raw(self, y, u, out=None):
        if out is None:
            return np.zeros(np.shape(u))
        out.fill(0.0)
        return out


TABLE = (Squared, SquaredHinge, Logistic, Hinge)     # the loss codes: a loss's position here
for _code, _cls in enumerate(TABLE):
    _cls.code = _code
LOSS_CODES = {cls.name: cls.code for cls in TABLE}
LOSSES = {cls.name: cls for cls in TABLE}
SMOOTH_LOSSES = tuple(cls.name for cls in TABLE if cls.smooth)
LOSS_ALIASES = {alias: cls.name for cls in TABLE for alias in cls.aliases}


# -- the table's scalar functions by code: what the compiled kernels call ---------------------------
def value1(code, y, u):
    return TABLE[code].value1(y, u)


def dloss1(code, y, u):
    return TABLE[code].dloss1(y, u)


def d2loss1(code, y, u):
    return TABLE[code].d2loss1(y, u)


def get_loss(name, smooth: bool = True) -> Loss:
    """Return the loss named ``name`` (or ``name`` itself when it is already a ``Loss``); with
    ``smooth`` (callers that need a second derivative) a non-smooth loss is refused."""
    if isinstance(name, Loss):
        loss = name
    else:
        key = LOSS_ALIASES.get(str(name), str(name))
        if key not in LOSSES:
            choices = SMOOTH_LOSSES if smooth else tuple(LOSSES)
            raise InputError(f"unknown loss {name!r}; choose one of: {', '.join(choices)}")
        loss = LOSSES[key]()
    if smooth and not loss.smooth:
        raise InputError(f"the {loss.name} loss is not smooth (no second derivative), and this solver needs one; "
                         f"choose one of: {', '.join(SMOOTH_LOSSES)} ({loss.name} is for the sample-stream "
                         f"learners)")
    return loss


def default_loss_for_labels(y) -> str:
    """``squared_hinge`` when every label is -1 or +1, otherwise ``squared``."""
    y = np.asarray(y)
    return "squared_hinge" if y.size and np.all((y == 1) | (y == -1)) else "squared"
