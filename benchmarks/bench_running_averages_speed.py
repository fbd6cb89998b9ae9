"""Running averages (thesis Ch. 3): update throughput against numpy's X^T X, and extraction times against Table 5.2.

**(a) Update throughput.** Samples per second of ``RunningAverages(p).update`` at ``p`` = 1000 for
mini-batches of ``b`` in {1, 10, 100, 1000, 10000} (``b`` = 1 uses the vector form
``update(x, y)``, a BLAS ``dsyr``; larger ``b`` one in-place ``dsyrk`` on the shifted batch),
against the baseline of the brief: plain numpy ``Xb.T @ Xb`` on the same batch (numpy calls
``syrk`` for this product and allocates the ``p x p`` result each time), rate ``b / seconds``. A
third column times the bare BLAS call the update is built on (scipy's ``dsyr``/``dsyrk`` into a
preallocated matrix, as ``asyos.learners.averages.stats`` calls it) to split the gap into BLAS and Python/numpy
overhead. The rows come from a pool of distinct N(0, 1) rows (at least 2048, cycled batch by batch),
the same batches for every contender: a repeated single row would be a zero vector after the shift
and OpenBLAS skips zero entries. Each measurement times enough calls to last ``target_s``; the three
contenders are measured in a rotating order, ``repeats`` times, and the median rate of each is
reported. Goal: ours >= 50% of numpy's rate at every ``b``.

**BLAS threads.** numpy and scipy each bring their own OpenBLAS. ``asyos._env`` pins one BLAS
thread only under an MPI launcher, so a plain run would use every core; this script sets
``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` before numpy is imported:
to 1 by default (like against like on a shared machine, and what an MPI rank gets), to ``N`` with
``--blas-threads N``, or not at all with ``--blas-threads 0`` (BLAS default). A variable the user
has set is kept unless ``--blas-threads`` is given. The thread counts actually in force are read
back with threadpoolctl when it is installed and printed with the number of cores.

**(b) Extraction time** on the thesis' simulation (Sec. 5.1): ``x = z 1_p + u``, ``z ~ N(0, 1)``,
``u ~ N(0, I_p)``; ``beta* = 1`` at the 0-based features 9, 19, ..., 999; ``y = X beta* + N(0, 1)``;
``n`` = 3000, ``p`` = 1000, ``k`` = 100. The running averages are accumulated in mini-batches of 100
(RAVE) and standardized once; then OLS-th, OFSA, OMCP, OElnet and OLasso (``asyos.learners.
extractors``, default settings) each extract a ``k``-feature model: one untimed warm-up call (numba
compiles or loads the coordinate descent), then ``extract_repeats`` timed calls in a rotating order,
median reported. Same-run baselines: ``np.linalg.solve`` of the 1000 x 1000 system ``S_xx b = S_xy``
(what OLS-th must at least do) and scipy's ``cho_factor`` + ``cho_solve`` (what it does). Thesis
Table 5.2 (p = 1000, k = 100, strong signal, n = 3e3, 100 runs on a Core i5-4460S): OLS-th 0.051 s,
OFSA 0.288 s, OMCP 13.86 s, OElnet 7.113 s, RAVE 0.076 s; the ratios ours/thesis compare different
machines, BLAS libraries and implementations, so only their order of magnitude means anything.

    python benchmarks/bench_running_averages_speed.py                  # ~75 s on a shared 2-core machine
    python benchmarks/bench_running_averages_speed.py --blas-threads 2 # both cores for every BLAS call
    python benchmarks/bench_running_averages_speed.py --quick          # seconds, for CI
"""
from __future__ import annotations

import os
import sys

# The BLAS thread count must be set before numpy (or scipy) is first imported.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _requested_threads(argv):
    for i, arg in enumerate(argv):
        if arg == "--blas-threads" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--blas-threads="):
            return arg.split("=", 1)[1]
    return None


