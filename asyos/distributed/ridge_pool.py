"""``--ridge auto`` under ``mpiexec``: the ranks agree on the ridge before the asynchronous phase.

Where ``ridge="auto"`` engages (``asyos.learners.substitution.ridge_choice``: samples few next to the
features), the choice is made by cross-validation on the pool of the features of largest marginal
gain. No rank holds every column, so each worker offers its shard's best ``pool_size`` features
(index and gain: the gains it computed for its visit order anyway), the central rank takes the
best ``pool_size`` of the offers (the same pool sequential OS takes from all the columns), reads
those columns from the data, chooses, and sends ``alpha`` back. Two polled collectives
(``agree_after_setup``), after the set-up one, so a rank that fails here ends the job as one that
fails in set-up does. Every rank knows ``n`` and ``p`` by then and so whether the choice engages.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..learners.checks import columns_block
from ..learners.substitution.ridge_choice import best_positions, engages, pool_size, top_features
from ..utils.progress import phase
from .transport import agree_after_setup


def chooses(config, problem, options) -> bool:
    """Whether this run's ridge is chosen (the same answer on every rank)."""
    return config.ridge is None and engages(problem.n_samples, problem.n_features, options.variant)


def offer(problem, columns, gains) -> np.ndarray:
    """This worker's best ``pool_size`` features: their indices then their gains, padded with -1."""
    size = pool_size(problem.n_samples, problem.n_features, problem.budget)
    out = np.full(2 * size, -1.0)
    keep = best_positions(columns, gains, size)
    out[:keep.size], out[size:size + keep.size] = np.asarray(columns)[keep], gains[keep]
    return out


def agree_on_ridge(comm, config, setup, options, backoff):
    """``(alpha, scores)`` on every rank (``scores`` on the central rank only): chosen on the pool when
    ``chooses``, else the fixed ``--ridge`` (0 for ``auto`` where it does not engage)."""
    problem = setup["problem"]
    if not chooses(config, problem, options):
        return float(config.ridge or 0.0), None
    size = pool_size(problem.n_samples, problem.n_features, problem.budget)
    mine = setup["pool_offer"] if comm.Get_rank() else np.full(2 * size, -1.0)
    which = f"all {size}" if size == problem.n_features else f"the {size} of largest gain of {problem.n_features}"
    with phase(f"choosing the ridge: cross-validation on {which} features"):
        offers = agree_after_setup(comm, None, mine, backoff, config.setup_timeout)[1:]
        alpha, scores, error = _central_choice(comm, offers, size, setup, options, config.seed)
        everyone = agree_after_setup(comm, error, [alpha], backoff, config.setup_timeout)
    return float(everyone[0, 0]), scores


def _central_choice(comm, offers, size, setup, options, seed):
    """``(alpha, scores, error)``: the central rank's choice on the best of the offers (zeros elsewhere)."""
    alpha, scores, error = 0.0, None, None
    if comm.Get_rank() == 0:
        indices, gains = offers[:, :size].ravel(), offers[:, size:].ravel()
        valid = indices >= 0
        pool = top_features(indices[valid].astype(np.int64), gains[valid], size)
        try:
            alpha, scores = _choose(setup, pool, options, seed)
        except InputError as exc:
            error = str(exc)
    return alpha, scores, error


def _choose(setup, pool, options, seed):
    """The central rank's choice on ``pool``'s columns, read from the run's data."""
    from ..learners.substitution.online_substitution import choose_on_columns
    source, problem = setup["source"], setup["problem"]
    if getattr(source, "columnar", False):
        columns = columns_block(source.lazy().X, pool)
    else:
        X = source.load(pool, with_test=False).X
        columns = columns_block(X, np.arange(pool.size))
    return choose_on_columns(columns, setup["y"], problem.loss, problem.budget, options, seed)
