"""``python -m asyos.run [options]``: the command line (``asyos.cli.run``), kept at this name for
``mpiexec -n N python -m asyos.run`` and the ``asyos`` console script."""
if __name__ == "__main__":     # before the heavy imports: a Ctrl-C while the ranks start is a stop, not a traceback
    from .distributed.supervisor import note_early_stops
    note_early_stops()
from .cli.run import command, exit_now, main

__all__ = ["command", "exit_now", "main"]

if __name__ == "__main__":
    command()
