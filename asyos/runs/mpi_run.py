"""Asy-OS on MPI: rank 0 is the central node (KDD'16 Alg. 2), ranks 1..q are workers (Alg. 3).

This module sets the run up, hands the asynchronous phase to a transport, and ends it; the
transports move the bytes (``--transport``; ``resolve_transport`` picks):

* ``shared-memory`` (``mpi_shared.py``, one node): ``u_C`` is the sum of one row per worker in an
  MPI shared-memory window; workers read it and add into their own row themselves, and the
  central rank only traces ``u_C``, watches the workers' step counters and takes their reports;
* ``messages`` (``mpi_messages.py``, any number of nodes): pushes to the central rank, the pull
  riding on the reply;
* ``node-aggregated`` (``mpi_node.py``, several nodes): shared memory within each node, one push
  per node and round trip, sent by the node's leader.

A transport is one class with four methods (``Transport`` below), built collectively on every
rank; the worker and central sides it drives are ``asyos.learners.protocol`` objects, the same ones the
loopback, the simulators and the replay drive.

Global budget (``--budget-mode global``): a push also carries the worker's retained ``|w|`` and a
reply the other workers' top ``r`` (``GlobalThreshold``); on shared memory every worker publishes
its ``|w|`` in the window and reads the others' rows itself. The union is finished to ``s`` at the
end (``asyos.learners.substitution.asy_finish``).

There is no barrier while running. Setup ends with one collective that agrees on input errors
(every rank exits 2 with the first message) and on ``L_F`` (the maximum of the shards' estimates).

No rank can hang the job (``watch.py``): a worker that raises sends its traceback (``TAG_ERROR``)
and the central rank aborts with ``EXIT_WORKER_FAILED``; a worker silent for
``--watchdog-timeout`` seconds (no push, or on shared memory no step proposed) makes the central
rank abort with ``EXIT_WORKER_LOST``; a worker that hears nothing from the central rank for as
long (no reply, no heartbeat in the window, no sign of life once it has finished) aborts with
``EXIT_CENTRAL_LOST``. Once every worker has reported, the central rank releases them and all
ranks meet in a barrier polled with a deadline, so nothing collective waits on a lost rank; then
the central rank finishes, refits and writes alone. A killed rank is caught by the launcher and
the supervisor (``supervisor.py``). All waits poll with back-off (``transport.py``).
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
import warnings

import numpy as np

from ..data.sharding import shard_columns
from ..data.synthetic import generates_columns, generates_test_columns
from ..records.checkpoint import RunInterrupted, StopSignals
from ..records.resume import rank_checkpointer
from ..errors import (EXIT_CENTRAL_LOST, EXIT_OK, EXIT_WORKER_FAILED, ConvergenceWarning, InputError, InputWarning,
                      OutputError)
from ..data.columnar import is_column_matrix
from ..learners.checks import columns_dense
from ..utils.process_stats import bytes_read, peak_rss_bytes
from ..learners.substitution.kernels import backend as kernel_backend, warm_up as warm_up_kernels
from ..learners.substitution.workers import local_lipschitz, make_worker
from .problem import open_data_source, resolve_problem
from ..utils.progress import phase
from ..learners.protocol.central import Central
from ..learners.substitution.asy_finish import Candidates, conclude
from ..learners.protocol.wire import TAG_ERROR, TAG_FINAL
from ..learners.substitution.asy_worker import Worker
from ..registry import get_algorithm
from ..learners.trace import ObjectiveTrace
from ..distributed.mpi_messages import MessagesTransport
from ..distributed.mpi_node import NodeAggregatedTransport
from ..distributed.mpi_shared import SharedMemoryTransport, ranks_share_one_node
from ..distributed.ridge_pool import agree_on_ridge, chooses, offer
from ..distributed.supervisor import note_segments, shared_memory_segments, unlink_segments
from ..distributed.transport import (Backoff, Deadline, abort_job, agree_after_setup, ranks_oversubscribe_cores,
                                      wait_all, wait_object)
from ..distributed.watch import Watch, end_run, patience, release_workers, wait_release

ERROR_GRACE = 5.0                 # a failed worker waits this long for the central rank to abort

TRANSPORTS = {t.name: t for t in (SharedMemoryTransport, MessagesTransport, NodeAggregatedTransport)}


class Transport:
    """What a transport module provides (documentation; the classes follow it by shape).

    ``__init__(comm, plan, config, n_samples, backoff)``: collective, on every rank;
    ``run_worker(worker) -> (compute seconds, staleness histogram or None)``: a worker rank runs
    its ``protocol.Worker`` to the end of its passes;
    ``run_central(central, watch, trace) -> (busy seconds, threshold record or None)``: the central
    rank keeps ``central`` (a ``protocol.Central``) up to date until ``watch`` has every final
    selection, reporting signs of life to ``watch``;
    ``close()``: collective, after ``watch.end_run``; ``central_alive()`` (optional): a worker's
    local view of the central rank's heartbeat; ``refuses_stale_pushes``: whether the central rank
    enforces ``--max-staleness`` (else the workers do, step by step).
    """


def run_mpi(config, comm) -> int:
    """The ``mpiexec`` entry point of ``asyos.run``: run, print, write; returns the exit status."""
    run_asy_os(config, comm)
    return EXIT_OK


WORKER_KIND = "asy-os-worker"


def run_asy_os(config, comm):
    """Asy-OS on ``comm`` (rank 0 central). Returns the results record on rank 0, ``None`` elsewhere."""
    rank, size = comm.Get_rank(), comm.Get_size()
    n_workers = size - 1
    t_start = time.perf_counter()
    if config.simulate:
        raise InputError("--simulate runs in one process; start it without mpiexec")
    spec = get_algorithm(config.algorithm)
    if not spec.runs_on_mpi:
        raise InputError(f"algorithm {config.algorithm!r} does not run under mpiexec; run it without mpiexec")
    note_segments(shared_memory_segments())     # the supervisor unlinks them should this rank die in set-up
    # no blocking collective before every rank has loaded: a rank that dies while the others wait in
    # one leaves them in C, where no deadline or stop signal reaches them (the polled Iallgather below
    # has the set-up deadline); set-up waits are long, so they sleep from the start, up to 10 ms a poll (a rank
    # waiting 5 s for another polled at 1 ms used 0.16 s of CPU, at 10 ms 0.05 s, measured here with mpi4py)
    backoff = Backoff(spin_seconds=0.0, max_sleep=10e-3)
    setup, error = {}, None
    try:
        setup = _central_setup(config, n_workers) if rank == 0 else _worker_setup(config, rank, n_workers)
        # a checkpoint of another problem is an input error every rank agrees on below
        setup["checkpoint"] = rank_checkpointer(config, rank, size)
    except InputError as exc:
        error = str(exc)
    # one non-blocking collective agrees on input errors and on L_F (max over the shards)
    with phase(f"loading: the {n_workers} workers read their shards of {config.data or 'the synthetic problem'}"):
        everyone = agree_after_setup(comm, error, [setup.get("lipschitz", 0.0)], backoff, config.setup_timeout)
    lipschitz = float(everyone[:, 0].max())
    setup["ridge"], setup["ridge_scores"] = agree_on_ridge(comm, config, setup, config.substitution_options(), backoff)
    oversubscribed = ranks_oversubscribe_cores(comm)
    backoff = Backoff(spin_seconds=0.0 if oversubscribed else 100e-6)
    setup["loaded_s"] = time.perf_counter() - t_start       # every rank has its data (rank 0 waited for them)
    # every rank is past MPI_Init, so every rank of the node has mapped MPICH's segment: unlinked
    # now, it is freed however the job ends (only a clean MPI_Finalize would unlink it otherwise)
    unlink_segments(shared_memory_segments())
    name = resolve_transport(config, comm)
    checkpoint = setup["checkpoint"]
    if name == "node-aggregated" and checkpoint is not None:     # the same on every rank
        if config.resume:
            raise InputError("--resume: runs with the node-aggregated transport are not checkpointed")
        checkpoint = None
    transport = TRANSPORTS[name](comm, setup["plan"], config, setup["problem"].n_samples, backoff)
    # with a checkpointer, SIGTERM / SIGINT are stop requests: each worker saves at its next step and
    # reports; the run then ends as usual and the central rank raises RunInterrupted (asyos.records.resume)
    with np.errstate(over="ignore", invalid="ignore"), \
            (checkpoint.watching() if checkpoint is not None else contextlib.nullcontext()):
        if rank == 0:
            return _central_main(config, comm, setup, lipschitz, backoff, t_start, oversubscribed, transport,
                                 checkpoint)
        _worker_main(config, comm, setup, lipschitz, backoff, transport, checkpoint)
    return None


def _resume_point(comm, contribution, steps, backoff, timeout):
    """A resumed run: ``u_C`` as the sum of every worker's contribution ``X_S w_S + b`` in its
    checkpoint, and the steps they had taken (one collective, polled with a deadline). The
    workers' checkpoints need not be of the same moment: each is its own consistent state, and
    ``u_C`` is rebuilt from them rather than saved (pushes in flight at the stop are not lost)."""
    mine = np.append(np.asarray(contribution, dtype=np.float64), float(steps))
    total = np.empty_like(mine)
    try:
        wait_all([comm.Iallreduce(mine, total)], backoff, timeout)
    except Deadline:
        abort_job(comm, EXIT_CENTRAL_LOST, f"asyos: rank {comm.Get_rank()}: the ranks did not agree on the "
                                           f"resumed state within {timeout:g} s; aborting the job")
    return total[:-1], int(round(total[-1]))


def resolve_transport(config, comm) -> str:
    """``auto``: with a ``--push-mode``, messages; else shared memory when every rank is on one node,
    node-aggregated when they span several. Collective (every rank calls it)."""
    one_node = ranks_share_one_node(comm)
    if config.transport == "shared-memory" and not one_node:
        raise InputError("--transport shared-memory needs every rank on one node; these ranks span several "
                         "(use --transport node-aggregated, messages or auto)")
    if config.transport != "auto":
        return config.transport
    if config.push_mode != "auto":
        return "messages"
    return "shared-memory" if one_node else "node-aggregated"


# ------------------------------------------------------------------------------------ setup
def _central_setup(config, n_workers):
    from .pipeline import start
    start(config)                       # the run pipeline's first steps: the output directory, the settings
    with warnings.catch_warnings():     # the data's warnings come once, with the workers' (_shard_warnings)
        warnings.simplefilter("ignore", InputWarning)
        source = open_data_source(config)
    y = source.labels("train")
    problem = resolve_problem(config, source, y)
    plan = config.asy_os_plan(problem.n_features, problem.budget, n_workers)
    y_test = source.labels("test")
    return {"source": source, "problem": problem, "plan": plan, "y": y, "y_test": y_test,
            "true_coef": source.true_coef()}


def _worker_setup(config, rank, n_workers):
    read_before = bytes_read()
    options = config.substitution_options()
    # the data's and the shard's warnings (parts of the file not read, its scale) go to the central rank with
    # the final report, printed once there
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        source = open_data_source(config)
        # the shard depends on p, q and the scheme only, so it is read before the labels fix the plan
        columns = shard_columns(source.n_features, n_workers, rank - 1, config.resolved_sharding)
        if getattr(source, "columnar", False):   # only this shard's columns are read, once, kept in the file's dtype
            data = source.lazy()
            shard = options.shard(data.X, columns, hold=True)
        else:
            # a generated problem's test columns are generated at the end, for the candidates only
            # (generating the shard's took as long as its training columns: 1 s a worker at p = 20000)
            data = source.load(columns, with_test=not generates_test_columns(source))
            if generates_columns(source):      # nothing else reads the generated X: scaled in place, no copy
                shard = options.shard(data.X, columns, copy=False)
                data.X = None                   # the selected columns' raw values are generated again
            else:
                shard = options.shard(data.X, columns)
    notes = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    for w in caught:
        if not issubclass(w.category, ConvergenceWarning):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    problem = resolve_problem(config, source, data.y)
    plan = config.asy_os_plan(problem.n_features, problem.budget, n_workers)
    # compile or load the step before the timed phase (if this worker's run is long enough to use it), and
    # the compiled visits that the shared-memory transports run it in (mpi_shared.shared_batches)
    warm_up_kernels(kernel_backend(None, Worker.expected_steps(shard, options.worker_passes)), visits=True)
    gains = options.gains(shard, data.y, problem.loss)
    order = options.visit_order(shard, data.y, problem.loss, gains)
    return {
        "data": data, "shard": shard, "problem": problem, "plan": plan, "order": order, "read_before": read_before,
        "source": source,
        "warnings": notes,
        "pool_offer": offer(problem, columns, gains) if chooses(config, problem, options) else None,
        "lipschitz": local_lipschitz(shard, problem.budget, problem.loss, config.seed, rank - 1, order),
    }


# ----------------------------------------------------------------------------------- worker
def _worker_main(config, comm, setup, lipschitz, backoff, transport, checkpoint=None):
    rank = comm.Get_rank()
    problem, shard, data, plan = setup["problem"], setup["shard"], setup["data"], setup["plan"]
    timeout = patience(config.watchdog_timeout, rank)         # for the central rank
    try:
        externals = {"shard": shard}
        worker = checkpoint.take(WORKER_KIND, externals) if checkpoint is not None else None
        if worker is None:
            worker = make_worker(shard, data.y, problem.loss, plan.budgets[rank - 1], lipschitz,
                                 config.substitution_options().with_ridge(setup["ridge"]), worker_id=rank - 1,
                                 slack=plan.slack,
                                 n_workers=plan.n_workers, total_budget=plan.budget, order=setup["order"])
        u0 = None
        if config.resume:
            u0, _ = _resume_point(comm, worker.contribution(), worker.steps, backoff, config.setup_timeout)
        between = None if checkpoint is None else \
            (lambda: checkpoint.poll(WORKER_KIND, lambda: worker, worker.progress, externals))
        try:
            t_loop = time.perf_counter()
            compute_s, histogram = transport.run_worker(worker, between=between, u0=u0)
            loop_s = time.perf_counter() - t_loop
            if checkpoint is not None:        # finished: saved, should a stop come before the others finish
                checkpoint.save(WORKER_KIND, worker, worker.progress(), externals)
            final = _final(worker, data, compute_s, histogram, setup["read_before"], setup["source"])
            final["warnings"], final["loop_s"] = setup["warnings"], loop_s
        except RunInterrupted as exc:         # saved at the stop request: say so instead of a selection
            final = {"worker": worker.worker_id, "stopped": exc.signum, "steps": worker.steps,
                     "staleness_histogram": [0], "refused": worker.refused}
        wait_object(comm.isend(final, dest=0, tag=TAG_FINAL), backoff, timeout)
    except Deadline as exc:
        abort_job(comm, EXIT_CENTRAL_LOST,
                  f"asyos: worker rank {rank}: the central rank 0 did not answer ({exc}); aborting the job")
        raise
    except (KeyboardInterrupt, RunInterrupted):   # a signal reaches every rank: ``asyos.run`` ends each one
        raise
    except BaseException as exc:  # noqa: BLE001 - report any failure to the central rank, then abort
        _report_failure(comm, rank, exc)
        raise
    wait_release(comm, rank, timeout, getattr(transport, "central_alive", None))
    end_run(comm, timeout)
    transport.close()


def _test_columns(data, source, shard, local):
    """The test columns of the shard's features ``local`` (feature-major), or ``None``."""
    if data.has_test:
        return columns_dense(data.X_test, shard.columns[local] if is_column_matrix(data.X_test) else local).T.copy()
    if generates_test_columns(source):
        return source.columns_T(shard.columns[local], "test")
    return None


