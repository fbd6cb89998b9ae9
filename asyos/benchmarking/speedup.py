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
   sequential OS and against q = 1 of the same transport; runs with more busy ranks than cores
   are marked oversubscribed (``busy_ranks``: a shared-memory central rank sleeps between looks);
4. projects both transports to q = 1..64 on dedicated cores with the discrete-event replay
   (``asyos.learners.protocol.replay``), which runs the real workers as the engine does (sequential OS and
   the shared-memory workers in compiled batches of visits, ``SHARED_BATCH`` between two reads of
   ``u_C``; the messages workers a step at a time), from costs calibrated here on another instance of
   the problem (seed 1): a compiled visit against the retained size and a compiled call's own cost
   (``visit_costs``), a Python step against the retained size (``step_times``), message latency and
   bandwidth (``pingpong`` under ``mpiexec -n 2``), from one-worker MPI runs the central rank's
   service time and the loops' own costs (``calibrate_compiled``; for the global budget, its
   bookkeeping per push and per step: ``global_budget_costs``); and validates each projection
   against every run measured here with a core per busy rank (sequential OS, q = 1, and q = 2 under
   shared memory, whose central rank sleeps): each must be within 20% of the measured median;
5. (``large``) the projection that matters for a cluster: KDD'16's regression problem at p = 100000
   (s = 100, the engine's defaults), validated on that very problem against sequential OS,
   ``mpiexec -n 2`` and ``-n 3`` measured here, then projected to q = 8, 16, 64 under shared memory
   (one node of q cores), messages (q nodes) and node-aggregated (16 nodes x 4): time to the
   training error every run reaches, speedup against sequential OS, recall. The model's
   assumptions: a core per rank, every worker on the compiled step (``compiled_kernels``), costs
   as calibrated on this machine (memory bandwidth per core
   included: a visit streams a column and ``X_S`` from memory), messages between nodes at the
   latency and bandwidth of this machine's shared-memory MPI (a real network is slower: the
   messages and node-aggregated rows are then upper bounds);
