"""``python -m asyos``: the same command as ``python -m asyos.run`` and ``asyos``."""
from .cli.run import exit_now, main

if __name__ == "__main__":
    exit_now(main())
