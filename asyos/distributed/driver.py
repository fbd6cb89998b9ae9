"""Asy-OS on MPI: rank 0 is the central node (KDD'16 Alg. 2), ranks 1..q are workers (Alg. 3).

Two transports for the pushes (``--transport``; ``resolve_transport`` picks):

* ``shared-memory`` (one node): ``u_C`` is the sum of one row per worker in an MPI shared-memory
  window (``shared_state.py``); workers read it and add into their own row themselves, and the
  central rank only traces ``u_C``, watches the workers' step counters and takes their reports;
* ``messages`` (any number of nodes), below.

Message protocol (buffer messages, no pickling on the hot path; ``messages.py`` has the layout):

* a worker sends ``[delta_u | version_read]`` (``TAG_PUSH``) and has the reply already posted;
* the central rank serves every push that has arrived (persistent receives polled with
  ``Testsome``, which is fair across workers), refuses a push older than ``--max-staleness``
  versions, otherwise adds it into ``u_C``, and answers ``[u_C | version | status]``: the pull
  rides on the push reply. A refused worker discards its step and redoes it from that fresh state;
* a worker that has finished its passes sends its selection (``TAG_FINAL``, pickled); when all
  have, the central rank refits on the union, writes the results and releases the workers.

Global budget (``--budget-mode global``): a push also carries the worker's retained ``|w|`` and a
reply the other workers' top ``s`` (``GlobalThreshold``); on shared memory every worker publishes
its ``|w|`` in the window and reads the others' rows itself. The union is cut to ``s`` at the end.

There is no barrier while running. Setup ends with one collective that agrees on input errors
(every rank exits 2 with the first message) and on ``L_F`` (the maximum of the shards' estimates).

Failures end the job: a worker that raises sends its traceback (``TAG_ERROR``) and the central rank
aborts with ``EXIT_WORKER_FAILED``; a worker silent for ``--watchdog-timeout`` seconds (no push, or
on shared memory no step proposed; hung, or exited without MPI noticing) makes the central rank
abort with ``EXIT_WORKER_LOST``; a worker that
waits too long for the central rank aborts with ``EXIT_CENTRAL_LOST``. A killed rank is caught by
the launcher. All waits poll with back-off (``transport.py``).
"""
from __future__ import annotations

import time
import traceback
import warnings

import numpy as np

from ..data.sharding import shard_columns
from ..errors import (EXIT_CENTRAL_LOST, EXIT_OK, EXIT_USAGE, EXIT_WORKER_FAILED, EXIT_WORKER_LOST, ConvergenceWarning,
                      InputError)
from ..learners.asy_os import (Candidates, check_worker_count, finish, keeps_threshold, threshold_rank,
                               worker_budgets)
from ..learners.base import columns_dense
from ..learners.kernels import backend as kernel_backend, warm_up as warm_up_kernels
from ..learners.online_substitution import check_objective, local_lipschitz, make_worker
from ..learners.refit import refit as refit_model, refit_with_intercept
from ..problem import open_data_source, resolve_problem
from ..registry import get_algorithm
from ..trace import ObjectiveTrace
from .messages import (PUSH_OWN_UNSEEN, PUSH_STEPS, PUSH_VERSION, REPLY_HEADER, REPLY_STATUS, REPLY_VERSION,
                       STATUS_ACCEPTED, STATUS_REFUSED, TAG_ERROR, TAG_FINAL, TAG_PUSH, TAG_REPLY, TAG_SHUTDOWN,
                       others_section, push_buffer, read_weights, reply_buffer, write_weights)
from .roles import DEFAULT_SLACK, Central, GlobalThreshold, Worker, kth_largest
from .shared_state import SharedState, ranks_share_one_node, shared_steps
from .transport import Backoff, Deadline, abort_job, ranks_oversubscribe_cores, wait_all, wait_object

