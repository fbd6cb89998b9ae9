"""How the CLI runs each family of algorithms: in one process, and under ``mpiexec`` where it can.

Every family of ``asyos.registry.FAMILIES`` has a ``Runner`` here; ``asyos.run`` parses the
command line and calls ``runner_for(spec)(config, comm)``. The table lives above the registry, not
in the algorithm specs, because the MPI runners (``asyos.runs.mpi_run``,
``asyos.runs.accumulate``) look the algorithm up in the registry themselves: keeping the
runners out of the registry keeps the import graph free of circles.

Each runner imports its module when called, so a run loads only its own family's code (the
start-up cost of every CLI process and MPI rank stays what the family needs).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from ..errors import InputError


def run_local(config) -> int:
    """Substitution, baselines and stream families in one process (``asyos.runs.local_run``)."""
    from .local_run import run_local as run
    return run(config)


def run_asy_os_mpi(config, comm) -> int:
    """Asy-OS on the ranks of ``comm`` (``asyos.runs.mpi_run``)."""
    from .mpi_run import run_mpi
    return run_mpi(config, comm)


def run_running_averages(config, comm=None) -> int:
    """Running averages, in one process or reduced across the ranks of ``comm``."""
    from .accumulate import run_running_averages as run
    return run(config, comm)


def run_dfls(config) -> int:
    """DFLS: fit, move a block of features along the solution path, compare with retraining."""
    from .run_dfls import run_dfls as run
    return run(config)


def _not_under_mpi(config) -> str:
    """The error for an algorithm that runs in one process only, started under ``mpiexec``."""
    if config.simulate:                         # the simulator is one process whatever the algorithm
        return "--simulate runs in one process; start it without mpiexec"
    return f"algorithm {config.algorithm!r} does not run under mpiexec; run it without mpiexec"


def _path_not_under_mpi(config) -> str:
    return f"--algorithm {config.algorithm} runs in one process; start it without mpiexec"


@dataclass(frozen=True)
class Runner:
    """``local(config)`` runs in this process, ``mpi(config, comm)`` on every rank of ``comm``
    (``None``: one process only, and ``refusal(config)`` is the error); both return the exit status."""
    local: Callable
    mpi: Optional[Callable] = None
    refusal: Callable = _not_under_mpi

    def __call__(self, config, comm=None) -> int:
        """Run ``config`` in this process (``comm`` is ``None``) or on the ranks of ``comm``."""
        if comm is None:
            return self.local(config)
        if self.mpi is None:
            raise InputError(self.refusal(config))
        return self.mpi(config, comm)


RUNNERS = {
    "substitution": Runner(run_local, run_asy_os_mpi),
    "baselines": Runner(run_local),
    "stream": Runner(run_local),
    "averages": Runner(run_running_averages, run_running_averages),
    "path": Runner(run_dfls, refusal=_path_not_under_mpi),
}


def runner_for(spec) -> Runner:
    """The runner of an ``AlgorithmSpec``: its family's."""
    return RUNNERS[spec.family]
