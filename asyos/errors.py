"""Errors that reach the user, and the exit codes of the engine.

``InputError`` is for anything the user can fix (bad flag, unreadable file, NaN in the data,
budget out of range, ...). The CLI prints it as one line and exits with ``EXIT_USAGE`` on every
rank; it never shows a traceback.
"""

EXIT_OK = 0
EXIT_INTERNAL = 1        # a bug: unexpected exception (traceback printed)
EXIT_USAGE = 2           # bad input or configuration (one line, no traceback)
EXIT_WORKER_FAILED = 3   # a worker raised; the central rank reports rank and traceback
EXIT_WORKER_LOST = 17    # the central watchdog saw a worker go silent
EXIT_CENTRAL_LOST = 18   # a worker waited too long for the central rank
EXIT_OUTPUT = 74         # an output could not be written (a full disk, ...): sysexits' EX_IOERR
EXIT_INTERRUPTED = 130   # Ctrl-C (SIGINT), as shells report it


class InputError(ValueError):
    """Bad user input: printed as one line, exit status 2."""


class OutputError(RuntimeError):
    """A run's output (results, log, model, checkpoint) could not be written: one line, exit status
    ``EXIT_OUTPUT``; what was on disk before the failed write is left as it was."""


class DivergenceError(InputError):
    """The iterates became non-finite: the step size is too large for the data."""


class ConvergenceWarning(UserWarning):
    """The run finished, but its result is suspect (e.g. worse than the empty model)."""


class SelectionWarning(ConvergenceWarning):
    """A fitted budget learner's model is suspect: fewer features than its budget, one class predicted
    for every training sample, or a training accuracy below the majority-class rate
    (``BudgetedSelector``'s check after every ``fit``). A ``ConvergenceWarning``, so that the CLI
    prints it and writes it into the results record."""


class InputWarning(ConvergenceWarning):
    """The input was read, but part of it was left out or its reading guessed: ``.npz`` members not read,
    a libsvm file read as 0-based because index 0 appears a few times. Printed by the CLI and recorded in
    ``results.json`` as the learners' warnings are."""


class StepSizeWarning(ConvergenceWarning):
    """The learner's default step (``eta="auto"``, ``gamma="auto"``) diverged on the data and was
    reduced until the fit was finite (``asyos.learners.stream.auto_step``)."""