CENTRAL_TIMEOUT_FACTOR = 4.0      # a worker waits this many watchdog periods for a reply
SHUTDOWN_TIMEOUT = 3600.0         # the central rank's final refit and write may take a while
ERROR_GRACE = 5.0                 # a failed worker waits this long for the central rank to abort


def run_mpi(config, comm) -> int:
    """The ``mpiexec`` entry point of ``asyos.run``: run, print, write; returns the exit status."""
    run_asy_os(config, comm)
    return EXIT_OK


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
    oversubscribed = ranks_oversubscribe_cores(comm)

    backoff = Backoff(spin_seconds=0.0 if oversubscribed else 100e-6)
    setup, error = {}, None
    try:
        setup = _central_setup(config, n_workers) if rank == 0 else _worker_setup(config, rank, n_workers)
    except InputError as exc:
        error = str(exc)
    # one non-blocking collective agrees on input errors and on L_F (max over the shards)
    mine = np.array([error is not None, setup.get("lipschitz", 0.0)], dtype=np.float64)
    everyone = np.empty((size, mine.size))
    try:
        wait_all([comm.Iallgather(mine, everyone)], backoff, config.setup_timeout)
    except Deadline:
        abort_job(comm, EXIT_CENTRAL_LOST if rank else EXIT_WORKER_LOST,
                  f"asyos: rank {rank}: setup did not finish on every rank within {config.setup_timeout:g} s; "
                  f"aborting the job")
    if everyone[:, 0].any():
        raise InputError(next(e for e in comm.allgather(error) if e))
    lipschitz = float(everyone[:, 1].max())
    transport = resolve_transport(config, comm)
    cap = worker_budgets(setup["problem"].budget, n_workers, config.resolved_budget_mode, config.cap)[0] \
        if keeps_threshold(config.resolved_budget_mode, n_workers) else 0
    shared = SharedState(comm, setup["problem"].n_samples, n_workers, cap) if transport == "shared-memory" else None
    with np.errstate(over="ignore", invalid="ignore"):   # divergence is reported by the kernel
        if rank == 0:
            return _central_main(config, comm, setup, lipschitz, backoff, t_start, oversubscribed, shared)
        _worker_main(config, comm, setup, lipschitz, backoff, shared)
    return None


def resolve_transport(config, comm) -> str:
    """``auto``: shared memory when every rank is on one node and no ``--push-mode`` was asked for,
    else messages. Collective (every rank calls it)."""
    one_node = ranks_share_one_node(comm)
    if config.transport == "shared-memory" and not one_node:
        raise InputError("--transport shared-memory needs every rank on one node; these ranks span several "
                         "(use --transport messages or auto)")
    if config.transport != "auto":
        return config.transport
    return "shared-memory" if one_node and config.push_mode == "auto" else "messages"


# ------------------------------------------------------------------------------------ setup
def _central_setup(config, n_workers):
    from ..results import prepare_output_dir
    if config.output:
        prepare_output_dir(config.output)
    source = open_data_source(config)
    y = source.labels("train")
    problem = resolve_problem(config, source, y)
    check_worker_count(n_workers, problem.n_features, problem.budget, config.resolved_budget_mode)
    y_test = source.labels("test")
    return {"source": source, "problem": problem, "y": y, "y_test": y_test, "true_coef": source.true_coef()}


def _worker_setup(config, rank, n_workers):
    source = open_data_source(config)
    columns = shard_columns(source.n_features, n_workers, rank - 1, config.resolved_sharding)
    data = source.load(columns)
    problem = resolve_problem(config, source, data.y)
    check_worker_count(n_workers, problem.n_features, problem.budget, config.resolved_budget_mode)
    options = config.substitution_options()
    shard = options.shard(data.X, columns)
    # compile or load the step before the timed phase (if this worker's run is long enough to use it)
    warm_up_kernels(kernel_backend(None, Worker.expected_steps(shard, options.worker_passes)))
    order = options.visit_order(shard, data.y, problem.loss)
    return {
        "data": data, "shard": shard, "problem": problem, "order": order,
        "budget": worker_budgets(problem.budget, n_workers, config.resolved_budget_mode, config.cap)[rank - 1],
        "lipschitz": local_lipschitz(shard, problem.budget, problem.loss, config.seed, rank - 1, order),
    }


