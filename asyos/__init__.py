"""asyos: budgeted online feature selection (Online Substitution, Asy-OS on MPI).

Public API (imported on first use, so that ``import asyos`` stays light)::

    from asyos import OnlineSubstitution, AsyncOnlineSubstitution, ProjectedGradient, LassoToBudget
    from asyos import BudgetedARDA, BudgetedAMD, OFS, SOFS, L1ARDA, AdaFOBOS, OPG, RDA, SFSA, TSGD
    from asyos import AsyncSampleStream
    from asyos import RunningAverages, OLSThreshold, OFSA, OLasso, OElasticNet, OMCP
    from asyos import DFLS
    from asyos import make_regression, make_classification, load_dataset
"""
from . import _env  # noqa: F401  (must run before numpy is imported)

__version__ = "0.1.0"

_PUBLIC = {
    "InputError": ".errors",
    "OnlineSubstitution": ".learners.online_substitution",
    "AsyncOnlineSubstitution": ".learners.asy_os",
    "ProjectedGradient": ".learners.baselines",
    "LassoToBudget": ".learners.baselines",
    "BudgetedARDA": ".learners.budgeted",
    "BudgetedAMD": ".learners.budgeted",
    "OFS": ".learners.ofs",
    "SOFS": ".learners.ofs",
    "L1ARDA": ".learners.l1",
    "AdaFOBOS": ".learners.l1",
    "OPG": ".learners.l1",
    "RDA": ".learners.l1",
    "SFSA": ".learners.sfsa",
    "TSGD": ".learners.sfsa",
    "AsyncSampleStream": ".distributed.stream_simulator",
    "RunningAverages": ".stats",
    "OLSThreshold": ".learners.running_averages",
    "OFSA": ".learners.running_averages",
    "OLasso": ".learners.running_averages",
    "OElasticNet": ".learners.running_averages",
    "OMCP": ".learners.running_averages",
    "DFLS": ".learners.dfls",
    "make_regression": ".data.synthetic",
    "make_classification": ".data.synthetic",
    "load_dataset": ".data.io",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name in _PUBLIC:
        import importlib
        return getattr(importlib.import_module(_PUBLIC[name], __name__), name)
    raise AttributeError(f"module 'asyos' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_PUBLIC))
