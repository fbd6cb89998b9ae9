"""The catalogue of sample-stream learners, and the warm-up that compiles their row loops.

It sits above ``sample_stream`` (the base class) and the modules that subclass it, so that the base
class and the row loops in ``_stream_kernels`` never import the concrete learners: listing every
learner, or fitting each once to compile its loop, is done from here.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from . import _stream_kernels as K
from .budgeted import BudgetedAMD, BudgetedARDA
from .l1 import L1ARDA, OPG, RDA, AdaFOBOS
from .ofs import OFS, SOFS
from .sfsa import SFSA, TSGD


def all_stream_learners():
    """Every sample-stream learner class, in the order the benchmarks and tests report them."""
    return [BudgetedARDA, BudgetedAMD, OFS, SOFS, L1ARDA, AdaFOBOS, OPG, RDA, SFSA, TSGD]


def warm_up() -> None:
    """Compile (or load from numba's cache) every row loop now rather than inside a timed run."""
    if not K.COMPILED:
        return
    X = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 1.0]]))
    y = np.array([1.0, -1.0])
    for cls in all_stream_learners():
        cls(**cls._smoke_params()).fit(X, y)
