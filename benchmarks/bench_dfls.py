"""DFLS (Li & Gu): adding / removing ~20% of the features by the solution path vs retraining -- accuracy and time.

``asyos.learners.path.dfls.DFLS`` with the group lasso (eq. 9) or the l_p penalty (eq. 10) on least squares,
standardized columns and an intercept (the defaults). Three parts, after the paper's Sec. 5 and App. D-E:

**1. Accuracy (the paper's Tables 3-6).** Data: ``cpu_act`` (8192 x 21) and ``satellite_image``
(6435 x 36) from ``../shared/datasets`` (``$ASYOS_DATASETS`` or ``--data-dir``; dense ``.npz``, keys
``X, y``, cast to float64), and the synthetic MR#1 (n = 100, m = 500) and MR#2 (n = 100, m = 1000):
``X`` standard normal, ``y = X w + N(0, 1)`` with 10 informative features of weight ``100 U(0, 1)`` and
no bias -- scikit-learn's ``make_regression`` defaults with ``noise=1``, the paper's "random linear
regression model with no bias term ... noise std 1"; one data set each (generator seeds 1 and 2).
Settings: group lasso with partition **I** (singletons: the lasso) and **II** (per run, the columns
in a random order paired off consecutively, ``(o_0, o_1), (o_2, o_3), ...``, an odd last column alone),
and l_p with ``p`` = 4 and 6; ``alpha`` in {0.2, 0.5}. Per run (seed ``s``, one random generator per
data set and seed): a random 70/30 train/test split of the rows; a random block of
``round(0.2 m)`` columns (I and l_p: the same columns), for II ``round(0.2 * #groups)`` whole groups.
*Add* ("incremental"): ``fit`` on the other columns, then ``add_features(block)``; *remove*
("decremental"): ``fit`` on all columns, then ``remove_features(block)``. The reference is an
independent accurate batch solution on the final columns, ``DFLS(same parameters).fit(...)``
(FISTA with adaptive restart or L-BFGS, then Newton on the active set, KKT residual <= 1e-10 relative).
Reported per (data set, setting, alpha): aRMSE (test RMSE, mean over runs) of DFLS and of the
reference, the largest relative RMSE difference and the largest ``max |w_DFLS - w_ref|`` over the runs
(coefficients of the standardized problem, ``w_``), the largest KKT residual after DFLS
(``kkt_residual_``) and before its final Newton polish (``path_.kkt_residual_path``), the mean number of
transition points, and how many runs had to be finished by FISTA (``path_.fallback``). **bar** is
computed from these numbers: PASS when every run has relative RMSE difference <= 1e-3 and coefficient
difference <= 1e-4 (the issue's bar), FAIL otherwise.

**2. Time, in the same runs.** The ``add_features`` / ``remove_features`` call (wall clock, the new
columns' standardization and Gram products included) against retraining on the final columns with the
paper's batch stop criterion 1e-7: cold ``batch_solve(tol=1e-7)`` and warm ``batch_solve(w0=...)``
from the old coefficients (padded with zeros when adding, the removed entries dropped when removing).
Medians over the runs, the ratios of the medians warm/DFLS and cold/DFLS, and how far the 1e-7
retrainings are from the reference (``max |w - w_ref|``). On the real data every call takes milliseconds.

**3. Efficiency (the paper's Fig. 1).** (a-c) n >> m: dense regression with equicorrelated columns
(correlation 0.5: ``x = sqrt(.5) z + sqrt(.5) u``), 10 informative of the 25, as MR otherwise; the model
is fitted on m = 20 columns and m' = 5 are added (or fitted on all 25 and 5 removed), for n in
``efficiency_ns``, all rows used for training, ``efficiency_runs`` runs (a new data set each), both
penalties (group lasso I and l_4) at alpha = 0.2. (d-e) m >> n: MR-type data with n = 100 and m in
{500, 1000}: fitted on m - 5 columns, the last 5 added. Median seconds of DFLS, warm and cold retraining
(1e-7), their ratios and DFLS's accuracy against the reference fit. The goal is DFLS >= 5x faster than cold
retraining and at least as fast as warm retraining when n >> m; the printed notes say where it is and is
not met.

Runs: the paper's ten runs on cpu_act and satellite_image; MR#1 3 runs and MR#2 2 runs (on this shared
2-core machine an MR run costs 1-2 minutes, most of it in the l_p/group-lasso fits and the paths with
~100 transitions), ``--seeds N`` sets every data set's runs to N. The whole profile takes ~8-10 minutes
here. The SHA-1 of the DFLS sources (``asyos/learners/{dfls,solution_path,batch_solvers,penalties}.py``)
is printed and kept in the JSON, so a result can be tied to the code it measured. JSON: one unit per measured run (kind ``dynamic`` or ``efficiency``); the plot shows time
against n (log-log) and against m for DFLS and both retrainings. Warnings raised inside a run
(ConvergenceWarning of the fallback, scipy's LinAlgWarning) are counted in its unit, not printed.

Without the data directory ``--quick`` runs on a labelled synthetic dense stand-in instead of the real
sets (its figures say nothing about them); the paper profile stops with an error. ``--quick`` skips
MR#1-2 and uses small n (and m = 150 for the m >> n part).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_dfls.py            # ~10 min (shared 2-core machine)
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_dfls.py --quick    # ~10 s, for CI
"""
from __future__ import annotations