# ----------------------------------------------------------------------------------- worker
def _worker_main(config, comm, setup, lipschitz, backoff, shared=None):
    rank = comm.Get_rank()
    problem, shard, data = setup["problem"], setup["shard"], setup["data"]
    try:
        worker = make_worker(shard, data.y, problem.loss, setup["budget"], lipschitz, config.substitution_options(),
                             worker_id=rank - 1, slack=config.slack, n_workers=comm.Get_size() - 1,
                             total_budget=problem.budget, order=setup["order"])
        timeout = CENTRAL_TIMEOUT_FACTOR * config.watchdog_timeout
        histogram = None
        # the others' top |w| in the replies
        rank_theta = threshold_rank(problem.budget, config.variant)
        others = rank_theta if keeps_threshold(config.resolved_budget_mode, comm.Get_size() - 1) else 0
        if shared is not None:
            threshold = GlobalThreshold(rank_theta, shared.q, shared.cap) if shared.cap else None
            compute_s, histogram = shared_steps(shared, rank - 1, worker, config.max_staleness, threshold=threshold)
        elif config.resolved_push_mode == "pipelined":
            compute_s = _steps_pipelined(comm, worker, backoff, timeout, config.max_batch, others)
        else:
            compute_s = _steps_one_by_one(comm, worker, backoff, timeout, others)
        local = worker.state.retained
        order = np.argsort(shard.columns[local], kind="stable")
        local = local[order]
        final = {
            "worker": rank - 1,
            "selected": shard.columns[local],
            "weights": worker.state.weights[order],       # on the scaled columns
            "columns": worker.selected_columns(),         # the scaled training columns
            "raw_columns": columns_dense(data.X, local).T.copy() if shard.standardized else None,
            "offsets": shard.offsets[local],
            "scales": shard.scales[local],
            "intercept": worker.intercept,                # b on its owner (worker 0), else 0
            "passes": worker.passes_run,
            "test_columns": (columns_dense(data.X_test, local).T.copy() if data.has_test else None),
            "steps": worker.steps,
            "proposals": worker.proposals,
            "n_features": shard.n_local,
            "budget": worker.state.budget,
            "compute_s": compute_s,
            "step_size": worker.state.step_size,
            "log": worker.log.rows,
            "staleness_histogram": histogram,
            "dropped": worker.dropped,
        }
        wait_object(comm.isend(final, dest=0, tag=TAG_FINAL), backoff, timeout)
    except Deadline as exc:
        abort_job(comm, EXIT_CENTRAL_LOST,
                  f"asyos: worker rank {rank}: the central rank 0 did not answer ({exc}); aborting the job")
        raise
    except BaseException as exc:  # noqa: BLE001 - report any failure to the central rank, then abort
        _report_failure(comm, rank, exc)
        raise
    wait_object(comm.irecv(source=0, tag=TAG_SHUTDOWN), Backoff(max_sleep=20e-3), SHUTDOWN_TIMEOUT)
    if shared is not None:
        shared.free()


def _steps_one_by_one(comm, worker, backoff, timeout, others=0) -> float:
    """``--push-mode each-step``, KDD'16 Alg. 3 literally: push, wait for the verdict and the fresh
    ``u_C``, then step again. The only mode that can enforce ``--max-staleness``: a refused step is
    discarded and redone from the fresh state. ``others`` > 0: the global budget (the replies carry
    the other workers' top ``others`` weights)."""
    n = worker.n
    reply = reply_buffer(n, others)
    u = reply[:n]
    others_top = others_section(reply, n) if others else None
    version = 0
    compute_s = 0.0
    while True:
        t0 = time.perf_counter()
        push = worker.propose(u, version, others_top) if others else worker.propose(u, version)
        compute_s += time.perf_counter() - t0
        if push is None:
            return compute_s
        if others:
            worker.write_push_weights()
        recv = comm.Irecv(reply, source=0, tag=TAG_REPLY)
        send = comm.Isend(push.buffer, dest=0, tag=TAG_PUSH)
        wait_all([send, recv], backoff, timeout)
        version = int(reply[n + REPLY_VERSION])
        if reply[n + REPLY_STATUS] == STATUS_ACCEPTED:
            worker.commit()
        else:
            worker.discard()


