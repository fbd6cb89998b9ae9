"""``python -m asyos``: the same command as ``python -m asyos.run`` and ``asyos``."""
import sys

from .run import main

if __name__ == "__main__":
    sys.exit(main())
