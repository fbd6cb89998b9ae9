"""Command line: ``python -m asyos.run [options]``.

* no argument: the embedded default (a KDD'16 synthetic regression problem), sequential OS;
* under ``mpiexec -n N``: Asy-OS with rank 0 central and ``N - 1`` workers;
* ``--simulate --workers Q --max-staleness T`` (or ``--algorithm asy-os``): the staleness
  simulator in one process;
* ``--algorithm NAME`` any registered algorithm (``--list-algorithms``).

Bad input exits with status 2 and one line (printed by rank 0 only under MPI). Any other failure
under MPI aborts the whole job, so ``mpiexec -n 13 python -m asyos.run`` never hangs.
"""
from __future__ import annotations

from .. import _env  # noqa: F401  (before numpy)

import argparse
import atexit
import os
import sys
import traceback
from typing import NoReturn  # noqa: F401  (the annotations below)

from ..records.checkpoint import RunInterrupted
from ..errors import EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, InputError


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise InputError(message)


def _bool_flag(parser, name, help_text, dest=None):
    dest = dest or name.replace("-", "_")
    parser.add_argument(f"--{name}", dest=dest, action="store_true", help=help_text)
    parser.add_argument(f"--no-{name}", dest=dest, action="store_false", help=argparse.SUPPRESS)


def _or_auto(convert, what):
    """An option's type: ``auto`` (``None``: the default) or ``convert(text)``."""
    def parse(text):
        if text == "auto":
            return None
        try:
            return convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what} or auto; got {text!r}") from None
    return parse


_passes = _or_auto(int, "an integer")
_ridge = _or_auto(float, "a number >= 0")


