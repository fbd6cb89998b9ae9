"""Costs of the Asy-OS engine on this machine, measured for the simulator and the projection.

``measure_costs`` gives the fields of ``asyos.learners.protocol.replay.Costs``; ``measure_quantum`` the
scheduler's turn when more processes spin than there are cores (``replay.Machine``).
"""
from __future__ import annotations

import json
import multiprocessing
import statistics
import subprocess
import sys
import time

import numpy as np

from ..data.synthetic import SyntheticSource
from ..losses import get_loss
from .common import mpiexec_path, run_asyos
from .speedup import step_times


def measure_quantum(cores: int, seconds: float = 1.0) -> float:
    """The scheduler's turn on this machine: ``cores + 1`` processes spin, each noting how long it
    ran between two gaps of more than 0.2 ms; the median over all of them."""
    with multiprocessing.get_context("fork").Pool(cores + 1) as pool:
        runs = pool.map(_spin, [seconds] * (cores + 1))
    values = [r for part in runs for r in part]
    return statistics.median(values) if values else 1e-3


def _spin(seconds):
    runs, start = [], time.perf_counter()
    last = begin = start
    while last - start < seconds:
        now = time.perf_counter()
        if now - last > 2e-4:
            runs.append(last - begin)
            begin = now
        last = now
    return runs[1:]


def measure_costs(n_features: int = 2000, n_informative: int = 100) -> dict:
    """The simulator's costs (``asyos.learners.protocol.replay.Costs`` fields) on this machine, measured
    now on a KDD'16 regression problem (default: the embedded default's size):
    a worker step against its retained size (``speedup.step_times``), one-way message times
    (``pingpong`` under ``mpiexec -n 2``), the central rank's service time per push, the loops' own
    costs per step (one-worker runs of pipelined messages without a batch limit and of shared
    memory, seed 1000: their time beyond the worker's compute), how late a worker waiting in its
    back-off sees a reply (a one-worker each-step run: its time per step beyond the compute, the
    messages and the service), reading ``u_C`` from shared rows."""
    data = SyntheticSource("regression", n_features=n_features, n_informative=n_informative, seed=1).load(
        with_test=False)
    problem_args = ["--n-features", str(n_features), "--n-informative", str(n_informative)]
    levels, medians = step_times(data, get_loss("squared"), n_informative)
    slope, base = np.polyfit(levels, medians, 1) if levels.size > 1 else (0.0, float(medians[0]))
    n = data.n_samples
    out = subprocess.run([mpiexec_path(), "-n", "2", sys.executable, "-m", "asyos.benchmarking.pingpong", "1",
                          str(n)], capture_output=True, text=True, timeout=300, check=True)
    ping = json.loads(out.stdout.strip().splitlines()[-1])
    t_small, t_n = ping["one_way_s"]["1"], ping["one_way_s"][str(n)]
    # pipelined without a batch limit never waits: its time beyond the compute is the loop's own
    record, _ = run_asyos([*problem_args, "--seed", "1000", "--transport", "messages", "--max-batch", "0"], ranks=2)
    worker = record["workers"][0]
    rows, out_row = np.zeros((12, n)), np.empty(n)
    t0 = time.perf_counter()
    for _ in range(500):
        np.add.reduce(rows, axis=0, out=out_row)
    read_value = (time.perf_counter() - t0) / 500 / rows.size
    push_send = ping["post_s"] + read_value * 12          # post the messages, zero the pending sum
    protocol = max(0.0, (record["timing"]["async_s"] - worker["compute_s"]) / worker["steps"]
                   - push_send / record["steps_per_push"])
    shared, _ = run_asyos([*problem_args, "--seed", "1000", "--transport", "shared-memory"], ranks=2)
    worker_s = shared["workers"][0]
    shared_protocol = max(0.0, (shared["timing"]["async_s"] - worker_s["compute_s"]) / worker_s["steps"])
    # each-step waits for every reply: what it loses beyond the messages and the service is the
    # delay of noticing the reply in its back-off sleep
    each, _ = run_asyos([*problem_args, "--seed", "1000", "--push-mode", "each-step"], ranks=2)
    worker_e = each["workers"][0]
    service = each["central"]["service_us"] * 1e-6
    transfer = t_n
    gap = (each["timing"]["async_s"] - worker_e["compute_s"]) / (worker_e["steps"] + worker_e["refused"])
    wait = max(0.0, gap - push_send - 2 * transfer - service)
    costs = {"step_base_s": float(max(base, 0.0)), "step_per_retained_s": float(max(slope, 0.0)),
             "step_protocol_s": protocol, "push_send_s": push_send, "latency_s": t_small,
             "bandwidth_bytes_per_s": 8.0 * (n - 1) / max(t_n - t_small, 1e-9),
             "central_service_s": record["central"]["service_us"] * 1e-6, "read_value_s": read_value,
             "shared_protocol_s": shared_protocol, "wait_s": wait}
    return costs
