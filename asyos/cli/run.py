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
from ..errors import EXIT_INTERNAL, EXIT_OK, EXIT_OUTPUT, EXIT_USAGE, InputError, OutputError


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise InputError(message)


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


FAMILY_HELP = ("Each family's own options: --help-algorithm NAME shows those of NAME's family (os, asy-os: "
               "Online Substitution and parallel execution; b-arda, ofs, ... : the sample-stream learners; ofsa, "
               "olasso, ... : running averages; dfls: the dynamic feature space); --help-all shows every option.")


def make_parser(family=None, everything=False) -> argparse.ArgumentParser:
    """The command line, its options from ``asyos.runs.options``: every option is accepted; ``--help`` shows the
    common ones, and those of ``family``'s groups (every group with ``everything``)."""
    from ..runs.options import GROUPS
    p = _Parser(prog=program_name(), argument_default=argparse.SUPPRESS, epilog=FAMILY_HELP,
                description="Budgeted online feature selection: Online Substitution and Asy-OS. "
                            "'%(prog)s predict --model FILE --data NEW' applies a saved model (predict --help).")
    p.add_argument("--version", action="version", version=f"asyos {package_version()}")
    for group in GROUPS:
        shown = group.common or everything or family in group.families
        g = p.add_argument_group(group.title) if shown else p
        if group.key == "run":
            _run_flags(g)
        for option in group.options:
            if option.flag:
                _add_option(g, option, shown)
        if group.key == "output":
            g.add_argument("--resume", metavar="DIR", help=group_option(group, "resume").help)
    return p


def group_option(group, name):
    return next(o for o in group.options if o.name == name)


def _run_flags(g) -> None:
    g.add_argument("--help-algorithm", metavar="NAME", action=_FamilyHelp, help="the options of NAME's family too, "
                                                                                "then exit")
    g.add_argument("--help-all", action=_FamilyHelp, nargs=0, help="every option, then exit")
    g.add_argument("--list-algorithms", action="store_true", help="list the algorithms and exit")
    g.add_argument("--benchmark", metavar="NAME", help="run a shipped benchmark (speedup); must come first, its own "
                                                       "options follow (--benchmark speedup --help)")
    g.add_argument("--config", help="TOML file of settings (flags override it)")


def _add_option(g, option, shown) -> None:
    """One declared option as argparse arguments (``--name``; ``--no-name`` too when negatable)."""
    text = option.help if shown else argparse.SUPPRESS
    names = [option.short, option.option] if option.short else [option.option]
    if option.kind is bool:
        g.add_argument(*names, dest=option.name, action="store_true", help=text)
        if option.negatable:
            g.add_argument(f"--no-{option.option[2:]}", dest=option.name, action="store_false",
                           help=argparse.SUPPRESS)
    elif option.counted:
        g.add_argument(*names, dest=option.name, action="count", help=text)
    else:
        g.add_argument(*names, dest=option.name, type=option.parse or (None if option.kind is str else option.kind),
                       choices=option.cli_choices, metavar=option.metavar, help=text)