def _final(worker, data, compute_s, histogram, read_before, source) -> dict:
    """A worker's final report: its selection with the columns the central rank finishes on."""
    shard = worker.shard
    local = worker.state.retained
    order = np.argsort(shard.columns[local], kind="stable")
    local = local[order]
    return {
        "worker": worker.worker_id,
        "selected": shard.columns[local],
        "weights": worker.state.weights[order],       # on the scaled columns
        "columns": worker.selected_columns(),         # the scaled training columns
        "raw_columns": _raw_columns(shard, data.X, local, source) if shard.standardized else None,
        "offsets": shard.offsets[local],
        "scales": shard.scales[local],
        "intercept": worker.intercept,                # b on its owner (worker 0), else 0
        "passes": worker.passes_run,
        "test_columns": _test_columns(data, source, shard, local),
        "steps": worker.steps,
        "proposals": worker.proposals,
        "refused": worker.refused,
        "n_features": shard.n_local,
        "budget": worker.state.budget,
        "compute_s": compute_s,
        "step_size": worker.state.step_size,
        "log": worker.log.rows,
        "staleness_histogram": histogram,
        "dropped": worker.dropped,
        "peak_rss_bytes": peak_rss_bytes(),
        # bytes read by the process from opening the data to the end of the run (``/proc/self/io``)
        "bytes_read": None if read_before is None else bytes_read() - read_before,
        "shard_bytes": getattr(shard, "stored_bytes", None),        # the shard's size in the file
        "shard_bytes_read": getattr(shard, "bytes_read", None),     # by the column reader (headers included)
    }


