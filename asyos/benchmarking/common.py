"""Shared plumbing of the benchmarks: profiles, tables, JSON and plots.

Every script appends one JSON line per finished unit to ``<output>/<name>.jsonl`` (a failed run
keeps what finished), then writes the summary ``<output>/<name>.json`` and prints a table; where a
plot helps it writes ``<output>/<name>.png`` (needs matplotlib, said so when missing).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from ..records.results import ResultsLog, environment, to_jsonable, write_json_atomic

DEFAULT_OUTPUT = os.path.join("benchmarks", "results")


def parser(description: str, prog: str = None, data_dir: bool = False) -> argparse.ArgumentParser:
    """The benchmarks' common options; ``data_dir`` adds ``--data-dir`` (see ``datasets_dir``)."""
    p = argparse.ArgumentParser(description=description, prog=prog)
    p.add_argument("--quick", action="store_true", help="small profile: a first look in about a minute")
    p.add_argument("--smoke", action=_Smoke, nargs=0,
                   help="the smallest run through every code path of the benchmark, for the test suite "
                        "(tests/test_benchmarks.py); implies --quick; its figures mean nothing")
    p.add_argument("--seeds", type=int, help="repetitions (default: the profile's)")
    p.add_argument("--output", default=DEFAULT_OUTPUT, help=f"directory for JSON/PNG (default {DEFAULT_OUTPUT})")
    if data_dir:
        p.add_argument("--data-dir", help="directory of the shared datasets (default: $ASYOS_DATASETS, else "
                                          "../shared/datasets next to the repository)")
    return p


class _Smoke(argparse.Action):
    """``--smoke`` sets ``quick`` too: the code paths a quick run takes (no real data needed, the
    quick profile's sections) are the ones the smoke run must keep working."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.smoke = True
        namespace.quick = True


def choose_profile(args, profiles: dict) -> dict:
    """``profiles["smoke"]`` with ``--smoke`` (``profiles["quick"]`` where a benchmark has no
    smaller one), ``profiles["quick"]`` with ``--quick``, else ``profiles["paper"]``; ``--seeds``
    overrides."""
    if getattr(args, "smoke", False):
        name = "smoke" if "smoke" in profiles else "quick"
    else:
        name = "quick" if args.quick else "paper"
    profile = dict(profiles[name])
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


def mpiexec_path():
    """The ``mpiexec`` installed next to this interpreter (the mpich wheel's), else the one on PATH."""
    return shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")


def run_asyos(args, ranks=None, timeout=900, env_extra=None):
    """``[mpiexec -n ranks] python -m asyos.run args --output tmp --quiet``; returns ``(record, seconds)``,
    the run's ``results.json`` and the wall time of the whole command (start-up included).
    ``env_extra``: variables added to the environment (e.g. MPICH's virtual nodes)."""
    out_dir = tempfile.mkdtemp(prefix="asyos-bench-")
    cmd = [sys.executable, "-m", "asyos.run", *map(str, args), "--output", out_dir, "--quiet"]
    if ranks is not None:
        launcher = mpiexec_path()
        if launcher is None:
            raise SystemExit("mpiexec not found: pip install 'asyos[mpi]'")
        cmd = [launcher, "-n", str(ranks), *cmd]
    start = time.perf_counter()
    env = dict(os.environ, **(env_extra or {}))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    seconds = time.perf_counter() - start
    try:
        if proc.returncode != 0:
            raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr}")
        with open(os.path.join(out_dir, "results.json")) as fh:
            return json.load(fh), seconds
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def datasets_dir(given=None) -> str:
    """Where the real data sets are: ``given`` (``--data-dir``), else ``$ASYOS_DATASETS``, else
    ``../shared/datasets`` next to the repository."""
    if given:
        return os.path.abspath(given)
    if os.environ.get("ASYOS_DATASETS"):
        return os.path.abspath(os.environ["ASYOS_DATASETS"])
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(os.path.dirname(repo), "shared", "datasets")


def dense_dataset_path(data_dir, name) -> str:
    """``DIR/name/name.npz``: a dense shared data set (keys ``X, y``)."""
    return os.path.join(data_dir, name, f"{name}.npz")


def missing_dense_datasets(data_dir, names):
    """``None`` when every dense data set in ``names`` is there, else a message saying what is missing."""
    if not os.path.isdir(data_dir):
        return (f"data directory not found: {data_dir} (the shared datasets are expected at ../shared/datasets next "
                f"to the repository root; pass --data-dir DIR or set ASYOS_DATASETS)")
    missing = [dense_dataset_path(data_dir, n) for n in names if not os.path.exists(dense_dataset_path(data_dir, n))]
    if missing:
        return f"data directory {data_dir} lacks {', '.join(missing)} (see its README.md)"
    return None


def load_dense_dataset(data_dir, name):
    """``(X, y)`` of a dense shared data set, as float64."""
    import numpy as np
    with np.load(dense_dataset_path(data_dir, name), allow_pickle=False) as z:
        return z["X"].astype(np.float64), z["y"].astype(np.float64)


def sparse_stand_in(name="stand-in", n_train=300, n_test=300, n_features=2000, nnz_per_row=40, n_true=20,
                    seed=0):
    """A small sparse classification problem shaped like the text data sets, for a ``--quick`` run on a
    machine without them: non-negative counts, labels of a sparse linear model with 10% flipped.
    Returns ``(X_train, y_train, X_test, y_test)`` (CSR float64, labels in {-1, +1})."""
    import numpy as np
    import scipy.sparse as sp
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    cols = np.concatenate([np.sort(rng.choice(n_features, nnz_per_row, replace=False)) for _ in range(n)])
    X = sp.csr_matrix((rng.poisson(2.0, n * nnz_per_row) + 1.0, cols, np.arange(0, n * nnz_per_row + 1,
                                                                                 nnz_per_row)),
                      shape=(n, n_features))
    w = np.zeros(n_features)
    w[rng.choice(n_features, n_true, replace=False)] = rng.normal(size=n_true)
    y = np.where(X @ w - np.median(X @ w) >= 0, 1.0, -1.0)
    y[rng.random(n) < 0.1] *= -1
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
