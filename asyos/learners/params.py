"""The parameters every learner declares: constraints checked by scikit-learn's parameter validation.

A learner lists, in ``_parameter_constraints``, what each constructor parameter accepts (a list of
constraints, any of which will do: scikit-learn's ``Interval``, ``StrOptions``, a type, ``None``,
``"boolean"``...); ``Estimator._validate_params`` checks them at the start of ``fit`` (and of a
stream's first sample) and raises one message format for every parameter of every learner::

    The 'eta' parameter of BudgetedARDA must be a float in the range (0.0, inf). Got -1 instead.

(as ``InputError``, so that the CLI prints it as one line and exits 2). What a constraint cannot say
(two parameters together, a budget against the data's width) stays in the learner's own checks.

The constraint classes come from ``sklearn.utils._param_validation``: a private module, but the one
scikit-learn's own estimators and its contrib projects use; CI runs the estimator checks on the
oldest scikit-learn we support (1.6) and on the newest.
"""
from __future__ import annotations

from numbers import Integral, Real

from sklearn.utils._param_validation import Interval, StrOptions

__all__ = ["Interval", "StrOptions", "Integral", "Real", "positive", "non_negative", "count", "unit", "BUDGET",
           "SEED", "PASSES", "BOOLEAN"]


def positive():
    """A finite number > 0 (a step, a tolerance)."""
    return Interval(Real, 0, None, closed="neither")


def non_negative():
    """A finite number >= 0 (a regularization weight that may be off)."""
    return Interval(Real, 0, None, closed="left")


def count(minimum=1):
    """An integer >= ``minimum``."""
    return Interval(Integral, minimum, None, closed="left")


def unit(closed="both"):
    """A number in [0, 1] (or an open side of it)."""
    return Interval(Real, 0, 1, closed=closed)


BUDGET = [count(1)]
SEED = [count(0), None]
PASSES = [count(1), StrOptions({"auto"})]
BOOLEAN = ["boolean"]
