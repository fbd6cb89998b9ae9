"""Benchmarks that ship with the package, and the plumbing the scripts in ``benchmarks/`` share.

``python -m asyos.run --benchmark NAME [options]`` runs one of ``BENCHMARKS``.
"""
BENCHMARKS = {"speedup": "asyos.benchmarking.speedup"}


def run_benchmark(name, argv) -> int:
    import importlib

    from ..errors import InputError
    if name not in BENCHMARKS:
        raise InputError(f"unknown benchmark {name!r}; choose one of: {', '.join(sorted(BENCHMARKS))}")
    module = importlib.import_module(BENCHMARKS[name])
    return module.main(argv, prog=f"python -m asyos.run --benchmark {name}")
