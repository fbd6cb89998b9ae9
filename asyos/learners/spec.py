"""What a family registers: its algorithms (``AlgorithmSpec``) and itself (``Family``).

Each family package (``substitution``, ``baselines``, ``stream``, ``averages``, ``path``) lists its
algorithms in its ``__init__``; ``asyos.registry`` collects them, and ``asyos.__all__``, the CLI's
``--algorithm`` choices and help, the common test battery and the benchmarks all read that one list.
Nothing here imports numpy or a learner: the estimator class is named and imported on first use.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Family:
    name: str
    description: str


@dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm: its ``--algorithm`` name, its estimator class (``module`` + ``class_name``,
    imported on first use), how the CLI builds it from a ``RunConfig`` (``build(config, loss_name,
    budget)``), its family, small parameters for the common test battery and the tasks it serves."""

    name: str
    description: str
    module: str
    class_name: str
    build: Callable
    family: str = ""
    test_params: dict = field(default_factory=dict)
    tasks: tuple = ("regression", "classification")

    @property
    def estimator_class(self):
        return getattr(importlib.import_module(self.module), self.class_name)

    @property
    def runs_on_mpi(self) -> bool:
        """Asy-OS's MPI driver (``asyos.runs.mpi_run``) runs it: the substitution family."""
        return self.family == "substitution"


def algorithm(name, description, module, class_name, build, **kwargs) -> AlgorithmSpec:
    """An ``AlgorithmSpec`` whose ``family`` is filled in by ``asyos.registry`` from the package."""
    return AlgorithmSpec(name, description, module, class_name, build, **kwargs)
