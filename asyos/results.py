"""Writing results so that a failed run loses nothing that finished.

* ``write_results(dir, record, log_rows)`` writes ``results.json`` (atomically: a temporary file
  renamed into place) and ``selection_log.csv``;
* ``ResultsLog`` appends one JSON line per finished unit (benchmarks), flushed at once.
"""
from __future__ import annotations

import csv
import json
import os
import platform
import subprocess
import sys
import tempfile

import numpy as np

from .errors import InputError


def to_jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        obj = float(obj)
    if isinstance(obj, float) and not np.isfinite(obj):
        return None if np.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def prepare_output_dir(directory: str) -> str:
    """Create ``directory`` (or check it is writable) before any work is done."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create output directory {directory!r}: {exc.strerror}") from None
    if not os.access(directory, os.W_OK):
        raise InputError(f"output directory {directory!r} is not writable")
    return directory


def write_json_atomic(path: str, record) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(to_jsonable(record), fh, indent=1)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_results(directory: str, record: dict, log_rows=None) -> str:
    prepare_output_dir(directory)
    path = os.path.join(directory, "results.json")
    write_json_atomic(path, record)
    if log_rows is not None:
        from .protocol.worker import SelectionLog
        with open(os.path.join(directory, "selection_log.csv"), "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(SelectionLog.FIELDS)
            writer.writerows(log_rows)
    return path


class ResultsLog:
    """Append-only JSON-lines file: one record per finished unit, flushed immediately."""

    def __init__(self, path: str):
        self.path = path
        prepare_output_dir(os.path.dirname(os.path.abspath(path)))

    def append(self, record: dict) -> None:
        with open(self.path, "a") as fh:
            fh.write(json.dumps(to_jsonable(record)) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def read(self) -> list:
        if not os.path.exists(self.path):
            return []
        with open(self.path) as fh:
            return [json.loads(line) for line in fh if line.strip()]


def environment() -> dict:
    """Where the run happened: versions, cores, and the source commit when known."""
    import scipy
    env = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "argv": sys.argv,
    }
    from . import __version__
    env["asyos"] = __version__
    env["git_commit"] = _git_commit()
    if "mpi4py" in sys.modules:
        try:
            from mpi4py import MPI
            import mpi4py
            env["mpi4py"] = mpi4py.__version__
            env["mpi_library"] = MPI.Get_library_version().strip().splitlines()[0]
        except Exception:  # noqa: BLE001 - the environment record must never fail a run
            pass
    return env


def _git_commit():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
