"""Shared fixtures. ``tests/mpi`` runs inside an MPI job (``--with-mpi``); the plain run starts
that job itself from ``tests/launch/test_mpi_suite.py``."""
import os
import shutil
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# no run.png from the runs of tests that are not about it (1-4 s each: asyos.report.pictures_wanted);
# tests/test_report.py, tests/test_readme.py and the MPI launch test of the parallel fields turn it on
os.environ.setdefault("ASYOS_PICTURE", "0")


def pytest_ignore_collect(collection_path, config):
    in_mpi_dir = os.path.join(REPO, "tests", "mpi") in str(collection_path)
    if in_mpi_dir and not config.getoption("--with-mpi", default=False):
        return True
    return None


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def find_mpiexec():
    """The ``mpiexec`` next to this interpreter (the mpich wheel's), never a system one."""
    here = os.path.dirname(sys.executable)
    return shutil.which("mpiexec", path=here) or shutil.which("mpiexec")


def find_datasets():
    """The shared data sets (``../shared/datasets`` beside the checkout, as the README's examples
    name them; ``ASYOS_DATASETS`` overrides), or ``None`` when this machine has none."""
    for path in (os.environ.get("ASYOS_DATASETS"), os.path.join(REPO, "..", "shared", "datasets"),
                 "/work/shared/datasets"):
        if path and os.path.isfile(os.path.join(path, "README.md")):
            return os.path.realpath(path)
    return None


@pytest.fixture(params=["numpy", "numba"])
def kernels(request, monkeypatch):
    """Both implementations of the OS step: the numpy reference and the compiled one."""
    monkeypatch.setenv("ASYOS_KERNELS", request.param)
    return request.param
