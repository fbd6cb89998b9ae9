"""Speedup of Asy-OS across worker counts: measured with MPI here, projected to dedicated cores.

    python -m asyos.run --benchmark speedup [--quick] [--workers 1 2 4 8 12] [--repeats 3]
    python benchmarks/bench_speedup.py      (the same)

As in KDD'16 Sec. 5.3 (Fig. 3) speedup is the time to reach a fixed training error, relative to
sequential OS measured in the same invocation. For each task (regression n = 1000, p = 8192, s = 64;
classification s = 32) it

1. runs sequential OS and ``mpiexec -n q+1 python -m asyos.run`` for each q and each transport
   (``shared-memory``: the workers write ``u_C`` in memory shared on the node, the single-node
   default; ``messages``: pushes to the central rank, as across nodes) and each budget mode
   (``--budget-mode split``, KDD'16's s/q per worker, and ``global``), ``--repeats`` times,
   tracing the training error of the model at ``u_C`` every few worker steps;
2. sets the threshold to the loosest final training error among all those runs (times 1.05), so
   every run reaches it, unless ``--threshold`` is given;
3. reports per q the median time and worker steps to the threshold, recall, pushes/s, staleness,
   refused pushes, steps per push, the central rank's utilization, and the speedup against
   sequential OS and against q = 1 of the same transport; runs with more ranks than cores are
   marked oversubscribed;
4. projects the message protocol (the one that spans nodes) to q = 1..64 on dedicated cores with
   the discrete-event replay (``asyos.protocol.replay``), from costs calibrated here: the step time against the
   retained size (timed in this process), message latency and bandwidth (``pingpong`` under
   ``mpiexec -n 2``), and from a separate one-worker MPI run with another seed the central rank's
   service time and the worker loop's own cost per step (for the global budget, plus its own
   bookkeeping per push and per step, timed in this process: ``global_budget_costs``); and
   validates the projection against the
   q that runs un-oversubscribed here (q = 1 on 2 cores, messages): the prediction must be within
   25% of the measured median;
5. writes ``speedup.json`` and ``speedup.png`` (speedup vs q, measured and projected, with the ideal
   line; training error vs wall time per q, like the paper's Fig. 3).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np

from ..config import RunConfig
from ..data.synthetic import SyntheticSource
from ..protocol.loopback import run_loopback
from ..protocol.replay import Costs, SimulatedClock, replay, sequential_time
from ..protocol.central import Central
from ..protocol.threshold import GlobalThreshold
from ..protocol.plan import BUDGET_MODES, AsyOSPlan, keeps_threshold, worker_budgets
from ..learners.substitution.asy_os import build_workers
from ..learners.substitution.workers import SubstitutionOptions
from ..losses import get_loss
from ..trace import ObjectiveTrace, first_reaching
from .common import Run, mpiexec_path, parser, plot, print_table, run_asyos, usable_cores

TASKS = {
    "regression": {"synthetic": "regression", "n_samples": 1000, "n_features": 8192, "n_informative": 64,
                   "loss": "squared"},
    "classification": {"synthetic": "classification", "n_samples": 1000, "n_features": 8192,
                       "n_informative": 32, "loss": "squared_hinge"},
}
PROFILES = {
    "paper": {"tasks": ["regression", "classification"], "workers": [1, 2, 4, 8, 12], "repeats": 3,
              "passes": 2, "trace_every": 20, "projected": [1, 2, 4, 8, 12, 16, 32, 64], "shrink": None,
              "transports": ["shared-memory", "messages"], "budget_modes": ["split", "global"]},
    "quick": {"tasks": ["regression"], "workers": [1, 2], "repeats": 1, "passes": 1, "trace_every": 10,
              "projected": [1, 2, 4], "shrink": {"n_samples": 300, "n_features": 1024, "n_informative": 16},
              # one budget mode: the split mode takes the same path through the benchmark (4 mpiexec runs saved)
              "transports": ["shared-memory", "messages"], "budget_modes": ["global"]},
    # smoke (tests/test_benchmarks.py): the messages transport alone (the projection's path)
    "smoke": {"tasks": ["regression"], "workers": [1, 2], "repeats": 1, "passes": 1, "trace_every": 10,
              "projected": [1, 2], "shrink": {"n_samples": 200, "n_features": 512, "n_informative": 8},
              "transports": ["messages"], "budget_modes": ["global"]},
}
TRANSPORTS = ("shared-memory", "messages")
VALIDATION_TOLERANCE = 0.25
THRESHOLD_MARGIN = 1.05


def make_parser(prog=None):
    p = parser(__doc__.splitlines()[0], prog=prog)
    p.add_argument("--workers", type=int, nargs="+", help="worker counts to measure (default 1 2 4 8 12)")
    p.add_argument("--repeats", type=int, help="runs per worker count (default 3)")
    p.add_argument("--tasks", nargs="+", choices=sorted(TASKS), help="default: regression classification")
    p.add_argument("--threshold", type=float, help="training error to reach (default: the loosest final "
                                                   "training error of the measured runs x 1.05)")
    p.add_argument("--projected", type=int, nargs="+", help="worker counts to project (default up to 64)")
    p.add_argument("--transports", nargs="+", choices=TRANSPORTS,
                   help="MPI transports to measure (default both; the projection is validated on messages)")
    p.add_argument("--budget-modes", nargs="+", choices=BUDGET_MODES,
                   help="Asy-OS budget modes to measure (default split global)")
    return p


def main(argv=None, prog=None):
    args = make_parser(prog).parse_args(argv)
    profile = dict(PROFILES["smoke" if getattr(args, "smoke", False) else "quick" if args.quick else "paper"])
    for key in ("workers", "repeats", "tasks", "projected", "transports", "budget_modes"):
        if getattr(args, key):
            profile[key] = getattr(args, key)
    if args.seeds:
        profile["repeats"] = args.seeds
    if mpiexec_path() is None:
        raise SystemExit("the speedup benchmark needs mpiexec: pip install 'asyos[mpi]'")
    cores = usable_cores()
    run = Run("speedup", args, {**profile, "cores": cores})
    summary = {"cores": cores}
    messages = calibrate_messages(run, profile)
    for task in profile["tasks"]:
        summary[task] = bench_task(run, task, profile, args.threshold, cores, messages)
    path = run.finish(summary)
    draw(run, summary, profile)
    print(f"results: {path}")
    return 0


# ------------------------------------------------------------------------------ measurement
def task_settings(task, profile):
    settings = dict(TASKS[task])
    if profile["shrink"]:
        settings.update(profile["shrink"])
    return settings


def cli_args(settings, profile, seed=0):
    return ["--synthetic", settings["synthetic"], "--n-samples", settings["n_samples"], "--n-features",
            settings["n_features"], "--n-informative", settings["n_informative"], "--loss", settings["loss"],
            "--passes", profile["passes"], "--seed", seed, "--trace-every", profile["trace_every"]]


def bench_task(run, task, profile, threshold, cores, messages):
    settings = task_settings(task, profile)
    print(f"-- {task}: n = {settings['n_samples']}, p = {settings['n_features']}, s = {settings['n_informative']}, "
          f"{profile['passes']} passes, {cores} cores", flush=True)
    measured = []
    for repeat in range(profile["repeats"]):
        record, _ = run_asyos(cli_args(settings, profile))
        measured.append(run.unit(_unit(task, 0, repeat, record, cores)))
        for transport in profile["transports"]:
            for mode in profile["budget_modes"]:
                for q in profile["workers"]:
                    record, _ = run_asyos(cli_args(settings, profile) + ["--transport", transport,
                                                                         "--budget-mode", mode], ranks=q + 1)
                    measured.append(run.unit(_unit(task, q, repeat, record, cores)))
    if threshold is None:
        threshold = THRESHOLD_MARGIN * max(u["trace"]["train_error"][-1] for u in measured)
    for u in measured:
        hit = first_reaching(u["trace"], threshold)
        u["time_to_threshold_s"], u["steps_to_threshold"] = hit if hit else (None, None)
    sequential = [u for u in measured if u["q"] == 0]
    tables = {}
    for transport in profile["transports"]:
        for mode in profile["budget_modes"]:
            label = series(transport, mode)
            units = [u for u in measured if u.get("transport") == transport and u.get("budget_mode") == mode]
            tables[label] = summarise_measured(task, sequential + units, threshold, profile, cores, label)
    out = {"threshold": threshold, "measured": tables,
           "runs": [{k: v for k, v in u.items() if k != "trace"} for u in measured],
           "traces": {_trace_key(u): u["trace"] for u in measured}}
    if "messages" in profile["transports"]:      # the projection models the message protocol, which spans nodes
        costs = calibrate_costs(run, task, settings, profile, messages)
        out.update(costs=costs.as_dict(), projected={}, validation={})
        for mode in profile["budget_modes"]:
            label = series("messages", mode)
            projected = project(task, settings, profile, costs, threshold, mode)
            validation = validate(tables[label], projected)
            print_projection(task, label, projected, validation, costs)
            out["projected"][label], out["validation"][label] = projected, validation
    return out


def series(transport, budget_mode):
    """A measured series' name: the transport, with the budget mode when it is not KDD'16's split."""
    return transport if budget_mode == "split" else f"{transport}, global budget"