import os
import statistics
import time
import warnings
import zlib

import numpy as np

from asyos.benchmarking.common import (Run, choose_profile, datasets_dir, fmt, load_dense_dataset,
                                      missing_dense_datasets, parser, plot, print_table)

from asyos.learners.path.dfls import DFLS

PROFILES = {
    "paper": {"datasets": ["cpu_act", "satellite_image", "MR#1", "MR#2"], "seeds": 10,
              "mr_seeds": {"MR#1": 3, "MR#2": 2}, "alphas": [0.2, 0.5], "train_fraction": 0.7,
              "block_fraction": 0.2, "batch_tol": 1e-7, "bar_rel_rmse": 1e-3, "bar_coef": 1e-4,
              "efficiency_ns": [2000, 20000, 200000], "efficiency_m": 20, "efficiency_added": 5,
              "efficiency_runs": 5, "efficiency_alpha": 0.2, "wide_n": 100, "wide_ms": [500, 1000]},
    "quick": {"datasets": ["cpu_act", "satellite_image"], "seeds": 1, "mr_seeds": {}, "alphas": [0.2, 0.5],
              "train_fraction": 0.7, "block_fraction": 0.2, "batch_tol": 1e-7, "bar_rel_rmse": 1e-3,
              "bar_coef": 1e-4, "efficiency_ns": [1000, 5000], "efficiency_m": 20, "efficiency_added": 5,
              "efficiency_runs": 2, "efficiency_alpha": 0.2, "wide_n": 100, "wide_ms": [150]},
    # smoke (tests/test_benchmarks.py): one data set, one alpha, one size of each efficiency table
    "smoke": {"datasets": ["cpu_act"], "seeds": 1, "mr_seeds": {}, "alphas": [0.2],
              "train_fraction": 0.7, "block_fraction": 0.2, "batch_tol": 1e-7, "bar_rel_rmse": 1e-3,
              "bar_coef": 1e-4, "efficiency_ns": [1000], "efficiency_m": 20, "efficiency_added": 5,
              "efficiency_runs": 1, "efficiency_alpha": 0.2, "wide_n": 100, "wide_ms": [150]},
}
MR = {"MR#1": (100, 500, 1), "MR#2": (100, 1000, 2)}          # n, m, generator seed
SETTINGS = [("group_lasso", "I", {}), ("group_lasso", "II", {}), ("lp", "l4", {"exponent": 4.0}),
            ("lp", "l6", {"exponent": 6.0})]
EFFICIENCY_SETTINGS = [("group_lasso", "I", {}), ("lp", "l4", {"exponent": 4.0})]
DIRECTIONS = {"add": "incremental: add ~20% of the features", "remove": "decremental: remove ~20% of the features"}
STAND_IN = "stand-in"
STAND_IN_LABEL = "synthetic dense stand-in (NOT real data)"
REAL = ("cpu_act", "satellite_image")


# -------------------------------------------------------------------------------------------- data
def make_regression(n, m, rng, n_informative=10, rho=0.0):
    """``make_regression``-like: ``X`` normal (columns with correlation ``rho``), ``y = X w + N(0, 1)``,
    ``n_informative`` weights ``100 U(0, 1)``, no bias."""
    X = rng.standard_normal((n, m))
    if rho:
        X *= np.sqrt(1.0 - rho)
        X += np.sqrt(rho) * rng.standard_normal((n, 1))
    w = np.zeros(m)
    w[rng.choice(m, min(n_informative, m), replace=False)] = 100.0 * rng.random(min(n_informative, m))
    return X, X @ w + rng.standard_normal(n)


