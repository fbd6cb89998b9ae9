"""Checkpoints of CLI runs: where they go, what they are valid for, and ``--resume DIR``.

A run with ``--output DIR`` saves its configuration in ``DIR/run_config.json`` before it starts,
and its learner's state in ``DIR/checkpoint.pkl`` every ``--checkpoint-every`` seconds (default
``DEFAULT_EVERY_S``: runs shorter than that never write one) and when SIGTERM or SIGINT stops it;
the stopped run writes ``DIR/results.json`` with ``"status": "interrupted"`` and how far it got,
then exits ``128 + signal``. ``python -m asyos.run --resume DIR`` reads the configuration back,
checks that the checkpoint was written by this version for the same settings and data
(``run_identity``), and continues; a finished run removes its checkpoint.

Under ``mpiexec`` each rank writes ``DIR/checkpoint/rank-K.pkl`` (``asyos.runs.mpi_run``).
"""
from __future__ import annotations

import json
import os
import sys
from typing import Optional

from .checkpoint import CHECKPOINT_FILE, DEFAULT_EVERY_S, Checkpointer, RunInterrupted, signal_name
from ..errors import InputError

CONFIG_FILE = "run_config.json"
# settings that change neither the computation nor its result: they may differ on --resume
NOT_IDENTITY = ("output", "quiet", "verbose", "picture", "save_model", "checkpoint_every", "time_limit", "resume",
                "overwrite", "watchdog_timeout", "setup_timeout")
RESUME_OVERRIDES = ("checkpoint_every", "time_limit", "quiet", "verbose", "picture", "save_model", "watchdog_timeout",
                    "setup_timeout")


def checkpoint_path(config) -> str:
    return os.path.join(config.output, CHECKPOINT_FILE)


def run_identity(config) -> dict:
    """What a checkpoint is valid for: every setting that shapes the run, and each data file's
    resolved path, size and modification time (a file rewritten in place is another problem)."""
    settings = {k: v for k, v in config.as_dict().items() if k not in NOT_IDENTITY + ("data", "test_data")}
    identity = {"settings": settings}
    for name in ("data", "test_data"):
        path = getattr(config, name)
        if path == "-":
            identity[name] = path
        elif path is not None:
            identity[name] = [os.path.realpath(path)]
            try:
                st = os.stat(path)
            except OSError:
                continue                    # the loader says what is wrong with it
            identity[name] += [st.st_size, st.st_mtime_ns] if not os.path.isdir(path) else _files_of(path)
    return identity


def _files_of(directory) -> list:
    """``[name, size, mtime]`` of each file of a data directory (a file replaced in it counts)."""
    out = []
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if entry.is_file():
            st = entry.stat()
            out.append([entry.name, st.st_size, st.st_mtime_ns])
    return out


def checkpointer_for(config, kind: Optional[str] = None) -> Optional[Checkpointer]:
    """The run's ``Checkpointer`` (``None`` without ``--output``, or reading standard input), with
    the state to continue from under ``--resume`` (checked against this run's identity)."""
    if not config.output or config.data == "-":
        if config.resume:
            raise InputError("--resume needs the run's --output directory")
        return None
    return Checkpointer(checkpoint_path(config), _every(config), run_identity(config), resume=config.resume,
                        stop_after=_stop_after(), time_limit=config.time_limit,
                        run_id=lambda: run_id_of(config.output))


def with_progress(checkpoint, what):
    """``checkpoint`` writing progress lines at its polls when they are wanted (``asyos.utils.progress``)."""
    from ..utils.progress import Progress, wanted
    if checkpoint is not None and wanted():
        checkpoint.reporter = Progress(what).polled()
    return checkpoint


