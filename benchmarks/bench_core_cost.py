"""What one Online Substitution step costs, against the BLAS work it cannot avoid.

At ``n`` = 1000 and ``s`` = 64 (the KDD'16 MPI setting) a step must compute ``X_S^T g`` and
``X_S dw``: two matrix-vector products with a 64 x 1000 block, the *BLAS floor*. In one process this
measures the floor, sequential OS per feature (p = 4096, 2 passes; the goal is <= 2x the floor) with
the numpy step (the reference) and with the compiled step (``asyos/learners/substitution/kernels.py``), and a
breakdown of the numpy step, for KDD'16's step; then the exchange variant's step (numpy and
compiled) at the same sizes. Times are the best of several repeats, for the floor and for OS alike (the
machine's noise only ever adds time); the floor and the OS runs are measured interleaved. The
breakdown is: every operation it performs, timed alone at the same sizes and weighted by
how often a step performs it; what is left is Python dispatch and bookkeeping. Then one Asy-OS
worker step under MPI (2 ranks, a core each): asynchronous phase / steps, on shared memory and
with messages in both push modes.

    python benchmarks/bench_core_cost.py [--quick]
"""
from __future__ import annotations

import contextlib
import math
import os
import statistics
import time

import numpy as np
from scipy.linalg.blas import daxpy

from asyos.benchmarking.common import Run, choose_profile, parser, print_table, run_asyos
from asyos.data.shard import FeatureShard
from asyos.data.synthetic import SyntheticSource
from asyos.learners.protocol.central import Central
from asyos.learners.substitution.workers import SubstitutionOptions, local_lipschitz, make_worker
from asyos.learners.protocol.loopback import run_loopback
from asyos.losses import get_loss

PROFILES = {
    "paper": {"n": 1000, "p": 4096, "s": 64, "passes": 2, "repeats": 7, "calls": 20000, "mpi_repeats": 3},
    "quick": {"n": 1000, "p": 1024, "s": 64, "passes": 1, "repeats": 3, "calls": 2000, "mpi_repeats": 1},
    # smoke (tests/test_benchmarks.py): one of the mpiexec jobs (the transports are the launch tests')
    "smoke": {"n": 300, "p": 256, "s": 16, "passes": 1, "repeats": 1, "calls": 200, "mpi_repeats": 1,
              "mpi_variants": 1},
}


def per_call(fn, calls, repeats):
    """Best over ``repeats`` of the time per call of ``fn`` (``calls`` calls each)."""
    for _ in range(min(calls, 200)):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls)
    return min(times)


@contextlib.contextmanager
def kernel_backend(kernels):
    """``ASYOS_KERNELS=kernels`` for this process and the runs it starts."""
    before = os.environ.get("ASYOS_KERNELS")
    os.environ["ASYOS_KERNELS"] = kernels
    try:
        yield
    finally:
        if before is None:
            del os.environ["ASYOS_KERNELS"]
        else:                                   # the user's own setting comes back
            os.environ["ASYOS_KERNELS"] = before