class _FamilyHelp(argparse.Action):
    """``--help-algorithm NAME`` (the common options and NAME's family's) or ``--help-all``: print, exit 0."""

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string == "--help-all":
            make_parser(everything=True).print_help()
        else:
            from ..registry import get_algorithm
            try:
                family = get_algorithm(values).family
            except InputError as exc:
                parser.error(str(exc))
            make_parser(family).print_help()
        parser.exit()


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
    # MPI_Init returns once every rank of the node has attached MPICH's shared-memory segments: their files
    # can go now, so that no fault later (set-up included, under load) leaves them in /dev/shm, where they
    # hold RAM until reboot (8 were left after the fault tests beside two CPU-bound processes)
    from ..distributed.supervisor import note_settled, shared_memory_segments, unlink_segments
    unlink_segments(shared_memory_segments())
    note_settled()
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
    StopSignals.install(supervisor.note_stopping)   # SIGTERM / Ctrl-C: save a checkpoint, then stop (records.resume)
    try:
        status = _main(argv)
        # a stop recorded after a loop's last poll (the central rank's finish, the workers' wait to be
        # released) was never acted on: the job ended 0 with no line for a Ctrl-C during its last second
        status = _ended_by_stop(status, None if StopSignals.raised else StopSignals.requested,
                                os.environ.get("PMI_RANK", "0") == "0")
    finally:
        StopSignals.uninstall()
        from ..records.output_lock import release_outputs
        release_outputs()                       # the run's --output is free again (asyos.records.output_lock)
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
        from ..distributed.supervisor import early_stop, note_stopping
        if early_stop() is not None:                # Ctrl-C or SIGTERM while the rank was starting
            from ..records.checkpoint import StopSignals
            StopSignals.take(early_stop())
            note_stopping(early_stop())
            raise RunInterrupted(early_stop())
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
    except OutputError as exc:                  # raised by the rank that writes the file
        if comm is not None:                    # the job cannot go on without this rank: end it
            _abort(comm, rank, f"failed: {exc}", EXIT_OUTPUT)
        print(f"asyos: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_OUTPUT
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
    if comm is None and config is None and _env.launched_by_mpi():
        return _stopped_starting(exc)
    if rank == 0:
        report_interrupted(config, exc, f"mpiexec -n {comm.Get_size()} " if comm is not None else "")
    return exc.exit_status


def _stopped_starting(exc) -> int:
    """A rank of an ``mpiexec`` job stopped before its MPI world was up (starting, parsing, joining): the
    first rank of its node to get here says so in one line (``supervisor.first_to_stop``: rank 0 may be
    blocked in ``MPI_Init``, where no Python handler runs); every rank asks hydra to end the job with the
    stop's status, so that the job's status is it whichever rank goes first (the others may wait in
    ``MPI_Init``, or be killed by hydra as one goes, whose status would be 9)."""
    import time
    from ..distributed.supervisor import OUTPUT_GRACE, ask_launcher_to_abort, first_to_stop
    from ..records.checkpoint import signal_name
    first = first_to_stop()
    if first:
        print(f"asyos: stopped by {signal_name(exc.signum)} while the job was starting; nothing to save",
              file=sys.stderr, flush=True)
    time.sleep(OUTPUT_GRACE if first else 2 * OUTPUT_GRACE)     # the line reaches mpiexec before an abort
    ask_launcher_to_abort(exc.exit_status)
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
    if rank != 0:                       # staggered by rank: the first one stopped speaks, its abort ends the rest
        time.sleep(INTERRUPT_GRACE + (rank - 1) * LATER_WORKERS_S)
    elif config is not None:
        report_interrupted(config, exc, f"mpiexec -n {comm.Get_size()} ", quiet=True)
    from ..records.checkpoint import signal_name
    abort_job(comm, exc.exit_status, f"asyos: stopped by {signal_name(exc.signum)}; ending the job" if rank == 0
              else f"asyos: rank {rank} stopped by {signal_name(exc.signum)}; ending the job")


INTERRUPT_GRACE = 3.0
LATER_WORKERS_S = 1.0       # each worker waits this much longer than the one before it (a stop as the job
                            # ended, when rank 0 had finished, gave a line from each worker)


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
    stops = _stops_while_ending()
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        rank = mpi.COMM_WORLD.Get_rank()
        mpi.Finalize()
    else:
        rank = 0
    atexit._run_exitfuncs()
    if rank == 0:                               # the workers' status stays: rank 0's decides the job's
        status = _ended_by_stop(status, stops[0] if stops else None, True)
    _flush()
    try:
        import ctypes
        ctypes.CDLL(None).exit(int(status))
    except (OSError, AttributeError, TypeError):
        pass
    sys.exit(status)


def _ended_by_stop(status: int, signum, speaks: bool) -> int:
    """A run that ended well (``status`` 0) with a stop signal ``signum`` noted but not acted on: its results
    stand, the status is the stop's, and the rank that ``speaks`` (rank 0) says so in one line."""
    if status != EXIT_OK or signum is None:
        return status
    if speaks:
        from ..records.checkpoint import signal_name
        print(f"asyos: stopped by {signal_name(signum)} as the job ended; its results were written", file=sys.stderr,
              flush=True)
    return 128 + signum


def _stops_while_ending() -> list:
    """SIGINT / SIGTERM after ``main`` returned (a rank in ``MPI_Finalize``, waiting for the central rank
    to write the results) are noted, not raised: a Ctrl-C there gave each worker a ``KeyboardInterrupt``
    traceback from ``Finalize``, and SIGTERM killed them ("rank 2 was killed by signal 15" from each
    supervisor). The supervisor is told the rank takes it up (``note_stopping``); the list receives them,
    and rank 0 ends with the stop's status and one line (``exit_now``)."""
    import signal
    from ..distributed.supervisor import note_stopping
    stops = []

    def note(signum, _frame):
        if not stops:
            note_stopping(signum)
        stops.append(signum)
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, note)
        except ValueError:                      # not the main thread: nothing to route
            return stops
    return stops


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