def _set_blas_threads(argv):
    """Set the BLAS thread variables from ``--blas-threads`` (or to 1 unless the user set them);
    returns how the value was chosen."""
    requested = _requested_threads(argv)
    if requested is not None and requested.strip().isdigit():
        if int(requested) == 0:
            return "--blas-threads 0: BLAS default (variables as inherited)"
        for name in BLAS_THREAD_VARIABLES:
            os.environ[name] = requested.strip()
        return f"--blas-threads {int(requested)}"
    user = {name: os.environ[name] for name in BLAS_THREAD_VARIABLES if name in os.environ}
    for name in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
    return f"kept from the environment {user}" if user else "benchmark default (1 thread)"


BLAS_CHOICE = _set_blas_threads(sys.argv) if __name__ == "__main__" else None

import re  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
from scipy.linalg.blas import dsyr, dsyrk  # noqa: E402

from asyos.benchmarking.common import Run, choose_profile, parser, plot, print_table, usable_cores  # noqa: E402

from asyos.learners.averages import extractors as E  # noqa: E402
from asyos.learners.averages.stats import RunningAverages  # noqa: E402

PROFILES = {
    "paper": {"p": 1000, "batches": [1, 10, 100, 1000, 10000], "repeats": 9, "target_s": 0.15, "pool_rows": 2048,
              "n": 3000, "k": 100, "rave_batch": 100, "extract_repeats": 7, "seed": 0},
    "quick": {"p": 200, "batches": [1, 10, 100, 1000], "repeats": 3, "target_s": 0.005, "pool_rows": 256,
              "n": 600, "k": 20, "rave_batch": 100, "extract_repeats": 2, "seed": 0},
}
GOAL = 0.5                           # ours >= 50% of numpy's rate
# Thesis Table 5.2, p = 1000, k = 100, strong signal, n = 3e3 (seconds, Core i5-4460S, 100 runs)
THESIS = {"OLS-th": 0.051, "OFSA": 0.288, "OMCP": 13.86, "OElnet": 7.113, "RAVE": 0.076}
THESIS_SIZE = {"p": 1000, "k": 100, "n": 3000}
EXTRACTORS = {
    "OLS-th": lambda std, k: E.ols_threshold(std, k),
    "OFSA": lambda std, k: E.ofsa(std, k),
    "OMCP": lambda std, k: E.penalized(std, k, penalty="mcp"),
    "OElnet": lambda std, k: E.penalized(std, k, penalty="elnet"),
    "OLasso": lambda std, k: E.penalized(std, k, penalty="lasso"),
}


def blas_report():
    """``(text, info)``: the BLAS libraries loaded and their thread counts (threadpoolctl if installed)."""
    env = {name: os.environ.get(name) for name in BLAS_THREAD_VARIABLES}
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return f"threadpoolctl not installed; environment {env}", {"env": env, "libraries": None}
    libs = [{"owner": ("numpy" if "numpy" in lib.get("filepath", "") else
                       "scipy" if "scipy" in lib.get("filepath", "") else lib.get("filepath")),
             "internal_api": lib.get("internal_api"), "version": lib.get("version"),
             "num_threads": lib.get("num_threads"), "architecture": lib.get("architecture")}
            for lib in threadpool_info() if lib.get("user_api") == "blas"]
    text = "; ".join(f"{lib['owner']}: {lib['internal_api']} {lib['version']} ({lib['architecture']}), "
                     f"{lib['num_threads']} thread(s)" for lib in libs)
    return text, {"env": env, "libraries": libs}


# ------------------------------------------------------------------------------------ (a) update
def contenders(p, b, pool, y_pool):
    """name -> (setup, call(i)): our update, numpy's ``Xb.T @ Xb`` and the bare scipy BLAS call, on
    batch ``i`` of the pool (cycled)."""
    n_batches = pool.shape[0] // b
    batches = [pool[j * b:(j + 1) * b] for j in range(n_batches)]
    ys = [y_pool[j * b:(j + 1) * b] for j in range(n_batches)]
    state = {}

    def setup_ours():
        ra = RunningAverages(p)
        if b == 1:
            ra.update(batches[-1][0], ys[-1][0])        # the first sample sets the shift; not timed
        else:
            ra.update(batches[-1], ys[-1])
        state["ra"] = ra

    def ours(i):
        j = i % n_batches
        if b == 1:
            state["ra"].update(batches[j][0], ys[j][0])
        else:
            state["ra"].update(batches[j], ys[j])

    def numpy_xtx(i):
        Xb = batches[i % n_batches]
        return Xb.T @ Xb

    def setup_blas():
        state["C"] = np.zeros((p, p))

    def blas(i):
        Xb = batches[i % n_batches]
        if b == 1:
            dsyr(1.0, Xb[0], lower=0, a=state["C"].T, overwrite_a=1)
        else:
            dsyrk(1.0, Xb.T, beta=1.0, c=state["C"].T, trans=0, lower=0, overwrite_c=1)

    return {"ours": (setup_ours, ours), "numpy": (lambda: None, numpy_xtx), "blas": (setup_blas, blas)}


