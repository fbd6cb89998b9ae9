"""One run, whatever the family: the steps every run of ``python -m asyos.run`` takes, in one place.

``carry_out(config, run)`` carries out a run in one process::

    1  prepare the output directory            records.results.prepare_run_output (--overwrite, --resume)
    2  refuse what the family cannot do        run.check(config)
    3  save the settings                       records.resume.save_run_config (what --resume runs again)
    4  open the source, resolve the problem    run.load(config)
    5  fit                                     run.fit(config, loaded); ConvergenceWarnings are gathered
    6  evaluate and build the record           run.report(config, loaded, fitted, clock, notes) -> Outcome
    7  publish(config, outcome): print the summary, save the model (--save-model), write results.json with the
       selection log and the family's own files, drop the checkpoint (the run finished), draw run.png

A family supplies ``run`` (an object with ``check``, ``load``, ``fit`` and ``report``): how it loads, how it
fits, and what its record holds; the estimator reports its own fitted figures (``learners.base.run_extras``).
Under ``mpiexec`` the ranks load and fit together (``runs.mpi_run``, ``runs.accumulate``), and the root rank
ends through the same ``publish``.
"""
from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass
from typing import Callable, Optional

from ..errors import EXIT_OK, ConvergenceWarning, OutputError


@dataclass
class Clock:
    """When the run started, had loaded, and had fitted (``time.perf_counter``)."""
    started: float
    loaded: float = 0.0
    fitted: float = 0.0

    @property
    def load_s(self) -> float:
        return self.loaded - self.started

    @property
    def fit_s(self) -> float:
        return self.fitted - self.loaded


@dataclass
class Outcome:
    """A fitted run as its family hands it to ``publish``.

    ``record``: what results.json holds; ``summary``: the lines printed unless ``--quiet``; ``save_model``:
    writes ``--save-model FILE`` (``records.model_file.save_run_model`` with the family's estimator, columns
    and scaling; it notes the file in ``record``); ``selection_rows``: the rows of selection_log.csv (``None``:
    no log); ``files``: writes the family's own files into the output directory, before the checkpoint is
    dropped, and returns the names the results line shows after results.json."""
    record: dict
    summary: str
    save_model: Optional[Callable[[], object]] = None
    selection_rows: Optional[list] = None
    files: Optional[Callable[[str], list]] = None


def start(config, check: Optional[Callable] = None) -> float:
    """Steps 1-3: the output directory, the family's refusals, the settings; returns the start time."""
    from ..records.results import prepare_run_output
    from ..records.resume import save_run_config
    started = time.perf_counter()
    prepare_run_output(config)
    if check is not None:
        check(config)
    save_run_config(config)
    return started


@contextlib.contextmanager
def output_errors(where: str):
    """An ``OSError`` while the outputs are written (a full disk, a directory removed under the run) as
    ``OutputError``: one line and ``EXIT_OUTPUT``, instead of a traceback. The checkpoint stays, so the
    run can be resumed once there is room."""
    try:
        yield
    except OSError as exc:
        raise OutputError(f"cannot write the results to {where}: {exc.strerror or exc}; nothing of this run's "
                          f"results was written (its last checkpoint, if any, is kept)") from None


def publish(config, outcome: Outcome) -> int:
    """Step 7: print, save the model, write the results, finish, draw; returns the exit status."""
    from ..records.results import write_results
    from ..records.resume import finished
    from .report import draw_after_run
    if not config.quiet:
        print(outcome.summary, flush=True)
    with output_errors(config.output or "the model file"):
        if outcome.save_model is not None:
            outcome.save_model()
        if config.output:
            more = outcome.files(config.output) if outcome.files is not None else []
            path = write_results(config.output, outcome.record, outcome.selection_rows)   # the results last
    if config.output:
        finished(config)
        if not config.quiet:
            print(f"  results: {path}" + "".join(f", {name}" for name in more), flush=True)
        draw_after_run(config)
    return EXIT_OK


def carry_out(config, run) -> int:
    """A run of ``config`` in this process, its family's part done by ``run`` (module docstring)."""
    from .summary import report_warnings
    clock = Clock(start(config, run.check))
    with warnings.catch_warnings(record=True) as read:       # the data's (InputWarning: parts not read, guesses)
        warnings.simplefilter("always", ConvergenceWarning)
        loaded = run.load(config)
    clock.loaded = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        fitted = run.fit(config, loaded)
    clock.fitted = time.perf_counter()
    notes = report_warnings(read) + report_warnings(caught)
    return publish(config, run.report(config, loaded, fitted, clock, notes))
