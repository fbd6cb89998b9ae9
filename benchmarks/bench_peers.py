"""Sequential Online Substitution against the batch selectors, in one run: CPU, peak memory, recall.

The KDD'16 synthetic problems (``asyos.data.synthetic``: ``X ~ N(0, 1)``, ``s = 100`` true
features, ``n = ceil(1.2 s log2 p)``; regression ``y = X w* + 0.1 e``, classification
``y = sign(X w*)``) at each ``p`` of the profile, for each seed, are given to

* ``os``: ``OnlineSubstitution(budget=s)`` (the exchange variant, the estimators' default);
* ``os-kdd16``: the same with ``variant="kdd16"`` (the paper's step);
* ``abess``: ``abess.linear.LinearRegression`` / ``LogisticRegression`` with ``support_size=[s]``;
* ``lars`` (regression): scikit-learn's ``Lars(n_nonzero_coefs=s)``, LAR to ``s`` features;
* ``lasso-path`` (regression): scikit-learn's ``lars_path(method="lasso")``, the lasso path up to the
  last point with at most ``s`` features;
* ``l1-logistic`` (classification): scikit-learn's L1 ``LogisticRegression`` (liblinear, no
  intercept), ``C`` searched as ``LassoToBudget`` searches it (``asyos.learners.budget_search``:
  doubled from ``l1_min_c``, then 8 bisections in ``log C``), the largest ``C`` tried that keeps at
  most ``s`` features.

Every fit runs in a process of its own (``OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=1``, abess's
``thread=1``: every side single-threaded), which generates the same seeded data and reports the
CPU time of the fit alone (``time.process_time`` around it: imports, data generation and the loading
of OS's compiled step from numba's cache, 0.7-1 s once per process, happen before the clock starts;
OS runs its compiled step, ``ASYOS_KERNELS=numba``, at every ``p`` unless ``ASYOS_KERNELS`` is set),
its peak resident memory (``VmHWM``, the data included; the data's own bytes are printed beside it)
and the recall of the planted support. The table gives each method's CPU time over abess's on the
same problem and seed (the mean of the per-seed ratios): the goal of OS is at most 1.

    python benchmarks/bench_peers.py [--quick] [--ps 2000,20000] [--tasks regression] [--methods os,abess]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np

from asyos.benchmarking.common import Run, choose_profile, fmt, mean_std, parser, print_table
from asyos.utils.process_stats import peak_rss_bytes

PROFILES = {
    "paper": {"ps": [2_000, 20_000, 100_000], "s": 100, "seeds": 3, "timeout": 3600},
    "quick": {"ps": [2_000], "s": 100, "seeds": 1, "timeout": 600},
    # smoke (tests/test_benchmarks.py): every method in this process (a child's start-up is 2-3 s)
    "smoke": {"ps": [300], "s": 10, "seeds": 1, "timeout": 300, "in_process": True},
}
METHODS = {"regression": ("os", "os-kdd16", "abess", "lars", "lasso-path"),
           "classification": ("os", "os-kdd16", "abess", "l1-logistic")}
BASELINE = "abess"
SINGLE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


# ------------------------------------------------------------------------------ one fit (child)
def _problem(task, p, s, seed):
    from asyos.data.synthetic import make_classification, make_regression
    make = make_regression if task == "regression" else make_classification
    data = make(n_features=p, n_informative=s, seed=seed, n_test=0)
    return np.ascontiguousarray(data.X), data.y, np.flatnonzero(data.true_coef)


def _os(variant):
    # the compiled step whatever the problem's size: ``auto`` takes the numpy step below 20,000 steps
    # (p = 2000: 5,800 steps, 1.07 s of CPU against 0.27 s compiled, regression, the same selection),
    # because a fresh process would pay 0.7-1 s to load the compiled one, which happens here before the clock
    # (a backend the user set in ASYOS_KERNELS stays)
    os.environ.setdefault("ASYOS_KERNELS", "numba")
    from asyos import OnlineSubstitution
    from asyos.learners.substitution.kernels import warm_up
    warm_up("numba", visits=True)      # the cached step and visit loop loaded before the clock (once a process)

    def fit(X, y, s, task):
        loss = "squared" if task == "regression" else "auto"
        return OnlineSubstitution(budget=s, loss=loss, variant=variant).fit(X, y).support_
    return fit


def _abess():
    from abess.linear import LinearRegression, LogisticRegression

    def fit(X, y, s, task):
        model = (LinearRegression if task == "regression" else LogisticRegression)(support_size=[s], thread=1)
        return np.flatnonzero(model.fit(X, y).coef_)
    return fit


def _lars():
    from sklearn.linear_model import Lars
    return lambda X, y, s, task: np.flatnonzero(Lars(n_nonzero_coefs=s).fit(X, y).coef_)


def _lasso_path():
    from sklearn.linear_model import lars_path

    def fit(X, y, s, task):
        _, _, coefs = lars_path(X, y, method="lasso", max_iter=3 * s)
        sizes = np.count_nonzero(coefs, axis=0)
        return np.flatnonzero(coefs[:, np.flatnonzero(sizes <= s)[-1]])
    return fit


def _l1_logistic():
    from sklearn.svm import l1_min_c
    from asyos.learners.baselines.batch import _l1_classifier
    from asyos.learners.budget_search import search_l1_weight

    def fit(X, y, s, task):
        """The largest C (the smallest l1 weight 1/C) whose L1-logistic model keeps at most ``s``
        features: C doubled from ``l1_min_c`` (below it nothing is selected), then bisected in log C,
        as ``LassoToBudget`` searches its C."""
        def fit_at(weight, warm):
            coef = _l1_classifier("logistic", 1.0 / weight).fit(X, y).coef_.ravel()
            return coef, int(np.count_nonzero(coef))
        c_min = float(l1_min_c(X, y, loss="log", fit_intercept=False))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=Warning)
            found = search_l1_weight(fit_at, s, 1.0 / c_min, factor=2.0, max_expand=40, max_bisect=8,
                                     max_steps=48, precision=0.0, known={1.0 / c_min: (None, 0)}, warm=False)
        best = found.at_most()
        return np.empty(0, dtype=np.intp) if best is None or best.model is None else np.flatnonzero(best.model)
    return fit


PREPARE = {"os": lambda: _os("exchange"), "os-kdd16": lambda: _os("kdd16"), "abess": _abess, "lars": _lars,
           "lasso-path": _lasso_path, "l1-logistic": _l1_logistic}


def fit_one(method, task, p, s, seed) -> dict:
    """Generate the problem, fit ``method`` on it and return its record (in a child process, or in
    the benchmark's own with ``--smoke``). Imports and loading happen before the clock starts."""
    X, y, truth = _problem(task, p, s, seed)
    fit = PREPARE[method]()
    t0, c0 = time.perf_counter(), time.process_time()
    support = fit(X, y, s, task)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    return {"cpu_s": cpu, "wall_s": wall, "selected": int(support.size),
            "recall": float(np.isin(truth, support).mean()), "peak_rss_mb": peak_rss_bytes() / 2 ** 20,
            "data_mb": X.nbytes / 1e6, "n": int(X.shape[0])}


# -------------------------------------------------------------------------------- the run (parent)
def run_child(method, task, p, s, seed, timeout, in_process=False):
    if in_process:
        return fit_one(method, task, p, s, seed)
    argv = [sys.executable, os.path.abspath(__file__), "--one", json.dumps([method, task, p, s, seed])]
    env = dict(os.environ, **SINGLE_THREAD)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"no end within {timeout} s"}
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summarise(units, tasks, ps, methods):
    """Per task and ``p``: each method's CPU, its ratio to abess (mean of the per-seed ratios), memory
    and recall."""
    summary = {}
    for task in tasks:
        for p in ps:
            cell = {}
            base = {u["seed"]: u["cpu_s"] for u in units
                    if (u["task"], u["p"], u["method"]) == (task, p, BASELINE) and "cpu_s" in u}
            for method in methods[task]:
                mine = [u for u in units if (u["task"], u["p"], u["method"]) == (task, p, method) and "cpu_s" in u]
                if not mine:
                    continue
                ratios = [u["cpu_s"] / base[u["seed"]] for u in mine if base.get(u["seed"])]
                cell[method] = {"cpu_s": mean_std([u["cpu_s"] for u in mine]),
                                "over_abess": mean_std(ratios) if ratios else (None, None),
                                "recall": mean_std([u["recall"] for u in mine]),
                                "peak_rss_mb": max(u["peak_rss_mb"] for u in mine),
                                "data_mb": mine[0]["data_mb"], "n": mine[0]["n"], "seeds": len(mine)}
            summary[f"{task} p={p}"] = cell
    return summary


