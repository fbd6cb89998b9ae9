"""Speedup across worker counts, measured with MPI and projected to dedicated cores.

The benchmark ships with the package (``python -m asyos.run --benchmark speedup``); this script is
the same entry point next to the others. See ``asyos/benchmarking/speedup.py`` for what it does.

    python benchmarks/bench_speedup.py [--quick] [--workers 1 2 4 8 12] [--repeats 3]
"""
import sys

from asyos.benchmarking.speedup import main

if __name__ == "__main__":
    sys.exit(main())
