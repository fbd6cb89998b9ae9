"""Argument checks and small array helpers of the learners, with numpy and scipy alone: what the
MPI worker ranks use (``asyos.runs.mpi_run``, ``asyos.runs.problem``) without importing
scikit-learn, whose import is most of a rank's start-up."""
from __future__ import annotations

import numbers

import numpy as np

from ..data.sparse import issparse
from ..errors import InputError


def _check_budget_value(budget) -> None:
    if not isinstance(budget, numbers.Integral) or isinstance(budget, bool):
        raise InputError(f"budget must be an integer; got {budget!r}")
    if budget < 1:
        raise InputError(f"budget must be at least 1; got {budget}")


def check_budget(budget, n_features):
    _check_budget_value(budget)
    if budget > n_features:
        raise InputError(f"budget {budget} is larger than the number of features (n_features = {n_features})")


def effective_budget(budget, n_features):
    """The budget a fit keeps to: ``budget`` (checked), or ``n_features`` when the budget is larger, with a
    warning that every feature is kept, as scikit-learn's ``SelectKBest`` does with ``k > n_features``
    (its checks fit every estimator on 2-5 features); ``None`` stays ``None`` (no budget: an l1 weight)."""
    if budget is None:
        return None
    _check_budget_value(budget)
    if budget > n_features:
        import warnings
        warnings.warn(f"budget={budget} is greater than n_features={n_features}: all the features are kept",
                      UserWarning, stacklevel=3)
        return int(n_features)
    return int(budget)


def check_positive_int(value, name, minimum=1):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def check_positive_float(value, name, allow_none=False, minimum=0.0, inclusive=False):
    if value is None and allow_none:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number; got {value!r}") from None
    if not np.isfinite(v) or v < minimum or (v == minimum and not inclusive):
        op = ">=" if inclusive else ">"
        raise InputError(f"{name} must be a finite number {op} {minimum:g}; got {value!r}")
    return v


def columns_dense(X, support):
    """Dense ``(n, len(support))`` block of the given columns."""
    block = X[:, support]
    return block.toarray() if issparse(block) else np.asarray(block)


def columns_block(X, support):
    """The ``(n, len(support))`` block of the given columns: sparse (CSR) if ``X`` is, else dense."""
    block = X[:, support]
    return block.tocsr() if issparse(block) else np.asarray(block)
