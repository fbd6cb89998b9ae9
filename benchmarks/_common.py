"""Shared plumbing of the benchmark scripts: profiles, tables, JSON and plots.

Every script appends one JSON line per finished unit to ``<output>/<name>.jsonl`` (a failed run
keeps what finished), then writes the summary ``<output>/<name>.json`` and prints a table; where a
plot helps it writes ``<output>/<name>.png`` (needs matplotlib, said so when missing).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from asyos.results import ResultsLog, environment, to_jsonable, write_json_atomic  # noqa: E402


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="tiny profile for CI (seconds)")
    p.add_argument("--seeds", type=int, help="repetitions (default: the profile's)")
    p.add_argument("--output", default=os.path.join(HERE, "results"), help="directory for JSON/PNG")
    return p


def choose_profile(args, profiles: dict) -> dict:
    """``profiles["quick"]`` with ``--quick``, else ``profiles["paper"]``; ``--seeds`` overrides."""
    profile = dict(profiles["quick" if args.quick else "paper"])
    if getattr(args, "seeds", None):
        profile["seeds"] = args.seeds
    return profile


class Run:
    """One benchmark invocation: the JSON-lines log, the summary and the environment."""

    def __init__(self, name: str, args, profile: dict):
        self.name, self.args, self.profile = name, args, profile
        os.makedirs(args.output, exist_ok=True)
        self.log = ResultsLog(os.path.join(args.output, f"{name}.jsonl"))
        self.started = time.time()
        self.units = []
        self.log.append({"event": "start", "benchmark": name, "profile": profile, "time": self.started})

    def unit(self, record: dict) -> dict:
        self.units.append(record)
        self.log.append(record)
        return record

    def finish(self, summary: dict) -> str:
        path = os.path.join(self.args.output, f"{self.name}.json")
        write_json_atomic(path, {"benchmark": self.name, "profile": self.profile, "summary": summary,
                                 "units": self.units, "environment": environment(),
                                 "seconds": time.time() - self.started})
        return path


def mean_std(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def fmt(mean, std=None, digits=3):
    if mean is None:
        return "-"
    return f"{mean:.{digits}f}" if std is None else f"{mean:.{digits}f}±{std:.{digits}f}"


def print_table(title: str, header: list, rows: list) -> str:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(str(c).rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    text = "\n".join([title, line(header), line(["-" * w for w in widths]), *map(line, rows)])
    print(text + "\n", flush=True)
    return text


def plot(path: str, draw) -> bool:
    """Call ``draw(plt)`` and save to ``path``; False (with a note) when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(matplotlib is not installed: no plot written to {path})")
        return False
    draw(plt)
    plt.tight_layout()
    plt.savefig(path, dpi=110)
    plt.close("all")
    print(f"plot: {path}")
    return True


def dumps(obj) -> str:
    return json.dumps(to_jsonable(obj))
