"""One-process runs of the CLI: the sequential learners and the staleness simulator.

``run_local`` is the runner (``asyos.runs.runners``) of the substitution, baselines and stream families
when ``asyos.run`` is started without ``mpiexec``: it loads the data, builds the estimator from the
registry, fits it (optionally tuned, or wrapped in the simulator), evaluates it and reports. It is
library code so that the CLI module only parses and dispatches.
"""
from __future__ import annotations

import time
import warnings

import numpy as np

from ..errors import EXIT_OK, ConvergenceWarning, InputError
from ..metrics import evaluate
from ..records.model_file import save_run_model
from ..data.synthetic import generates_test_columns
from .problem import open_data_source, resolve_problem
from ..utils.progress import phase
from ..registry import get_algorithm
from ..utils.timing import command_timing
from .summary import build_record, format_summary, report_warnings
from ..records.results import prepare_run_output, write_results
from .report import draw_after_run
from ..records.resume import finished, fit_resumable, save_run_config


def run_local(config) -> int:
    """Run ``config.algorithm`` in this process (the substitution, baselines and stream families):
    fit, evaluate, print the summary, write the results; returns the exit status. With
    ``--simulate`` (or ``--algorithm asy-os``) Asy-OS or a sample-stream learner runs in the
    staleness simulator."""
    from .stream_run import run_stream, streams_rows
    if streams_rows(config):                    # a sample-stream learner learns from the file as it is read
        return run_stream(config)
    t0 = time.perf_counter()
    prepare_run_output(config)
    save_run_config(config)
    spec = get_algorithm(config.algorithm)
    simulated = config.simulate or config.algorithm == "asy-os"
    stream = spec.family == "stream"
    if simulated and not (stream or spec.family == "substitution"):
        raise InputError(f"--simulate runs Asy-OS or a sample-stream learner; algorithm {config.algorithm!r} "
                         f"has no simulated form")
    if config.budget_mode == "global" and not (simulated and not stream):
        raise InputError("--budget-mode global applies to Asy-OS: under mpiexec, or in the simulator (--simulate "
                         "or --algorithm asy-os)")
    if config.tune and not stream:
        raise InputError(f"--tune applies to the sample-stream learners; {config.algorithm!r} is not one")
    with phase(f"loading {config.data or 'the synthetic problem'}"):
        source = open_data_source(config)
        if simulated and not stream:
            spec = get_algorithm("asy-os")
        # OS and Asy-OS read a column-major file's columns on demand (memory O(n s), whatever p); others load it
        out_of_core = getattr(source, "columnar", False) and getattr(spec.estimator_class, "_reads_columns", False)
        generated_test = not out_of_core and generates_test_columns(source)     # made at the end (_test_point)
        data = source.lazy() if out_of_core else source.load(with_test=not generated_test)
        problem = resolve_problem(config, source, data.y)
    estimator = spec.build(config, problem.loss.name, problem.budget)
    t1 = time.perf_counter()
    extra = {}
    with warnings.catch_warnings(record=True) as caught, phase(f"fitting {config.algorithm}"):
        warnings.simplefilter("always", ConvergenceWarning)
        if config.tune:
            from ..learners.stream.tuning import grid_search
            estimator, table = grid_search(estimator, data.X, data.y)
            extra.update(tuned_params=estimator.tuned_params_, tuning=table)
            if not config.quiet:
                print(f"asyos: tuned {config.algorithm}: {estimator.tuned_params_}", flush=True)
        if simulated and stream:
            from ..learners.stream.stream_simulator import AsyncSampleStream
            estimator = AsyncSampleStream(estimator, n_workers=config.simulated_workers,
                                          max_staleness=config.max_staleness, policy=config.staleness_policy,
                                          schedule=config.schedule, random_state=config.seed)
        if simulated or not config.tune:            # grid_search leaves the best point fitted
            fit_resumable(estimator, data.X, data.y, config)
    t2 = time.perf_counter()
    notes = report_warnings(caught)

    coef = estimator.coef_
    support = estimator.support_
    intercept = float(getattr(estimator, "intercept_", 0.0))
    u_train = np.asarray(data.X[:, support] @ coef[support]).ravel() + intercept
    u_test, y_test = _test_point(data, source, generated_test, support, coef, intercept)
    metrics = evaluate(problem.loss, coef, u_train, data.y, u_test, y_test, data.true_coef, support)
    for name in ("objective_selection", "objective_candidates"):     # as the MPI record has them
        if hasattr(estimator, name + "_"):
            metrics[name] = float(getattr(estimator, name + "_"))
    extra["raw_coef"] = estimator.raw_coef_[support]
    extra["intercept"] = intercept
    if getattr(estimator, "trace_", None):
        extra["trace"] = estimator.trace_
    for name in ("step_size_", "lipschitz_", "n_steps_", "n_iter_", "n_samples_seen_", "n_updates_", "lam_",
                 "online_accuracy_", "threshold_", "n_dropped_", "slack_", "threshold_age_", "n_candidates_",
                 "raw_intercept_", "n_passes_", "finish_", "ridge_", "ridge_scores_"):
        if hasattr(estimator, name):
            extra[name.rstrip("_")] = getattr(estimator, name)
    if simulated:
        pushes = estimator.n_events_ if stream else estimator.n_pushes_
        extra.update(n_workers=estimator.n_workers, staleness=estimator.staleness_, refused_pushes=0,
                     pushes=pushes, pushes_per_s=pushes / (t2 - t1))
        transport = None if stream else estimator.transport
        if transport is None:
            tau = estimator.n_workers if estimator.max_staleness is None else estimator.max_staleness
            extra.update(max_staleness=tau, staleness_policy=config.staleness_policy, schedule=config.schedule)
        else:                     # the engine's protocol in simulated time
            extra.update(max_staleness=estimator.max_staleness, transport=transport,
                         push_mode=estimator.push_mode if transport == "messages" else None,
                         nodes=estimator.nodes, cores=estimator.cores, refused_pushes=estimator.refused_,
                         simulated_time_s=estimator.simulated_time_, push_staleness=estimator.push_staleness_,
                         pushes_per_s=pushes / estimator.simulated_time_ if estimator.simulated_time_ else None,
                         central_utilization=estimator.central_utilization_)
        if not stream:
            extra["budget_mode"] = estimator.budget_mode
    if spec.family == "substitution":
        extra["variant"] = estimator.variant
    timing = {"wall_s": time.perf_counter() - t0, "setup_s": t1 - t0,
              **command_timing(t0, load_s=t1 - t0, fit_s=t2 - t1)}
    record = build_record(config, problem, "simulated" if simulated else "sequential", support,
                          coef[support], metrics, timing, warnings=notes, **extra)
    if not config.quiet:
        print(format_summary(record), flush=True)
    save_run_model(config, record, estimator, data.X, source=source)
    if config.output:
        log = getattr(estimator, "selection_log_", None)
        rows = [tuple(r[k] for k in ("worker", "step", "pass", "feature", "event", "weight")) for r in log] \
            if log is not None else None
        path = write_results(config.output, record, rows)
        finished(config)
        if not config.quiet:
            print(f"  results: {path}", flush=True)
        draw_after_run(config)
    return EXIT_OK


def _test_point(data, source, generated, support, coef, intercept):
    """The model's ``u`` on the test split and the test labels (``None, None`` without a test split).
    A generated problem's test columns are generated here, for the selected features only: generating
    every one with the training columns cost as much as those (at p = 100000, 1.6 GB and 3-4 s of a
    22 s command) for a product with ``s`` of them."""
    if generated:
        return source.columns_T(support, "test").T @ coef[support] + intercept, source.labels("test")
    if not data.has_test:
        return None, None
    return np.asarray(data.X_test[:, support] @ coef[support]).ravel() + intercept, data.y_test