def dense_stand_in(n=2000, p=21, seed=0):
    """For ``--quick`` without the data: correlated columns with assorted scales and offsets."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + rng.standard_normal((n, 1))
    X = X * rng.uniform(0.1, 10.0, p) + rng.uniform(-50.0, 50.0, p)
    beta = np.zeros(p)
    true = rng.choice(p, 6, replace=False)
    beta[true] = rng.uniform(0.5, 2.0, 6) * rng.choice([-1.0, 1.0], 6) / X.std(axis=0)[true]
    return X, X @ beta + 0.7 * rng.standard_normal(n) + 3.0


def missing_data(data_dir, names):
    names = [n for n in names if n in REAL]
    return missing_dense_datasets(data_dir, names) if names else None


def load(data_dir, name):
    if name == STAND_IN:
        return dense_stand_in()
    if name in MR:
        n, m, seed = MR[name]
        return make_regression(n, m, np.random.default_rng(seed))
    return load_dense_dataset(data_dir, name)


def label(name):
    return STAND_IN_LABEL if name == STAND_IN else name


def library_fingerprint():
    """SHA-1 of the DFLS sources, so that a result names the code it measured."""
    import hashlib
    import asyos.learners.path as learners
    digest = hashlib.sha1()
    for module in ("dfls", "solution_path", "batch_solvers", "penalties"):
        with open(os.path.join(os.path.dirname(learners.__file__), f"{module}.py"), "rb") as fh:
            digest.update(fh.read())
    return digest.hexdigest()


def plan_run(name, X, seed, profile):
    """The split, the column block of partition I / l_p, and partition II's labels and block."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    n, m = X.shape
    rows = rng.permutation(n)
    n_train = int(round(profile["train_fraction"] * n))
    block = np.sort(rng.choice(m, int(round(profile["block_fraction"] * m)), replace=False))
    order = rng.permutation(m)
    pairs = np.empty(m, dtype=np.intp)
    pairs[order] = np.arange(m) // 2
    n_groups = int(pairs.max()) + 1
    chosen = rng.choice(n_groups, max(1, int(round(profile["block_fraction"] * n_groups))), replace=False)
    return {"train": rows[:n_train], "test": rows[n_train:],
            "I": (np.arange(m), block), "II": (pairs, np.flatnonzero(np.isin(pairs, chosen))),
            "lp": (None, block)}


# ------------------------------------------------------------------------------------------- runs
def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def rmse(y, pred):
    with np.errstate(over="ignore", invalid="ignore"):      # a diverged model's RMSE is inf: a result, not noise
        return float(np.sqrt(np.mean((y - pred) ** 2)))


def caught_summary(caught):
    counts, messages = {}, []
    for w in caught:
        counts[w.category.__name__] = counts.get(w.category.__name__, 0) + 1
        text = f"{w.category.__name__}: {str(w.message)[:200]}"
        if text not in messages and len(messages) < 3:
            messages.append(text)
    return counts, messages