def program_name(argv0=None) -> str:
    """How the user started us, for ``--help`` and messages: ``asyos`` (the console script),
    ``python -m asyos`` or ``python -m asyos.run``, behind ``mpiexec -n N`` under MPI."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    base = os.path.basename(argv0 or "")
    if base == "__main__.py":
        name = "python -m asyos"
    elif base in ("run.py", ""):
        name = "python -m asyos.run"
    else:
        name = os.path.splitext(base)[0] if base.startswith("asyos") else "python -m asyos.run"
    return f"mpiexec -n N {name}" if _env.launched_by_mpi() else name


def package_version() -> str:
    from ..records.results import package_version as version
    return version()


def make_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=program_name(), argument_default=argparse.SUPPRESS,
                description="Budgeted online feature selection: Online Substitution and Asy-OS. "
                            "'%(prog)s predict --model FILE --data NEW' applies a saved model (predict --help).")
    p.add_argument("--version", action="version", version=f"asyos {package_version()}")
    g = p.add_argument_group("what to run")
    g.add_argument("--algorithm", help="registered algorithm (default: os)")
    g.add_argument("--list-algorithms", action="store_true", help="list the algorithms and exit")
    g.add_argument("--benchmark", metavar="NAME", help="run a shipped benchmark (speedup); must come first, its own "
                                                       "options follow (--benchmark speedup --help)")
    g.add_argument("--config", help="TOML file of settings (flags override it)")
    g = p.add_argument_group("data (default: a KDD'16 synthetic problem)")
    g.add_argument("--data", help="dense .npz, a directory of sparse X_*.npz + y_*.npy, or libsvm text (also "
                                  ".gz, or - for standard input with --n-features); column-major (python -m "
                                  "asyos.convert): a directory with a Fortran-ordered X.npy + y.npy or a CSC X.npz, "
                                  "or a .parquet file (one column per feature), read by column (OS, Asy-OS); the "
                                  "sample-stream learners learn from libsvm text and .parquet rows as they are read")
    g.add_argument("--label-column", help="Parquet: the column holding the labels (default y)")
    g.add_argument("--test-data", help="libsvm test file")
    g.add_argument("--index-base", help="libsvm feature indices: auto (default), 0 or 1")
    g.add_argument("--synthetic", choices=["regression", "classification"], help="KDD'16 task (default regression)")
    g.add_argument("--n-samples", type=int, help="default ceil(1.2 s log2 p)")
    g.add_argument("--n-features", type=int, help="p (default 2000); declares p for libsvm")
    g.add_argument("--n-informative", type=int, help="s, the true features (default 100)")
    g.add_argument("--noise", type=float, help="default 0.1 (regression), 0 (classification)")
    g.add_argument("--n-test", type=int, help="synthetic test samples (default n)")
    g = p.add_argument_group("model")
    g.add_argument("--budget", type=int, help="features to keep (default: the true s of synthetic data)")
    g.add_argument("--loss", help="squared, squared_hinge, logistic, hinge (sample-stream learners only) or auto "
                                 "(default: from the labels; the choices are asyos.losses.TABLE)")
    g.add_argument("--passes", type=_passes, help="OS: scans over the features, or auto (default: until a pass "
                                                  "changes nothing, 2 to 10; 3 with --variant kdd16); sample-stream "
                                                  "learners: passes over the samples (default ceil(2 p / n), "
                                                  "ECML'18's)")
    g.add_argument("--variant", help="OS / Asy-OS: exchange (default: intercept, scaled columns, Newton weights for "
                                     "newcomers, substitutions that must lower the loss, features visited by "
                                     "marginal gain) or kdd16 (KDD'16 Alg. 1-3 literally)")
    _bool_flag(g, "intercept", dest="fit_intercept",
               help_text="OS: fit an unpenalised intercept (default with --variant exchange; --no-intercept drops it)")
    g.add_argument("--step-size", type=float, help="eta (default 0.5 / L_F estimated from the data)")
    g.add_argument("--step-divisor", type=float, help="the paper's m >= 1 (default 1)")
    _bool_flag(g, "decrease-check", "keep the objective-decrease check (default on; --no-decrease-check "
                                    "follows Alg. 3 literally)")
    g.add_argument("--decrease-constant", type=float, help="--variant kdd16: the paper's c in [0, 1] (default 1)")
    g.add_argument("--ridge", type=_ridge, help="OS / Asy-OS (exchange): alpha >= 0 of a (alpha / 2) ||w||^2 on the "
                                                "scaled columns in the selection and the refit (default 0: none), or "
                                                "auto: 0 unless p >= 5 n, where alpha is chosen from 0, 1, 10 by "
                                                "cross-validation on the training rows")
    _bool_flag(g, "refit", "refit on the selected features before evaluation (default on; --no-refit)")
    g.add_argument("--seed", type=int, help="seed of the synthetic data, the L_F estimate, the simulator's "
                                            "schedule, the learners' shuffles and DFLS's block (default 0): in one "
                                            "process a run repeats exactly; under mpiexec the data and each rank's "
                                            "own random choices repeat, but the order in which the workers' "
                                            "updates meet u_C (so the staleness, and possibly the selection) "
                                            "depends on timing, which no seed fixes")
    from ..registry import algorithms_of
    g = p.add_argument_group(f"sample-stream learners ({', '.join(s.name for s in algorithms_of('stream'))})")
    g.add_argument("--param", dest="params", help="the learner's parameters, name=value[,name=value...] "
                                                  "(e.g. eta=0.01,lam=1e-4; see --list-algorithms and the "
                                                  "class docstrings)")
    g.add_argument("--scale", help="OS: standard (default with --variant exchange: dense columns centred and "
                                   "scaled to unit variance, sparse ones to unit root mean square) or none; "
                                   "sample-stream learners: maxabs (their default: each feature divided by its "
                                   "largest |value|) or none (the data as given, the ECML'18 protocol)")
    g.add_argument("--tune", action="store_true", help="choose eta, lam (1/gamma for SOFS) from {1e-1, 1e-1.5, "
                                                       "..., 1e-8} on training accuracy (ECML'18), then fit")
    g = p.add_argument_group("parallel execution")
    g.add_argument("--simulate", action="store_true", help="run Asy-OS, or a sample-stream learner as data-parallel "
                                                           "workers, in one process: with --transport shared-memory, "
                                                           "messages or node-aggregated, a discrete-event simulation "
                                                           "of what mpiexec runs with it (--push-mode, --max-batch, "
                                                           "--max-staleness, --nodes, --cores, --costs); without, "
                                                           "KDD'16's bounded-staleness simulation (--max-staleness = "
                                                           "tau, --staleness-policy, --schedule)")
    g.add_argument("--workers", type=int, help="simulated workers (default 4)")
    g.add_argument("--max-staleness", type=int, help="bound tau: simulator default = workers; MPI default "
                                                     "unbounded (measured only)")
    g.add_argument("--staleness-policy", help="simulator: max (default), uniform or fresh")
    g.add_argument("--schedule", help="simulator: round-robin (default) or random")
    g.add_argument("--sharding", help="contiguous, strided, blocked (strided by 16 columns) or hashed (default: "
                                      "strided; blocked on a synthetic problem; contiguous with --variant kdd16)")
    g.add_argument("--budget-mode", help="Asy-OS: global (default) or split (each worker keeps s/q "
                                         "features, KDD'16). global: each worker may keep up to --cap; "
                                         "theta is the s-th largest |w| over all workers (the others' come "
                                         "with the replies, or from the shared window); workers drop "
                                         "features below --slack x theta; the union is cut to s")
    g.add_argument("--cap", type=int, help="global budget: the most features a worker keeps (default "
                                           "min(s, ceil(3 s / q), ceil(s/q + 5 sd)), sd the spread of a "
                                           "shard's share of s random features)")
    g.add_argument("--slack", type=float, help="global budget: workers drop features below slack x theta, "
                                               "in (0, 1] (default 0.5)")
    g.add_argument("--transport", help="MPI (and --simulate): shared-memory (the workers add their changes into "
                                       "u_C in memory shared on the node; the central rank only watches), messages "
                                       "(pushes to the central rank, which works across nodes), node-aggregated "
                                       "(shared memory within each node, one push per node from its leader), or "
                                       "auto (default: messages with a --push-mode, else shared-memory when every "
                                       "rank is on one node, node-aggregated when they span several)")
    g.add_argument("--nodes", type=int, help="--simulate --transport node-aggregated: nodes the workers are spread "
                                             "over, round-robin (default 1)")
    g.add_argument("--cores", type=int, help="--simulate with a --transport: cores the simulated ranks share "
                                             "(default: one each)")
    g.add_argument("--costs", help="--simulate with a --transport: JSON file of the simulated costs (fields of "
                                   "asyos.learners.protocol.replay.Costs; default: measured on the development machine)")
    g.add_argument("--push-mode", help="MPI: pipelined (one push in flight, the steps taken meanwhile summed "
                                       "into the next), each-step (wait for the fresh u_C after every step, "
                                       "KDD'16 Alg. 3 literally), or auto (default: pipelined, each-step "
                                       "with --max-staleness)")
    g.add_argument("--max-batch", type=int, help="MPI, pipelined: the most steps a worker sums into one push "
                                                 "while its previous push is in flight; then it waits "
                                                 "(default 16; 0 = no limit)")
    g.add_argument("--watchdog-timeout", type=float, help="MPI: seconds of silence before a worker is "
                                                          "declared lost (default 5)")
    g.add_argument("--setup-timeout", type=float, help="MPI: seconds every rank may take to load its data "
                                                       "(default 600)")
    g.add_argument("--chunk-rows", type=int, help="running averages: rows read from the file at a time "
                                                  "(default 4096)")
    g.add_argument("--trace-every", type=int, help="record the training objective and error every k worker "
                                                   "steps, with the time (default: with --output, rows by time at "
                                                   "a negligible cost, for DIR/run.png; 0: none)")
    g = p.add_argument_group("dynamic feature space (--algorithm dfls; --param penalty=group_lasso|lp,alpha=A,"
                             "exponent=P)")
    g.add_argument("--add-features", metavar="SPEC", help="fit without these columns, then add them by following "
                                                          "the solution path: indices and ranges (3,7-9) or a "
                                                          "share chosen by --seed (20%%, the default)")
    g.add_argument("--remove-features", metavar="SPEC", help="fit on every column, then remove these")
    g.add_argument("--group-size", type=int, help="group lasso over consecutive groups of K columns (default 1)")
    g = p.add_argument_group("output")
    g.add_argument("--output", help="directory for results.json and selection_log.csv")
    g.add_argument("--overwrite", action="store_true", help="replace the files of a previous run in --output "
                                                           "(without it, a used --output is refused)")
    g.add_argument("--save-model", metavar="FILE", help="write the fitted model (selected features, coefficients, "
                                                        "intercept, scaling, algorithm, asyos version) to FILE; "
                                                        "'predict --model FILE' applies it to new data")
    _bool_flag(g, "picture", "with --output, draw DIR/run.png at the end (the default; --no-picture: none, as "
                             "ASYOS_PICTURE=0 in the environment; python -m asyos.report DIR draws it later)")
    g.add_argument("-q", "--quiet", action="store_true", help="no summary on stdout and no progress lines on stderr "
                                                              "(warnings and errors still)")
    g.add_argument("-v", "--verbose", action="count", help="progress lines on stderr even when it is not a terminal "
                                                           "(a log file); -vv: debug messages too")
    g.add_argument("--checkpoint-every", type=float, metavar="SECONDS",
                   help="with --output: save the run's state to DIR/checkpoint.pkl every SECONDS (default 60; "
                        "0: only when stopped by SIGTERM or Ctrl-C, which save and exit 143 / 130)")
    g.add_argument("--time-limit", type=float, metavar="SECONDS",
                   help="stop after SECONDS of fitting as SIGTERM would (with --output: the state saved, exit 142; "
                        "continue with --resume DIR, which may give a new --time-limit); for batch queues' limits")
    g.add_argument("--resume", metavar="DIR", help="continue the stopped run whose --output was DIR, with its "
                                                   "settings (DIR/run_config.json) from its last checkpoint")
    return p


class CommandLineExit(SystemExit):
    """argparse's own exit (``--help``, ``--version``, a usage error). Every rank parses the same
    command line and leaves the same way, so each may end as one process does (``MPI_Finalize``
    waits for all of them, and all of them come); any other exit before the run started is one
    rank's alone, and ends the job (``_main``)."""