def _raw_columns(shard, X, local, source):
    """The selected columns in the data's units, one row per column (``X`` None: generated again)."""
    if hasattr(shard, "raw_columns"):
        return shard.raw_columns(local).T.copy()
    if X is None:
        return source.columns_T(shard.columns[local], "train")
    return columns_dense(X, local).T.copy()


def _report_failure(comm, rank, exc):
    payload = {"rank": rank, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(),
               "input_error": str(exc) if isinstance(exc, InputError) else None,
               "output_error": str(exc) if isinstance(exc, OutputError) else None}
    try:
        request = comm.isend(payload, dest=0, tag=TAG_ERROR)
        wait_object(request, Backoff(max_sleep=10e-3), 2.0)
        time.sleep(ERROR_GRACE)          # the central rank reports and aborts the job meanwhile
    except BaseException:  # noqa: BLE001
        pass
    abort_job(comm, EXIT_WORKER_FAILED, f"asyos: worker rank {rank} failed: {payload['error']}\n"
                                        f"{payload['traceback']}")


# ---------------------------------------------------------------------------------- central
def _central_main(config, comm, setup, lipschitz, backoff, t_start, oversubscribed, transport,
                  checkpoint=None) -> dict:
    problem = setup["problem"]
    n = problem.n_samples
    steps_before = 0
    if config.resume:
        u0, steps_before = _resume_point(comm, np.zeros(n), 0, backoff, config.setup_timeout)
    t_async0 = time.perf_counter()
    setup["connect_s"] = t_async0 - t_start - setup["loaded_s"]
    every = config.resolved_trace_every
    trace = ObjectiveTrace(every, problem.loss, setup["y"]) if every else None
    bound = config.max_staleness if transport.refuses_stale_pushes else None
    central = Central(n, max_staleness=bound, monitor=trace)
    if config.resume:
        central.u[:] = u0
    if trace is not None:
        trace.record(central)
    watch = Watch(comm, config.watchdog_timeout, report_dir=config.output)
    _progress_lines(watch, config, problem.loss, setup["y"])
    busy_s, theta = transport.run_central(central, watch, trace)
    async_s = time.perf_counter() - t_async0
    release_workers(comm, backoff)
    end_run(comm, config.watchdog_timeout)
    transport.close()
    finals = watch.finals
    stopped = [f["stopped"] for f in finals if f.get("stopped")]
    if stopped or (checkpoint is not None and StopSignals.requested is not None):
        steps = sum(f["steps"] for f in finals)
        raise RunInterrupted(stopped[0] if stopped else StopSignals.requested,
                             os.path.dirname(checkpoint.path) if checkpoint is not None else None,
                             {"steps": steps, "workers stopped": f"{len(stopped)} of {len(finals)}"})
    for final in finals:                # when each worker finished: uneven progress shows here
        final["finished_s"] = final.pop("received_at") - t_async0
    if trace is not None:
        trace.record(central)

    record = _central_results(config, setup, finals, central, lipschitz, trace, async_s, busy_s, t_start,
                              oversubscribed, transport.name, theta, steps_before)
    from .pipeline import Outcome, publish
    from .summary import format_summary
    from ..records.model_file import save_run_model
    publish(config, Outcome(record, format_summary(record), selection_rows=[row for f in finals for row in f["log"]],
                            save_model=lambda: save_run_model(config, record, scaling=record.get("scaling"),
                                                              source=setup["source"])))
    return record


