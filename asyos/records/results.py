"""Writing results so that a failed run loses nothing that finished, and leaves nothing stale.

* ``prepare_output_dir(dir, overwrite, resume)``: the pre-flight of ``--output``, before any
  computation: the directory is created or checked writable, a file of the run that exists as a
  directory is refused, and a directory that holds a previous run's files is refused unless
  ``overwrite`` (those files are then removed, so a failed rerun cannot leave the old
  ``results.json`` behind) or ``resume`` (``--resume DIR`` continues that run);
* ``atomic_file(path)`` / ``write_json_atomic``: every output file is written to a temporary file
  in the same directory and renamed into place (a killed run left a 0-byte ``selection_log.csv``),
  with the mode a plain ``open`` would give (0666 less the umask; ``mkstemp``'s 0600 hid results
  from the other users of a cluster account's group);
* ``write_results(dir, record, log_rows)`` writes ``results.json`` and ``selection_log.csv``;
* ``ResultsLog`` appends one JSON line per finished unit (benchmarks), flushed at once.
"""
from __future__ import annotations

import contextlib
import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from ..errors import InputError


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


# what a run of the CLI writes into --output (asyos.records.resume, asyos.runs.run_dfls, asyos.distributed.*):
# the files a rerun replaces, and that make a directory "used"
RUN_FILES = ("results.json", "selection_log.csv", "checkpoint.pkl", "checkpoint", "path.csv", "path.png",
             "running_averages.npz", "predictions.csv", "run.png")
TRACEBACK_PREFIX = "asyos-rank"
# written before a run computes anything (its settings, a file being written): alone, they are what a run that
# failed on its input or was killed before its first checkpoint left; they do not make the directory used
LEFTOVERS = ("run_config.json",)
TEMPORARY_PREFIX = ".tmp-"


def previous_run_files(directory: str, leftovers: bool = False) -> list:
    """The names in ``directory`` that a previous run wrote (sorted); with ``leftovers``, also its
    settings and temporary files."""
    def ours(name):
        if name in RUN_FILES or (name.startswith(TRACEBACK_PREFIX) and "-traceback-" in name):
            return True
        return leftovers and (name in LEFTOVERS or name.startswith(TEMPORARY_PREFIX))
    try:
        return sorted(name for name in os.listdir(directory) if ours(name))
    except OSError:
        return []


