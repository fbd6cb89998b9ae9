"""From a ``RunConfig`` to the problem to solve: the data source, the loss and the budget.

Shared by the single-process path and every MPI rank, so each rank resolves the same problem
from the same flags without communication.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from ..data.io import open_source
from ..data.synthetic import SyntheticSource
from ..errors import InputError
from ..learners.checks import check_budget
from ..losses import Loss, default_loss_for_labels, get_loss


def open_data_source(config):
    """A ``SyntheticSource`` or a file source; only headers are read. A source without samples or
    features, or whose per-feature state cannot fit in memory, is refused here, before any work."""
    source = _open_data_source(config)
    _check_sizes(config, source)
    return source


def _open_data_source(config):
    if config.data is None and config.label_column is not None:
        raise InputError("--label-column names the label column of a .parquet file; it does not go with synthetic data")
    if config.data is None:
        return SyntheticSource(task=config.synthetic, n_features=config.synthetic_features,
                               n_informative=config.synthetic_informative, n_samples=config.n_samples,
                               n_test=config.n_test, noise=config.noise, seed=config.seed)
    check_data_paths(config)
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


def check_data_paths(config) -> None:
    """``--data`` and ``--test-data`` must be files or directories: a named pipe (FIFO), a
    character or block device or a socket is refused. The readers scan a file for its sizes and
    then read it again, so a FIFO hung on the second open and ``/dev/zero`` grew memory without
    bound. Standard input (``-``) is read once, as a stream, and stays allowed."""
    for flag, path in (("--data", config.data), ("--test-data", config.test_data)):
        if path is None or path == "-":
            continue
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue                                # the loader says what is wrong with it
        kind = next((name for test, name in _SPECIAL_FILES if test(mode)), None)
        if kind is not None:
            raise InputError(f"{flag} {path!r} is {kind}, not a data file: the data are read more than once "
                             f"(a scan for the sizes, then the values); save them to a file"
                             + (", or pipe libsvm text to --data - with --n-features" if flag == "--data" else ""))


_SPECIAL_FILES = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
                  (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
# bytes a learner keeps per feature of p (vectors of length p, not counting the data), rounded down
# from the peak resident memory of ``--data F.svm --n-features p`` at p = 1e6 and 4e6 on 60 rows (a
# 2-core development machine): OS 70 B, OFS 22 B; the check refuses only what cannot fit
STATE_BYTES_PER_FEATURE = {"substitution": 64}
DEFAULT_STATE_BYTES_PER_FEATURE = 16
SHARDING_BYTES_PER_FEATURE = 24     # every rank: arange(p) (8), its mixed hash (8), the mask (1), rounding


def _check_sizes(config, source) -> None:
    """No samples, no features, or a run whose size cannot fit in memory: ``InputError`` before
    anything is read or allocated (an empty data set raised ZeroDivisionError deep in a learner,
    ``--n-features 1000000000`` a MemoryError or the kernel's out-of-memory kill)."""
    where = "the synthetic problem" if config.data is None else ("standard input" if config.data == "-"
                                                                 else repr(config.data))
    if source.n_features == 0:
        raise InputError(f"{where} has no features (X has 0 columns)")
    if getattr(source, "n_train", None) == 0:
        raise InputError(f"{where} has no samples (X has 0 rows)")
    from .. import _env
    from ..data.dataset import check_fits_in_memory
    from ..registry import get_algorithm
    family = get_algorithm(config.algorithm).family
    mpi = _env.launched_by_mpi()
    if mpi and family != "substitution":           # the running averages check their own p x p allocations
        return
    per_feature = STATE_BYTES_PER_FEATURE.get(family, DEFAULT_STATE_BYTES_PER_FEATURE)
    p = int(source.n_features)
    rows = source.n_train + source.n_test_samples if isinstance(source, SyntheticSource) else 0
    what = f"p = {p} features" + (" (--n-features)" if config.n_features is not None else "") + \
        f": --algorithm {config.algorithm} (about {per_feature} bytes per feature"
    if rows:                                       # generated dense: X (and its test split) are held
        what += f", plus the synthetic X of {source.n_train} + {source.n_test_samples} test rows in float64"
    if not mpi:
        check_fits_in_memory(p * (per_feature + 8 * rows), what + ")")
        return
    # Asy-OS under mpiexec: each worker holds its shard (a share of the columns, their state and, generated,
    # their values) and every rank the O(p) index arrays of the sharding (``SHARDING_BYTES_PER_FEATURE``);
    # the ranks of one node share its memory. Before, --n-features 1e9 grew to 2.3 GB before a worker was
    # refused, and 1e10 ended in a MemoryError traceback from every worker.
    # A worker holds its columns' training rows (a generated problem's test columns are generated at the end,
    # for the candidates only); the central rank holds no columns.
    size, local = _env.launched_ranks()
    share = -(-p // max(size - 1, 1))
    held = source.n_train if isinstance(source, SyntheticSource) else rows
    workers_here = min(local, max(size - 1, 1))
    need = local * p * SHARDING_BYTES_PER_FEATURE + workers_here * share * (per_feature + 8 * held)
    check_fits_in_memory(need, what + f"; under mpiexec, {local} ranks on this node, each with the sharding's "
                                      f"{SHARDING_BYTES_PER_FEATURE} bytes per feature, {workers_here} of them "
                                      f"workers holding {share} columns)")


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
        from ..registry import get_algorithm
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
