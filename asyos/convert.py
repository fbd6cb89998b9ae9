"""``python -m asyos.convert SRC DST``: write a data set column-major (``asyos.cli.convert``)."""
import sys

from .cli.convert import main

if __name__ == "__main__":
    sys.exit(main())