def _steps_pipelined(comm, worker, backoff, timeout, max_batch, others=0) -> float:
    """``--push-mode pipelined``, Alg. 3 without idle waits: one push in flight, and the steps taken
    meanwhile summed into the next push.

    Each step is taken at the worker's *view*: the last ``u_C`` received plus this worker's own
    changes not yet in it (its own information is always current; the other workers' is as old as
    the last reply). When the central rank answers quickly every push carries one step, exactly as
    in Alg. 3; when it lags, pushes carry more steps, so the central's load stays bounded by the
    number of workers over the round-trip time. A push's ``version_read`` is the version of the
    snapshot its steps were taken at, so its measured staleness includes the time it waited.

    ``max_batch`` (> 0) bounds how far a worker runs ahead: after that many steps with its push
    still in flight it waits for the reply. Without a bound, 12 workers on 2 cores left the central
    rank so little CPU that pushes summed ~60 steps and recall fell from 0.67 to 0.42; a bound of 16
    kept each-step recall at several times each-step speed. Under the global budget the replies
    carry the other workers' top ``others`` weights and a push carries the weights the worker
    holds when it is sent.
    """
    n = worker.n
    reply = reply_buffer(n, others)
    others_top = others_section(reply, n).copy() if others else None   # as of the last reply taken
    view = np.zeros(n)
    pending = push_buffer(n, worker.state.budget)        # steps not yet pushed
    sending = push_buffer(n, worker.state.budget)        # the push in flight
    version, steps_pending = 0, 0
    send = recv = None
    finished = False
    compute_s = 0.0
    limit = max_batch if max_batch > 0 else float("inf")
    while True:
        if send is not None and (finished or steps_pending >= limit or recv.Test()):
            if finished or steps_pending >= limit:
                wait_all([recv], backoff, timeout)
            send.Wait()                                   # the central has it: it answered
            view[:] = reply[:n]
            view += pending[:n]                           # own steps it has not seen yet
            version = int(reply[n + REPLY_VERSION])
            if others:
                others_top[:] = others_section(reply, n)
            send = recv = None
        if send is None and steps_pending:
            pending, sending = sending, pending
            sending[n + PUSH_STEPS] = steps_pending
            if others:
                write_weights(sending, n, worker.state.weights)
            recv = comm.Irecv(reply, source=0, tag=TAG_REPLY)
            send = comm.Isend(sending, dest=0, tag=TAG_PUSH)
            pending[:n] = 0.0
            steps_pending = 0
        if finished:
            if send is None:
                return compute_s
            continue
        t0 = time.perf_counter()
        push = worker.propose(view, version, others_top) if others else worker.propose(view, version)
        if push is None:
            finished = True
            continue
        worker.commit()
        view += push.delta
        pending[:n] += push.delta
        if steps_pending == 0:
            pending[n + PUSH_VERSION] = version
            pending[n + PUSH_OWN_UNSEEN] = 0 if send is None else 1
        steps_pending += 1
        compute_s += time.perf_counter() - t0


def _report_failure(comm, rank, exc):
    payload = {"rank": rank, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(),
               "input_error": str(exc) if isinstance(exc, InputError) else None}
    try:
        request = comm.isend(payload, dest=0, tag=TAG_ERROR)
        wait_object(request, Backoff(max_sleep=10e-3), 2.0)
        time.sleep(ERROR_GRACE)          # the central rank reports and aborts the job meanwhile
    except BaseException:  # noqa: BLE001
        pass
    abort_job(comm, EXIT_WORKER_FAILED, f"asyos: worker rank {rank} failed: {payload['error']}\n"
                                        f"{payload['traceback']}")


