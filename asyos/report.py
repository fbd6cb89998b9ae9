"""``python -m asyos.report DIR``: draw a finished run's picture again (``asyos.cli.report``)."""
import sys

from .cli.report import main

if __name__ == "__main__":
    sys.exit(main())
