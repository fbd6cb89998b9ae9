"""Registry of algorithms: name -> how to build it from a ``RunConfig``.

The CLI, the common tests and the benchmarks iterate over ``all_algorithms()``, so registering
an algorithm here is what makes it reachable from ``--algorithm`` and tested.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .errors import InputError


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str
    description: str
    build: Callable          # (config, loss_name, budget) -> estimator
    runs_on_mpi: bool = False
    test_params: dict = None  # small, fast parameters for the common test battery


_REGISTRY: dict[str, AlgorithmSpec] = {}


def register(spec: AlgorithmSpec) -> AlgorithmSpec:
    if spec.name in _REGISTRY:
        raise ValueError(f"algorithm {spec.name!r} registered twice")
    _REGISTRY[spec.name] = spec
    return spec


def get_algorithm(name: str) -> AlgorithmSpec:
    _load_builtin()
    if name not in _REGISTRY:
        raise InputError(f"unknown algorithm {name!r}; choose one of: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def all_algorithms() -> list[AlgorithmSpec]:
    _load_builtin()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def _os_kwargs(config, loss, budget):
    return dict(budget=budget, loss=loss, passes=config.passes, step_size=config.step_size,
                step_divisor=config.step_divisor, decrease_check=config.decrease_check,
                decrease_constant=config.decrease_constant, refit=config.refit, random_state=config.seed,
                trace_every=config.trace_every)


def _build_os(config, loss, budget):
    from .learners.online_substitution import OnlineSubstitution
    return OnlineSubstitution(**_os_kwargs(config, loss, budget))


def _build_asy_os(config, loss, budget):
    from .config import DEFAULT_SIMULATED_WORKERS
    from .learners.asy_os import AsyncOnlineSubstitution
    workers = config.workers or DEFAULT_SIMULATED_WORKERS
    return AsyncOnlineSubstitution(n_workers=workers, max_staleness=config.max_staleness,
                                   policy=config.staleness_policy, schedule=config.schedule,
                                   sharding=config.sharding, **_os_kwargs(config, loss, budget))


def _build_proj_gd(config, loss, budget):
    from .learners.baselines import ProjectedGradient
    return ProjectedGradient(budget=budget, loss=loss, refit=config.refit, random_state=config.seed)


def _build_lasso(config, loss, budget):
    from .learners.baselines import LassoToBudget
    return LassoToBudget(budget=budget, loss=loss, refit=config.refit, random_state=config.seed)


_LOADED = False


def _load_builtin():
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    register(AlgorithmSpec("os", "Online Substitution (KDD'16 Alg. 1); Asy-OS under mpiexec", _build_os,
                           runs_on_mpi=True, test_params={"passes": 2}))
    register(AlgorithmSpec("asy-os", "Asy-OS (KDD'16 Alg. 2-3): MPI under mpiexec, else the simulator",
                           _build_asy_os, runs_on_mpi=True, test_params={"passes": 2, "n_workers": 2}))
    register(AlgorithmSpec("proj-gd", "Projected gradient / IHT onto the L0 ball (batch baseline)",
                           _build_proj_gd, test_params={"max_iter": 50}))
    register(AlgorithmSpec("lasso", "L1 path tuned to the budget, scikit-learn (batch baseline)",
                           _build_lasso, test_params={}))
