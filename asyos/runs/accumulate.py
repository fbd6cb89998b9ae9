"""Running averages from files: streamed in one process, or accumulated across MPI ranks.

``python -m asyos.run --algorithm ofsa --data FILE --budget K`` streams the file in row chunks into
a ``RunningAverages`` (at most one chunk held; progress lines on stderr, ``asyos.utils.progress``) and
extracts the model. Under ``mpiexec -n N`` every rank reads only its own contiguous block of rows
(``rows_of_rank``), then the statistics are combined with two collectives:

1. an ``Iallreduce`` of ``(W, W mu_x, W mu_y)`` gives every rank the global means;
2. every rank moves its shifted sums to that common shift (``RunningAverages.shifted_to``, exact) and
   an ``Ireduce(SUM)`` adds them on rank 0, which extracts and reports the model.

Waits are non-blocking requests polled with back-off (a rank blocked in an MPICH call spins a
core). A rank that fails aborts the job with its message (``asyos.run``); one that dies is ended by
the launcher. In one process, ``--output DIR`` saves the statistics and the rows read to
``DIR/checkpoint.pkl`` every ``--checkpoint-every`` seconds and on SIGTERM/SIGINT, and ``--resume
DIR`` reads on from there (``accumulate``); under ``mpiexec`` nothing is saved (``asyos.run`` does
not turn the stop signals into requests there) and ``--resume`` is refused. Forgetting (eq. 3.11)
weighs samples by their order, which ranks reading in parallel do not have, so it is refused under MPI.
"""
from __future__ import annotations

import contextlib
import os
import time

import numpy as np

from ..errors import InputError
from ..learners.averages.stats import (EXTRACT_MATRICES, GRAM_MATRICES, REDUCE_MATRICES, RunningAverages,
                                       check_gram_memory)

CHECKPOINT_KIND = "running-averages"


def rows_of_rank(n_rows: int, size: int, rank: int) -> tuple[int, int]:
    """The contiguous block ``[start, stop)`` of ``n_rows`` read by ``rank`` of ``size`` (sizes differ by at most 1)."""
    base, extra = divmod(int(n_rows), int(size))
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def iter_source_rows(source, start, stop, chunk_rows):
    """Row chunks of any data source (files stream; a synthetic problem is materialised, it is small)."""
    if hasattr(source, "iter_rows"):
        yield from source.iter_rows(start, stop, chunk_rows)
        return
    data = source.load(with_test=False)
    for lo in range(start, stop, chunk_rows):
        hi = min(stop, lo + chunk_rows)
        yield data.X[lo:hi], data.y[lo:hi]


def test_split(source):
    """``(X_test, y_test)`` of a source, or ``None``."""
    if hasattr(source, "load_test"):
        return source.load_test()
    data = source.load()
    return (data.X_test, data.y_test) if data.has_test else None


def accumulate(source, n_features, start, stop, chunk_rows=4096, forgetting=None, forget_by="sample",
               check_labels=None, progress=None, checkpoint=None) -> RunningAverages:
    """Running averages of the rows ``start:stop`` of ``source``, read in chunks.

    ``checkpoint`` (an ``asyos.records.checkpoint.Checkpointer``) saves the statistics and the rows done
    before a chunk (and once after the last, so a stop during the extraction keeps them all) and,
    holding a saved state, reads on from that row: the chunks are the same (the position is a
    whole number of chunks from ``start``), so the statistics are the uninterrupted run's bit for bit."""
    saved = checkpoint.take(CHECKPOINT_KIND) if checkpoint is not None else None
    stats, done = (RunningAverages(n_features, forgetting, forget_by), 0) if saved is None else \
        (saved["stats"], saved["rows"])
    if progress is not None:
        progress.phase(progress.what, progress.total, progress.unit, done)

    def poll():
        if checkpoint is not None:
            checkpoint.poll(CHECKPOINT_KIND, lambda: {"stats": stats, "rows": done},
                            lambda: {"rows": f"{done} of {stop - start}"})

    with checkpoint.watching() if checkpoint is not None else contextlib.nullcontext():
        for X, y in iter_source_rows(source, start + done, stop, chunk_rows):
            poll()
            if check_labels is not None:
                check_labels(y)
            stats.update(X, y)
            done += X.shape[0]
            if progress is not None:
                progress.advance(X.shape[0])
        poll()
    return stats


