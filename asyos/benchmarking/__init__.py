"""Benchmarks that ship with the package (``python -m asyos.run --benchmark NAME``), and the plumbing
the scripts in ``benchmarks/`` share."""
