"""The sample-stream learner classes (from the family's list), and the warm-up that compiles their row loops.

It sits above ``sample_stream`` (the base class) and the modules that subclass it, so that the base
class and the row loops in ``_stream_kernels`` never import the concrete learners: listing every
learner, or fitting each once to compile its loop, is done from here.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from . import _stream_kernels as K


def all_stream_learners():
    """Every sample-stream learner class, in the order the family lists them (``asyos.learners.stream``)."""
    from . import ALGORITHMS
    return [spec.estimator_class for spec in ALGORITHMS]


def warm_up() -> None:
    """Compile (or load from numba's cache) every row loop now rather than inside a timed run."""
    if not K.COMPILED:
        return
    X = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 1.0]]))
    y = np.array([1.0, -1.0])
    for cls in all_stream_learners():
        cls(**cls._smoke_params()).fit(X, y)
    cls = all_stream_learners()[0]                  # learn_one's row preparation: an array row, a dict row
    cls(**cls._smoke_params()).learn_one(np.array([1.0, 0.0, 2.0]), 1.0)
    cls(**cls._smoke_params()).learn_one({"a": 1.0, "b": 2.0}, 1.0)
