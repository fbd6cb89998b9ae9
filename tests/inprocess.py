"""``python -m asyos.run ARGS`` and ``python SCRIPT ARGS`` run inside the test process: what a fresh
process would print and return, without the 3-4 s a fresh process spends importing scikit-learn, scipy
and numba (most of the CLI tests' time, measured: 70 of them took 196 s as subprocesses; of a benchmark's
smoke run, 5.9 of bench_ecml.py's 10.8 s under ``cProfile``).

What a fresh process would have and the test process has not is set up for the call and restored
after it: ``sys.argv`` (the program name in messages), the environment and the working directory,
Python's default warning filters and a ``showwarning`` that writes to stderr (pytest records
warnings instead), and the ``asyos`` logger's handlers (``asyos.utils.logs.configure`` binds one to the
stderr of the call). Tests of what only a separate process shows (signals, exit by a signal,
memory, standard input, an installed entry point) start a real one."""
from __future__ import annotations

import contextlib
import io
import logging
import os
import runpy
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


@contextlib.contextmanager
def _as_a_process(program, args, cwd=None, env=None):
    """Inside: what a fresh process started as ``program args`` would have (module docstring); yields
    the stdout and stderr buffers and a one-item list that takes the exit status (``SystemExit``'s
    code as Python would exit with it)."""
    out, err, status = io.StringIO(), io.StringIO(), [0]
    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    logger = logging.getLogger("asyos")
    saved_logger = (list(logger.handlers), logger.level, logger.propagate)
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        sys.argv = [program, *map(str, args)]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            _python_filters()
            warnings.showwarning = _show
            try:
                yield out, err, status
            except SystemExit as exc:              # argparse's --help and usage errors, as Python exits
                if exc.code is None or isinstance(exc.code, int):
                    status[0] = exc.code or 0
                else:
                    print(exc.code, file=sys.stderr)
                    status[0] = 1
    finally:
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        logger.handlers[:] = saved_logger[0]
        logger.setLevel(saved_logger[1])
        logger.propagate = saved_logger[2]


def run_asyos(*args, cwd=None, env=None):
    """``(exit status, stdout, stderr)`` of ``python -m asyos.run *args`` (``env``: the whole
    environment of the call, default this process's)."""
    with _as_a_process(PROGRAM, args, cwd, env) as (out, err, status):
        status[0] = asyos.run.main([str(a) for a in args])
    return status[0], out.getvalue(), err.getvalue()


def run_script(path, *args, cwd=None):
    """``(exit status, stdout, stderr)`` of ``python PATH *args``: the script run as ``__main__``
    (``runpy.run_path``), with its own directory first on ``sys.path`` as Python puts it. The
    environment is restored after it (a script may set variables for the processes it starts);
    figures it left open are closed."""
    saved_path = list(sys.path)
    try:
        with _as_a_process(path, args, cwd) as (out, err, status):
            sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
            runpy.run_path(path, run_name="__main__")
    finally:
        sys.path[:] = saved_path
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close("all")
    return status[0], out.getvalue(), err.getvalue()