6. writes ``speedup.json`` and ``speedup.png`` (speedup vs q, measured and projected, with the ideal
   line; training error vs wall time per q, like the paper's Fig. 3).
"""
from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np

from ..runs.config import RunConfig
from ..data.synthetic import SyntheticSource, default_n_samples
from ..learners.protocol.loopback import BATCH_VISITS, run_loopback
from ..distributed.mpi_shared import SHARED_BATCH
from ..learners.protocol.replay import DEFAULT_JITTER, Costs, Machine, SimulatedClock, replay, sequential_time
from ..learners.protocol.central import Central
from ..learners.protocol.threshold import GlobalThreshold
from ..data.sharding import default_sharding
from ..learners.protocol.plan import BUDGET_MODES, AsyOSPlan, keeps_threshold, worker_budgets
from ..learners.substitution.asy_os import build_workers, gather_selection
from ..learners.substitution.workers import SubstitutionOptions
from ..losses import get_loss
from ..learners.trace import ObjectiveTrace, first_reaching
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
              "transports": ["shared-memory", "messages"], "budget_modes": ["split", "global"],
              "large": {"n_features": 100000, "workers": [8, 16, 64], "nodes": 16, "per_node": 4, "measured": [1, 2],
                        "trace_every": 200, "seeds": 3, "repeats": 3}},
    "quick": {"tasks": ["regression"], "workers": [1, 2], "repeats": 1, "passes": 1, "trace_every": 10,
              "projected": [1, 2, 4], "shrink": {"n_samples": 300, "n_features": 1024, "n_informative": 16},
              # one budget mode: the split mode takes the same path through the benchmark (4 mpiexec runs saved)
              "transports": ["shared-memory", "messages"], "budget_modes": ["global"],
              "large": {"n_features": 20000, "workers": [8, 16], "nodes": 4, "per_node": 4, "measured": [1, 2],
                        "trace_every": 100, "seeds": 1}},
    # smoke (tests/test_benchmarks.py): the messages transport alone (the projection's path)
    "smoke": {"tasks": ["regression"], "workers": [1, 2], "repeats": 1, "passes": 1, "trace_every": 10,
              "projected": [1, 2], "shrink": {"n_samples": 200, "n_features": 512, "n_informative": 8},
              "transports": ["messages"], "budget_modes": ["global"], "large": None},
}
TRANSPORTS = ("shared-memory", "messages")
VALIDATION_TOLERANCE = 0.20
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
    p.add_argument("--projection-features", type=int, metavar="P",
                   help="p of the large projection's regression problem (default 100000, --quick 20000; 0: none)")
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
    if args.projection_features is not None:
        profile["large"] = (dict(PROFILES["paper"]["large"], **(profile["large"] or {}),
                                 n_features=args.projection_features) if args.projection_features > 0 else None)
    for task in profile["tasks"]:
        summary[task] = bench_task(run, task, profile, args.threshold, cores, messages)
    if profile["large"]:
        summary["large"] = bench_large(run, profile, messages, cores)
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


# ------------------------------------------------------------------------------ the large projection
def bench_large(run, profile, messages, cores):
    """Asy-OS projected to many dedicated cores on KDD'16's regression problem at ``large["n_features"]``
    (s = 100, n = 1.2 s log2 p, the engine's defaults: automatic passes, the global budget), validated
    on the same problem against what this machine measures with a core per busy rank: sequential OS
    (one process), ``mpiexec -n 2`` and ``-n 3`` (shared memory, one and two workers); then projected
    on ``large["seeds"]`` instances (seeds 0, 1, ...; each its own threshold: 1.05 times the loosest
    final training error of its sequential run and, on seed 0, of the measured runs), with the
    measured spread of the work's time (``call_spread`` for compiled calls, ``DEFAULT_JITTER`` for
    steps)."""
    large = profile["large"]
    p, s = large["n_features"], 100
    n = default_n_samples(s, p)
    settings = {"synthetic": "regression", "n_samples": n, "n_features": p, "n_informative": s, "loss": "squared"}
    passes = {"passes": "auto", "trace_every": large["trace_every"]}
    print(f"-- projection: regression n = {n}, p = {p}, s = {s}, automatic passes, global budget", flush=True)
    measured = {q: [] for q in [0] + large["measured"]}
    for repeat in range(large.get("repeats", 1)):         # alternating, so that a busy moment hits all
        for q in measured:
            record, _ = run_asyos(cli_args(settings, passes), ranks=q + 1 if q else None)
            measured[q].append(run.unit({**_unit("large", q, repeat, record, cores), "part": "large"}))
    # costs: the compiled visits and the loops at the same n and s on another instance (seed 1, p <= 20000)
    small = dict(settings, n_features=min(p, 20000))
    calibration = SyntheticSource("regression", small["n_features"], s, n, seed=1).load(with_test=False)
    costs = calibrate_costs(run, "large", small, passes, messages, anchor=True, data=calibration)
    spread = call_spread(calibration, get_loss("squared"), s)
    del calibration
    run.unit({"part": "calibration", "what": "spread", "compiled_call": spread, "step": DEFAULT_JITTER})
    series_ = [("shared-memory", [1, 2] + large["workers"], None), ("messages", large["workers"], None),
               ("node-aggregated", [large["nodes"] * large["per_node"]], large["nodes"])]
    instances = []
    for seed in range(large.get("seeds", 1)):
        data = SyntheticSource("regression", p, s, n, seed=seed).load(with_test=False)
        sequential, projected = {}, {}
        for transport, qs, nodes in series_:
            projected[transport] = project("large", settings, passes, costs, "global", transport, workers=qs,
                                           nodes=nodes, data=data, sequential=sequential, compiled=True, seed=seed,
                                           spread=DEFAULT_JITTER if transport == "messages" else spread)
        del data
        finals = [projected["shared-memory"][0]["final_train_error"]]
        if seed == 0:
            finals += [u["final_train_error"] for units in measured.values() for u in units]
        threshold = THRESHOLD_MARGIN * max(finals)
        for table in projected.values():
            to_threshold(table, threshold)
        instances.append({"seed": seed, "threshold": threshold, "projected": projected})
        if seed == 0:
            for units in measured.values():
                for u in units:
                    hit = first_reaching(u["trace"], threshold)
                    u["time_to_threshold_s"], u["steps_to_threshold"] = hit if hit else (None, None)
            table = {q: {"time_to_threshold_s": median_of(units, "time_to_threshold_s")}
                     for q, units in measured.items()}
            validation = validate(table, projected["shared-memory"], "shared-memory", cores)
            for transport, _, nodes in series_:
                name = transport + (f" ({nodes} nodes x {large['per_node']})" if nodes else "")
                print_projection("regression", f"{name}, global budget, p = {p}, seed 0, threshold {threshold:.4g}",
                                 projected[transport], validation if transport == "shared-memory"
                                 else {"checks": {}, "within_tolerance": None}, costs)
    summary = summarise_instances(instances, series_, large)
    return {"settings": settings, "costs": costs.as_dict(), "spread": spread, "validation": validation,
            "measured": {q: [{k: v for k, v in u.items() if k != "trace"} for u in units]
                         for q, units in measured.items()},
            "instances": instances, "speedups": summary}


def summarise_instances(instances, series_, large):
    """The projected speedups over the instances: median, lowest and highest per transport and q,
    and the median recall; printed as one table."""
    rows, out = [], {}
    for transport, qs, nodes in series_:
        name = transport + (f" {nodes}x{large['per_node']}" if nodes else "")
        for q in qs:
            values = [i["projected"][transport].get(q, {}).get("speedup_vs_sequential") for i in instances]
            recalls = [i["projected"][transport].get(q, {}).get("recall") for i in instances]
            reached = [v for v in values if v]
            entry = {"speedups": values, "median": statistics.median(reached) if reached else None,
                     "reached": f"{len(reached)}/{len(values)}",
                     "recall": statistics.median(r for r in recalls if r is not None) if any(recalls) else None}
            out[f"{transport} q={q}"] = entry
            rows.append([name, q, entry["reached"], _f(entry["median"], 2),
                         " / ".join(_f(v, 2) for v in values), _f(entry["recall"], 3)])
    print_table(f"Projected speedup on dedicated cores, time to each instance's threshold against sequential OS "
                f"({len(instances)} instances; goal >= 6 at 8 workers, >= 10 at 16)",
                ["transport", "q", "reached", "median", "per instance", "recall"], rows)
    return out


def to_threshold(projected, threshold):
    """Fill a projection's times to ``threshold`` and speedups from its traces (dropped); returns it."""
    seq_time = None
    for q in sorted(projected):
        entry = projected[q]
        hit = first_reaching(entry.pop("trace"), threshold)
        entry["time_to_threshold_s"], entry["steps_to_threshold"] = hit if hit else (None, None)
        if q == 0:
            seq_time = entry["time_to_threshold_s"]
        t = entry["time_to_threshold_s"]
        entry["speedup_vs_sequential"] = seq_time / t if t and seq_time and q else None
    return projected


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
    costs = calibrate_costs(run, task, settings, profile, messages)
    out.update(costs=costs.as_dict(), projected={}, validation={})
    for transport in profile["transports"]:
        for mode in profile["budget_modes"]:
            label = series(transport, mode)
            projected = to_threshold(project(task, settings, profile, costs, mode, transport), threshold)
            validation = validate(tables[label], projected, transport, cores)
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
                    oversubscribed=busy_ranks(q, record["transport"]) > cores,
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
            entry["oversubscribed"] = any(u["oversubscribed"] for u in sel)
        table[q] = entry
        label = "sequential OS" if q == 0 else f"q={q}" + (" (oversubscribed)" if entry["oversubscribed"] else "")
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


def calibrate_costs(run, task, settings, profile, messages, anchor=False, data=None) -> Costs:
    """Step time vs retained size (timed here), protocol and message costs, central service time
    (a one-worker MPI run with another seed than the measured ones); ``data``: that instance (seed 1)
    if the caller has it already."""
    if data is None:
        data = SyntheticSource(settings["synthetic"], settings["n_features"], settings["n_informative"],
                               settings["n_samples"], seed=1).load(with_test=False)
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
    costs = calibrate_compiled(costs, data, loss, settings["n_informative"],
                               cli_args(settings, profile, seed=1) + ["--transport", "shared-memory"],
                               cli_args(settings, profile, seed=1) if anchor else None, run)
    run.unit({"part": "calibration", "task": task, **costs.as_dict()})
    return costs


def calibrate_compiled(costs, data, loss, budget, shared_args, sequential_args=None, run=None) -> Costs:
    """``costs`` with the compiled path's: a visit against the retained size and a compiled call's
    own cost (``visit_costs``, timed here), reading one value of a shared row (numpy, timed here),
    and the shared-memory loop's own cost per batch beyond the visits and the read (the counters,
    the beat check, the write of the row, under the global budget the others' top ``|w|`` and the
    worker's threshold): a two-worker ``mpiexec -n 3`` run with ``shared_args``, each worker's loop
    (``loop_s``) beyond its compute, per write.

    ``sequential_args``: a one-process run with these arguments (another instance than the measured
    ones) anchors the visits' cost: its training trace's time per step against the model's (visits of
    the budget's size in calls that end where a row is due) scales ``visit_base_s`` and
    ``visit_per_retained_s``. On the p = 20000 problem the timed visits alone came to 11.4 us and the
    command's run to 13.6 us a step (its trace, its copies of the data): the projected sequential time
    was 12.5% short."""
    visits = visit_costs(data, loss, budget)
    n = data.n_samples
    rows, out_row = np.zeros((8, n)), np.empty(n)
    t0 = time.perf_counter()
    for _ in range(500):
        np.add.reduce(rows, axis=0, out=out_row)
    read_value = (time.perf_counter() - t0) / 500 / rows.size
    if sequential_args is not None:
        record, _ = run_asyos(sequential_args)
        trace = record["trace"]
        steps, times = np.asarray(trace["steps"][1:], dtype=float), np.asarray(trace["time_s"][1:])
        if steps.size > 2 and np.ptp(steps) > 0:
            measured = float(np.polyfit(steps, times, 1)[0])
            every = max(1, int(np.median(np.diff(steps))))
            model = (visits["visit_base_s"] + visits["visit_per_retained_s"] * budget
                     + visits["batch_call_s"] / min(every, BATCH_VISITS))
            scale = measured / model if model > 0 else 1.0
            visits["visit_base_s"] *= scale
            visits["visit_per_retained_s"] *= scale
            if run is not None:
                run.unit({"part": "calibration", "what": "sequential anchor", "measured_step_s": measured,
                          "model_step_s": model, "scale": scale})
    record, _ = run_asyos(shared_args, ranks=3)
    # the workers' loops beyond their compute (finished_s, when the central rank had a worker's report,
    # also held its start after the others' and its report's columns: 70 us a write at p = 20000 instead of 7-8.5)
    outside = sum(w["loop_s"] - w["compute_s"] for w in record["workers"])
    per_write = outside / max(record["pushes"], 1)
    return replace(costs, **visits, read_value_s=read_value,
                   shared_protocol_s=max(0.0, per_write - read_value * n * len(record["workers"])))


@contextlib.contextmanager
def compiled_kernels():
    """Workers built inside take the compiled step (``ASYOS_KERNELS=numba``) whatever their length:
    the automatic choice (``kernels.backend``) leaves shards of fewer than 20,000 steps on the numpy
    step, where loading numba (0.5 s a process here) costs more than it saves, a cost of the
    set-up that the replay's time (the asynchronous phase) does not hold."""
    chosen = os.environ.get("ASYOS_KERNELS")
    os.environ["ASYOS_KERNELS"] = "numba"
    try:
        yield
    finally:
        if chosen is None:
            del os.environ["ASYOS_KERNELS"]
        else:
            os.environ["ASYOS_KERNELS"] = chosen


def call_spread(data, loss, budget, size=SHARED_BATCH) -> float:
    """The spread of a compiled call's time (standard deviation of its logarithm): sequential OS
    in calls of ``size`` visits (``run_loopback``), the full calls after the first pass timed. Here
    0.063 for calls of 32 visits at n = 1715, s = 100 (a step at a time: 0.22-0.27,
    ``replay.DEFAULT_JITTER``)."""
    plan = AsyOSPlan.build(data.X.shape[1], budget, 1)
    with compiled_kernels():
        workers, _ = build_workers(data.X, data.y, loss, plan, SubstitutionOptions(), 0)
    worker, central = workers[0], Central(data.n_samples)
    times, last = [], [None, 0]

    def between():
        now = time.perf_counter()
        if last[0] is not None and central.steps - last[1] == size and worker.passes_run >= 1:
            times.append(now - last[0])
        last[1] = central.steps
        last[0] = time.perf_counter()

    run_loopback(worker, central, between=between, batch=size)
    return float(np.log(times).std()) if len(times) > 10 else 0.0


def visit_costs(data, loss, budget, repeats=2) -> dict:
    """The compiled visits' costs on ``data`` (``Costs.visit_base_s``, ``visit_per_retained_s``,
    ``batch_call_s``), from whole runs of sequential OS (``run_loopback``; the best of ``repeats``):
    with ``budget`` in calls of 256 and of 8 visits, the call's own cost ``c`` from the two times per
    visit (``t_B = v + c / B``); with ``budget`` and with a tenth of it in calls of 256, the visit's
    ``v = a + b m`` at the two retained sizes (the budget fills within the first pass's first few
    hundred visits: ``m`` is the budget for nearly every visit).

    Timing each call and fitting all of them at once (least squares on 1, visits, visits x m) gave
    15.9 us a visit at n = 1715, s = 100 where whole runs take 12.2 (pass by pass 11.9-12.6): the
    many small calls carried the harness's own time. The shared-memory workers' calls
    (``Worker.visit_view``) also copy ``u_C`` and subtract it, two passes over n values, which
    ``shared_protocol_s`` holds."""
    from ..learners.substitution import kernels
    kernels.warm_up("numba", visits=True)

    def per_visit(size, k):
        plan = AsyOSPlan.build(data.X.shape[1], k, 1)
        best = None
        for _ in range(repeats):
            with compiled_kernels():
                workers, _ = build_workers(data.X, data.y, loss, plan, SubstitutionOptions(), 0)
            worker, central = workers[0], Central(data.n_samples)
            if not worker.batchable():
                raise SystemExit("the compiled visits are not available here (numba): the projection needs them")
            t0 = time.perf_counter()
            run_loopback(worker, central, batch=size)
            value = (time.perf_counter() - t0) / max(central.steps, 1)
            best = value if best is None else min(best, value)
        return best

    small = max(1, budget // 10)
    t256, t8, t256_small = per_visit(256, budget), per_visit(8, budget), per_visit(256, small)
    call = max(0.0, (t8 - t256) / (1 / 8 - 1 / 256))
    v_full, v_small = t256 - call / 256, t256_small - call / 256
    slope = max(0.0, (v_full - v_small) / (budget - small)) if budget > small else 0.0
    return {"batch_call_s": float(call), "visit_base_s": float(max(v_full - slope * budget, 0.0)),
            "visit_per_retained_s": float(slope)}


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
def project(task, settings, profile, costs, budget_mode="split", transport="messages", workers=None,
            nodes=None, data=None, sequential=None, compiled=False, spread=None, seed=0):
    """Sequential OS and Asy-OS on ``workers`` (default ``profile["projected"]``) in the replay on
    dedicated cores, as the engine runs them: sequential OS in compiled batches; ``messages``: the
    pipelined pushes, a step at a time; ``shared-memory`` (and ``node-aggregated`` on ``nodes``
    nodes): ``SHARED_BATCH`` compiled steps between two reads of ``u_C``. ``compiled``: every
    worker on the compiled step (``compiled_kernels``), not only those the automatic choice gives it.
    Each entry keeps its training ``trace`` (``to_threshold`` turns it into the time to a threshold);
    ``sequential`` (a dict) keeps sequential OS's run for the next call on the same data.
    ``spread``: the log-normal spread of a piece of work's time (``replay.Machine.jitter``; default
    none: every cost exact), drawn with ``seed``. Exact costs keep the workers in lock step, which no
    machine does: at p = 20000 eight workers then reached the threshold 4.5x faster than sequential
    OS, 5.9-7.5x (three instances) with the spread of a compiled call measured here (0.063)."""
    if data is None:
        data = SyntheticSource(settings["synthetic"], settings["n_features"], settings["n_informative"],
                               settings["n_samples"], seed=0).load(with_test=False)
    loss = get_loss(settings["loss"])
    options = SubstitutionOptions(passes=profile["passes"])
    budget = settings["n_informative"]
    max_batch = RunConfig().max_batch            # the engine's default, as in the measured runs
    if transport == "messages":
        kw = {"mode": "pipelined", "max_batch": max_batch}
    else:
        kw = {"mode": transport, "batch": SHARED_BATCH, "nodes": nodes or 1}

    def traced(q, run):
        """``run(workers, central, clock)`` on q simulated workers, with the training error traced:
        ``(its result, the trace, the recall)``."""
        plan = AsyOSPlan.build(data.X.shape[1], budget, q, budget_mode=budget_mode, variant=options.variant,
                               sharding=default_sharding(options.variant, generated=True))   # as the runs shard
        with compiled_kernels() if compiled else contextlib.nullcontext():
            workers, _ = build_workers(data.X, data.y, loss, plan, options, 0)
        clock = SimulatedClock()
        trace = ObjectiveTrace(profile["trace_every"], loss, data.y, clock=clock)
        central = Central(data.n_samples, monitor=trace)
        trace.record(central)
        result = run(workers, central, clock)
        trace.record(central)
        return result, trace.as_dict(), selection_recall(workers, getattr(data, "true_coef", None), budget)

    sequential = {} if sequential is None else sequential
    if "run" not in sequential:
        def run_sequential(workers, central, clock):
            return sequential_time(workers[0], central, costs, clock, compiled=True)
        sequential["run"], sequential["trace"], sequential["recall"] = traced(1, run_sequential)
    out = {0: {"run_s": sequential["run"], "final_train_error": sequential["trace"]["train_error"][-1],
               "recall": sequential["recall"], "trace": sequential["trace"]}}
    for q in workers or profile["projected"]:
        if q > settings["n_features"] or (q > budget and budget_mode == "split"):
            continue
        threshold_keeper, costs_q = None, costs
        if keeps_threshold(budget_mode, q):
            cap = worker_budgets(budget, q, budget_mode)[0]
            threshold_keeper = GlobalThreshold(budget, q, cap)
            if transport == "messages":         # a step at a time: its threshold check costs per step
                costs_q = global_budget_costs(costs, data, loss, budget, q, cap)
        machine = Machine(jitter=spread) if spread else None
        report, trace, recall = traced(q, lambda workers, central, clock: replay(
            workers, central, costs_q, clock, threshold=threshold_keeper, machine=machine, seed=seed, **kw))
        out[q] = {"run_s": report.time_s, "central_utilization": report.central_utilization,
                  "steps_per_push": report.steps / report.pushes if report.pushes else None,
                  "staleness_mean": report.staleness["mean"], "final_train_error": trace["train_error"][-1],
                  "central_service_us": 1e6 * costs_q.central_service_s, "step_base_us": 1e6 * costs_q.step_base_s,
                  "recall": recall, "trace": trace}
    return out


def selection_recall(workers, true_coef, budget):
    """The share of the true features among the workers' selection (cut to ``budget``)."""
    if true_coef is None:
        return None
    support, _ = gather_selection(workers, budget)
    true = np.flatnonzero(true_coef)
    return float(np.isin(true, support).mean()) if true.size else None


def busy_ranks(q, transport) -> int:
    """The ranks of ``q`` workers that keep a core busy: the workers, and the central rank where it
    serves pushes (messages, node-aggregated); on shared memory it sleeps between looks (1 ms)."""
    return q + (0 if transport == "shared-memory" else 1)


def validate(measured, projected, transport="messages", cores=2):
    """The projection against the runs that have a core per busy rank here: sequential OS, q = 1,
    and every q up to ``cores`` under shared memory (its central rank sleeps between looks) or up to
    ``cores - 1`` under messages (its central rank serves pushes)."""
    checks = {}
    for q in sorted(measured):
        if busy_ranks(q, transport) > cores and q > 1:
            continue
        m, p = measured[q].get("time_to_threshold_s"), projected.get(q, {}).get("time_to_threshold_s")
        if m and p:
            checks["sequential" if q == 0 else f"q={q}"] = {"measured_s": m, "projected_s": p,
                                                            "relative_error": (p - m) / m}
    ok = bool(checks) and all(abs(c["relative_error"]) <= VALIDATION_TOLERANCE for c in checks.values())
    return {"checks": checks, "within_tolerance": ok, "tolerance": VALIDATION_TOLERANCE}


def print_projection(task, label, projected, validation, costs):
    rows = []
    for q, entry in sorted(projected.items()):
        rows.append(["sequential OS" if q == 0 else f"q={q}", _f(entry["time_to_threshold_s"], 4),
                     _f(entry.get("speedup_vs_sequential"), 2), _f(entry.get("steps_per_push"), 1),
                     _f(entry.get("central_utilization"), 2), _f(entry.get("central_service_us"), 1),
                     _f(entry.get("step_base_us"), 1), _f(entry.get("staleness_mean"), 1),
                     _f(entry.get("final_train_error"), 4), _f(entry.get("recall"), 3)])
    print_table(f"Projected on dedicated cores, {task}, {label} (discrete-event replay; Python step "
                f"{costs.step_base_s * 1e6:.1f} us + {costs.step_per_retained_s * 1e6:.3f} us/retained feature, "
                f"compiled visit {costs.visit_base_s * 1e6:.1f} us + {costs.visit_per_retained_s * 1e6:.3f} "
                f"us/retained feature + {costs.batch_call_s * 1e6:.0f} us a call, central "
                f"{costs.central_service_s * 1e6:.1f} us/push, latency {costs.latency_s * 1e6:.1f} us)",
                ["run", "time to threshold s", "speedup", "steps/push", "central util", "central us/push",
                 "step us", "staleness", "final error", "recall"],
                rows)
    for name, check in validation["checks"].items():
        print(f"validation {name}: measured {check['measured_s']:.4f} s, projected {check['projected_s']:.4f} s, "
              f"error {100 * check['relative_error']:+.1f}%")
    if validation["checks"]:
        print(f"projection within {100 * VALIDATION_TOLERANCE:.0f}% of every run measured on dedicated cores: "
              f"{'yes' if validation['within_tolerance'] else 'NO'}", flush=True)
    print(flush=True)


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