def poller_for(config, what=None):
    """What a CLI fit polls: the run's ``Checkpointer`` (``checkpointer_for``), else a
    ``ProgressPoller`` when progress lines are wanted, else ``None``; either writes the progress
    lines of the learner's ``progress()`` dicts (a poll costs a clock reading between two lines:
    ``benchmarks/bench_progress.py``)."""
    from ..utils.progress import poller
    what = what or config.algorithm
    checkpoint = checkpointer_for(config)
    return with_progress(checkpoint, what) if checkpoint is not None else poller(what)


def _every(config) -> Optional[float]:
    """``--checkpoint-every``: ``DEFAULT_EVERY_S`` when not given; ``None`` (on stop only) for 0."""
    every = DEFAULT_EVERY_S if config.checkpoint_every is None else config.checkpoint_every
    return every if every > 0 else None


STOP_AFTER_ENV = "ASYOS_STOP_AFTER_POLLS"


def _stop_after() -> Optional[int]:
    """Fault injection for tests: ``ASYOS_STOP_AFTER_POLLS=k`` stops a one-process run at its
    ``k``-th poll exactly as SIGTERM would there (a real signal races a run that lasts a second)."""
    value = os.environ.get(STOP_AFTER_ENV)
    return int(value) if value and value.isdigit() else None


RANKS_DIR = "checkpoint"


def rank_checkpointer(config, rank: int, size: int) -> Optional[Checkpointer]:
    """Under ``mpiexec``: rank ``rank``'s ``Checkpointer`` (``DIR/checkpoint/rank-K.pkl``), valid
    for the same settings, data and number of ranks; ``None`` without ``--output``. (The driver
    drops it for the node-aggregated transport, which is not saved.)"""
    if not config.output:
        if config.resume:
            raise InputError("--resume needs the run's --output directory")
        return None
    return Checkpointer(os.path.join(config.output, RANKS_DIR, f"rank-{rank}.pkl"), _every(config),
                        {**run_identity(config), "ranks": size}, resume=config.resume, time_limit=config.time_limit,
                        run_id=lambda: run_id_of(config.output))


def takes_checkpoint(estimator) -> bool:
    """Whether ``estimator.fit`` saves and resumes (its ``checkpoint`` argument)."""
    import inspect
    try:
        return "checkpoint" in inspect.signature(estimator.fit).parameters
    except (TypeError, ValueError):
        return False


def fit_resumable(estimator, X, y, config):
    """``estimator.fit(X, y)`` with the run's poller (``poller_for``: checkpoints, progress lines)
    when it takes one; a learner that does not is stopped by a signal at once, with nothing saved."""
    checkpoint = poller_for(config)
    if checkpoint is None or not takes_checkpoint(estimator):
        if checkpoint is not None and checkpoint.resumed_kind is not None:
            raise InputError(f"{type(estimator).__name__} does not resume from a checkpoint")
        return estimator.fit(X, y)
    return estimator.fit(X, y, checkpoint=checkpoint)


def save_run_config(config) -> None:
    """``DIR/run_config.json``: what ``--resume DIR`` runs again (written before the run starts)."""
    if not config.output or config.resume:
        return
    from .results import write_json_atomic
    import secrets
    settings = config.as_dict()
    for name in ("data", "test_data", "costs"):       # --resume may run from another directory
        if settings.get(name) not in (None, "-"):
            settings[name] = os.path.abspath(settings[name])
    settings[RUN_ID] = secrets.token_hex(8)             # this run's checkpoints carry it (records.checkpoint)
    try:
        write_json_atomic(os.path.join(config.output, CONFIG_FILE), settings)
    except OSError as exc:                              # before any work: the directory is not usable
        raise InputError(f"cannot write {os.path.join(config.output, CONFIG_FILE)}: {exc.strerror or exc}") from None


RUN_ID = "run_id"


