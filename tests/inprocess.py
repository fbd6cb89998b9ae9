"""``python -m asyos.run ARGS`` run inside the test process: what a fresh process would print and
return, without the 3-4 s a fresh process spends importing scikit-learn, scipy and numba (most of
the CLI tests' time, measured: 70 of them took 196 s as subprocesses).

What a fresh process would have and the test process has not is set up for the call and restored
after it: ``sys.argv`` (the program name in messages), the environment and the working directory,
Python's default warning filters and a ``showwarning`` that writes to stderr (pytest records
warnings instead), and the ``asyos`` logger's handlers (``asyos.logs.configure`` binds one to the
stderr of the call). Tests of what only a separate process shows (signals, exit by a signal,
memory, standard input, an installed entry point) start a real one."""
from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import warnings

import asyos.run

PROGRAM = asyos.run.__file__         # sys.argv[0] of ``python -m asyos.run``


def _show(message, category, filename, lineno, file=None, line=None):
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def _python_filters():
    """The filters of a process started without ``-W`` (``python -m asyos.run``)."""
    warnings.resetwarnings()
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.filterwarnings("ignore", category=category)
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")


def run_asyos(*args, cwd=None, env=None):
    """``(exit status, stdout, stderr)`` of ``python -m asyos.run *args`` (``env``: the whole
    environment of the call, default this process's)."""
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    logger = logging.getLogger("asyos")
    saved_logger = (list(logger.handlers), logger.level, logger.propagate)
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        sys.argv = [PROGRAM, *map(str, args)]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            _python_filters()
            warnings.showwarning = _show
            try:
                status = asyos.run.main([str(a) for a in args])
            except SystemExit as exc:              # argparse's --help and usage errors, as Python exits
                if exc.code is None or isinstance(exc.code, int):
                    status = exc.code or 0
                else:
                    print(exc.code, file=sys.stderr)
                    status = 1
    finally:
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(saved_env)
        logger.handlers[:] = saved_logger[0]
        logger.setLevel(saved_logger[1])
        logger.propagate = saved_logger[2]
    return status, out.getvalue(), err.getvalue()