def reduce_to_root(comm, stats: RunningAverages, backoff, root=0):
    """The merged statistics of every rank on ``root`` (``None`` elsewhere); exact (see module doc)."""
    from mpi4py import MPI

    from ..distributed.transport import wait_all
    p = stats.n_features
    local = np.zeros(p + 3)
    if stats.n_seen:
        local[0] = stats.weight
        local[1:p + 1] = stats.weight * stats.mean_x
        local[p + 1] = stats.weight * stats.mean_y
    local[p + 2] = stats.n_seen
    total = np.empty_like(local)
    wait_all([comm.Iallreduce(local, total, op=MPI.SUM)], backoff, float("inf"))
    if total[p + 2] == 0:
        raise InputError("no samples were read on any rank")
    shift_x, shift_y = total[1:p + 1] / total[0], total[p + 1] / total[0]
    moved = stats.shifted_to(shift_x, shift_y) if stats.n_seen else RunningAverages(p)
    vector, matrix = moved.to_buffers()
    rank = comm.Get_rank()
    vec_out = np.empty_like(vector) if rank == root else None
    mat_out = np.empty_like(matrix) if rank == root else None
    wait_all([comm.Ireduce(vector, vec_out, op=MPI.SUM, root=root),
              comm.Ireduce(matrix, mat_out, op=MPI.SUM, root=root)], backoff, float("inf"))
    if rank != root:
        return None
    return RunningAverages.from_buffers(vec_out, mat_out, shift_x, shift_y)


def ranks_on_node(size: int) -> int:
    """The ranks of this job on this node, from the launcher's environment (Open MPI, MPICH's Hydra,
    PMI); ``size`` (all of them) when it does not say."""
    for name in ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return min(int(value), size)
    return size


def matrices_on_node(size: int) -> int:
    """The p x p matrices one node holds at the peak (``stats``): one process accumulates and extracts;
    under MPI every rank on the node also moves and reduces its averages, and the root extracts."""
    if size == 1:
        return GRAM_MATRICES
    return REDUCE_MATRICES * ranks_on_node(size) + 1 + EXTRACT_MATRICES


def run_running_averages(config, comm=None) -> int:
    """The CLI for the running-averages learners (one process, or every rank of ``comm``): every rank
    sets up and reads its rows; rank 0 extracts the model and ends through the run pipeline's ``publish``."""
    from .pipeline import Clock, publish
    rank, size = (comm.Get_rank(), comm.Get_size()) if comm is not None else (0, 1)
    clock = Clock(time.perf_counter())
    source, problem, estimator = _set_up(config, comm, rank, size)
    stats, reduced_at = _read_rows(config, comm, rank, size, source, problem, estimator, clock)
    if rank != 0:
        return 0
    return publish(config, _extract(config, source, problem, estimator, stats, size, clock, reduced_at))


def _set_up(config, comm, rank, size):
    """The source, problem and (rank 0) estimator; an input error of any rank is every rank's."""
    from .problem import open_data_source, resolve_problem
    from ..registry import get_algorithm
    from ..records.results import prepare_run_output
    from ..records.resume import save_run_config
    error, setup = None, None
    try:
        if config.tune:         # --simulate, a parallel option, is refused for this family by the options' check
            raise InputError(f"{config.algorithm} accumulates running averages: --tune does not apply (its statistics "
                             f"are the same in any order and on any number of ranks, and it has no step to tune)")
        if rank == 0:
            prepare_run_output(config)
            if comm is None:
                save_run_config(config)
            elif config.resume:
                raise InputError("--resume continues a run in one process; under mpiexec the running averages "
                                 "are not checkpointed")
        source = open_data_source(config)
        if getattr(source, "n_features", None):          # before any row is read
            check_gram_memory(source.n_features, matrices_on_node(size), config.algorithm)
        problem = resolve_problem(config, source, source.labels("train"))
        # the estimator (its parameters checked) on rank 0 alone, which extracts the model: the other ranks
        # only add rows, without forgetting (refused under MPI), and skip the estimator classes' import of
        # scikit-learn (2.3-2.8 s of CPU a rank here: 30 s for 12 ranks on 2 cores)
        spec = get_algorithm(config.algorithm)
        estimator = spec.build(config, problem.loss.name, problem.budget) if rank == 0 else None
        if estimator is not None:
            estimator._check_params()
            if size > 1 and estimator.forgetting is not None:
                raise InputError("forgetting weighs samples by their order; ranks reading in parallel have none: "
                                 "run it in one process")
        setup = (source, problem, estimator)
    except InputError as exc:
        error = str(exc)
    if comm is not None:
        from ..distributed.transport import agree_after_setup
        agree_after_setup(comm, error, timeout=config.setup_timeout)
    elif error:
        raise InputError(error)
    return setup