def prepare_output_dir(directory: str, overwrite: bool = False, resume: bool = False) -> str:
    """The pre-flight of ``--output`` (module docstring), before any work is done: create
    ``directory`` or check it is a writable directory; refuse a run file that exists as a
    directory (it failed only when the results were written, after the whole computation); a
    directory holding a previous run's files is refused unless ``resume`` (accepted as it is) or
    ``overwrite`` (every file of that run is removed now)."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise InputError(f"--output {directory!r} is a file, not a directory")
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create output directory {directory!r}: {exc.strerror}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise InputError(f"output directory {directory!r} is not writable")
    from .output_lock import lock_output
    lock_output(directory)              # before anything in it is read or removed: one run at a time
    for name in ("results.json", "selection_log.csv"):
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not overwrite:
            raise InputError(f"--output {directory!r}: {name} is a directory; the results could not be written "
                             f"there (remove it, or choose another --output)")
    if resume:
        return directory
    used = previous_run_files(directory)
    if used and not overwrite:
        shown = ", ".join(used[:4]) + (f" (+{len(used) - 4})" if len(used) > 4 else "")
        hint = " (or --resume DIR to continue it)" if {"checkpoint.pkl", "checkpoint"} & set(used) else ""
        raise InputError(f"--output {directory!r} holds a previous run's files ({shown}); pass --overwrite to "
                         f"replace them{hint}, or choose another directory")
    for name in previous_run_files(directory, leftovers=True):
        path = os.path.join(directory, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError as exc:
            raise InputError(f"--overwrite: cannot remove {path!r}: {exc.strerror}") from None
    return directory


def prepare_run_output(config) -> None:
    """``prepare_output_dir`` of ``config.output`` (if any) with the run's ``--overwrite`` / ``--resume``."""
    if config.output:
        prepare_output_dir(config.output, overwrite=config.overwrite, resume=config.resume)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def _staging(path: str, mode: str = "w", **open_args):
    """``with _staging(path) as (fh, tmp)``: write ``fh``, a temporary file next to ``path`` with the mode a
    plain ``open`` would give it (0666 less the umask, not ``mkstemp``'s 0600), flushed to disk when the block
    ends and removed if it fails; the caller renames ``tmp`` onto ``path`` (or removes it)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=TEMPORARY_PREFIX, suffix="-" + os.path.basename(path), dir=directory)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, mode, **open_args) as fh:
            yield fh, tmp
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_file(path: str, mode: str = "w", **open_args):
    """``with atomic_file(path) as fh``: write ``fh``; on success the file replaces ``path`` at
    once (``os.replace``), on failure ``path`` is left as it was."""
    with _staging(path, mode, **open_args) as (fh, tmp):
        yield fh
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: str, text: str) -> None:
    with atomic_file(path) as fh:
        fh.write(text)


def write_json_atomic(path: str, record) -> None:
    with atomic_file(path) as fh:
        json.dump(to_jsonable(record), fh, indent=1)
        fh.write("\n")


def write_results(directory: str, record: dict, log_rows=None) -> str:
    """``results.json`` and (``log_rows``) ``selection_log.csv``: both written in full to temporary files
    first, then renamed into place, the results last. A write that fails (a full disk) leaves the
    directory as it was: each file complete or absent, and the results never without their log."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "results.json")
    staged = []
    try:
        if log_rows is not None:
            from ..learners.substitution.asy_worker import SelectionLog
            log = os.path.join(directory, "selection_log.csv")
            with _staging(log, newline="") as (fh, tmp):
                writer = csv.writer(fh)
                writer.writerow(SelectionLog.FIELDS)
                writer.writerows(log_rows)
            staged.append((tmp, log))
        with _staging(path) as (fh, tmp):
            json.dump(to_jsonable(record), fh, indent=1)
            fh.write("\n")
        staged.append((tmp, path))
    except BaseException:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    for tmp, final in staged:                      # renames take no space: they do not fail on a full disk
        os.replace(tmp, final)
    return path


class ResultsLog:
    """Append-only JSON-lines file: one record per finished unit, flushed immediately."""

    def __init__(self, path: str):
        self.path = path
        directory = os.path.dirname(os.path.abspath(path))
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create output directory {directory!r}: {exc.strerror}") from None

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
    """Where the run happened: versions, cores, and the source commit when known. It never fails a
    run: each part that cannot be found is left out (``from . import __version__`` raised ImportError
    after the whole fit when ``asyos`` had been imported as a namespace package: run from the
    directory that holds a checkout named ``asyos``, the editable install found its modules but
    never ran ``__init__``)."""
    env = {"python": platform.python_version(), "numpy": np.__version__, "argv": list(sys.argv)}
    parts = (("scipy", lambda: __import__("scipy").__version__), ("platform", platform.platform),
             ("cpu_count", os.cpu_count), ("usable_cores", _usable_cores), ("asyos", package_version),
             ("git_commit", _git_commit))
    for name, get in parts:
        try:
            env[name] = get()
        except Exception:  # noqa: BLE001 - the environment record must never fail a run
            env[name] = None
    if "mpi4py" in sys.modules:
        try:
            from mpi4py import MPI
            import mpi4py
            env["mpi4py"] = mpi4py.__version__
            env["mpi_library"] = MPI.Get_library_version().strip().splitlines()[0]
        except Exception:  # noqa: BLE001 - the environment record must never fail a run
            pass
    return env


def package_version():
    """``asyos.__version__``, or the installed distribution's version when the package's
    ``__init__`` did not run (a namespace import); ``None`` when neither is known."""
    version = getattr(sys.modules.get(__package__), "__version__", None)
    if version is not None:
        return version
    try:
        from importlib.metadata import PackageNotFoundError, version as dist_version
        return dist_version("asyos")
    except (ImportError, PackageNotFoundError, ValueError):
        return None


def _usable_cores():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _git_commit():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
