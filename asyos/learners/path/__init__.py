"""A regularized model whose feature set changes, followed along its solution path (no budget): DFLS
(``dfls``; ``solution_path`` follows theta, ``batch_solvers`` and ``penalties`` are the batch side)."""
from ..spec import Family, algorithm

FAMILY = Family("path", "a regularized model whose feature set changes, followed along its solution path "
                        "(no budget)")


def _build_dfls(config, loss, budget):
    """DFLS has no budget: ``--param penalty=...,alpha=...,exponent=...`` sets it."""
    from .dfls import DFLS
    return DFLS(**config.estimator_params)


ALGORITHMS = (
    algorithm("dfls", "DFLS: group-lasso or l_p least squares; add or remove a block of features by following the "
                      "solution path (Li & Gu)", f"{__name__}.dfls", "DFLS", _build_dfls, tasks=("regression",)),
)
PUBLIC = {}
