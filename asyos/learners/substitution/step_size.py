"""The step size of Online Substitution: ``eta = 0.5 / L_F`` (KDD'16 Sec. 4.1).

``L_F`` (Assumption 1, eq. 6) is the Lipschitz constant of the gradient restricted to the
coordinates one OS step moves: the retained set ``S`` plus the new feature, at most ``s + 1``
columns. For ``L(Xw)`` with ``d2L/du2 <= curvature / n`` it is bounded by
``curvature * lambda_max(X_B^T X_B) / n`` over blocks ``B`` of ``s + 1`` columns. The exact maximum
over all blocks is combinatorial; we estimate it as the largest ``lambda_max`` over

* the block of the ``s + 1`` columns of largest norm (which dominates when column scales differ),
* ``n_random_blocks`` blocks of ``s + 1`` columns drawn at random (seeded),

which is exact when the shard has at most ``s + 1`` columns. Under Asy-OS each worker estimates
on its own shard and the engine takes the maximum over workers, so ``eta`` does not depend on how
the features are split. A shard with fewer than ``s + 1`` columns (many workers, few features)
cannot hold such a block: its ``k``-column estimate is extrapolated to ``s + 1`` columns as if the
columns were equicorrelated, ``lambda_k = d (1 + (k - 1) rho)``, ``d`` the mean ``||x||^2 / n``
(without it, 12 workers on the 36 correlated columns of satellite_image each measured blocks of 3,
``eta`` came out three times too large and the asynchronous run diverged). The objective-decrease
check of Alg. 1 guards the steps in the rare case that a block met during the run is stiffer than
the estimate.
"""
from __future__ import annotations

import numpy as np

from ...data.shard import CenteredRows
from ...data.sparse import issparse
from ...errors import InputError

EXACT_GRAM_LIMIT = 384


def largest_eigenvalue_of_gram(block) -> float:
    """``lambda_max(B B^T)`` for a feature-major block ``B`` (k x n): dense, sparse, or a centred
    sparse block (``FeatureShard.block``)."""
    k = block.shape[0]
    if k == 0:
        return 0.0
    centred = isinstance(block, CenteredRows)
    if k <= EXACT_GRAM_LIMIT:
        gram = block.gram() if centred else block @ block.T
        gram = gram.toarray() if issparse(gram) else gram
        if not np.all(np.isfinite(gram)):       # LinAlgError otherwise ("Eigenvalues did not converge")
            raise InputError("the data's Gram matrix overflows float64 (values too large to square); rescale the "
                             "data")
        return float(np.linalg.eigvalsh(gram)[-1])
    from scipy.sparse.linalg import LinearOperator, eigsh
    matvec = block.matvec if centred else (lambda v: block @ (block.T @ v))
    op = LinearOperator((k, k), matvec=matvec, dtype=np.float64)
    return float(eigsh(op, k=1, which="LA", v0=np.ones(k), tol=1e-6, return_eigenvectors=False)[0])


def restricted_lipschitz(shard, block_size: int, curvature: float, seed, n_random_blocks: int = 8,
                         ranking=None) -> float:
    """Estimate of ``L_F`` on one shard (see the module docstring); 0 for an empty shard.

    ``ranking`` (the exchange variant: the columns by decreasing marginal gain) replaces the
    columns' positions: the first block is its top ``s + 1`` (the columns most likely retained
    together) instead of the largest norms (equal once the columns are scaled), and the random
    blocks are drawn from ranks, so the estimate does not depend on the order of the columns in the
    file."""
    k = min(int(block_size), shard.n_local)
    if k <= 0:
        return 0.0
    n = shard.n_samples
    if k == shard.n_local:
        blocks = [np.arange(k)]
    else:
        rng = np.random.default_rng(seed)
        if ranking is None:
            norms = shard.squared_norms()
            blocks = [np.sort(np.argsort(-norms, kind="stable")[:k])]
            blocks += [np.sort(rng.choice(shard.n_local, size=k, replace=False)) for _ in range(n_random_blocks)]
        else:
            ranking = np.asarray(ranking)
            blocks = [np.sort(ranking[:k])]
            blocks += [np.sort(ranking[rng.choice(shard.n_local, size=k, replace=False)])
                       for _ in range(n_random_blocks)]
    lam = max(largest_eigenvalue_of_gram(shard.block(b)) for b in blocks)
    if 1 < k < int(block_size):
        norms = shard.squared_norms()
        mean_diag = float(norms[norms > 0].mean()) if np.any(norms > 0) else 0.0
        if mean_diag > 0:
            rho = min(1.0, max(0.0, (lam / mean_diag - 1.0) / (k - 1)))
            lam = max(lam, mean_diag * (1.0 + (int(block_size) - 1) * rho))
    return curvature * lam / n


def coupling(lipschitz: float, curvature: float, mean_diag: float, block_size: int) -> float:
    """The columns' typical correlation ``rho`` implied by ``L_F`` on blocks of ``block_size``
    columns (equicorrelated columns: ``L_F = curvature d (1 + (block_size - 1) rho)``), in [0, 1]."""
    if block_size <= 1 or not mean_diag > 0 or not curvature > 0:
        return 0.0
    return min(1.0, max(0.0, (lipschitz / (curvature * mean_diag) - 1.0) / (block_size - 1)))


def step_size_from_lipschitz(lipschitz: float) -> float:
    """``eta = 0.5 / L_F``, the choice Theorem 1 recommends; 1.0 for an all-zero problem."""
    return 0.5 / lipschitz if lipschitz > 0 else 1.0