# ---------------------------------------------------------------------------------- central
def _central_main(config, comm, setup, lipschitz, backoff, t_start, oversubscribed, shared=None) -> dict:
    problem = setup["problem"]
    n = problem.n_samples
    t_async0 = time.perf_counter()
    trace = ObjectiveTrace(config.trace_every, problem.loss, setup["y"]) if config.trace_every else None
    central = Central(n, max_staleness=config.max_staleness, monitor=trace)
    if trace is not None:
        trace.record(central)
    if shared is None:
        finals, busy_s, theta = _serve_pushes(config, comm, central, backoff, problem.budget)
    else:
        finals, busy_s = _watch_shared(config, comm, central, shared, trace)
        # every worker publishes its |w| after every step: they are as stale as its read of u_C
        theta = ({"value": kth_largest(shared.weights.ravel(), threshold_rank(problem.budget, config.variant)),
                  "age": None} if shared.cap else None)
    async_s = time.perf_counter() - t_async0
    for final in finals:                # when each worker finished: uneven progress shows here
        final["finished_s"] = final.pop("received_at") - t_async0
    if trace is not None:
        trace.record(central)

    record = _central_results(config, setup, finals, central, lipschitz, trace, async_s, busy_s, t_start,
                              oversubscribed, "messages" if shared is None else "shared-memory", theta)
    from ..report import format_summary
    if not config.quiet:
        print(format_summary(record), flush=True)
    if config.output:
        from ..results import write_results
        rows = [row for f in finals for row in f["log"]]
        path = write_results(config.output, record, rows)
        if not config.quiet:
            print(f"  results: {path}", flush=True)
    shutdown = [comm.isend(None, dest=w, tag=TAG_SHUTDOWN) for w in range(1, comm.Get_size())]
    for request in shutdown:
        wait_object(request, backoff, SHUTDOWN_TIMEOUT)
    if shared is not None:
        shared.free()
    return record


def _serve_pushes(config, comm, central, backoff, budget):
    """``--transport messages``: serve pushes until every worker has sent its final selection.
    Returns the finals, the time spent serving pushes and (global budget) the final threshold over
    all reported weights and the age of the others' weights sent with the replies (``mean``: over
    replies, of their mean age; ``max``; in versions of ``u_C``)."""
    from mpi4py import MPI

    n, q = central.n, comm.Get_size() - 1
    budgets = worker_budgets(budget, q, config.resolved_budget_mode, config.cap)
    threshold = (GlobalThreshold(threshold_rank(budget, config.variant), q, budgets[0])
                 if keeps_threshold(config.resolved_budget_mode, q) else None)
    push_bufs = [push_buffer(n, budgets[i]) for i in range(q)]
    reply_bufs = [reply_buffer(n, threshold.budget if threshold is not None else 0) for _ in range(q)]
    receives = [comm.Recv_init(push_bufs[i], source=i + 1, tag=TAG_PUSH) for i in range(q)]
    MPI.Prequest.Startall(receives)
    replies = [None] * q
    finals = [None] * q
    last_seen = [time.monotonic()] * q
    status = MPI.Status()
    busy_s = 0.0                        # time spent serving pushes: the central rank's capacity
    while any(f is None for f in finals):
        progressed = False
        t_poll = time.perf_counter()
        ready = MPI.Request.Testsome(receives)
        if ready:
            now = time.monotonic()
            for i in ready:
                buf = push_bufs[i]
                accepted = central.apply(buf[:n], int(buf[n + PUSH_VERSION]), int(buf[n + PUSH_STEPS]),
                                         int(buf[n + PUSH_OWN_UNSEEN]))
                if threshold is not None and accepted:
                    threshold.update(i, read_weights(buf, n), central.version)
                if replies[i] is not None:
                    replies[i].Wait()           # the worker got it before pushing again
                out = reply_bufs[i]
                out[:n + REPLY_HEADER] = central.u_ext
                out[n + REPLY_STATUS] = STATUS_ACCEPTED if accepted else STATUS_REFUSED
                if threshold is not None:
                    threshold.others_top(i, out=others_section(out, n))
                replies[i] = comm.Isend(out, dest=i + 1, tag=TAG_REPLY)
                receives[i].Start()
                last_seen[i] = now
            progressed = True
            busy_s += time.perf_counter() - t_poll
        # pushes are matched at once by the persistent receives (a worker has at most one in
        # flight), so whatever a probe finds is an error report or a worker's final selection
        progressed |= _receive_report(comm, status, finals)
        if progressed:
            backoff.reset()
            continue
        _check_silence(comm, config, finals, last_seen, f"{central.accepted} pushes applied")
        backoff.pause()
    for request in receives:
        request.Cancel()
        request.Wait()
        request.Free()
    MPI.Request.Waitall([r for r in replies if r is not None])
    if threshold is None:
        return finals, busy_s, None
    return finals, busy_s, {"value": threshold.value, "age": threshold.age}