def dynamic_run(run, profile, name, X, y, seed, plan, direction, setting, alpha):
    penalty, tag, kw = setting
    labels, block = plan["lp" if penalty == "lp" else tag]
    m = X.shape[1]
    rest = np.setdiff1d(np.arange(m), block)
    Xtr, ytr, Xte, yte = X[plan["train"]], y[plan["train"]], X[plan["test"]], y[plan["test"]]
    grp = (lambda cols: None) if labels is None else (lambda cols: labels[cols])  # noqa: E731
    make = lambda cols: DFLS(penalty, alpha=alpha, groups=grp(cols), **kw)       # noqa: E731
    record = {"kind": "dynamic", "dataset": name, "direction": direction, "penalty": penalty, "setting": tag,
              "alpha": alpha, "seed": seed, "n_train": int(Xtr.shape[0]), "n_test": int(Xte.shape[0]), "m": m,
              "block_size": int(block.size), "block": block.tolist()}
    tol = profile["batch_tol"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if direction == "add":
                final = np.r_[rest, block]
                model, fit_s = timed(lambda: make(rest).fit(Xtr[:, rest], ytr))
                w_before = model.w_.copy()
                _, dfls_s = timed(lambda: model.add_features(Xtr[:, block], groups=grp(block)))
                w_warm = np.r_[w_before, np.zeros(block.size)]
            else:
                final = rest
                model, fit_s = timed(lambda: make(np.arange(m)).fit(Xtr, ytr))
                w_before = model.w_.copy()
                _, dfls_s = timed(lambda: model.remove_features(block))
                w_warm = w_before[rest]
            cold, cold_s = timed(lambda: model.batch_solve(tol=tol))
            warm, warm_s = timed(lambda: model.batch_solve(w0=w_warm, tol=tol))
            ref, ref_s = timed(lambda: make(final).fit(Xtr[:, final], ytr))
        except Exception as exc:        # a crash is a finding: keep it and go on
            record.update(error=f"{type(exc).__name__}: {exc}")
            record["warnings"], record["warning_messages"] = caught_summary(caught)
            print(f"  ERROR {name} {direction} {tag} alpha={alpha} seed={seed}: {record['error']}", flush=True)
            return run.unit(record)
    path = model.path_
    r_dfls, r_ref = rmse(yte, model.predict(Xte[:, final])), rmse(yte, ref.predict(Xte[:, final]))
    record["warnings"], record["warning_messages"] = caught_summary(caught)
    record.update(
        rmse_dfls=r_dfls, rmse_ref=r_ref, rel_rmse_diff=abs(r_dfls - r_ref) / r_ref,
        coef_diff=float(np.max(np.abs(model.w_ - ref.w_))), kkt=float(model.kkt_residual_),
        kkt_path=float(path.kkt_residual_path), ref_kkt=float(ref.kkt_residual_), transitions=len(path.transitions),
        fallback=bool(path.fallback), n_rhs=int(path.n_rhs), n_newton=int(path.n_newton),
        phase1_theta=path.phase1_theta, nnz_before=int(np.count_nonzero(w_before)),
        nnz_after=int(np.count_nonzero(model.w_)), nnz_ref=int(np.count_nonzero(ref.w_)),
        seconds={"fit_before": fit_s, "dfls": dfls_s, "dfls_path": path.seconds, "cold": cold_s, "warm": warm_s,
                 "reference_fit": ref_s},
        cold={"n_iter": cold.n_iter, "converged": bool(cold.converged), "kkt": cold.kkt_residual,
              "coef_diff": float(np.max(np.abs(cold.coef - ref.w_))),
              "rmse": rmse(yte, Xte[:, final] @ (cold.coef / model.x_scale_) + model.y_mean_
                           - float(model.x_mean_ @ (cold.coef / model.x_scale_)))},
        warm={"n_iter": warm.n_iter, "converged": bool(warm.converged), "kkt": warm.kkt_residual,
              "coef_diff": float(np.max(np.abs(warm.coef - ref.w_)))})
    return run.unit(record)


def efficiency_run(run, profile, family, X, y, m_old, r, setting, direction="add"):
    """One timed change: ``add`` fits on the first ``m_old`` columns and adds the rest; ``remove``
    fits on all of them and removes the columns past ``m_old``. Retraining is timed on the final
    columns, cold and warm (from the coefficients before the change)."""
    penalty, tag, kw = setting
    alpha = profile["efficiency_alpha"]
    n, m = X.shape
    tol = profile["batch_tol"]
    record = {"kind": "efficiency", "family": family, "direction": direction, "penalty": penalty, "setting": tag,
              "alpha": alpha, "run": r, "n": n, "m_old": m_old, "m_added": m - m_old}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if direction == "add":
            model, fit_s = timed(lambda: DFLS(penalty, alpha=alpha, **kw).fit(X[:, :m_old], y))
            w_before = model.w_.copy()
            _, dfls_s = timed(lambda: model.add_features(X[:, m_old:]))
            start = np.r_[w_before, np.zeros(m - m_old)]
            final = X
        else:
            model, fit_s = timed(lambda: DFLS(penalty, alpha=alpha, **kw).fit(X, y))
            w_before = model.w_.copy()
            _, dfls_s = timed(lambda: model.remove_features(np.arange(m_old, m)))
            start = w_before[:m_old]
            final = X[:, :m_old]
        cold, cold_s = timed(lambda: model.batch_solve(tol=tol))
        warm, warm_s = timed(lambda: model.batch_solve(w0=start, tol=tol))
        ref, ref_s = timed(lambda: DFLS(penalty, alpha=alpha, **kw).fit(final, y))
    path = model.path_
    record["warnings"], record["warning_messages"] = caught_summary(caught)
    record.update(
        coef_diff=float(np.max(np.abs(model.w_ - ref.w_))), kkt=float(model.kkt_residual_),
        kkt_path=float(path.kkt_residual_path), transitions=len(path.transitions), fallback=bool(path.fallback),
        n_rhs=int(path.n_rhs), nnz_before=int(np.count_nonzero(w_before)), nnz_after=int(np.count_nonzero(model.w_)),
        seconds={"fit_before": fit_s, "dfls": dfls_s, "dfls_path": path.seconds, "cold": cold_s, "warm": warm_s,
                 "reference_fit": ref_s},
        cold={"n_iter": cold.n_iter, "converged": bool(cold.converged),
              "coef_diff": float(np.max(np.abs(cold.coef - ref.w_)))},
        warm={"n_iter": warm.n_iter, "converged": bool(warm.converged),
              "coef_diff": float(np.max(np.abs(warm.coef - ref.w_)))})
    return run.unit(record)


def warm_up():
    """One tiny add/remove/retrain so that first-call costs (imports, LAPACK set-up) are not timed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        X, y = make_regression(200, 8, np.random.default_rng(0))
        for penalty, _, kw in SETTINGS[::2]:
            model = DFLS(penalty, alpha=0.2, **kw).fit(X[:, :6], y).add_features(X[:, 6:])
            model.batch_solve()
            model.remove_features([6, 7])


# -------------------------------------------------------------------------------------------- main
def main():
    p = parser(__doc__.splitlines()[0], data_dir=True)
    args = p.parse_args()
    profile = choose_profile(args, PROFILES)
    if args.seeds:
        profile["mr_seeds"] = {k: args.seeds for k in profile["mr_seeds"]}
    data_dir = datasets_dir(args.data_dir)
    problem = missing_data(data_dir, profile["datasets"])
    if problem and not args.quick:
        raise SystemExit(problem)
    if problem:
        print(f"NOTE: {problem}; the quick profile runs on a {STAND_IN_LABEL} instead: its figures say nothing "
              f"about cpu_act or satellite_image\n")
        profile["datasets"] = [STAND_IN] + [d for d in profile["datasets"] if d not in REAL]
    profile["data_dir"] = data_dir
    profile["data_source"] = STAND_IN_LABEL if problem else "real"
    profile["library_sha1"] = library_fingerprint()
    run = Run("dfls", args, profile)
    warm_up()
    print(f"DFLS vs retraining; {profile['train_fraction']:.0%} of the rows for training, ~"
          f"{profile['block_fraction']:.0%} of the columns added/removed; batch stop criterion "
          f"{profile['batch_tol']:g}; data: {data_dir if not problem else STAND_IN_LABEL}; DFLS sources sha1 "
          f"{profile['library_sha1'][:12]}\n", flush=True)

    for name in profile["datasets"]:
        X, y = load(data_dir, name)
        seeds = profile["mr_seeds"].get(name, profile["seeds"]) if name in MR else profile["seeds"]
        t0 = time.perf_counter()
        for seed in range(seeds):
            plan = plan_run(name, X, seed, profile)
            for direction in DIRECTIONS:
                for setting in SETTINGS:
                    for alpha in profile["alphas"]:
                        dynamic_run(run, profile, name, X, y, seed, plan, direction, setting, alpha)
        print(f"{label(name)}: {X.shape[0]} x {X.shape[1]}, {seeds} run(s) x 2 directions x {len(SETTINGS)} "
              f"settings x {len(profile['alphas'])} alphas in {time.perf_counter() - t0:.1f} s", flush=True)

    t0 = time.perf_counter()
    m_old, m_new = profile["efficiency_m"], profile["efficiency_added"]
    for n in profile["efficiency_ns"]:
        for r in range(profile["efficiency_runs"]):
            X, y = make_regression(n, m_old + m_new, np.random.default_rng([n, r, 7]), rho=0.5)
            for setting in EFFICIENCY_SETTINGS:
                for direction in DIRECTIONS:
                    efficiency_run(run, profile, "n>>m", X, y, m_old, r, setting, direction)
    for m in profile["wide_ms"]:
        for r in range(profile["efficiency_runs"]):
            X, y = make_regression(profile["wide_n"], m, np.random.default_rng([m, r, 11]))
            for setting in EFFICIENCY_SETTINGS:
                efficiency_run(run, profile, "m>>n", X, y, m - m_new, r, setting)
    print(f"efficiency runs in {time.perf_counter() - t0:.1f} s\n", flush=True)

    summary = summarise(run.units, profile)
    path = run.finish(summary)
    draw(run, summary)
    print(f"results: {path}")


# ------------------------------------------------------------------------------------------ tables
def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def sci(v):
    return "-" if v is None else f"{v:.1e}"


def ratio(a, b):
    return None if a is None or not b else a / b


def setting_label(penalty, tag):
    return f"G {tag}" if penalty == "group_lasso" else f"l_{tag[1:]}"


def summarise(units, profile):
    dyn = [u for u in units if u["kind"] == "dynamic"]
    datasets = [d for d in profile["datasets"] if any(u["dataset"] == d for u in dyn)]
    accuracy, timing, notes = [], [], []
    for direction, title in DIRECTIONS.items():
        for family, table in (("group_lasso", "3" if direction == "add" else "5"),
                              ("lp", "4" if direction == "add" else "6")):
            rows = []
            for name in datasets:
                for penalty, tag, _ in SETTINGS:
                    if penalty != family:
                        continue
                    for alpha in profile["alphas"]:
                        mine = [u for u in dyn if (u["dataset"], u["direction"], u["penalty"], u["setting"],
                                                   u["alpha"]) == (name, direction, penalty, tag, alpha)]
                        if not mine:
                            continue
                        ok = [u for u in mine if "error" not in u]
                        errors = len(mine) - len(ok)
                        row = {"dataset": name, "direction": direction, "penalty": penalty, "setting": tag,
                               "alpha": alpha, "runs": len(mine), "errors": errors}
                        if ok:
                            rel = max(u["rel_rmse_diff"] for u in ok)
                            dw = max(u["coef_diff"] for u in ok)
                            row.update(
                                armse_dfls=float(np.mean([u["rmse_dfls"] for u in ok])),
                                armse_ref=float(np.mean([u["rmse_ref"] for u in ok])),
                                armse_cold=float(np.mean([u["cold"]["rmse"] for u in ok])),
                                max_rel_rmse_diff=rel, max_coef_diff=dw, max_kkt=max(u["kkt"] for u in ok),
                                max_kkt_path=max(u["kkt_path"] for u in ok),
                                mean_transitions=float(np.mean([u["transitions"] for u in ok])),
                                fallbacks=sum(u["fallback"] for u in ok),
                                passed=errors == 0 and rel <= profile["bar_rel_rmse"] and dw <= profile["bar_coef"],
                                dfls_s=median([u["seconds"]["dfls"] for u in ok]),
                                warm_s=median([u["seconds"]["warm"] for u in ok]),
                                cold_s=median([u["seconds"]["cold"] for u in ok]),
                                warm_iter=median([u["warm"]["n_iter"] for u in ok]),
                                cold_iter=median([u["cold"]["n_iter"] for u in ok]),
                                warm_coef_diff=max(u["warm"]["coef_diff"] for u in ok),
                                cold_coef_diff=max(u["cold"]["coef_diff"] for u in ok))
                            row["warm_over_dfls"] = ratio(row["warm_s"], row["dfls_s"])
                            row["cold_over_dfls"] = ratio(row["cold_s"], row["dfls_s"])
                        else:
                            row["passed"] = False
                        rows.append(row)
            if not rows:
                continue
            accuracy.extend(rows)
            print_table(
                f"Table {table} analogue -- {'group lasso' if family == 'group_lasso' else 'l_p penalty'}, {title}: "
                f"aRMSE = test RMSE averaged over the runs; batch = independent fit on the final columns (tol 1e-10); "
                f"bar = PASS if every run has |dRMSE|/RMSE <= {profile['bar_rel_rmse']:g} and max|dw| <= "
                f"{profile['bar_coef']:g}",
                ["data set", "G" if family == "group_lasso" else "l_p", "alpha", "runs", "aRMSE DFLS", "aRMSE batch",
                 "max rel dRMSE", "max|dw|", "max KKT", "max KKT pre-polish", "transitions", "fallback", "bar"],
                [[label(r["dataset"]), r["setting"] if family == "group_lasso" else r["setting"][1:], r["alpha"],
                  r["runs"] if not r["errors"] else f"{r['runs']} ({r['errors']} crashed)",
                  fmt(r.get("armse_dfls"), digits=4), fmt(r.get("armse_ref"), digits=4),
                  sci(r.get("max_rel_rmse_diff")), sci(r.get("max_coef_diff")), sci(r.get("max_kkt")),
                  sci(r.get("max_kkt_path")), fmt(r.get("mean_transitions"), digits=1),
                  f"{r.get('fallbacks', 0)}/{r['runs'] - r['errors']}", "PASS" if r["passed"] else "FAIL"]
                 for r in rows])
        rows = [r for r in accuracy if r["direction"] == direction and "dfls_s" in r]
        timing.extend(rows)
        print_table(
            f"Time, {title}: median seconds over the runs of the DFLS call vs retraining on the final columns to "
            f"{profile['batch_tol']:g} (warm: from the old coefficients; cold: from 0); ratios of the medians; "
            f"max|dw| of the retrainings against the batch reference",
            ["data set", "setting", "alpha", "runs", "DFLS s", "warm s", "cold s", "warm/DFLS", "cold/DFLS",
             "warm iters", "cold iters", "warm max|dw|", "cold max|dw|", "DFLS max|dw|"],
            [[label(r["dataset"]), setting_label(r["penalty"], r["setting"]), r["alpha"], r["runs"] - r["errors"],
              f"{r['dfls_s']:.4f}", f"{r['warm_s']:.4f}", f"{r['cold_s']:.4f}", fmt(r["warm_over_dfls"], digits=2),
              fmt(r["cold_over_dfls"], digits=2), f"{r['warm_iter']:.0f}", f"{r['cold_iter']:.0f}",
              sci(r["warm_coef_diff"]), sci(r["cold_coef_diff"]), sci(r["max_coef_diff"])] for r in rows])

    eff_units = [u for u in units if u["kind"] == "efficiency"]
    efficiency = []
    for family in ("n>>m", "m>>n"):
        keys = sorted({(u["n"], u["m_old"], u["m_added"]) for u in eff_units if u["family"] == family},
                      key=lambda k: (k[0], k[1]))
        for penalty, tag, _ in EFFICIENCY_SETTINGS:
            for direction, n, m_old, m_added in [(d, *k) for d in DIRECTIONS for k in keys]:
                mine = [u for u in eff_units if (u["family"], u["penalty"], u["n"], u["m_old"],
                                                 u.get("direction", "add")) == (family, penalty, n, m_old, direction)]
                if not mine:
                    continue
                row = {"family": family, "direction": direction, "penalty": penalty, "setting": tag, "n": n,
                       "m_old": m_old,
                       "m_added": m_added, "runs": len(mine),
                       "dfls_s": median([u["seconds"]["dfls"] for u in mine]),
                       "dfls_path_s": median([u["seconds"]["dfls_path"] for u in mine]),
                       "warm_s": median([u["seconds"]["warm"] for u in mine]),
                       "cold_s": median([u["seconds"]["cold"] for u in mine]),
                       "transitions": median([u["transitions"] for u in mine]),
                       "max_coef_diff": max(u["coef_diff"] for u in mine),
                       "warm_coef_diff": max(u["warm"]["coef_diff"] for u in mine),
                       "fallbacks": sum(u["fallback"] for u in mine)}
                row["warm_over_dfls"] = ratio(row["warm_s"], row["dfls_s"])
                row["cold_over_dfls"] = ratio(row["cold_s"], row["dfls_s"])
                efficiency.append(row)
    if efficiency:
        print_table(
            f"Efficiency (Fig. 1): m' columns added to a model on m columns, or removed from one on m + m', "
            f"alpha = {profile['efficiency_alpha']}; median seconds over the runs (DFLS: the add_features / "
            f"remove_features call, its path alone in brackets); retraining on the final columns; n>>m: "
            f"equicorrelated (0.5) Gaussian design; m>>n: MR-type design",
            ["regime", "change", "penalty", "n", "m", "m'", "runs", "DFLS s", "(path s)", "warm s", "cold s",
             "warm/DFLS", "cold/DFLS", "transitions", "DFLS max|dw|", "warm max|dw|", "fallback"],
            [[r["family"], r["direction"], setting_label(r["penalty"], r["setting"]), r["n"], r["m_old"],
              r["m_added"], r["runs"],
              f"{r['dfls_s']:.4f}", f"({r['dfls_path_s']:.4f})", f"{r['warm_s']:.4f}", f"{r['cold_s']:.4f}",
              fmt(r["warm_over_dfls"], digits=2), fmt(r["cold_over_dfls"], digits=2), f"{r['transitions']:.0f}",
              sci(r["max_coef_diff"]), sci(r["warm_coef_diff"]), f"{r['fallbacks']}/{r['runs']}"]
             for r in efficiency])

    # -- notes, all computed from the rows above
    failed = [r for r in accuracy if not r["passed"]]
    notes.append(f"accuracy bar: {len(accuracy) - len(failed)}/{len(accuracy)} rows PASS"
                 + ("" if not failed else "; FAIL: " + ", ".join(
                     f"{label(r['dataset'])} {r['direction']} {setting_label(r['penalty'], r['setting'])} "
                     f"alpha={r['alpha']}" for r in failed)))
    fb = [u for u in dyn if u.get("fallback")] + [u for u in eff_units if u.get("fallback")]
    if fb:
        notes.append(f"{len(fb)} run(s) were finished by the FISTA fallback (path_.fallback): " + "; ".join(
            f"{u.get('dataset', u.get('family'))} {u.get('direction', 'add')} "
            f"{setting_label(u['penalty'], u['setting'])} alpha={u['alpha']} "
            f"run={u.get('seed', u.get('run'))} (n_train={u.get('n_train', u.get('n'))}, active before="
            f"{u['nnz_before']}, {u['transitions']} transitions, {u['seconds']['dfls']:.1f} s"
            f"{', ' + u['warning_messages'][0][:110] if u['warning_messages'] else ''})" for u in fb[:12])
            + ("" if len(fb) <= 12 else f"; ... ({len(fb) - 12} more in the JSON)"))
    else:
        notes.append("no run used the FISTA fallback")
    crashed = [u for u in dyn if "error" in u]
    if crashed:
        notes.append(f"{len(crashed)} run(s) crashed: " + "; ".join(
            f"{u['dataset']} {u['direction']} {u['setting']} alpha={u['alpha']}: {u['error']}" for u in crashed[:5]))
    slower = [r for r in timing if r["warm_over_dfls"] is not None and r["warm_over_dfls"] < 1]
    faster = [r for r in timing if r not in slower]
    short = lambda r: (f"{label(r['dataset'])} {r['direction']} {setting_label(r['penalty'], r['setting'])} "  # noqa: E731
                       f"a={r['alpha']} ({r['warm_over_dfls']:.2f}x)")
    if slower:
        notes.append(f"DFLS was slower than warm retraining (medians) in {len(slower)}/{len(timing)} accuracy rows; "
                     + (f"faster only in: {', '.join(map(short, faster))}" if len(faster) < len(slower) else
                        f"slower in: {', '.join(map(short, slower))}"))
    for r in efficiency:
        if r["family"] != "n>>m":
            continue
        goal = r["cold_over_dfls"] is not None and r["cold_over_dfls"] >= 5 and r["warm_over_dfls"] >= 1
        notes.append(f"n>>m, {r['direction']}, {setting_label(r['penalty'], r['setting'])}, n={r['n']}: cold/DFLS = "
                     f"{r['cold_over_dfls']:.2f}x, warm/DFLS = {r['warm_over_dfls']:.2f}x -> goal (>= 5x faster than "
                     f"cold retraining, >= 1x warm) {'met' if goal else 'NOT met'}"
                     + ("" if r["warm_over_dfls"] >= 1 else " (DFLS is SLOWER than warm retraining here)"))
    for r in efficiency:
        if r["family"] == "m>>n":
            notes.append(f"m>>n, {r['direction']}, {setting_label(r['penalty'], r['setting'])}, n={r['n']}, "
                         f"m={r['m_old']}+{r['m_added']}: warm/DFLS = {r['warm_over_dfls']:.2f}x"
                         + (" (DFLS is SLOWER than warm retraining)" if r["warm_over_dfls"] < 1 else ""))
    real_rows = [r for r in timing if r["dataset"] in REAL + (STAND_IN,)]
    if real_rows:
        notes.append(f"on the real data every call takes {min(r['dfls_s'] for r in real_rows) * 1e3:.1f}-"
                     f"{max(max(r['dfls_s'], r['warm_s'], r['cold_s']) for r in real_rows) * 1e3:.1f} ms: "
                     f"the ratios there are dominated by fixed overheads")
    notes.append(f"DFLS sources sha1 {profile['library_sha1']}")
    print("Notes:\n" + "\n".join(f"* {n}" for n in notes) + "\n", flush=True)
    return {"accuracy": accuracy, "efficiency": efficiency, "notes": notes,
            "rows_passed": len(accuracy) - len(failed), "rows": len(accuracy), "fallback_runs": len(fb),
            "crashed_runs": len(crashed)}


def draw(run, summary):
    eff = [r for r in summary["efficiency"] if r["direction"] == "add"]      # the paper's Fig. 1: additions
    if not eff:
        return

    def draw_fn(plt):
        fig, axes = plt.subplots(1, 3, figsize=(14, 4))
        styles = {"dfls_s": ("DFLS", "o-", "C0"), "warm_s": ("warm retraining", "s--", "C1"),
                  "cold_s": ("cold retraining", "^:", "C2")}
        for ax, (penalty, tag, _) in zip(axes[:2], EFFICIENCY_SETTINGS):
            rows = sorted([r for r in eff if r["family"] == "n>>m" and r["penalty"] == penalty], key=lambda r: r["n"])
            for key, (name, style, colour) in styles.items():
                ax.loglog([r["n"] for r in rows], [r[key] for r in rows], style, color=colour, label=name)
            if rows:
                ax.set_title(f"{setting_label(penalty, tag)}: m = {rows[0]['m_old']} + {rows[0]['m_added']} added",
                             fontsize=9)
            ax.set_xlabel("n (samples)")
            ax.set_ylabel("median seconds")
            ax.legend(fontsize=7)
        ax = axes[2]
        for (penalty, tag, _), fill in zip(EFFICIENCY_SETTINGS, ("full", "none")):
            rows = sorted([r for r in eff if r["family"] == "m>>n" and r["penalty"] == penalty],
                          key=lambda r: r["m_old"])
            for key, (name, style, colour) in styles.items():
                ax.semilogy([r["m_old"] + r["m_added"] for r in rows], [r[key] for r in rows], style, color=colour,
                            fillstyle=fill, label=f"{setting_label(penalty, tag)} {name}")
        ax.set_title("m >> n: n = 100, 5 columns added", fontsize=9)
        ax.set_xlabel("m (columns after the addition)")
        ax.set_ylabel("median seconds")
        ax.legend(fontsize=6)
    plot(os.path.join(run.args.output, "dfls.png"), draw_fn)


if __name__ == "__main__":
    main()
