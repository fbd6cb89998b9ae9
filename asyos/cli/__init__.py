"""The command lines: ``python -m asyos.run`` (parser and ``main``), ``asyos.convert``, ``predict``."""