def os_run(data, s, passes, lipschitz, kernels="numpy", variant="kdd16"):
    """Sequential OS per feature: KDD'16's step (whose parts the breakdown times), or the exchange
    variant's (its intercept, scaled columns and exchange score: one more product with ``X_S``
    once the retained set is full)."""
    loss = get_loss("squared")
    options = SubstitutionOptions(passes=passes, variant=variant)
    with kernel_backend(kernels):
        worker = make_worker(options.shard(data.X), data.y, loss, s, lipschitz, options)
    assert worker.state.kernels == kernels
    central = Central(data.n_samples)
    t0 = time.perf_counter()
    run_loopback(worker, central)
    return (time.perf_counter() - t0) / worker.steps, worker, central


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    profile = choose_profile(args, PROFILES)
    run = Run("core_cost", args, profile)
    n, p, s, calls, reps = profile["n"], profile["p"], profile["s"], profile["calls"], profile["repeats"]
    data = SyntheticSource("regression", n_features=p, n_informative=s, n_samples=n, seed=0).load(with_test=False)
    loss = get_loss("squared")
    lipschitz = local_lipschitz(FeatureShard(data.X), s, loss, seed=0)

    # sequential OS per feature and the BLAS floor, interleaved, best of the repeats
    probe = os_run(data, s, 1, lipschitz)[1].state
    XSf = probe.XS[:probe.size].copy()
    gf, gSf, dwf, outf = (np.random.default_rng(1).standard_normal(k) for k in (n, XSf.shape[0], XSf.shape[0], n))
    # the floor is timed as the step performs it: both products back to back (timed apart, each
    # loop keeps its own operands in cache and the pair looks a third cheaper than in a real step)
    floor_calls = {"X_S^T g and X_S dw (the floor)": lambda: (np.dot(XSf, gf, out=gSf), np.dot(dwf, XSf, out=outf))}
    runs, compiled, floors = [], [], {name: [] for name in floor_calls}
    os_run(data, s, 1, lipschitz, "numba")            # compile, or load the compiled step from the cache
    exchange, exchange_compiled = [], []
    for _ in range(reps):
        runs.append(os_run(data, s, profile["passes"], lipschitz))
        compiled.append(os_run(data, s, profile["passes"], lipschitz, "numba"))
        exchange.append(os_run(data, s, profile["passes"], lipschitz, variant="exchange"))
        exchange_compiled.append(os_run(data, s, profile["passes"], lipschitz, "numba", variant="exchange"))
        for name, fn in floor_calls.items():
            floors[name].append(per_call(fn, calls // 4, 2))
    os_step = min(r[0] for r in runs)
    os_step_compiled = min(r[0] for r in compiled)
    exchange_step = min(r[0] for r in exchange)
    exchange_step_compiled = min(r[0] for r in exchange_compiled)
    assert compiled[-1][1].state.retained.tolist() == runs[-1][1].state.retained.tolist()
    worker, central = runs[-1][1], runs[-1][2]
    state = worker.state
    steps = worker.steps
    actions = {"enter": sum(r[4] == "enter" for r in worker.log.rows),
               "leave": sum(r[4] == "leave" for r in worker.log.rows)}

    # the floor and the operations of a step, at the sizes of a full retained set
    XS = state.XS[:state.size]
    m = XS.shape[0]
    rng = np.random.default_rng(0)
    u, y, xj = central.u.copy(), data.y, data.X[:, 0].copy()
    g, gS, dw, delta, tmp = np.empty(n), np.empty(m), rng.standard_normal(m) * 1e-3, np.empty(n), np.empty(n)
    w = state.w[:m].copy()
    new_w, abs_w = np.empty(m), np.empty(m)
    ops = {
        "gradient n dL/du": (lambda: loss.dloss_raw(y, u, out=g), 1.0),
        "new feature x_j^T g": (lambda: float(np.dot(xj, g)), 1.0),
        "retained step eta/m": (lambda: np.multiply(gS, -0.1, out=dw), 1.0),
        "divergence guard": (lambda: math.isfinite(0.5 + float(np.dot(gS, gS))), 1.0),
        "weakest retained": (lambda: int(np.argmin(np.abs(np.add(w, dw, out=new_w), out=abs_w))), 1.0),
        "decrease check": (lambda: (np.add(u, delta, out=tmp), daxpy(xj, tmp, a=0.1), daxpy(xj, tmp, a=-0.1),
                                    loss.value(y, u), loss.value(y, tmp)), state.checks / steps),
        "enter/substitute (axpy, copy)": (lambda: (daxpy(xj, delta, a=0.1), tmp.__setitem__(slice(None), xj)),
                                          (actions["enter"] + actions["leave"]) / steps),
        "central u += delta": (lambda: np.add(u, delta, out=u), 1.0),
    }
    timings = {name: min(t) for name, t in floors.items()}
    timings.update({name: per_call(fn, calls, reps) * weight for name, (fn, weight) in ops.items()})
    floor = timings["X_S^T g and X_S dw (the floor)"]
    rest = os_step - sum(timings.values())
    rows = [[name, f"{t * 1e6:.2f}", f"{t / floor:.2f}"] for name, t in timings.items()]
    rows.append(["Python dispatch, schedule, log, bookkeeping (rest)", f"{rest * 1e6:.2f}", f"{rest / floor:.2f}"])
    rows.append(["OS per feature, numpy step (measured)", f"{os_step * 1e6:.2f}", f"{os_step / floor:.2f}"])
    rows.append(["OS per feature, compiled step (measured)", f"{os_step_compiled * 1e6:.2f}",
                 f"{os_step_compiled / floor:.2f}"])
    rows.append(["exchange variant per feature, numpy step (measured)", f"{exchange_step * 1e6:.2f}",
                 f"{exchange_step / floor:.2f}"])
    rows.append(["exchange variant per feature, compiled step (measured)", f"{exchange_step_compiled * 1e6:.2f}",
                 f"{exchange_step_compiled / floor:.2f}"])
    print_table(f"OS step at n = {n}, s = {s} (p = {p}, {profile['passes']} passes, {steps} steps; "
                f"{state.checks} decrease checks): microseconds per feature, and x the BLAS floor "
                f"({floor * 1e6:.2f} us)", ["part", "us / feature", "x floor"], rows)
    run.unit({"part": "os", "n": n, "s": s, "p": p, "steps": steps, "os_step_s": os_step, "blas_floor_s": floor,
              "ratio": os_step / floor, "breakdown_s": timings, "rest_s": rest, "checks": state.checks,
              "os_step_compiled_s": os_step_compiled, "ratio_compiled": os_step_compiled / floor,
              "exchange_step_s": exchange_step, "exchange_step_compiled_s": exchange_step_compiled,
              "os_step_runs_s": [r[0] for r in runs], "os_step_compiled_runs_s": [r[0] for r in compiled],
              "floor_runs_s": floors})

    # one Asy-OS worker step under MPI: 2 ranks, a core each
    rows = []
    variants = [("shared-memory", "numba"), ("shared-memory", "numpy"), ("pipelined", "numpy"), ("each-step", "numpy")]
    variants = variants[:profile.get("mpi_variants", len(variants))]
    for mode, kernels in variants:
        choice = ["--transport", mode] if mode == "shared-memory" else ["--transport", "messages", "--push-mode", mode]
        per = []
        for _ in range(profile["mpi_repeats"]):
            with kernel_backend(kernels):
                record, _ = run_asyos(["--n-samples", n, "--n-features", p, "--n-informative", s, "--passes",
                                       profile["passes"], *choice], ranks=2)
            wk = record["workers"][0]
            per.append((record["timing"]["async_s"] / record["steps"], wk["compute_s"] / wk["steps"],
                        record["steps_per_push"], record["oversubscribed"]))
        wall, compute = statistics.median(x[0] for x in per), statistics.median(x[1] for x in per)
        rows.append([f"{mode}, {kernels} step", f"{wall * 1e6:.2f}", f"{compute * 1e6:.2f}", f"{wall / floor:.2f}",
                     f"{per[-1][2]:.2f}", "yes" if per[-1][3] else "no"])
        run.unit({"part": "asy-os worker", "mode": mode, "kernels": kernels, "step_wall_s": wall,
                  "step_compute_s": compute, "ratio": wall / floor, "steps_per_push": per[-1][2],
                  "oversubscribed": per[-1][3]})
    print_table(f"One Asy-OS worker (budget {s}, n = {n}) under mpiexec -n 2: wall time per step of the "
                f"asynchronous phase, and its propose+commit part",
                ["transport / push mode", "us / step", "compute us / step", "x floor", "steps / push",
                 "oversubscribed"],
                rows)
    path = run.finish({"os_per_feature_us": os_step * 1e6, "blas_floor_us": floor * 1e6,
                       "ratio": os_step / floor, "os_per_feature_compiled_us": os_step_compiled * 1e6,
                       "ratio_compiled": os_step_compiled / floor})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
