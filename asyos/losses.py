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
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit

from .errors import InputError


class Loss:
    name: str = ""
    task: str = ""          # "regression" or "classification"
    curvature: float = 1.0

    def value(self, y, u) -> float:
        raise NotImplementedError

    def dloss(self, y, u, out=None):
        out = self.dloss_raw(y, u, out=out)
        out *= 1.0 / out.shape[0]
        return out

    def dloss_raw(self, y, u, out=None):
        raise NotImplementedError

    def d2loss(self, y, u):
        out = self.d2loss_raw(y, u)
        out *= 1.0 / out.shape[0]
        return out

    def d2loss_raw(self, y, u, out=None):
        raise NotImplementedError

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


class Squared(Loss):
    """``L = 1/(2n) ||u - y||^2`` (KDD'16 eq. 2); ``dL/du = (u - y)/n`` (eq. 4)."""

    name = "squared"
    task = "regression"
    curvature = 1.0

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
    """``L = 1/n sum log(1 + exp(-y_i u_i))``, evaluated with ``logaddexp`` and ``expit`` so that
    it neither overflows nor loses precision for large ``|u|``."""

    name = "logistic"
    curvature = 0.25

    def value(self, y, u):
        return float(np.mean(np.logaddexp(0.0, -y * u)))

    def dloss_raw(self, y, u, out=None):
        out = np.multiply(y, u, out=out)
        np.negative(out, out=out)
        expit(out, out=out)
        out *= y
        return np.negative(out, out=out)

    def d2loss_raw(self, y, u, out=None):
        z = np.multiply(y, u, out=out)
        expit(z, out=z)
        np.subtract(1.0, z, out=z)
        z *= 1.0 - z                    # z (1 - z) is symmetric: expit(-yu) gives the same value
        return z


LOSSES = {cls.name: cls for cls in (Squared, SquaredHinge, Logistic)}
LOSS_ALIASES = {"squared_loss": "squared", "least_squares": "squared", "hinge_squared": "squared_hinge",
                "squared-hinge": "squared_hinge", "log": "logistic", "log_loss": "logistic"}


def get_loss(name) -> Loss:
    """Return the loss named ``name`` (or ``name`` itself when it is already a ``Loss``)."""
    if isinstance(name, Loss):
        return name
    key = LOSS_ALIASES.get(str(name), str(name))
    if key not in LOSSES:
        raise InputError(f"unknown loss {name!r}; choose one of: {', '.join(LOSSES)}")
    return LOSSES[key]()


def default_loss_for_labels(y) -> str:
    """``squared_hinge`` when every label is -1 or +1, otherwise ``squared``."""
    y = np.asarray(y)
    return "squared_hinge" if y.size and np.all((y == 1) | (y == -1)) else "squared"
