"""Process environment set before numpy is imported.

Under an MPI launcher every rank gets one BLAS thread: 13 ranks on 2 cores with threaded BLAS
ran 3.3x slower on our machines (``design/mpi-experiments.md`` section 0). A user who sets the
variables keeps them.
"""
import os

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def launched_by_mpi() -> bool:
    """True when this process was started by mpiexec/mpirun/srun with more than one rank."""
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        value = os.environ.get(name)
        if value is not None:
            return value.strip() not in ("", "1")
    return "PMIX_RANK" in os.environ


def pin_blas_threads() -> None:
    for name in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")


if launched_by_mpi():
    pin_blas_threads()
