"""Process environment set before numpy is imported.

Under an MPI launcher every rank gets one BLAS thread: 13 ranks on 2 cores with threaded BLAS
ran 3.3x slower on our machines (``design/mpi-experiments.md`` section 0). Our commands
(``python -m asyos...``, and every rank under a launcher) turn numpy's hugepage advice off
(``asyos.data.memory`` says why: fresh memory filled 4-5x faster; ``python -m asyos.run --n-features
20000`` 5.3 -> 4.5 s). A user who sets the variables keeps them.
"""
import os
import sys

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def launched_by_mpi() -> bool:
    """True when this process was started by mpiexec/mpirun/srun with more than one rank."""
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        value = os.environ.get(name)
        if value is not None:
            return value.strip() not in ("", "1")
    return "PMIX_RANK" in os.environ


def launched_ranks() -> tuple:
    """``(ranks of the job, ranks on this node)`` as the launcher says them (hydra's ``PMI_SIZE`` and
    ``MPI_LOCALNRANKS``, Open MPI's ``OMPI_COMM_WORLD_SIZE`` and ``..._LOCAL_SIZE``); ``(1, 1)`` alone."""
    def number(*names):
        for name in names:
            value = os.environ.get(name, "").strip()
            if value.isdigit() and int(value) > 0:
                return int(value)
        return None
    size = number("PMI_SIZE", "OMPI_COMM_WORLD_SIZE") or 1
    return size, number("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE") or size


def our_command() -> bool:
    """True when this process is one of the package's commands (``python -m asyos...``)."""
    args = iter(getattr(sys, "orig_argv", [])[1:])
    for arg in args:
        if arg == "-m":
            return next(args, "").split(".")[0] == "asyos"
        if arg in ("-X", "-W"):                 # the interpreter's options that take a value
            next(args, None)
        elif not arg.startswith("-") or arg == "-c":
            return False                        # a script or a command string
    return False


def pin_blas_threads() -> None:
    for name in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")


if launched_by_mpi():
    pin_blas_threads()
if launched_by_mpi() or our_command():
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