SHARED_POLL_S = 1e-3              # the central rank's sleep between looks at the shared state


def _watch_shared(config, comm, central, shared, trace):
    """``--transport shared-memory``: the workers update ``u_C`` themselves; the central rank wakes
    every millisecond to trace ``u_C``, watch the heartbeats and take reports, then sleeps.
    Returns the finals and the time spent tracing."""
    from mpi4py import MPI

    q = comm.Get_size() - 1
    finals = [None] * q
    status = MPI.Status()
    heartbeat = shared.proposals.copy()
    last_seen = [time.monotonic()] * q
    busy_s = 0.0
    while any(f is None for f in finals):
        if _receive_report(comm, status, finals):
            continue
        if trace is not None:
            steps = shared.total_steps()
            if trace.due(steps):
                t0 = time.perf_counter()
                central.steps = central.version = steps
                shared.read(central.u)
                trace.record(central)
                busy_s += time.perf_counter() - t0
        now = time.monotonic()
        beats = shared.proposals.copy()
        for i in np.flatnonzero(beats != heartbeat):
            last_seen[i] = now
        heartbeat = beats
        _check_silence(comm, config, finals, last_seen, f"{shared.total_steps()} steps taken")
        time.sleep(SHARED_POLL_S)
    # every worker has reported, so every write is done: the exact final state
    histograms = [np.asarray(f["staleness_histogram"], dtype=np.int64) for f in finals]
    merged = np.zeros(max(h.size for h in histograms), dtype=np.int64)
    for h in histograms:
        merged[:h.size] += h
    shared.read(central.u)
    central.set_counts(steps=shared.total_steps(), refused=int(shared.refused.sum()), histogram=merged)
    return finals, busy_s


def _receive_report(comm, status, finals) -> bool:
    """Take one error report (aborts the job) or final selection if one has arrived."""
    from mpi4py import MPI
    if not comm.Iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status):
        return False
    source, tag = status.Get_source(), status.Get_tag()
    if tag == TAG_ERROR:
        report = comm.recv(source=source, tag=TAG_ERROR)
        if report["input_error"] is not None:
            abort_job(comm, EXIT_USAGE, f"asyos: error: worker rank {report['rank']}: {report['input_error']}")
        abort_job(comm, EXIT_WORKER_FAILED, f"asyos: worker rank {report['rank']} failed: "
                                            f"{report['error']}\n{report['traceback']}asyos: aborting the job")
    if tag == TAG_FINAL:
        final = comm.recv(source=source, tag=TAG_FINAL)
        final["received_at"] = time.perf_counter()
        finals[source - 1] = final
        return True
    return False