def timed(call, calls):
    t0 = time.perf_counter()
    for i in range(calls):
        call(i)
    return time.perf_counter() - t0


def measure_update(run, profile, rng):
    p, reps, target = profile["p"], profile["repeats"], profile["target_s"]
    rows = []
    for b in profile["batches"]:
        n_pool = max(b, profile["pool_rows"])
        n_pool -= n_pool % b
        pool = rng.standard_normal((n_pool, p))
        y_pool = rng.standard_normal(n_pool)
        funcs = contenders(p, b, pool, y_pool)
        calls = {}
        for name, (setup, call) in funcs.items():       # warm up and choose the number of calls
            setup()
            call(0)
            one = max(timed(call, 1), 1e-7)
            calls[name] = max(1, int(np.ceil(target / one)))
        seconds = {name: [] for name in funcs}
        order = list(funcs)
        for r in range(reps):
            for name in order[r % 3:] + order[:r % 3]:    # rotate who goes first
                funcs[name][0]()
                seconds[name].append(timed(funcs[name][1], calls[name]) / calls[name])
        rate = {name: b / statistics.median(s) for name, s in seconds.items()}
        unit = run.unit({"part": "update", "p": p, "b": b, "form": "vector" if b == 1 else "batch",
                         "calls_per_measurement": calls, "seconds_per_call": seconds,
                         "samples_per_s": rate["ours"], "numpy_samples_per_s": rate["numpy"],
                         "blas_samples_per_s": rate["blas"], "ratio": rate["ours"] / rate["numpy"],
                         "ratio_to_blas": rate["ours"] / rate["blas"], "goal": f">= {GOAL:.0%} of numpy",
                         "goal_met": rate["ours"] / rate["numpy"] >= GOAL})
        rows.append(unit)
        print(f"  b = {b:<6} ours {rate['ours']:>12.0f} samples/s   numpy X^T X {rate['numpy']:>12.0f}   "
              f"ratio {unit['ratio']:6.2f}   bare {'dsyr' if b == 1 else 'dsyrk'} {rate['blas']:>12.0f}", flush=True)
    return rows


