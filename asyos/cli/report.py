"""``python -m asyos.report DIR [--output FILE.png]``: draw the picture of a finished run again."""
from __future__ import annotations

import argparse
import sys

from ..errors import EXIT_OK, EXIT_USAGE, InputError
from ..runs.report import NoMatplotlib, draw_run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m asyos.report",
                                     description="Draw the picture (run.png) of a finished run from its --output "
                                                 "directory (results.json, selection_log.csv).")
    parser.add_argument("directory", help="the --output directory of a finished run")
    parser.add_argument("--output", help="the PNG file to write (default DIR/run.png)")
    args = parser.parse_args(argv)
    try:
        path = draw_run(args.directory, args.output)
    except NoMatplotlib as exc:
        print(f"asyos: no picture drawn: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except InputError as exc:
        print(f"asyos: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    if path is None:
        print(f"asyos: nothing to draw in {args.directory!r}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    print(path)
    return EXIT_OK
