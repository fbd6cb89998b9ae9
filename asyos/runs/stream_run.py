"""Sample-stream learners that learn from a file as it is read (``python -m asyos.run``).

``run_local`` hands a run here (``streams_rows``) when the algorithm is of the ``stream`` family, there
is no ``--tune`` and no ``--simulate``, and ``--data`` is libsvm text (a path, a ``.gz`` path, or
``-`` for standard input) or a ``.parquet`` file; ``.npz`` files and directories keep the in-memory
path of ``run_local``. The rows are read in chunks of ``--chunk-rows`` rows and each chunk goes to the
learner's ``partial_fit``, so at most one block of the file (``asyos.data.libsvm.BLOCK_BYTES`` of
text and its arrays) and one chunk are held, never the data set.

**Order and passes.** ``fit`` on an in-memory array makes each pass in a fresh random order and
takes the ``maxabs`` scale over all of ``X`` first; a file stream reads the rows in file order and
its scale is the running one of ``partial_fit`` (raised by each chunk before learning from it). The
number of passes is the learner's (``--passes``; ``auto`` is ``ceil(2 p / n)`` with ``n`` from the
scan of the file), each pass re-reading the file. Standard input is read once: ``auto`` means one
pass there, and more passes are refused.

**Checkpoints** (``--output DIR``, ``asyos.records.resume``): the estimator and the position (pass, rows
done in it) are saved before a chunk every ``--checkpoint-every`` seconds and on SIGTERM/SIGINT;
``--resume DIR`` reads the file again from that row (``iter_rows(start, ...)``: the same chunks,
since the position is a whole number of chunks) and continues the same ``partial_fit`` calls, so
the model is the uninterrupted run's bit for bit. Standard input is read once: it is never
checkpointed and ``--resume`` of such a run is refused. ``--tune`` (``run_local``'s grid search)
saves nothing.

**Metrics.** The record has ``run_local``'s fields. For a file, the training metrics are those of
the final model, computed by ``asyos.metrics.evaluate`` from its predictions in one more streaming
pass (the predictions and labels, 16 bytes a row, are kept; the rows are not). Standard input
cannot be read again: there the training metrics are *progressive*, from each chunk's predictions
by the model just before it learned that chunk (``train_metrics`` in the record says which). The
test split (``--test-data``, or the file's own) is streamed the same way with the final model.

Measured by ``benchmarks/bench_ingest.py`` (10^6 rows x 10^6 features, 100 values a row, 1.44 GB of
text; 2 shared cores): ``--algorithm b-arda --budget 100 --passes 1`` takes 28.4 s with a peak RSS of
450 MB (scan 3.8 s, learning pass 18.6 s, metrics pass 4.6 s), where loading the file with
scikit-learn's ``load_svmlight_file`` and one SGD epoch takes 31.9 s and 2.1 GB.
"""
from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import time

import numpy as np

from ..errors import InputError
from ..learners.trace import StreamTrace

CHECKPOINT_KIND = "stream-file"


def streams_rows(config) -> bool:
    """True when ``run_local`` should stream ``config``'s data into a sample-stream learner."""
    from ..registry import get_algorithm
    if config.data is None or config.tune or config.simulate or get_algorithm(config.algorithm).family != "stream":
        return False
    data = str(config.data)
    return data == "-" or data.endswith(".parquet") or not (data.endswith(".npz") or os.path.isdir(data))


def open_rows(config):
    """The row source of ``config.data`` (a ``.parquet`` file as a row stream)."""
    from .problem import label_column, open_data_source
    if str(config.data).endswith(".parquet"):
        from ..data.io import open_source
        return open_source(config.data, config.test_data, n_features=config.n_features, rows=True,
                           label=label_column(config))
    return open_data_source(config)


def _predict(X, coef, intercept):
    return np.asarray(X @ coef).ravel() + intercept


def run_stream(config) -> int:
    """Learn from ``config.data`` chunk by chunk (module docstring); report as ``run_local`` does."""
    from .pipeline import carry_out
    return carry_out(config, StreamRun())


@dataclasses.dataclass
class _Opened:
    source: object
    problem: object
    estimator: object
    passes: int
    chunk_rows: int
    stream: object            # standard input's chunks (read once), else None