def _trace_key(unit):
    if unit["q"] == 0:
        return f"sequential repeat={unit['repeat']}"
    return f"{series(unit['transport'], unit['budget_mode'])} q={unit['q']} repeat={unit['repeat']}"


def _unit(task, q, repeat, record, cores):
    unit = {"task": task, "q": q, "repeat": repeat, "mode": record["mode"], "recall": record["metrics"].get("recall"),
            "final_train_error": record["trace"]["train_error"][-1], "trace": record["trace"],
            "run_s": record["timing"].get("async_s", record["timing"].get("fit_s"))}
    if record["mode"] == "mpi":
        unit.update(transport=record["transport"], budget_mode=record["budget_mode"], ranks=q + 1,
                    oversubscribed=q + 1 > cores,
                    pushes_per_s=record["pushes_per_s"],
                    staleness_mean=record["staleness"]["mean"], staleness_max=record["staleness"]["max"],
                    refused=record["refused_pushes"], steps_per_push=record["steps_per_push"],
                    central_utilization=record["central"]["utilization"],
                    central_service_us=record["central"]["service_us"])
    return unit


def median_of(units, key):
    values = [u[key] for u in units if u.get(key) is not None]
    return statistics.median(values) if values else None


def summarise_measured(task, units, threshold, profile, cores, series_label):
    seq = [u for u in units if u["q"] == 0]
    seq_time = median_of(seq, "time_to_threshold_s")
    rows, table = [], {}
    q1_time = median_of([u for u in units if u["q"] == 1], "time_to_threshold_s")
    for q in [0] + profile["workers"]:
        sel = [u for u in units if u["q"] == q]
        t = median_of(sel, "time_to_threshold_s")
        reached = sum(u["time_to_threshold_s"] is not None for u in sel)
        entry = {"time_to_threshold_s": t, "reached": f"{reached}/{len(sel)}",
                 "steps_to_threshold": median_of(sel, "steps_to_threshold"), "recall": median_of(sel, "recall"),
                 "speedup_vs_sequential": seq_time / t if t and seq_time else None,
                 "speedup_vs_q1": q1_time / t if t and q1_time and q else None}
        if q:
            entry.update({k: median_of(sel, k) for k in ("pushes_per_s", "staleness_mean", "refused",
                                                          "steps_per_push", "central_utilization")})
            entry["staleness_max"] = max(u["staleness_max"] for u in sel)
            entry["oversubscribed"] = q + 1 > cores
        table[q] = entry
        label = "sequential OS" if q == 0 else f"q={q}" + (" (oversubscribed)" if q + 1 > cores else "")
        rows.append([label, _f(t, 3), entry["reached"], _f(entry["steps_to_threshold"], 0), _f(entry["recall"], 3),
                     _f(entry["speedup_vs_sequential"], 2), _f(entry["speedup_vs_q1"], 2),
                     _f(entry.get("pushes_per_s"), 0), _f(entry.get("steps_per_push"), 1),
                     f"{_f(entry.get('staleness_mean'), 1)}/{entry.get('staleness_max', '-')}",
                     _f(entry.get("refused"), 0), _f(entry.get("central_utilization"), 2)])
    error_name = "RMSE" if task == "regression" else "misclassification rate"
    print_table(f"Measured on {cores} cores, {task}, {series_label}: time to training {error_name} <= "
                f"{threshold:.4g} "
                f"(median of {profile['repeats']})",
                ["run", "time s", "reached", "steps", "recall", "vs seq", "vs q=1", "pushes/s", "steps/push",
                 "staleness mean/max", "refused", "central util"], rows)
    return table