# -------------------------------------------------------------------------------- (b) extraction
def thesis_data(n, p, seed):
    """The thesis' strong-signal simulation: ``x = z 1_p + u``, ``beta* = 1`` at features 9, 19, ..."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    X += rng.standard_normal((n, 1))
    true = np.arange(9, p, 10)
    y = X[:, true].sum(axis=1) + rng.standard_normal(n)
    return X, y, true


def accumulate(X, y, batch):
    ra = RunningAverages(X.shape[1])
    for i in range(0, X.shape[0], batch):
        ra.update(X[i:i + batch], y[i:i + batch])
    return ra


def measure_extraction(run, profile):
    p, n, k, reps = profile["p"], profile["n"], profile["k"], profile["extract_repeats"]
    X, y, true = thesis_data(n, p, profile["seed"])
    ra = accumulate(X, y, profile["rave_batch"])
    std = ra.standardize()

    def solve():
        return np.linalg.solve(std.xx, std.xy)

    def cholesky():
        return scipy.linalg.cho_solve(scipy.linalg.cho_factor(std.xx, check_finite=False), std.xy,
                                      check_finite=False)

    tasks = {"RAVE": lambda: accumulate(X, y, profile["rave_batch"]), "standardize": ra.standardize,
             "np.linalg.solve": solve, "cho_factor+cho_solve": cholesky}
    tasks.update({name: (lambda f=f: f(std, k)) for name, f in EXTRACTORS.items()})
    seconds, warm, notes, models = {name: [] for name in tasks}, {}, {name: set() for name in tasks}, {}

    def call(name):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0 = time.perf_counter()
            out = tasks[name]()
            elapsed = time.perf_counter() - t0
        notes[name].update(f"{w.category.__name__}: {w.message}" for w in caught)
        return elapsed, out

    for name in tasks:                                   # warm-up (numba compiles or loads its cache)
        warm[name], models[name] = call(name)
    order = list(tasks)
    for r in range(reps):
        for name in order[r % len(order):] + order[:r % len(order)]:
            seconds[name].append(call(name)[0])
    rows = []
    for name in tasks:
        med = statistics.median(seconds[name])
        unit = {"part": "extraction", "task": name, "p": p, "n": n, "k": k, "rave_batch": profile["rave_batch"],
                "seconds": seconds[name], "median_s": med, "min_s": min(seconds[name]), "warm_up_s": warm[name],
                "thesis_s": THESIS.get(name), "ratio_to_thesis": med / THESIS[name] if name in THESIS else None,
                "warnings": sorted(notes[name])}
        model = models[name]
        if name in EXTRACTORS:
            unit.update({"support_size": int(model.support.size),
                         "dr": float(np.intersect1d(model.support, true).size / true.size),
                         "lam": model.lam, "n_iter": model.n_iter, "info": model.info})
        rows.append(run.unit(unit))
    return rows


# ------------------------------------------------------------------------------------------ main
def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--blas-threads", type=int, default=None,
                   help="BLAS threads for numpy and scipy (default 1; 0 = the BLAS default); set before numpy loads")
    args = p.parse_args()
    profile = choose_profile(args, PROFILES)
    text, info = blas_report()
    profile["blas"] = {"choice": BLAS_CHOICE, **info}
    cores = {"cpu_count": os.cpu_count(), "usable_cores": usable_cores()}
    profile["cores"] = cores
    run = Run("running_averages_speed", args, profile)
    print(f"cores: {cores['cpu_count']} (usable by this process: {cores['usable_cores']}); BLAS threads: "
          f"{BLAS_CHOICE}\nBLAS libraries: {text}\n", flush=True)
    rng = np.random.default_rng(profile["seed"])

    print(f"(a) update throughput at p = {profile['p']}, median of {profile['repeats']} measurements of "
          f">= {profile['target_s']} s each", flush=True)
    update = measure_update(run, profile, rng)
    print(f"\n(b) extraction at p = {profile['p']}, n = {profile['n']}, k = {profile['k']} "
          f"(median of {profile['extract_repeats']})", flush=True)
    extraction = measure_extraction(run, profile)
    summary = summarise(update, extraction, profile)
    path = run.finish(summary)
    draw(run, update, extraction, profile)
    print(f"results: {path}")


def summarise(update, extraction, profile):
    p = profile["p"]
    table = [[u["b"], "vector (dsyr)" if u["b"] == 1 else "batch (dsyrk)", f"{u['samples_per_s']:.0f}",
              f"{1e6 / u['samples_per_s']:.2f}", f"{u['numpy_samples_per_s']:.0f}", f"{u['ratio']:.2f}",
              f"{u['blas_samples_per_s']:.0f}", f"{u['ratio_to_blas']:.2f}",
              f"{u['goal']}: {'met' if u['goal_met'] else 'MISSED'}"] for u in update]
    print_table(f"\n(a) RunningAverages({p}).update: samples/s (median of {profile['repeats']}), against numpy "
                f"Xb.T @ Xb on the same batches and the bare scipy BLAS call; BLAS threads: {BLAS_CHOICE}",
                ["b", "form", "ours samples/s", "us / sample", "numpy X^T X samples/s", "ours / numpy",
                 "bare BLAS samples/s", "ours / BLAS", "goal"], table)
    same_size = all(profile[key] == value for key, value in THESIS_SIZE.items())
    table = []
    for u in extraction:
        ratio = u["ratio_to_thesis"] if same_size else None
        table.append([u["task"], f"{u['median_s']:.4f}", f"{u['min_s']:.4f}", f"{u['warm_up_s']:.4f}",
                      "-" if u["thesis_s"] is None else f"{u['thesis_s']:.3f}", "-" if ratio is None else f"{ratio:.2f}",
                      "-" if "dr" not in u else f"{100 * u['dr']:.0f}", "-" if "dr" not in u else u["support_size"],
                      short_warnings(u["warnings"])])
    caveat = ("" if same_size else f" (thesis sizes are p = {THESIS_SIZE['p']}, n = {THESIS_SIZE['n']}: the ratio "
              f"is left out)")
    print_table(f"(b) seconds at p = {p}, n = {profile['n']}, k = {profile['k']}, median of "
                f"{profile['extract_repeats']} (RAVE: accumulating the n samples in batches of {profile['rave_batch']}); "
                f"thesis Table 5.2 on a Core i5-4460S (other machine, other BLAS: orders of magnitude only){caveat}",
                ["task", "median s", "min s", "warm-up s", "thesis s", "ours / thesis", "DR %", "|support|",
                 "warnings"], table)
    by_task = {u["task"]: u for u in extraction}
    return {"blas_threads": BLAS_CHOICE,
            "update": {str(u["b"]): {"samples_per_s": u["samples_per_s"], "numpy_samples_per_s":
                                     u["numpy_samples_per_s"], "blas_samples_per_s": u["blas_samples_per_s"],
                                     "ratio": u["ratio"], "goal_met": u["goal_met"]} for u in update},
            "update_goal_met": all(u["goal_met"] for u in update),
            "extraction_median_s": {name: u["median_s"] for name, u in by_task.items()},
            "ratio_to_thesis": ({name: u["ratio_to_thesis"] for name, u in by_task.items() if u["thesis_s"]}
                                if same_size else None),
            "ols_th_over_solve": by_task["OLS-th"]["median_s"] / by_task["np.linalg.solve"]["median_s"]}


def short_warnings(messages):
    """One short cell for the table (the full messages are in the JSON)."""
    out = []
    for m in messages:
        found = re.search(r"stopped at max_sweeps=(\d+) in (\d+) of (\d+) solves", m)
        out.append(f"CD hit max_sweeps={found[1]} in {found[2]}/{found[3]} solves" if found else m[:60])
    return "; ".join(out) or "-"


def draw(run, update, extraction, profile):
    def draw_fn(plt):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
        bs = [u["b"] for u in update]
        for key, label, style in (("samples_per_s", "RunningAverages.update", "o-"),
                                  ("numpy_samples_per_s", "numpy Xb.T @ Xb", "s--"),
                                  ("blas_samples_per_s", "bare scipy dsyr / dsyrk", "^:")):
            ax1.plot(bs, [u[key] for u in update], style, label=label)
        ax1.set_xscale("log")
        ax1.set_yscale("log")
        ax1.set_xlabel("mini-batch size b")
        ax1.set_ylabel("samples / s")
        ax1.set_title(f"update throughput, p = {profile['p']} ({BLAS_CHOICE})", fontsize=9)
        ax1.legend(fontsize=8)
        names = [u["task"] for u in extraction]
        ax2.bar(np.arange(len(names)) - 0.2, [u["median_s"] for u in extraction], width=0.4, label="ours (median)")
        ax2.bar(np.arange(len(names)) + 0.2, [u["thesis_s"] or 0 for u in extraction], width=0.4,
                label="thesis Table 5.2 (i5-4460S)")
        ax2.set_yscale("log")
        ax2.set_xticks(range(len(names)))
        ax2.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        ax2.set_ylabel("seconds")
        ax2.set_title(f"extraction, p = {profile['p']}, n = {profile['n']}, k = {profile['k']}", fontsize=9)
        ax2.legend(fontsize=8)
    plot(os.path.join(run.args.output, "running_averages_speed.png"), draw_fn)


if __name__ == "__main__":
    main()
