"""``python -m asyos``: the same command as ``python -m asyos.run`` and ``asyos``."""
if __name__ == "__main__":     # before the heavy imports: a Ctrl-C while the ranks start is a stop, not a traceback
    from .distributed.supervisor import note_early_stops
    note_early_stops()
from .cli.run import exit_now, main

if __name__ == "__main__":
    exit_now(main())