class StreamRun:
    """The pipeline's family part for a sample-stream learner that learns from a file as it is read."""

    def check(self, config) -> None:
        if config.data == "-" and config.resume:
            raise InputError("standard input is read once: a run reading it cannot be resumed")

    def load(self, config) -> _Opened:
        from .problem import resolve_problem
        from ..registry import get_algorithm
        source = open_rows(config)
        chunk_rows = max(1, int(config.chunk_rows))
        stream = None
        if getattr(source, "path", None) == "-":
            stream = source.iter_rows(0, None, chunk_rows)
            first = next(stream, None)
            if first is None:
                raise InputError("<stdin>: no samples found")
            problem = resolve_problem(config, source, first[1])
            stream = itertools.chain([first], stream)
        else:
            problem = resolve_problem(config, source, source.labels("train"))
        estimator = get_algorithm(config.algorithm).build(config, problem.loss.name, problem.budget)
        if stream is not None:
            if estimator.passes not in ("auto", 1):
                raise InputError(f"standard input is read once: --passes {estimator.passes} needs a file")
            passes = 1
        else:
            passes = estimator._n_passes(problem.n_samples, problem.n_features)
        return _Opened(source, problem, estimator, passes, chunk_rows, stream)

    def fit(self, config, opened):
        """The passes over the file, chunk by chunk, checkpointed: ``(estimator, where, trace, u_parts,
        y_parts)`` (standard input's progressive predictions and labels in the parts)."""
        from ..utils.progress import Progress
        from ..records.resume import checkpointer_for
        problem, passes, stdin = opened.problem, opened.passes, opened.stream is not None
        estimator = opened.estimator
        classes = [-1.0, 1.0] if problem.loss.task == "classification" else None
        progress = Progress(config.algorithm, None if stdin else problem.n_samples * passes, "rows")
        u_parts, y_parts = [], []
        checkpoint = checkpointer_for(config)          # None for standard input (read once: nothing to resume)
        first, skip = 0, 0
        saved = checkpoint.take(CHECKPOINT_KIND) if checkpoint is not None else None
        if saved is not None:
            estimator, first, skip = saved["estimator"], saved["pass"], saved["rows"]
            progress.phase(progress.what, progress.total, progress.unit, first * problem.n_samples + skip)
        where = {"pass": first, "rows": skip}
        trace = StreamTrace() if config.output else None    # run.png's curves (asyos.learners.trace): reads only

        def capture():
            return {"estimator": estimator, **where}

        def report():
            return {"pass": f"{where['pass'] + 1} of {passes}", "rows": where["rows"]}

        with checkpoint.watching() if checkpoint is not None else contextlib.nullcontext():
            for k in range(first, passes):
                start = skip if k == first else 0           # resumed: the pass continues at its saved row
                where["pass"], where["rows"] = k, start
                chunks = opened.stream if stdin else opened.source.iter_rows(start, problem.n_samples,
                                                                             opened.chunk_rows)
                for X, y in chunks:
                    if checkpoint is not None:
                        checkpoint.poll(CHECKPOINT_KIND, capture, report)
                    if stdin:
                        problem.loss.check_labels(y, where="the labels of <stdin>")
                        fitted = hasattr(estimator, "_state")
                        u_parts.append(_predict(X, estimator.coef_, _intercept(estimator)) if fitted
                                       else np.zeros(y.size))
                        y_parts.append(y)
                    estimator.partial_fit(X, y, classes=classes)
                    where["rows"] += y.size
                    progress.advance(y.size, **{"pass": f"{k + 1} of {passes}"})
                    if trace is not None:
                        trace.after_chunk(estimator, k)
        return estimator, where, trace, u_parts, y_parts

    def report(self, config, opened, fitted, clock, notes):
        from ..metrics import evaluate
        from .pipeline import Outcome
        from .summary import build_record, format_summary
        from ..utils.timing import command_timing
        estimator, where, trace, u_parts, y_parts = fitted
        source, problem, passes, chunk_rows = opened.source, opened.problem, opened.passes, opened.chunk_rows
        stdin = opened.stream is not None
        coef, support, intercept = estimator.coef_, estimator.support_, _intercept(estimator)
        if stdin:
            problem = dataclasses.replace(problem, n_samples=int(sum(y.size for y in y_parts)))
        else:
            for X, y in source.iter_rows(0, problem.n_samples, chunk_rows):
                u_parts.append(_predict(X, coef, intercept))
                y_parts.append(y)
        u_train, y_train = np.concatenate(u_parts), np.concatenate(y_parts)
        u_test = y_test = None
        test = [(_predict(X, coef, intercept), y) for X, y in _test_rows(source, chunk_rows)]
        if test:
            u_test, y_test = np.concatenate([u for u, _ in test]), np.concatenate([y for _, y in test])
        evaluated = time.perf_counter()
        metrics = evaluate(problem.loss, coef, u_train, y_train, u_test, y_test, source.true_coef(), support)
        extra = {"raw_coef": estimator.raw_coef_[support], "intercept": intercept, "n_passes": passes,
                 "chunk_rows": chunk_rows, "train_metrics": "progressive" if stdin else "final model",
                 "samples_per_s": problem.n_samples * passes / max(clock.fit_s, 1e-9)}
        if trace is not None:
            extra["trace"] = trace.finish(estimator, where["pass"])
        extra.update(estimator._run_report())
        timing = {"wall_s": time.perf_counter() - clock.started, "setup_s": clock.load_s,
                  **command_timing(clock.started, load_s=clock.load_s, fit_s=clock.fit_s,
                                   evaluate_s=evaluated - clock.fitted)}
        record = build_record(config, problem, "streamed", support, coef[support], metrics, timing, warnings=notes,
                              **extra)
        summary = (format_summary(record) + f"\n  streamed {problem.n_samples} rows x {passes} pass(es) in chunks of "
                   f"{chunk_rows}: {extra['samples_per_s']:.0f} samples/s")
        log = trace.log() if trace is not None else None
        from ..records.model_file import save_run_model
        return Outcome(record, summary, selection_rows=[tuple(r.values()) for r in log] if log else None,
                       save_model=lambda: save_run_model(config, record, estimator, source=source))


def _intercept(estimator):
    return float(getattr(estimator, "intercept_", 0.0))


def _test_rows(source, chunk_rows):
    """The test split in chunks: streamed when the source can, else loaded (``load_test``)."""
    if hasattr(source, "iter_test_rows"):
        yield from source.iter_test_rows(chunk_rows)
        return
    test = source.load_test()
    if test is not None:
        yield test
