"""Batch baselines, in one process (KDD'16 Sec. 5 "Baseline Methods"): ``batch``."""
from ..spec import Family, algorithm

FAMILY = Family("baselines", "batch baselines, in one process")


def _build_proj_gd(config, loss, budget):
    from .batch import ProjectedGradient
    return ProjectedGradient(budget=budget, loss=loss, refit=config.refit, random_state=config.seed)


def _build_lasso(config, loss, budget):
    from .batch import LassoToBudget
    return LassoToBudget(budget=budget, loss=loss, refit=config.refit, random_state=config.seed)


ALGORITHMS = (
    algorithm("proj-gd", "Projected gradient / IHT onto the L0 ball (batch baseline)", f"{__name__}.batch",
              "ProjectedGradient", _build_proj_gd, test_params={"max_iter": 50}),
    algorithm("lasso", "L1 path tuned to the budget, scikit-learn (batch baseline)", f"{__name__}.batch",
              "LassoToBudget", _build_lasso),
)
PUBLIC = {}
