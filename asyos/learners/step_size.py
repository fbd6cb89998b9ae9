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
the features are split. The objective-decrease check of Alg. 1 guards the steps in the rare case
that a block met during the run is stiffer than the estimate.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, eigsh

EXACT_GRAM_LIMIT = 384


def largest_eigenvalue_of_gram(block) -> float:
    """``lambda_max(B B^T)`` for a feature-major block ``B`` (k x n), dense or sparse."""
    k = block.shape[0]
    if k == 0:
        return 0.0
    if k <= EXACT_GRAM_LIMIT:
        gram = block @ block.T
        gram = gram.toarray() if sp.issparse(gram) else gram
        return float(np.linalg.eigvalsh(gram)[-1])
    op = LinearOperator((k, k), matvec=lambda v: block @ (block.T @ v), dtype=np.float64)
    return float(eigsh(op, k=1, which="LA", v0=np.ones(k), tol=1e-6, return_eigenvectors=False)[0])


def restricted_lipschitz(shard, block_size: int, curvature: float, seed, n_random_blocks: int = 8) -> float:
    """Estimate of ``L_F`` on one shard (see the module docstring); 0 for an empty shard."""
    k = min(int(block_size), shard.n_local)
    if k <= 0:
        return 0.0
    n = shard.n_samples
    if k == shard.n_local:
        blocks = [np.arange(k)]
    else:
        norms = shard.squared_norms()
        rng = np.random.default_rng(seed)
        blocks = [np.sort(np.argsort(-norms, kind="stable")[:k])]
        blocks += [np.sort(rng.choice(shard.n_local, size=k, replace=False)) for _ in range(n_random_blocks)]
    lam = max(largest_eigenvalue_of_gram(shard.XT[b]) for b in blocks)
    return curvature * lam / n


def step_size_from_lipschitz(lipschitz: float) -> float:
    """``eta = 0.5 / L_F``, the choice Theorem 1 recommends; 1.0 for an all-zero problem."""
    return 0.5 / lipschitz if lipschitz > 0 else 1.0