def _check_silence(comm, config, finals, last_seen, progress):
    now = time.monotonic()
    silent = [i + 1 for i in range(len(finals)) if finals[i] is None and now - last_seen[i] > config.watchdog_timeout]
    if silent:
        abort_job(comm, EXIT_WORKER_LOST,
                  f"asyos: worker rank(s) {silent} sent nothing for more than {config.watchdog_timeout:g} s "
                  f"(hung, or exited without finishing); {progress}; aborting the job")


def _central_results(config, setup, finals, central, lipschitz, trace, async_s, busy_s, t_start, oversubscribed,
                     transport, theta=None):
    from ..metrics import evaluate
    from ..report import build_record
    from ..report import report_warnings

    problem = setup["problem"]
    loss, y, y_test = problem.loss, setup["y"], setup["y_test"]
    options = config.substitution_options()
    candidates = Candidates.from_parts([(f["selected"], f["weights"], f["columns"], f["offsets"], f["scales"],
                                         f["intercept"]) for f in finals], y.size)
    raw_columns = Candidates.gather([f["columns"] if f["raw_columns"] is None else f["raw_columns"] for f in finals],
                                    candidates.order, y.size)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        objective_candidates = check_objective(loss, y, central.u, finals[0]["step_size"], lipschitz)
        done = finish(candidates, y, loss, problem.budget, options, config.seed,
                      cut=config.resolved_budget_mode == "global")
    notes = report_warnings(caught)
    selected, weights, columns = done.features, done.coef, raw_columns[done.positions]
    has_test = y_test is not None and all(f["test_columns"] is not None for f in finals)
    test_columns = (Candidates.gather([f["test_columns"] for f in finals], candidates.order, 0)[done.positions]
                    if has_test and selected.size else None)
    # the selection's own loss before the refit (the refit starts from it and cannot do worse)
    objective_selection = objective_candidates if done.u is None else loss.value(y, done.u)
    intercept = done.intercept if options.fit_intercept else 0.0
    if config.refit and options.fit_intercept:
        coef_sel, intercept = refit_with_intercept(columns.T, y, loss, w0=weights, intercept0=intercept)
    elif config.refit and selected.size:
        coef_sel = refit_model(columns.T, y, loss, w0=weights)
    else:
        coef_sel = weights
    coef = np.zeros(problem.n_features)
    coef[selected] = coef_sel
    u_train = coef_sel @ columns + intercept
    u_test = (coef_sel @ test_columns + intercept if test_columns is not None
              else (np.full(y_test.size, intercept) if has_test else None))
    metrics = evaluate(loss, coef, u_train, y, u_test, y_test if has_test else None, setup["true_coef"], selected)
    metrics["objective_selection"] = objective_selection
    metrics["objective_candidates"] = objective_candidates
    wall_s = time.perf_counter() - t_start
    staleness = central.staleness_summary()
    workers = [{"rank": f["worker"] + 1, "n_features": f["n_features"], "budget": f["budget"], "steps": f["steps"],
                "refused": f["proposals"] - f["steps"], "compute_s": f["compute_s"],
                "finished_s": f["finished_s"]} for f in finals]
    extra = dict(
        n_workers=len(finals),
        staleness=staleness,
        max_staleness=config.max_staleness,
        refused_pushes=central.refused,
        pushes=central.accepted,
        pushes_per_s=central.accepted / async_s if async_s > 0 else None,
        transport=transport,
        **_push_settings(config, transport),
        steps=central.steps,
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
        budget_mode=config.resolved_budget_mode,
        slack=(config.slack or DEFAULT_SLACK) if config.resolved_budget_mode == "global" else None,
        threshold=theta["value"] if theta else None,
        threshold_age=theta["age"] if theta else None,
        n_dropped=int(sum(f["dropped"] for f in finals)),
        candidates=_candidates_record(candidates),
        n_candidates=candidates.size,
    )
    if trace is not None:
        extra["trace"] = trace.as_dict()
    timing = {"wall_s": wall_s, "setup_s": wall_s - async_s, "async_s": async_s}
    return build_record(config, problem, "mpi", selected, coef_sel, metrics, timing, **extra)


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