def _f(value, digits):
    if value is None:
        return "-"
    return f"{value:.{digits}f}"


# ------------------------------------------------------------------------------ calibration
def calibrate_messages(run, profile):
    """One-way times and worker-side costs from ``pingpong`` under ``mpiexec -n 2``."""
    n = max(task_settings(t, profile)["n_samples"] for t in profile["tasks"])
    out = subprocess.run([mpiexec_path(), "-n", "2", sys.executable, "-m", "asyos.benchmarking.pingpong", "1", str(n)],
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"pingpong failed: {out.stderr}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    t_small, t_n = result["one_way_s"]["1"], result["one_way_s"][str(n)]
    bandwidth = 8.0 * (n - 1) / max(t_n - t_small, 1e-9)
    messages = {"latency_s": t_small, "bandwidth_bytes_per_s": bandwidth, "post_s": result["post_s"],
                "test_s": result["test_s"]}
    run.unit({"part": "calibration", "what": "messages", **messages})
    return messages


def calibrate_costs(run, task, settings, profile, messages) -> Costs:
    """Step time vs retained size (timed here), protocol and message costs, central service time
    (a one-worker MPI run with another seed than the measured ones)."""
    source = SyntheticSource(settings["synthetic"], settings["n_features"], settings["n_informative"],
                             settings["n_samples"], seed=1)
    data = source.load(with_test=False)
    loss = get_loss(settings["loss"])
    levels, medians = step_times(data, loss, settings["n_informative"])
    slope, base = np.polyfit(levels, medians, 1) if levels.size > 1 else (0.0, float(medians[0]))
    n = data.n_samples
    view = np.zeros(n)
    t0 = time.perf_counter()
    for _ in range(2000):
        np.add(view, view, out=view)
    vector_op = (time.perf_counter() - t0) / 2000        # one pass over an n-vector
    push_send = messages["post_s"] + vector_op            # post the messages, zero the pending sum
    # one worker under MPI (seed 1, not a measured run): its wall time per step beyond the compute and
    # the sends is the pipelined loop's own cost (vector updates, Test, Python)
    record, _ = run_asyos(cli_args(settings, profile, seed=1) + ["--transport", "messages"], ranks=2)
    service = record["central"]["service_us"] * 1e-6
    wk = record["workers"][0]
    protocol = max(0.0, (record["timing"]["async_s"] - wk["compute_s"]) / wk["steps"]
                   - push_send / record["steps_per_push"])
    costs = Costs(step_base_s=float(max(base, 0.0)), step_per_retained_s=float(max(slope, 0.0)),
                  step_protocol_s=protocol, push_send_s=push_send,
                  latency_s=messages["latency_s"], bandwidth_bytes_per_s=messages["bandwidth_bytes_per_s"],
                  central_service_s=service)
    run.unit({"part": "calibration", "task": task, **costs.as_dict()})
    return costs


def step_times(data, loss, budget, timed_steps=400):
    """Median time of a worker step (propose, commit, the loopback's apply) at retained sizes
    1, 2, 4, ... up to ``budget``, each timed once the retained set is full (steady state)."""
    levels = sorted({b for b in (1, 2, 4, 8, 16, 32, 64, 128, budget) if b <= budget})
    medians = []
    for b in levels:
        times = timed_full_steps(data, loss, b, timed_steps)
        medians.append(float(np.median(times[len(times) // 4:])))     # the first quarter warms up
    return np.asarray(levels, dtype=float), np.asarray(medians)


def timed_full_steps(data, loss, budget, count, others_top=None):
    """Times of up to ``count`` steps (propose, commit, the loopback's apply) of one worker with
    ``budget`` retained features, each timed once the retained set is full; ``others_top``: the
    global budget's argument (the worker then thresholds against it at every step)."""
    cols = min(data.X.shape[1], budget + count + 50)
    workers, _ = build_workers(data.X[:, :cols], data.y, loss, AsyOSPlan.build(cols, budget, 1),
                               SubstitutionOptions(passes=3), 1)
    worker, central = workers[0], Central(data.n_samples)
    if others_top is not None:
        propose = worker.propose
        worker.propose = lambda u, version=0, _others=None: propose(u, version, others_top)
    times = []
    last = [time.perf_counter(), False]      # the previous step's mark, and whether it began full

    def on_step():                           # between a step's propose and its apply and commit
        now = time.perf_counter()
        if last[1]:
            times.append(now - last[0])      # apply + commit of the previous step, propose of this one
        last[:] = [now, worker.state.size == budget]
        return len(times) >= count

    run_loopback(worker, central, on_step)
    return times


def global_budget_costs(costs, data, loss, budget, q, cap, timed=2000) -> Costs:
    """``costs`` plus what the global budget adds, timed here: per push at the central rank,
    recording the worker's ``|w|`` and taking the others' top ``s`` (``GlobalThreshold``); per
    worker step, the worker's threshold and drop check (a worker at its cap proposing with and
    without the others' weights, on the same features: zeros leave its path unchanged)."""
    rng = np.random.default_rng(0)
    keeper = GlobalThreshold(budget, q, cap)
    for k in range(q):
        keeper.update(k, rng.standard_normal(cap))
    weights, others = rng.standard_normal(cap), np.empty(budget)
    t0 = time.perf_counter()
    for i in range(timed):
        keeper.update(i % q, weights)
        keeper.others_top(i % q, out=others)
    central_extra = (time.perf_counter() - t0) / timed
    plain, thresholded = (float(np.median(timed_full_steps(data, loss, cap, timed // 4, others)))
                          for others in (None, np.zeros(budget)))
    step_extra = max(0.0, thresholded - plain)
    return replace(costs, step_base_s=costs.step_base_s + step_extra,
                   central_service_s=costs.central_service_s + central_extra)


# ------------------------------------------------------------------------------ projection
def project(task, settings, profile, costs, threshold, budget_mode="split"):
    source = SyntheticSource(settings["synthetic"], settings["n_features"], settings["n_informative"],
                             settings["n_samples"], seed=0)
    data = source.load(with_test=False)
    loss = get_loss(settings["loss"])
    options = SubstitutionOptions(passes=profile["passes"])
    budget = settings["n_informative"]
    max_batch = RunConfig().max_batch            # the engine's default, as in the measured runs

    def traced(q, run):
        """``run(workers, central, clock)`` on q simulated workers, with the training error traced."""
        plan = AsyOSPlan.build(data.X.shape[1], budget, q, budget_mode=budget_mode, variant=options.variant)
        workers, _ = build_workers(data.X, data.y, loss, plan, options, 0)
        clock = SimulatedClock()
        trace = ObjectiveTrace(profile["trace_every"], loss, data.y, clock=clock)
        central = Central(data.n_samples, monitor=trace)
        trace.record(central)
        result = run(workers, central, clock)
        trace.record(central)
        trace = trace.as_dict()
        return result, trace, first_reaching(trace, threshold)

    total, _, seq = traced(1, lambda workers, central, clock: sequential_time(workers[0], central, costs, clock))
    seq_time = seq[0] if seq else None
    out = {0: {"time_to_threshold_s": seq_time, "run_s": total}}
    for q in profile["projected"]:
        if q > settings["n_features"] or q > budget:
            continue
        threshold_keeper, costs_q = None, costs
        if keeps_threshold(budget_mode, q):
            cap = worker_budgets(budget, q, budget_mode)[0]
            threshold_keeper = GlobalThreshold(budget, q, cap)
            costs_q = global_budget_costs(costs, data, loss, budget, q, cap)
        report, trace, hit = traced(q, lambda workers, central, clock: replay(
            workers, central, costs_q, clock, mode="pipelined", max_batch=max_batch, threshold=threshold_keeper))
        t = hit[0] if hit else None
        out[q] = {"time_to_threshold_s": t, "steps_to_threshold": hit[1] if hit else None, "run_s": report.time_s,
                  "speedup_vs_sequential": seq_time / t if t and seq_time else None,
                  "central_utilization": report.central_utilization,
                  "steps_per_push": report.steps / report.pushes if report.pushes else None,
                  "staleness_mean": report.staleness["mean"], "final_train_error": trace["train_error"][-1],
                  "central_service_us": 1e6 * costs_q.central_service_s, "step_base_us": 1e6 * costs_q.step_base_s}
    return out


def validate(measured, projected):
    """The projection against the q that runs with a core per rank here (q = 1 on 2 cores)."""
    checks = {}
    for q in (0, 1):
        m, p = measured.get(q, {}).get("time_to_threshold_s"), projected.get(q, {}).get("time_to_threshold_s")
        if m and p:
            checks["sequential" if q == 0 else f"q={q}"] = {"measured_s": m, "projected_s": p,
                                                            "relative_error": (p - m) / m}
    ok = "q=1" in checks and abs(checks["q=1"]["relative_error"]) <= VALIDATION_TOLERANCE
    return {"checks": checks, "within_tolerance": ok, "tolerance": VALIDATION_TOLERANCE}


def print_projection(task, label, projected, validation, costs):
    rows = []
    for q, entry in sorted(projected.items()):
        rows.append(["sequential OS" if q == 0 else f"q={q}", _f(entry["time_to_threshold_s"], 4),
                     _f(entry.get("speedup_vs_sequential"), 2), _f(entry.get("steps_per_push"), 1),
                     _f(entry.get("central_utilization"), 2), _f(entry.get("central_service_us"), 1),
                     _f(entry.get("step_base_us"), 1), _f(entry.get("staleness_mean"), 1),
                     _f(entry.get("final_train_error"), 3)])
    print_table(f"Projected on dedicated cores, {task}, {label} (discrete-event replay; step "
                f"{costs.step_base_s * 1e6:.1f} us"
                f" + {costs.step_per_retained_s * 1e6:.3f} us/retained feature, central "
                f"{costs.central_service_s * 1e6:.1f} us/push, latency {costs.latency_s * 1e6:.1f} us)",
                ["run", "time to threshold s", "speedup", "steps/push", "central util", "central us/push",
                 "step us", "staleness", "final error"],
                rows)
    for name, check in validation["checks"].items():
        print(f"validation {name}: measured {check['measured_s']:.4f} s, projected {check['projected_s']:.4f} s, "
              f"error {100 * check['relative_error']:+.1f}%")
    print(f"projection within {100 * VALIDATION_TOLERANCE:.0f}% of the measured q=1: "
          f"{'yes' if validation['within_tolerance'] else 'NO'}\n", flush=True)


# ------------------------------------------------------------------------------ plot
def draw(run, summary, profile):
    tasks = [t for t in profile["tasks"] if t in summary]

    def draw_fn(plt):
        fig, axes = plt.subplots(len(tasks), 2, figsize=(11, 4 * len(tasks)), squeeze=False)
        for row, task in zip(axes, tasks):
            res = summary[task]
            ax = row[0]
            tops = [1]
            for transport, table in res["measured"].items():
                qs = sorted(q for q in table if q)
                meas = [table[q]["speedup_vs_sequential"] for q in qs]
                over = [table[q]["oversubscribed"] for q in qs]
                ax.plot(qs, [m if m else np.nan for m in meas], "o-",
                        label=f"measured, {transport} ({summary['cores']} cores)")
                for q, m, o in zip(qs, meas, over):
                    if o and m:
                        ax.annotate("oversubscribed", (q, m), fontsize=7, textcoords="offset points", xytext=(3, 3))
                tops += qs
            for label, projected in res.get("projected", {}).items():
                pq = sorted(q for q in projected if q)
                ax.plot(pq, [projected[q].get("speedup_vs_sequential") or np.nan for q in pq], "s--",
                        label=f"projected, {label}, dedicated cores")
                tops += pq
            top = max(tops)
            ax.plot([1, top], [1, top], ":", color="gray", label="ideal (linear)")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log", base=2)
            ax.set_xlabel("workers q")
            ax.set_ylabel("speedup vs sequential OS (time to threshold)")
            ax.set_title(f"{task}: threshold {res['threshold']:.3g}")
            ax.legend(fontsize=8)
            ax = row[1]
            shown = series(profile["transports"][0], profile["budget_modes"][-1])   # one series stays readable
            for key, trace in res["traces"].items():
                if key.endswith("repeat=0") and (key.startswith("sequential") or key.startswith(shown)):
                    ax.plot(trace["time_s"], trace["train_error"], label=key[:-len(" repeat=0")])
            ax.axhline(res["threshold"], color="gray", ls=":", label="threshold")
            ax.set_xlabel("wall time s (asynchronous phase)")
            ax.set_ylabel("training error" + (" (RMSE)" if task == "regression" else " (misclassification)"))
            ax.set_yscale("log")
            ax.legend(fontsize=8)
    plot(os.path.join(run.args.output, "speedup.png"), draw_fn)


if __name__ == "__main__":
    sys.exit(main())