def parse_config(argv):
    from ..runs.config import build_config, load_toml
    parser = make_parser()
    try:
        args = vars(parser.parse_args(argv))
    except SystemExit as exc:
        raise CommandLineExit(exc.code) from None
    if args.pop("list_algorithms", False):
        return None
    config_path = args.pop("config", None)
    resume_dir = args.pop("resume", None)
    if resume_dir is not None:
        from ..records.resume import resume_settings
        if config_path:
            raise InputError("--resume continues a run with its own settings; it does not take --config")
        return build_config(resume_settings(resume_dir, args), {})
    file_settings = load_toml(config_path) if config_path else {}
    return build_config(file_settings, args)


def list_algorithms() -> str:
    from ..registry import all_algorithms
    return "\n".join(f"{spec.name:10s} {spec.description}" for spec in all_algorithms())


# --------------------------------------------------------------------------------------------
def _mpi_world():
    """``COMM_WORLD`` when launched by mpiexec with more than one rank, else ``None``."""
    if not _env.launched_by_mpi():
        return None
    try:
        from mpi4py import MPI
    except ImportError:
        raise InputError("running under mpiexec needs mpi4py: pip install 'asyos[mpi]'") from None
    return MPI.COMM_WORLD if MPI.COMM_WORLD.Get_size() > 1 else None


