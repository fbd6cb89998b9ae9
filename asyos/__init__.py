"""asyos: budgeted online feature selection (Online Substitution, Asy-OS on MPI).

Public API (imported on first use, so that ``import asyos`` stays light)::

    from asyos import OnlineSubstitution, AsyncOnlineSubstitution, ProjectedGradient, LassoToBudget
    from asyos import OnlineSubstitutionClassifier, OnlineSubstitutionRegressor
    from asyos import BudgetedARDA, BudgetedAMD, OFS, SOFS, L1ARDA, AdaFOBOS, OPG, RDA, SFSA, TSGD
    from asyos import AsyncSampleStream
    from asyos import RunningAverages, OLSThreshold, OFSA, OLasso, OElasticNet, OMCP
    from asyos import DFLS
    from asyos import make_regression, make_classification, load_dataset
"""
import sys

from . import _env  # noqa: F401  (must run before numpy is imported)

if sys.argv[:1] == ["-m"] and _env.launched_by_mpi():    # `mpiexec ... python -m asyos[.run]`
    from .distributed.supervisor import note_early_stops                # starting: a Ctrl-C is a stop request
    note_early_stops()

__version__ = "0.1.0"

_PUBLIC = {
    "InputError": "asyos.errors",
    "make_regression": "asyos.data.synthetic",
    "make_classification": "asyos.data.synthetic",
    "load_dataset": "asyos.data.io",
}


def _estimators():
    """The families' public classes (``asyos.registry``: each family lists its algorithms)."""
    from .registry import public_names
    return public_names()


_PUBLIC.update(_estimators())
__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name in _PUBLIC:
        import importlib
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'asyos' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_PUBLIC))