def _progress_lines(watch, config, loss, y):
    """The job's progress lines, written by the central rank's watch (``asyos.utils.progress``)."""
    from ..utils.progress import Progress, wanted
    if wanted():
        watch.reporter = Progress(f"asy-os, {watch.q} workers")

        def objective(u):
            with np.errstate(all="ignore"):
                return loss.value(y, u)
        watch.objective = objective


def _central_results(config, setup, finals, central, lipschitz, trace, async_s, busy_s, t_start, oversubscribed,
                     transport, theta=None, steps_before=0):
    from ..metrics import evaluate
    from .summary import build_record
    from ..utils.timing import command_timing
    from .summary import report_warnings

    problem = setup["problem"]
    loss, y, y_test = problem.loss, setup["y"], setup["y_test"]
    options = config.substitution_options().with_ridge(setup["ridge"])
    candidates = Candidates.from_parts([(f["selected"], f["weights"], f["columns"], f["offsets"], f["scales"],
                                         f["intercept"]) for f in finals], y.size)
    raw_columns = Candidates.gather([f["columns"] if f["raw_columns"] is None else f["raw_columns"] for f in finals],
                                    candidates.order, y.size)
    plan = setup["plan"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        outcome = conclude(candidates, central.u, y, loss, plan, options, config.seed, finals[0]["step_size"],
                           lipschitz, refit=config.refit, raw_columns=raw_columns)
    notes = report_warnings(caught) + _shard_warnings(finals)
    done = outcome.finished
    selected, weights, columns = done.features, done.coef, raw_columns[done.positions]
    coef_sel, intercept = outcome.coef, outcome.intercept
    has_test = y_test is not None and all(f["test_columns"] is not None for f in finals)
    test_columns = (Candidates.gather([f["test_columns"] for f in finals], candidates.order, 0)[done.positions]
                    if has_test and selected.size else None)
    coef = np.zeros(problem.n_features)
    coef[selected] = coef_sel
    u_train = coef_sel @ columns + intercept
    u_test = (coef_sel @ test_columns + intercept if test_columns is not None
              else (np.full(y_test.size, intercept) if has_test else None))
    metrics = evaluate(loss, coef, u_train, y, u_test, y_test if has_test else None, setup["true_coef"], selected)
    metrics["objective_selection"] = outcome.objective_selection
    metrics["objective_candidates"] = outcome.objective_candidates
    notes += _doubts(config, problem, loss, y, u_train, int(np.count_nonzero(coef_sel)))
    wall_s = time.perf_counter() - t_start
    extra = _record_extras(config, finals, central, lipschitz, async_s, busy_s, oversubscribed, transport, theta,
                           steps_before, setup, options, plan, candidates, done, weights, intercept, notes)
    if trace is not None:
        extra["trace"] = trace.as_dict()
    finish_s = wall_s - setup["loaded_s"] - setup["connect_s"] - async_s
    timing = {"wall_s": wall_s, "setup_s": wall_s - async_s,
              **command_timing(t_start, load_s=setup["loaded_s"], connect_s=setup["connect_s"], async_s=async_s,
                               finish_s=finish_s)}
    return build_record(config, problem, "mpi", selected, coef_sel, metrics, timing, **extra)


def _doubts(config, problem, loss, y, u_train, kept) -> list:
    """The warnings one process gives its model (``asyos.learners.base.selection_notes``: fewer features
    than the budget, one class, below the majority rate, an exact fit with p >= n), from ``u_C`` on the
    training rows: printed and recorded as sequential OS's are. Before, Asy-OS under MPI selected 44 of 50
    features on a gene-expression set without the warning sequential OS gave."""
    from ..learners.base import selection_notes
    from ..errors import SelectionWarning
    from .summary import report_warnings
    classes = np.array([-1.0, 1.0]) if loss.task == "classification" else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        name = get_algorithm(config.algorithm).class_name        # the name one process's warnings give
        for note in selection_notes(name, problem.budget, kept, loss.task, y, u_train, classes,
                                    problem.n_features, True,
                                    lambda: "check --passes and --ridge, or compare with one process (no mpiexec)"):
            warnings.warn(note, SelectionWarning)
    return report_warnings(caught)


def _shard_warnings(finals) -> list:
    """Each worker's data warnings (its shard's columns), once each, printed and returned."""
    shards, notes = {}, []
    for f in finals:
        for note in f.get("warnings", ()):
            shards.setdefault(note, []).append(f["worker"] + 1)
    for note, ranks in shards.items():
        note = f"{note} (the shards of rank(s) {', '.join(map(str, ranks))})"
        print(f"asyos: warning: {note}", file=sys.stderr, flush=True)
        notes.append(note)
    return notes


def _record_extras(config, finals, central, lipschitz, async_s, busy_s, oversubscribed, transport, theta,
                   steps_before, setup, options, plan, candidates, done, weights, intercept, notes) -> dict:
    """The MPI record's fields beyond the common ones: the workers, the pushes, the staleness, the finish."""
    staleness = central.staleness_summary()
    workers = [{"rank": f["worker"] + 1, "n_features": f["n_features"], "budget": f["budget"], "steps": f["steps"],
                "refused": f["refused"], "compute_s": f["compute_s"], "loop_s": f.get("loop_s"),
                "finished_s": f["finished_s"],
                "peak_rss_bytes": f["peak_rss_bytes"], "bytes_read": f["bytes_read"], "shard_bytes": f["shard_bytes"],
                "shard_bytes_read": f["shard_bytes_read"]}
               for f in finals]
    extra = dict(
        ridge=options.ridge,
        ridge_scores=setup["ridge_scores"],
        n_workers=len(finals),
        staleness=staleness,
        push_staleness=central.push_staleness,
        max_staleness=config.max_staleness,
        refused_pushes=central.refused,
        pushes=central.accepted,
        pushes_per_s=central.accepted / async_s if async_s > 0 else None,
        transport=transport,
        **_push_settings(config, transport),
        # the workers' own counts (a resumed worker's include its steps before the stop): the shared
        # window counts writes, and a worker's last write may carry only drops, which is no step
        steps=sum(f["steps"] for f in finals),
        steps_before_resume=steps_before if config.resume else None,
        steps_per_push=central.steps / central.accepted if central.accepted else None,
        oversubscribed=bool(oversubscribed),
        step_size=finals[0]["step_size"] if finals else None,
        lipschitz=lipschitz,
        workers=workers,
        central=_central_load(central, async_s, busy_s),
        raw_coef=weights.tolist(),
        intercept=float(intercept),
        raw_intercept=float(done.intercept) if options.fit_intercept else 0.0,
        variant=options.variant,
        finish=done.how,
        passes=max(f["passes"] for f in finals),
        warnings=notes,
        budget_mode=plan.budget_mode,
        slack=plan.resolved_slack,
        threshold=theta["value"] if theta else None,
        threshold_age=theta["age"] if theta else None,
        n_dropped=int(sum(f["dropped"] for f in finals)),
        candidates=_candidates_record(candidates),
        n_candidates=candidates.size,
        scaling=_scaling(candidates, done) if options.scale else None,
    )
    return extra


def _scaling(candidates, done) -> dict:
    """How the workers scaled the selected columns, ``z = (x - offsets) * scales``, and the selection's
    weights on ``z`` (the model file's ``scaling``, ``asyos.records.model_file``)."""
    offsets, scales = candidates.offsets[done.positions], candidates.scales[done.positions]
    raw = np.divide(np.asarray(done.coef, dtype=float), scales, out=np.zeros(scales.size), where=scales > 0)
    return {"kind": "standard", "offsets": offsets, "scales": scales, "raw_coef": raw}


def _candidates_record(candidates) -> dict:
    """Every worker's features at the end, their coefficients and the intercept in the data's
    units: the model whose training predictions are the final ``u_C``."""
    coef, intercept = candidates.in_units()
    return {"features": candidates.features.tolist(), "coef": coef.tolist(), "intercept": intercept}


def _push_settings(config, transport) -> dict:
    """``push_mode`` and ``max_batch`` as run (messages only; shared memory writes every step)."""
    if transport != "messages":
        return {"push_mode": None, "max_batch": None}
    mode = config.resolved_push_mode
    return {"push_mode": mode, "max_batch": config.max_batch if mode == "pipelined" else 1}


def _central_load(central, async_s, busy_s) -> dict:
    """How busy the central rank was serving pushes, and what that implies for its capacity."""
    served = central.accepted + central.refused
    return {"busy_s": busy_s, "utilization": busy_s / async_s if async_s > 0 else None,
            "service_us": 1e6 * busy_s / served if served else None,
            "capacity_pushes_per_s": served / busy_s if busy_s > 0 else None}