def main(argv=None) -> int:
    from ..distributed import supervisor
    argv = sys.argv[1:] if argv is None else list(argv)
    if supervisor.should_supervise():           # before numpy and MPI are loaded
        status = supervisor.supervise()         # None: this is the rank, forked by its supervisor
        if status is not None:
            return status
    atexit.register(supervisor.mark_finished)   # registered before mpi4py: runs after MPI_Finalize
    from ..records.checkpoint import StopSignals
    StopSignals.install(supervisor.note_stopping)   # SIGTERM / Ctrl-C: save a checkpoint, then stop (asyos.records.resume)
    try:
        status = _main(argv)
    finally:
        StopSignals.uninstall()
    supervisor.run_ended()
    return status


def _main(argv) -> int:
    comm = None
    rank = 0
    started = False                             # the configuration is parsed: the run is under way
    config = None
    if argv[:1] == ["--benchmark"] or (argv and argv[0].startswith("--benchmark=")):
        return _benchmark(argv)
    if argv[:1] == ["predict"]:
        from .predict import main as predict
        return predict(argv[1:], prog=f"{program_name()} predict")
    try:
        comm = _mpi_world()
        rank = comm.Get_rank() if comm is not None else 0
        config = parse_config(argv)
        from ..utils.logs import configure
        if config is not None:
            configure(quiet=config.quiet, verbose=config.verbose, rank=rank)
        started = True
        if config is None:
            if rank == 0:
                print(list_algorithms())
            return EXIT_OK
        from ..registry import get_algorithm
        from ..runs.runners import runner_for
        return runner_for(get_algorithm(config.algorithm))(config, comm)
    except InputError as exc:
        if rank == 0:
            print(f"asyos: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except SystemExit as exc:
        if isinstance(exc, CommandLineExit) or not _env.launched_by_mpi():  # --help on every rank, or one process
            from ..distributed.supervisor import run_ended
            run_ended()
            raise
        # one rank leaving on its own, even while it sets up: its MPI_Finalize would wait for ranks
        # that wait for its shard until --setup-timeout (600 s), so it ends the job now. Before MPI
        # is up there is no job to abort: its supervisor says it left early and asks hydra to end
        # the job (supervisor.ask_launcher_to_abort)
        world = comm if comm is not None else _initialized_world()
        if world is not None:
            _abort(world, world.Get_rank(), f"exited with status {exc.code} before the run finished", EXIT_INTERNAL)
        raise
    except RunInterrupted as exc:               # a stop request, the state saved (asyos.records.checkpoint)
        return _stopped(comm, rank, exc, config)

    except BaseException as exc:  # noqa: BLE001 - anything else is a bug: report, abort the job
        from ..records.checkpoint import StopSignals
        if StopSignals.raised and StopSignals.requested is not None:
            # the stop handler's RunInterrupted, turned into another error by the C code it was raised
            # in: a Ctrl-C while an extension module initialised gave "ImportError: initialization
            # failed" (seen once in the suite)
            return _stopped(comm, rank, RunInterrupted(StopSignals.requested), config)
        if comm is None:
            raise
        from ..distributed.watch import write_traceback
        where = write_traceback(getattr(config, "output", None) if started else None, rank, traceback.format_exc())
        _abort(comm, rank, f"failed: {type(exc).__name__}: {exc}; ending the job (traceback: {where})", EXIT_INTERNAL)
        raise


def _stopped(comm, rank, exc, config) -> int:
    from ..records.resume import report_interrupted
    if comm is not None and exc.path is None:
        _interrupted(comm, rank, exc, config)  # outside a loop that saves: end the whole job now
    if rank == 0:
        report_interrupted(config, exc, f"mpiexec -n {comm.Get_size()} " if comm is not None else "")
    return exc.exit_status


def _initialized_world():
    """``COMM_WORLD`` if this process has initialised MPI in a job of several ranks (an exit may
    land while ``_mpi_world`` is still starting it), else ``None``."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return None
    return mpi.COMM_WORLD if mpi.COMM_WORLD.Get_size() > 1 else None


def _benchmark(argv) -> int:
    """``--benchmark NAME [options]``: a benchmark that ships with the package (it starts its own
    ``mpiexec`` runs, so it is itself started without one)."""
    from ..benchmarking import BENCHMARKS, run_benchmark
    name, rest = (argv[1] if len(argv) > 1 else None, argv[2:]) if argv[0] == "--benchmark" \
        else (argv[0].split("=", 1)[1], argv[1:])
    try:
        if _env.launched_by_mpi():
            raise InputError("--benchmark starts its own mpiexec runs; start it without mpiexec")
        if not name:
            raise InputError(f"--benchmark needs a name: {', '.join(sorted(BENCHMARKS))}")
        return run_benchmark(name, rest)
    except InputError as exc:
        print(f"asyos: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE


def _interrupted(comm, rank, exc, config):
    """A stop under ``mpiexec`` that no loop answered (set-up, the finish, no ``--output``): the
    launcher signals every rank; rank 0 says so once (and writes what it can) and aborts the job
    with ``128 + signal`` (``MPI_Abort`` passes its code on exactly: ranks leaving on their own
    made the launcher report 9 or 3, whichever it saw first). The others wait for that; one
    stopped alone ends the job itself after ``INTERRUPT_GRACE`` seconds."""
    import time
    from ..distributed.transport import abort_job
    from ..records.resume import report_interrupted
    if rank != 0:
        time.sleep(INTERRUPT_GRACE)
    elif config is not None:
        report_interrupted(config, exc, f"mpiexec -n {comm.Get_size()} ", quiet=True)
    from ..records.checkpoint import signal_name
    abort_job(comm, exc.exit_status, f"asyos: stopped by {signal_name(exc.signum)}; ending the job" if rank == 0
              else f"asyos: rank {rank} stopped by {signal_name(exc.signum)}; ending the job")


INTERRUPT_GRACE = 3.0


def _abort(comm, rank, what, code):
    from ..distributed.transport import abort_job
    abort_job(comm, code, f"asyos: rank {rank} {what}")


def exit_now(status: int) -> "NoReturn":
    """End the command with ``status`` once ``main`` has returned, without the interpreter's teardown
    of every module, which took 0.4-0.5 s after the results were written (``python -m asyos.run
    --n-features 20000``: 0.48 s; scikit-learn's modules alone 0.25 s), on every rank of a job and in
    every command of the test suite: the streams flushed, MPI finalised (mpi4py's own hook runs in
    that teardown), the exit handlers run (the supervisor's note, logging), then the C library's
    ``exit``, whose own handlers a rank needs (with ``os._exit`` instead, hydra killed the job as
    soon as a rank had left: "BAD TERMINATION ... Killed (signal 9)", every time here). A failure (an
    exception out of ``main``) leaves the usual way, as does a platform without a C library to call."""
    _flush()
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.Finalize()
    atexit._run_exitfuncs()
    _flush()
    try:
        import ctypes
        ctypes.CDLL(None).exit(int(status))
    except (OSError, AttributeError, TypeError):
        pass
    sys.exit(status)


def _flush() -> None:
    """Flush stdout and stderr; a reader that went away (``| head``) is not an error of the run."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def command() -> "NoReturn":
    """The ``asyos`` console script."""
    exit_now(main())


if __name__ == "__main__":
    command()