def run_id_of(directory: Optional[str]) -> Optional[str]:
    """The token of the run whose ``--output`` is ``directory`` (its ``run_config.json``), ``None`` when
    there is none: every checkpoint of the run holds it, and a resume refuses one that holds another."""
    if not directory:
        return None
    try:
        with open(os.path.join(directory, CONFIG_FILE)) as fh:
            value = json.load(fh).get(RUN_ID)
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def resume_settings(directory: str, flags: dict) -> dict:
    """The settings of the run whose ``--output`` was ``directory``, with the few flags that may
    change on resume (``RESUME_OVERRIDES``); any other flag is refused."""
    path = os.path.join(directory, CONFIG_FILE)
    if not os.path.isdir(directory):
        raise InputError(f"--resume {directory}: not a directory")
    if not os.path.exists(path):
        raise InputError(f"--resume {directory}: no {CONFIG_FILE} there (not the --output of a run)")
    others = sorted(k for k in flags if k not in RESUME_OVERRIDES)
    if others:
        raise InputError(f"--resume continues the run with its own settings; --{others[0].replace('_', '-')} "
                         f"cannot change (only {', '.join('--' + k.replace('_', '-') for k in RESUME_OVERRIDES)})")
    try:
        with open(path) as fh:
            saved = json.load(fh)
    except (OSError, ValueError) as exc:
        raise InputError(f"--resume {directory}: cannot read {CONFIG_FILE}: {exc}") from None
    if not isinstance(saved, dict):
        raise InputError(f"--resume {directory}: {CONFIG_FILE} is not a settings table")
    if _finished(directory):
        raise InputError(f"--resume {directory}: that run finished (results.json); nothing to resume")
    saved.pop(RUN_ID, None)                 # not a setting: the checkpoints' check reads it from the file
    saved["time_limit"] = None              # the stopped run's limit is spent: a resumed run takes its own
    if "quiet" in flags or "verbose" in flags:  # -q after a run made with -v: the flag given decides both
        saved.update(quiet=False, verbose=0)
    saved.update(flags, output=directory, resume=True)
    return saved


def _finished(directory) -> bool:
    path = os.path.join(directory, "results.json")
    if not os.path.exists(path):
        return False
    try:
        with open(path) as fh:
            return json.load(fh).get("status") != "interrupted"
    except (OSError, ValueError, AttributeError):
        return False


def finished(config) -> None:
    """The run finished and its results are written: its checkpoint is no longer needed."""
    if config is not None and config.output:
        import shutil
        try:
            os.unlink(checkpoint_path(config))
        except FileNotFoundError:
            pass
        shutil.rmtree(os.path.join(config.output, RANKS_DIR), ignore_errors=True)


def report_interrupted(config, exc: RunInterrupted, launcher: str = "", quiet: bool = False) -> None:
    """One line on stderr and, with ``--output``, ``results.json`` saying the run was stopped,
    how far it got, and how to continue it (``launcher``: ``mpiexec -n N `` under MPI)."""
    output = getattr(config, "output", None)
    saved = exc.path is not None and os.path.exists(exc.path)
    progress = {k: v for k, v in exc.progress.items() if not k.startswith("_")}    # "_": progress lines only
    done = ", ".join(f"{k} {v}" for k, v in progress.items())
    where = f" after {done}" if done else ""
    command = f"{launcher}python -m asyos.run --resume {output}"
    if saved:
        tail = f"; checkpoint {exc.path}; continue with: {command}"
    elif output:
        tail = "; nothing to save yet" + (f" (continue with: {command})"
                                          if os.path.exists(os.path.join(output, CONFIG_FILE)) else "")
    else:
        tail = " (no --output: nothing saved)"
    if not quiet:
        print(f"asyos: stopped by {signal_name(exc.signum)}{where}{tail}", file=sys.stderr, flush=True)
    if output and os.path.isdir(output):
        from .results import write_json_atomic
        record = {"status": "interrupted", "signal": signal_name(exc.signum), "exit_status": exc.exit_status,
                  "progress": progress, "checkpoint": exc.path if saved else None,
                  "resume": command, "config": config.as_dict()}
        try:
            write_json_atomic(os.path.join(output, "results.json"), record)
        except OSError:
            pass
