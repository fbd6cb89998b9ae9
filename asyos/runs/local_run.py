"""One-process runs of the CLI: the sequential learners and the staleness simulator.

``LocalRun`` is the substitution, baselines and stream families' part of the run pipeline
(``asyos.runs.pipeline``) when ``asyos.run`` is started without ``mpiexec``: it loads the data, builds the
estimator from the registry, fits it (optionally tuned, or wrapped in the simulator), evaluates it and
builds the record. A sample-stream learner reading a file learns from it as it is read (``stream_run``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..metrics import evaluate
from ..data.synthetic import generates_test_columns
from .pipeline import Outcome, carry_out
from .problem import open_data_source, resolve_problem
from ..utils.progress import phase
from ..registry import get_algorithm
from ..utils.timing import command_timing
from .summary import build_record, format_summary
from ..records.model_file import save_run_model
from ..records.resume import fit_resumable


def run_local(config) -> int:
    """Run ``config.algorithm`` in this process (the substitution, baselines and stream families): fit,
    evaluate, print the summary, write the results; returns the exit status. With ``--simulate`` (or
    ``--algorithm asy-os``) Asy-OS or a sample-stream learner runs in the staleness simulator."""
    from .stream_run import StreamRun, streams_rows
    return carry_out(config, StreamRun() if streams_rows(config) else LocalRun())


@dataclass
class _Loaded:
    spec: object
    source: object
    data: object
    problem: object
    estimator: object
    generated_test: bool


class LocalRun:
    """The pipeline's family part for an estimator fitted in this process on data held in memory (or read
    column by column from a column store by OS and Asy-OS)."""

    @staticmethod
    def simulated(config) -> bool:
        return bool(config.simulate) or config.algorithm == "asy-os"

    def check(self, config) -> None:
        family = get_algorithm(config.algorithm).family
        stream = family == "stream"
        if config.budget_mode == "global" and not (self.simulated(config) and not stream):
            raise InputError("--budget-mode global applies to Asy-OS: under mpiexec, or in the simulator (--simulate "
                             "or --algorithm asy-os)")
        if config.tune and not stream:
            raise InputError(f"--tune applies to the sample-stream learners; {config.algorithm!r} is not one")

    def load(self, config) -> _Loaded:
        spec = get_algorithm(config.algorithm)
        with phase(f"loading {config.data or 'the synthetic problem'}"):
            source = open_data_source(config)
            if self.simulated(config) and spec.family != "stream":
                spec = get_algorithm("asy-os")
            # OS and Asy-OS read a column-major file's columns on demand (memory O(n s), whatever p); others load it
            out_of_core = getattr(source, "columnar", False) and getattr(spec.estimator_class, "_reads_columns", False)
            generated_test = not out_of_core and generates_test_columns(source)     # made at the end (_test_point)
            data = source.lazy() if out_of_core else source.load(with_test=not generated_test)
            problem = resolve_problem(config, source, data.y)
        if spec.family == "substitution" and self.simulated(config):      # the command line refuses, as for --budget
            from ..learners.protocol.plan import check_worker_count
            check_worker_count(config.simulated_workers, problem.n_features, problem.budget,
                               config.resolved_budget_mode)
        estimator = spec.build(config, problem.loss.name, problem.budget)
        return _Loaded(spec, source, data, problem, estimator, generated_test)

    def fit(self, config, loaded):
        """The fitted estimator, and the tuning's extras (``--tune``)."""
        estimator, X, y, extra = loaded.estimator, loaded.data.X, loaded.data.y, {}
        stream = loaded.spec.family == "stream"
        with phase(f"fitting {config.algorithm}"):
            if config.tune:
                from ..learners.stream.tuning import grid_search
                estimator, table = grid_search(estimator, X, y)
                extra.update(tuned_params=estimator.tuned_params_, tuning=table)
                if not config.quiet:
                    print(f"asyos: tuned {config.algorithm}: {estimator.tuned_params_}", flush=True)
            if self.simulated(config) and stream:
                from ..learners.stream.stream_simulator import AsyncSampleStream
                estimator = AsyncSampleStream(estimator, n_workers=config.simulated_workers,
                                              max_staleness=config.max_staleness, policy=config.staleness_policy,
                                              schedule=config.schedule, random_state=config.seed)
            if self.simulated(config) or not config.tune:        # grid_search leaves the best point fitted
                fit_resumable(estimator, X, y, config)
        return estimator, extra

    def report(self, config, loaded, fitted, clock, notes) -> Outcome:
        estimator, extra = fitted
        data, problem = loaded.data, loaded.problem
        coef, support = estimator.coef_, estimator.support_
        intercept = float(getattr(estimator, "intercept_", 0.0))
        u_train = np.asarray(data.X[:, support] @ coef[support]).ravel() + intercept
        u_test, y_test = _test_point(data, loaded.source, loaded.generated_test, support, coef, intercept)
        metrics = evaluate(problem.loss, coef, u_train, data.y, u_test, y_test, data.true_coef, support)
        for name in ("objective_selection", "objective_candidates"):     # as the MPI record has them
            if hasattr(estimator, name + "_"):
                metrics[name] = float(getattr(estimator, name + "_"))
        extra.update(raw_coef=estimator.raw_coef_[support], intercept=intercept)
        if getattr(estimator, "trace_", None):
            extra["trace"] = estimator.trace_
        extra.update(estimator._run_report())
        simulated = self.simulated(config)
        if simulated:
            extra.update(_simulation(config, estimator, loaded.spec.family == "stream", clock.fit_s))
        if loaded.spec.family == "substitution":
            extra["variant"] = estimator.variant
        timing = {"wall_s": time.perf_counter() - clock.started, "setup_s": clock.load_s,
                  **command_timing(clock.started, load_s=clock.load_s, fit_s=clock.fit_s)}
        record = build_record(config, problem, "simulated" if simulated else "sequential", support,
                              coef[support], metrics, timing, warnings=notes, **extra)
        log = getattr(estimator, "selection_log_", None)
        rows = [tuple(r[k] for k in ("worker", "step", "pass", "feature", "event", "weight")) for r in log] \
            if log is not None else None
        return Outcome(record, format_summary(record), selection_rows=rows,
                       save_model=lambda: save_run_model(config, record, estimator, data.X, source=loaded.source))


def _simulation(config, estimator, stream, fit_s) -> dict:
    """The simulator's figures: workers, staleness, pushes (and the engine's protocol in simulated time)."""
    pushes = estimator.n_events_ if stream else estimator.n_pushes_
    extra = dict(n_workers=estimator.n_workers, staleness=estimator.staleness_, refused_pushes=0,
                 pushes=pushes, pushes_per_s=pushes / fit_s)
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
    return extra


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
