"""Registry of algorithms: name -> how to build it from a ``RunConfig``, and its family.

Every family package of ``asyos.learners`` (``FAMILY_PACKAGES``) lists its algorithms in its
``__init__`` (``FAMILY``, ``ALGORITHMS``, ``PUBLIC``); this module collects them. The CLI, the common
tests, the benchmarks and ``asyos.__all__`` iterate over ``all_algorithms()`` / ``public_names()``, so
adding an algorithm to its family's list is what makes it reachable from ``--algorithm``, exported
and tested.

The family says how an algorithm is run (one process, the simulator, MPI ranks); the CLI looks
the family's runner up in ``asyos.runs.runners``. The runners are not stored here because the MPI
drivers themselves look algorithms up in this registry: the registry stays below them.
"""
from __future__ import annotations

import dataclasses
import importlib

from .errors import InputError
from .learners.spec import AlgorithmSpec, Family

__all__ = ["AlgorithmSpec", "Family", "FAMILY_PACKAGES", "FAMILIES", "register", "get_algorithm",
           "all_algorithms", "algorithms_of", "public_names"]

FAMILY_PACKAGES = ("substitution", "baselines", "stream", "averages", "path")

_REGISTRY: dict[str, AlgorithmSpec] = {}
FAMILIES: dict[str, str] = {}          # family name -> description, filled by _load_builtin
_PUBLIC: dict[str, str] = {}           # public class name -> absolute module


def _family(package: str):
    return importlib.import_module(f"{__package__}.learners.{package}")


def register(spec: AlgorithmSpec) -> AlgorithmSpec:
    """Register one more algorithm (a plug-in's): its family must be one of ``FAMILIES``."""
    _load_builtin()
    return _register(spec)


def _register(spec: AlgorithmSpec) -> AlgorithmSpec:
    if spec.name in _REGISTRY:
        raise ValueError(f"algorithm {spec.name!r} registered twice")
    if spec.family not in FAMILIES:
        raise ValueError(f"algorithm {spec.name!r}: unknown family {spec.family!r}; "
                         f"choose one of: {', '.join(FAMILIES)}")
    _REGISTRY[spec.name] = spec
    _PUBLIC.setdefault(spec.class_name, spec.module)
    return spec


def get_algorithm(name: str) -> AlgorithmSpec:
    _load_builtin()
    if name not in _REGISTRY:
        raise InputError(f"unknown algorithm {name!r}; choose one of: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def all_algorithms() -> list[AlgorithmSpec]:
    _load_builtin()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def algorithms_of(family: str) -> list[AlgorithmSpec]:
    """The algorithms of one family, in the order the family lists them (the order of reports)."""
    _load_builtin()
    return [spec for spec in _REGISTRY.values() if spec.family == family]


def public_names() -> dict[str, str]:
    """Every public class of the families (estimators and their helpers) -> its module."""
    _load_builtin()
    return dict(_PUBLIC)


_LOADED = False


def _load_builtin():
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for package in FAMILY_PACKAGES:
        module = _family(package)
        family: Family = module.FAMILY
        FAMILIES[family.name] = family.description
        for spec in module.ALGORITHMS:
            _register(dataclasses.replace(spec, family=family.name))
        _PUBLIC.update(module.PUBLIC)
