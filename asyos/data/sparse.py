"""``scipy.sparse`` only where sparse data are met.

Importing ``scipy.sparse`` takes 0.3 s of a process's start-up (it loads scipy's array-API layer,
which imports ``numpy.f2py`` and ``numpy.testing``): a quarter of an MPI rank's start-up on dense
data, measured with ``python -X importtime`` per rank of ``mpiexec -n 3 python -m asyos.run``. The
modules that a dense run imports call ``issparse`` (which does not import it) and import
``scipy.sparse`` inside the functions that build sparse matrices.
"""
from __future__ import annotations

import sys


def issparse(x) -> bool:
    """``scipy.sparse.issparse(x)``, without importing ``scipy.sparse``: no object is a scipy sparse
    matrix or array before that module has been imported."""
    module = sys.modules.get("scipy.sparse")
    return module is not None and module.issparse(x)