def _read_rows(config, comm, rank, size, source, problem, estimator, clock):
    """This rank's rows accumulated (checkpointed in one process), then reduced to rank 0 under MPI;
    ``clock.loaded`` is when the rows were read, the second value when they were reduced."""
    from ..records.resume import checkpointer_for
    from ..utils.progress import Progress
    start, stop = rows_of_rank(problem.n_samples, size, rank)
    what = f"{config.algorithm}, rank 0 of {size}" if size > 1 else config.algorithm
    progress = Progress(f"{what}: read", stop - start, "rows")       # rank 0 only (asyos.utils.logs)
    check = (lambda y_: problem.loss.check_labels(y_)) if problem.loss.task == "classification" else None
    checkpoint = checkpointer_for(config) if comm is None else None     # one process (module docstring)
    forgetting, forget_by = (estimator.forgetting, estimator.forget_by) if estimator is not None else (None, "sample")
    stats = accumulate(source, problem.n_features, start, stop, config.chunk_rows, forgetting, forget_by, check,
                       progress, checkpoint)
    clock.loaded = time.perf_counter()
    if comm is not None:
        from ..distributed.transport import Backoff
        stats = reduce_to_root(comm, stats, Backoff(min_sleep=1e-4, max_sleep=5e-3))
    return stats, time.perf_counter()


def _extract(config, source, problem, estimator, stats, size, clock, reduced_at):
    """Rank 0: the model extracted from the statistics, its metrics and record (``pipeline.Outcome``)."""
    import warnings
    from ..errors import ConvergenceWarning
    from .pipeline import Outcome
    from .summary import build_record, format_summary, report_warnings
    from ..utils.timing import command_timing
    from ..records.model_file import save_run_model
    t0, t1, t2 = clock.started, clock.loaded, reduced_at
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        estimator.fit_stats(stats)
        model = estimator.model_
    t3 = time.perf_counter()
    notes = report_warnings(caught)
    std = stats.standardize()
    metrics = {"n_selected": int(model.support.size), "objective": std.objective(model.std_coef)}
    if problem.loss.task == "regression":
        metrics["train_error"] = float(np.sqrt(max(2.0 * metrics["objective"], 0.0)))
    test = test_split(source)
    if test is not None:
        from ..learners.base import decision_values
        metrics["test_error"] = problem.loss.error(np.asarray(test[1], dtype=float),
                                                   decision_values(estimator, test[0]))
    true_coef = source.true_coef()
    if true_coef is not None:
        from ..metrics import recall
        metrics["recall"] = recall(model.support, np.flatnonzero(true_coef))
    timing = {"wall_s": time.perf_counter() - t0, "fit_s": t3 - t0,
              **command_timing(t0, accumulate_s=t1 - t0, reduce_s=t2 - t1, extract_s=t3 - t2)}
    extra = {"intercept": model.intercept, "n_samples_seen": stats.n_seen, "ranks": size,
             "rows_per_rank": [list(rows_of_rank(problem.n_samples, size, r)) for r in range(size)],
             "samples_per_s": stats.n_seen / max(t1 - t0, 1e-9), "lam": model.lam, "n_iter": model.n_iter}
    record = build_record(config, problem, "mpi-reduce" if size > 1 else "streamed", model.support,
                          model.coef[model.support], metrics, timing, warnings=notes, **extra)
    summary = (format_summary(record) + f"\n  running averages of {stats.n_seen} samples on {size} rank(s): "
               f"accumulate {t1 - t0:.2f} s, reduce {t2 - t1:.3f} s, extract {t3 - t2:.3f} s")

    def files(output):
        stats.save(f"{output}/running_averages.npz")
        return []

    return Outcome(record, summary, files=files,
                   save_model=lambda: save_run_model(config, record, estimator, scaling=_scaling(std, model),
                                                     source=source))


def _scaling(std, model) -> dict:
    """The model file's ``scaling`` (``asyos.records.model_file``): the selected features standardized by the
    running means and spreads, ``z = (x - mean) / sigma``, and the selection's weights on ``z``."""
    support = np.asarray(model.support, dtype=np.intp)
    sigma = std.scale[support]
    return {"kind": "standard", "offsets": std.mean_x[support].copy(),
            "scales": np.divide(1.0, sigma, out=np.zeros(support.size), where=sigma > 0),
            "raw_coef": np.asarray(model.selection_coef, dtype=float)[support]}
