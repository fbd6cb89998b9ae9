"""Quality measures of a selection and of the refit model (KDD'16 Sec. 5 "Performance Measure").

* ``recall``: fraction of the true features that were selected;
* ``recovery_error``: ``||w - w*|| / ||w*||``, the normalised distance to the true model;
* ``objective``: the training loss ``L(Xw, y)``;
* ``train_error`` / ``test_error``: RMSE for regression, misclassification rate for classification.
"""
from __future__ import annotations

import numpy as np


def recall(selected, true_support) -> float:
    true_support = np.asarray(true_support)
    if true_support.size == 0:
        return float("nan")
    return float(np.isin(true_support, np.asarray(selected)).mean())


def recovery_error(coef, true_coef) -> float:
    true_coef = np.asarray(true_coef, dtype=float)
    norm = float(np.linalg.norm(true_coef))
    return float(np.linalg.norm(np.asarray(coef, dtype=float) - true_coef) / norm) if norm > 0 else float("nan")


def evaluate(loss, coef, u_train, y, u_test=None, y_test=None, true_coef=None, selected=None) -> dict:
    """Metrics of a fitted model from its predictions ``u = X w`` (train, and test if given)."""
    metrics = {
        "n_selected": int(len(selected)) if selected is not None else int(np.count_nonzero(coef)),
        "objective": loss.value(y, u_train),
        "train_error": loss.error(y, u_train),
    }
    if u_test is not None and y_test is not None:
        metrics["test_error"] = loss.error(y_test, u_test)
    if true_coef is not None:
        support = np.flatnonzero(coef) if selected is None else selected
        metrics["recall"] = recall(support, np.flatnonzero(true_coef))
        if loss.task == "regression":
            metrics["recovery_error"] = recovery_error(coef, true_coef)
    return metrics
