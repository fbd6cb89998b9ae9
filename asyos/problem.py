"""From a ``RunConfig`` to the problem to solve: the data source, the loss and the budget.

Shared by the single-process path and every MPI rank, so each rank resolves the same problem
from the same flags without communication.
"""
from __future__ import annotations

from dataclasses import dataclass

from .data.io import open_source
from .data.synthetic import SyntheticSource
from .errors import InputError
from .learners.base import check_budget
from .losses import Loss, default_loss_for_labels, get_loss


def open_data_source(config):
    """A ``SyntheticSource`` or a file source; only headers are read."""
    if config.data is None and config.label_column is not None:
        raise InputError("--label-column names the label column of a .parquet file; it does not go with synthetic data")
    if config.data is None:
        return SyntheticSource(task=config.synthetic, n_features=config.synthetic_features,
                               n_informative=config.synthetic_informative, n_samples=config.n_samples,
                               n_test=config.n_test, noise=config.noise, seed=config.seed)
    for flag in ("n_samples", "n_informative", "noise", "n_test"):
        if getattr(config, flag) is not None:
            raise InputError(f"--{flag.replace('_', '-')} describes a synthetic problem; it does not go with --data")
    if config.n_features is not None and not (config.data.endswith(".npz") or _is_dir(config.data)):
        n_features = config.n_features          # declares p for libsvm text
    elif config.n_features is not None:
        raise InputError("--n-features goes with libsvm text or synthetic data; .npz files carry their shape")
    else:
        n_features = None
    return open_source(config.data, config.test_data, config.index_base, n_features, label=label_column(config))


def label_column(config) -> str:
    """``--label-column``: Parquet only (other formats store the labels apart)."""
    if config.label_column is not None and not _is_parquet(config.data):
        raise InputError("--label-column names the label column of a .parquet file")
    return config.label_column or "y"


def _is_parquet(path):
    import os
    if str(path).endswith(".parquet"):
        return True
    return os.path.isdir(path) and os.path.exists(os.path.join(path, "train.parquet"))


def _is_dir(path):
    import os
    return os.path.isdir(path)


@dataclass(frozen=True)
class Problem:
    loss: Loss
    budget: int
    n_features: int
    n_samples: int
    name: str


def resolve_problem(config, source, y) -> Problem:
    """Loss (``auto`` picks from the labels), budget (default: the true sparsity of synthetic data)."""
    if config.loss == "auto":
        if isinstance(source, SyntheticSource):
            loss = get_loss("squared" if source.task == "regression" else "squared_hinge")
        else:
            loss = get_loss(default_loss_for_labels(y))
    else:
        from .registry import get_algorithm
        loss = get_loss(config.loss, smooth=get_algorithm(config.algorithm).family != "stream")
    loss.check_labels(y, where=f"the labels of {source.name}")
    if config.budget is not None:
        budget = config.budget
    elif isinstance(source, SyntheticSource):
        budget = source.n_informative
    else:
        raise InputError("--budget is required with --data (how many features to keep)")
    check_budget(budget, source.n_features)
    return Problem(loss, int(budget), int(source.n_features), int(y.shape[0]), source.name)