def print_summary(summary):
    for title, cell in summary.items():
        if not cell:
            continue
        some = next(iter(cell.values()))
        rows = [[method, fmt(*c["cpu_s"], digits=2), fmt(*c["over_abess"], digits=2), fmt(*c["recall"]),
                 f"{c['peak_rss_mb']:.0f}", c["seeds"]] for method, c in cell.items()]
        print_table(f"{title} (n = {some['n']}, X {some['data_mb']:.0f} MB): CPU of the fit, single-threaded",
                    ["method", "CPU s", "x abess", "recall", "peak RSS MB", "seeds"], rows)


def main(argv=None):
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--ps", help="comma-separated numbers of features (default: the profile's)")
    p.add_argument("--tasks", default="regression,classification", help="regression, classification or both")
    p.add_argument("--methods", help="comma-separated subset of " + ", ".join(sorted(set(sum(METHODS.values(), ())))))
    p.add_argument("--one", help=argparse.SUPPRESS)       # a child process: one fit
    args = p.parse_args(argv)
    if args.one:                                    # a child: one fit, its record on stdout
        method, task, n_features, s, seed = json.loads(args.one)
        print(json.dumps(fit_one(method, task, n_features, s, seed)))
        return 0
    profile = choose_profile(args, PROFILES)
    if args.ps:
        profile["ps"] = [int(v) for v in args.ps.split(",")]
    tasks = [t for t in args.tasks.split(",") if t]
    wanted = set(args.methods.split(",")) if args.methods else None
    methods = {t: [m for m in METHODS[t] if wanted is None or m in wanted or m == BASELINE] for t in tasks}
    run = Run("peers", args, profile)
    for task in tasks:
        for n_features in profile["ps"]:
            for seed in range(profile["seeds"]):
                for method in methods[task]:
                    record = run_child(method, task, n_features, profile["s"], seed, profile["timeout"],
                                       profile.get("in_process", False))
                    run.unit({"task": task, "p": n_features, "seed": seed, "method": method, **record})
                    shown = record.get("error") or (f"{record['cpu_s']:.2f} s CPU, recall {record['recall']:.3f}, "
                                                    f"peak {record['peak_rss_mb']:.0f} MB")
                    print(f"  {task} p={n_features} seed {seed} {method}: {shown}", flush=True)
    summary = summarise(run.units, tasks, profile["ps"], methods)
    print_summary(summary)
    print(f"results: {run.finish(summary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
