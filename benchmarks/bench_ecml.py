"""ECML-PKDD'18 Sec. 5 on its real data: B-ARDA and B-AMD vs OFS, SOFS, l1-ARDA and Ada-FOBOS.

Zhai, Wang, Koriche, Gao, "Online Feature Selection by Adaptive Sub-gradient Methods". Data: the
authors' own files of arcene, dexter, basehock, pcmac and farm_ads (``../shared/datasets`` next to
the repository, or ``--data-dir``; gisette is not staged), their train/test splits as given, raw
(unscaled: ``scale=None``) features, each class's default loss (squared hinge for B-ARDA, B-AMD,
l1-ARDA, Ada-FOBOS; hinge for OFS, SOFS), ``delta = 1e-2``, ``ceil(2d/n)`` passes over freshly
permuted training data (``passes="auto"``; ``random_state`` = the run's seed).

Protocol, per data set:

1. **Tuning** on training accuracy at the tuning budget (B = 100), one run (seed 0) per point:
   ``eta, lam`` of B-ARDA, B-AMD, OFS and ``1/gamma`` of SOFS from ``ECML_GRID`` = {1e-1, 1e-1.5,
   ..., 1e-8}; the best training accuracy wins; among tied points the best online accuracy (each
   training sample predicted before it was learned from, which the authors' code records), then the
   first point in grid order (larger ``eta``, then larger ``lam``) -- the rule of
   ``asyos.learners.stream.tuning.grid_search``. The points are run here one by one (each a logged unit, two
   at a time on two cores). A fit whose weights are not finite counts as failed.
2. **Accuracy vs budget** (the paper's Fig. 1 small budgets, Fig. 2 larger ones): the four budgeted
   learners with the tuned parameters, every budget, ``seeds`` runs; test accuracy mean and std.
3. **Equal feature counts** (Fig. 3): l1-ARDA with B-ARDA's tuned ``eta`` and Ada-FOBOS with B-AMD's
   (the paper: "the choice of step-sizes follows ... Sect. 5.2"); their l1 weight ``lam`` is
   "gradually modified" (run 0: powers of ten, then a bisection on ``log lam`` per target count
   ``l1_targets``, stopping within a factor 1.3 of it -- cheaper than ``lam="auto"``'s exact search)
   to reach feature counts near the targets; each ``lam`` found is then run with every seed, and
   B-ARDA (B-AMD) is run with the same seed at budget = the count l1-ARDA (Ada-FOBOS) reached in
   that run. Both are compared on test accuracy at these equal feature counts. Where no ``lam``
   comes within 2x of any target (the count can jump from 0 to hundreds of features between two
   nearly equal ``lam``: l1-ARDA on arcene), the smallest non-zero count reached is used instead.

The summary holds, per data set, the tuned parameters, the accuracy-vs-budget table, the equal-count
table, and one verdict per claim of the paper, computed from the means: (1) B-ARDA best at small
budgets; (2) B-AMD better than OFS at larger budgets; (3) B-ARDA >= l1-ARDA and B-AMD >= Ada-FOBOS
at equal feature counts.

Reductions of the "paper" profile. One fit takes 0.02-0.4 s on dexter, basehock and pcmac, 0.4-3.5 s
on farm_ads and 1-10 s on arcene (200 passes over dense rows; measured two fits at a time on the
2-core machine, shared: B-ARDA 3.7 s, B-AMD 7.4 s, OFS 1.9 s, SOFS 3.9 s on average). The full
protocol (225 grid points per learner and data set, 10 runs at every 10th / 100th budget) would take
several hours, arcene's grid alone about 50 minutes of fits; the profile is sized to finish within
30-40 minutes:

* grid: first ``eta`` in {1e-1, 1e-2, ..., 1e-8} (every decade) x ``lam`` in {1e-1, 1e-3, 1e-5, 1e-7}
  (every other decade; on dexter and pcmac the full 15x15 grid showed training accuracy almost flat
  in ``lam``), then the half-decade neighbours (3 x 3) of the best point: about 40 of 225 points;
  SOFS keeps its full 15-point grid;
* tuning with one run (seed 0) per point instead of averaging runs;
* budgets {10, 20, 30, 50, 100} (small) and {200, 300, 500, 700, 1000} (larger) instead of every
  10 / every 100;
* equal-count comparison at 4 target counts {10, 20, 50, 100} (Fig. 3's small budgets).

The 10 runs per budget and per equal-count point are kept. Measured on the 2-core machine: 731 s
(12 minutes) with little other load; expect about twice that when the machine is shared (arcene
alone, with fewer budgets, took 15 minutes at load average 5).

    python benchmarks/bench_ecml.py                          # "paper" profile, 12-25 min on 2 cores
    python benchmarks/bench_ecml.py --quick                  # seconds, for CI (dexter only)
    python benchmarks/bench_ecml.py --datasets dexter,pcmac --data-dir /path/to/datasets --jobs 2
"""
from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp

from asyos.benchmarking.common import (Run, choose_profile, datasets_dir, fmt, mean_std, parser, plot,
                                       print_table, sparse_stand_in, usable_cores)

from asyos.errors import InputError
from asyos.learners.stream.budgeted import BudgetedAMD, BudgetedARDA
from asyos.learners.stream.l1 import L1ARDA, AdaFOBOS
from asyos.learners.stream.ofs import OFS, SOFS
from asyos.learners.stream.tuning import ECML_GRID, tuning_grid

STAND_IN = "stand-in"
DATASETS = ("arcene", "dexter", "basehock", "pcmac", "farm_ads")
DENSE = {"arcene": "arcene/arcene.npz"}

LEARNERS = {"b-arda": BudgetedARDA, "b-amd": BudgetedAMD, "ofs": OFS, "sofs": SOFS,
            "l1-arda": L1ARDA, "ada-fobos": AdaFOBOS}
BUDGETED = ("b-arda", "b-amd", "ofs", "sofs")
PAIRS = {"l1-arda": "b-arda", "ada-fobos": "b-amd"}          # l1 learner -> budgeted one at its count
DELTA = 1e-2
L1_TOLERANCE = 1.3          # a path point within this factor of a target count is taken as reaching it
L1_STEPS = 6                # bisection fits per target count at most

# Grids are exponents e of 10^-e, on ECML_GRID's half-decade lattice (1 ... 8).
PROFILES = {
    "paper": {"datasets": list(DATASETS), "seeds": 10, "tune_budget": 100, "tune_seed": 0,
              "eta_exponents": [1, 2, 3, 4, 5, 6, 7, 8], "lam_exponents": [1, 3, 5, 7], "refine": True,
              "sofs_exponents": [k / 2 for k in range(2, 17)],
              "small_budgets": [10, 20, 30, 50, 100], "large_budgets": [200, 300, 500, 700, 1000],
              "l1_targets": [10, 20, 50, 100], "l1_seeds": 10},
    "quick": {"datasets": ["dexter"], "seeds": 2, "tune_budget": 50, "tune_seed": 0,
              "eta_exponents": [1, 3, 5], "lam_exponents": [1, 5], "refine": True,
              "sofs_exponents": [1, 4, 8],
              "small_budgets": [10, 50], "large_budgets": [200],
              "l1_targets": [10, 50], "l1_seeds": 2},
    # smoke (tests/test_benchmarks.py): one seed, the fewest points of each grid
    "smoke": {"datasets": ["dexter"], "seeds": 1, "tune_budget": 10, "tune_seed": 0,
              "eta_exponents": [3], "lam_exponents": [1], "refine": True,
              "sofs_exponents": [4],
              "small_budgets": [10], "large_budgets": [200],
              "l1_targets": [10], "l1_seeds": 1},
}


def reductions(profile) -> list:
    """What this profile leaves out of the full protocol, in words (printed and stored)."""
    full = [k / 2 for k in range(2, 17)]
    eta, lam, sofs = profile["eta_exponents"], profile["lam_exponents"], profile["sofs_exponents"]
    out = []
    if len(eta) < len(full) or len(lam) < len(full):
        out.append(f"grid: eta in {grid_text(eta)} x lam in {grid_text(lam)}"
                   + (", then the half-decade neighbours of the best point" if profile["refine"] else "")
                   + f" (the full grid has {len(full)} x {len(full)} points)")
    if len(sofs) < len(full):
        out.append(f"SOFS: 1/gamma in {grid_text(sofs)} (of {len(full)} values)")
    out.append(f"tuning: one run (seed {profile['tune_seed']}) per grid point, at B = {profile['tune_budget']}")
    out.append(f"budgets: small {profile['small_budgets']}, larger {profile['large_budgets']}")
    if profile["seeds"] < 10:
        out.append(f"{profile['seeds']} runs per budget (the paper: 10)")
    l1_seeds = min(profile["l1_seeds"], profile["seeds"])
    out.append(f"equal-count comparison: {l1_seeds} runs, lam values reaching about {profile['l1_targets']} features")
    if profile["datasets"] != list(DATASETS):
        out.append(f"data sets: {', '.join(profile['datasets'])}")
    return out


def grid_text(exponents):
    return "{" + ", ".join(f"1e-{e:g}" for e in exponents) + "}"


def main():
    p = parser(__doc__.splitlines()[0], prog="bench_ecml.py", data_dir=True)
    p.add_argument("--datasets", help=f"comma-separated subset of {','.join(DATASETS)} (default: the profile's)")
    p.add_argument("--jobs", type=int, default=usable_cores(),
                   help="fits run at once in threads (the row loops release the GIL; default: usable cores)")
    args = p.parse_args()
    profile = choose_profile(args, PROFILES)
    if args.datasets:
        names = [n.strip() for n in args.datasets.split(",") if n.strip()]
        unknown = [n for n in names if n not in DATASETS]
        if unknown or not names:
            raise SystemExit(f"--datasets: unknown {', '.join(unknown) or '(none given)'}; "
                             f"choose from {', '.join(DATASETS)}")
        profile["datasets"] = names
    data_dir = datasets_dir(args.data_dir)
    problem = missing_data(data_dir, profile["datasets"])
    if problem and not args.quick:
        raise SystemExit(problem)
    if problem:                      # --quick on a machine without the data: exercise the code on a stand-in
        print(f"NOTE: {problem}; the quick profile runs on a synthetic sparse stand-in instead "
              f"(asyos.benchmarking.common.sparse_stand_in): its figures say nothing about the paper's data\n")
        profile["datasets"] = [STAND_IN]
    profile["data_dir"] = data_dir
    profile["data_source"] = "synthetic stand-in" if problem else "real"
    profile["jobs"] = max(1, args.jobs)
    profile["reductions"] = reductions(profile)
    run = Run("ecml", args, profile)
    print(f"ECML'18 protocol, {'quick' if args.quick else 'paper'} profile, {profile['jobs']} fits at a time; "
          f"data: {data_dir}")
    print("reductions of the full protocol:\n" + "\n".join(f"  * {r}" for r in profile["reductions"]) + "\n",
          flush=True)
    pool = ThreadPoolExecutor(max_workers=profile["jobs"]) if profile["jobs"] > 1 else None
    try:
        per_dataset = {}
        for name in profile["datasets"]:
            data = load(data_dir, name)
            per_dataset[name] = run_dataset(run, pool, profile, name, data)
            report_dataset(name, per_dataset[name], profile)
    finally:
        if pool is not None:
            pool.shutdown()
    summary = {"datasets": per_dataset, "reductions": profile["reductions"],
               "verdicts": overall_verdicts(per_dataset), "seconds": time.time() - run.started}
    print_overall(summary)
    path = run.finish(summary)
    draw(run, per_dataset)
    print(f"total time: {summary['seconds']:.0f} s")
    print(f"results: {path}")


# -- data -------------------------------------------------------------------------------------------
def missing_data(path, names):
    """Why the data sets cannot be read from ``path`` (``None`` when they can)."""
    if not os.path.isdir(path):
        return (f"data directory not found: {path} (the shared datasets are expected at ../shared/datasets "
                f"next to the repository root; pass --data-dir DIR or set ASYOS_DATASETS)")
    missing = [n for n in names if not os.path.exists(os.path.join(path, DENSE.get(n, f"{n}/X_train.npz")))]
    if missing:
        return f"data directory {path} lacks {', '.join(missing)} (see its README.md)"
    return None


def load(data_dir, name):
    """``(X_train, y_train, X_test, y_test)``: canonical float64 CSR and float labels in {-1, +1}."""
    if name == STAND_IN:
        X, y, Xt, yt = sparse_stand_in()
    elif name in DENSE:
        with np.load(os.path.join(data_dir, DENSE[name])) as z:
            X, y, Xt, yt = (z[k] for k in ("X_train", "y_train", "X_test", "y_test"))
        X, Xt = X.astype(np.float64), Xt.astype(np.float64)    # int16 products would overflow
    else:
        base = os.path.join(data_dir, name)
        X, Xt = sp.load_npz(os.path.join(base, "X_train.npz")), sp.load_npz(os.path.join(base, "X_test.npz"))
        y, yt = np.load(os.path.join(base, "y_train.npy")), np.load(os.path.join(base, "y_test.npy"))

    def csr(M):
        # one canonical float64 CSR shared by every fit (read-only; no per-fit conversion)
        M = sp.csr_matrix(M, dtype=np.float64)
        M.sum_duplicates()
        M.sort_indices()
        return M
    X, Xt = csr(X), csr(Xt)
    n, d = X.shape
    return {"X": X, "y": np.asarray(y, dtype=np.float64), "X_test": Xt, "y_test": np.asarray(yt, dtype=np.float64),
            "n": n, "d": d, "passes": max(1, math.ceil(2 * d / n))}


# -- one fit ----------------------------------------------------------------------------------------
def fit_one(data, spec):
    """Fit ``spec`` (algorithm, budget, seed, params) and measure it; never raises on a bad point."""
    algo, params = spec["algorithm"], dict(spec["params"])
    if algo in ("b-arda", "b-amd"):
        params.setdefault("delta", DELTA)
    if algo == "b-amd":                # ECML'18 Alg. 2 as published: a coordinate left out restarts from 0
        params.setdefault("outside", "reset")
    if algo in PAIRS:                  # the paper's online l1 models: no refit of the kept features, and the
        params.setdefault("refit", False)     # most non-zeros not above the budget
        params.setdefault("budget_rule", "at_most")
    est = LEARNERS[algo](budget=spec["budget"], scale=None, passes="auto", random_state=spec["seed"], **params)
    rec = {k: v for k, v in spec.items() if k != "params"}
    rec.update(params)
    t0 = time.perf_counter()
    try:
        with np.errstate(all="ignore"):
            est.fit(data["X"], data["y"])
        seconds = time.perf_counter() - t0
        coef = est.coef_               # a diverged run raises DivergenceError (an InputError) here
    except (InputError, FloatingPointError, ValueError) as exc:
        rec.update(seconds=time.perf_counter() - t0, error=f"{type(exc).__name__}: {exc}", train_acc=None,
                   test_acc=None, n_features=None, finite=None)
        return rec
    finite = bool(np.all(np.isfinite(coef)))
    rec.update(seconds=seconds, finite=finite, n_features=int(np.count_nonzero(coef)),
               n_updates=est.n_updates_, online_acc=est.online_accuracy_, max_abs_coef=float(np.max(np.abs(coef))) if coef.size else 0.0)
    if finite:
        rec["train_acc"] = accuracy(est, data["X"], data["y"])
        rec["test_acc"] = accuracy(est, data["X_test"], data["y_test"])
    else:
        rec.update(train_acc=None, test_acc=None, error="non-finite weights (diverged)")
    return rec


def accuracy(est, X, y):
    return float(est.score(X, y))


def run_fits(run, pool, data, specs):
    """Fit every spec (in the pool when there is one) and log each as a unit, in order."""
    results = pool.map(lambda s: fit_one(data, s), specs) if pool is not None else map(
        lambda s: fit_one(data, s), specs)
    return [run.unit(rec) for rec in results]


# -- the protocol on one data set -------------------------------------------------------------------
def run_dataset(run, pool, profile, name, data):
    t0 = time.time()
    print(f"== {name}: n = {data['n']}, d = {data['d']}, test {data['X_test'].shape[0]}, "
          f"{data['passes']} passes per fit", flush=True)
    tuned, tuning = tune(run, pool, profile, name, data)
    print(f"   tuned in {time.time() - t0:.0f} s", flush=True)
    t1 = time.time()
    budgets = sorted(set(profile["small_budgets"]) | set(profile["large_budgets"]))
    specs = [{"dataset": name, "phase": "budget", "algorithm": algo, "budget": b, "seed": seed,
              "params": tuned[algo]}
             for algo in BUDGETED for b in budgets for seed in range(profile["seeds"])]
    recs = run_fits(run, pool, data, specs)
    table = {}
    for b in budgets:
        table[b] = {}
        for algo in BUDGETED:
            sel = [r for r in recs if r["algorithm"] == algo and r["budget"] == b]
            table[b][algo] = {"test_acc": mean_std([r["test_acc"] for r in sel]),
                              "train_acc": mean_std([r["train_acc"] for r in sel]),
                              "n_features_max": max((r["n_features"] or 0) for r in sel),
                              "failed": sum(r["test_acc"] is None for r in sel)}
    print(f"   budgets in {time.time() - t1:.0f} s", flush=True)
    t2 = time.time()
    l1 = compare_l1(run, pool, profile, name, data, tuned)
    print(f"   equal-count comparison in {time.time() - t2:.0f} s", flush=True)
    out = {"n_train": data["n"], "n_test": data["X_test"].shape[0], "d": data["d"], "passes": data["passes"],
           "tuned": tuned, "tuning": tuning, "accuracy_vs_budget": table, "l1_comparison": l1,
           "seconds": time.time() - t0}
    out["verdicts"] = verdicts(out, profile)
    return out


def tune(run, pool, profile, name, data):
    """Grid search on training accuracy at ``tune_budget`` (see the module docstring)."""
    B, seed = profile["tune_budget"], profile["tune_seed"]
    full = [k / 2 for k in range(2, 17)]                       # exponents of ECML_GRID, in grid order
    assert np.allclose([10.0 ** -e for e in full], ECML_GRID)
    specs = []
    grids = {}
    for algo in ("b-arda", "b-amd", "ofs"):
        names = list(tuning_grid(LEARNERS[algo]()))
        assert names == ["eta", "lam"], names
        grids[algo] = [(e, l) for e in profile["eta_exponents"] for l in profile["lam_exponents"]]
    assert list(tuning_grid(SOFS())) == ["gamma"]
    grids["sofs"] = [(e,) for e in profile["sofs_exponents"]]

    def spec(algo, point):
        params = ({"gamma": 10.0 ** point[0]} if algo == "sofs"
                  else {"eta": 10.0 ** -point[0], "lam": 10.0 ** -point[1]})
        return {"dataset": name, "phase": "tune", "algorithm": algo, "budget": B, "seed": seed, "point": point,
                "params": params}

    for algo, points in grids.items():
        specs += [spec(algo, pt) for pt in points]
    recs = run_fits(run, pool, data, specs)
    if profile["refine"]:
        more = []
        for algo in ("b-arda", "b-amd", "ofs"):
            best = best_point([r for r in recs if r["algorithm"] == algo])
            if best is None:
                continue
            done = {tuple(r["point"]) for r in recs if r["algorithm"] == algo}
            for e in neighbours(best["point"][0], full):
                for l in neighbours(best["point"][1], full):
                    if (e, l) not in done:
                        more.append(spec(algo, (e, l)))
        recs += run_fits(run, pool, data, more)
    tuned, info = {}, {}
    for algo in BUDGETED:
        sel = [r for r in recs if r["algorithm"] == algo]
        best = best_point(sel)
        if best is None:
            raise SystemExit(f"{name}: no grid point gave a usable {algo} model")
        tuned[algo] = {k: best[k] for k in (("gamma",) if algo == "sofs" else ("eta", "lam"))}
        tied = [r for r in sel if r["train_acc"] == best["train_acc"]]     # before the online tie-break
        info[algo] = {"train_acc": best["train_acc"], "test_acc_at_tuning_point": best["test_acc"],
                      "points": len(sel), "failed_points": sum(r["train_acc"] is None for r in sel),
                      "ties_at_best": len(tied),
                      # diagnostic only (never used to choose): how much the tie-break matters
                      "test_acc_range_over_ties": [min(r["test_acc"] for r in tied), max(r["test_acc"] for r in tied)],
                      "seconds": sum(r["seconds"] for r in sel)}
    return tuned, info


def neighbours(e, lattice):
    i = lattice.index(e)
    return lattice[max(0, i - 1):i + 2]


def best_point(recs):
    """The highest training accuracy; on a tie the best online accuracy, then the first in grid order
    (larger eta, then larger lam; for SOFS larger 1/gamma), as ``grid_search`` (whose grid order runs
    from 1e-1 down)."""
    ok = [r for r in recs if r["train_acc"] is not None]
    if not ok:
        return None
    return min(ok, key=lambda r: (-r["train_acc"], -r["online_acc"], *r["point"]))


def compare_l1(run, pool, profile, name, data, tuned):
    targets = profile["l1_targets"]
    seeds = range(min(profile["l1_seeds"], profile["seeds"]))
    etas = {l1: tuned[b]["eta"] for l1, b in PAIRS.items()}
    paths = list(pool.map(lambda l1: l1_path(profile, name, data, l1, etas[l1]), PAIRS)) if pool is not None \
        else [l1_path(profile, name, data, l1, etas[l1]) for l1 in PAIRS]
    for recs in paths:
        for rec in recs:
            run.unit(rec)
    chosen = {}
    for l1, recs in zip(PAIRS, paths):
        ok = [r for r in recs if r["test_acc"] is not None and r["n_features"] >= 1]
        picks = {}
        for target in targets:              # the run-0 point nearest each target count (within 2x)
            near = min(ok, key=lambda r: abs(math.log(r["n_features"] / target)), default=None)
            if near is not None and abs(math.log(near["n_features"] / target)) <= math.log(2.0) \
                    and near["lam"] not in picks:
                picks[near["lam"]] = f"~{target}"
        if not picks and ok:                # no count near any target (the count jumped from 0 to many):
            fewest = min(ok, key=lambda r: (r["n_features"], -r["lam"]))      # the fewest features reached
            picks[fewest["lam"]] = "fewest reached"
        chosen[l1] = dict(sorted(picks.items(), reverse=True))
    specs = [{"dataset": name, "phase": "l1-compare", "algorithm": l1, "budget": None, "seed": s,
              "params": {"eta": etas[l1], "lam": lam}} for l1 in PAIRS for lam in chosen[l1] for s in seeds]
    l1_recs = run_fits(run, pool, data, specs)
    specs = [{"dataset": name, "phase": "l1-compare", "algorithm": PAIRS[r["algorithm"]],
              "budget": r["n_features"], "seed": r["seed"], "matched_to": r["algorithm"], "matched_lam": r["lam"],
              "params": tuned[PAIRS[r["algorithm"]]]}
             for r in l1_recs if r["test_acc"] is not None and r["n_features"] >= 1]
    b_recs = run_fits(run, pool, data, specs)
    rows = []
    for l1 in PAIRS:
        for lam in chosen[l1]:
            mine = [r for r in l1_recs if r["algorithm"] == l1 and r["lam"] == lam]
            theirs = {r["seed"]: r for r in b_recs if r["matched_to"] == l1 and r["matched_lam"] == lam}
            paired = [(r, theirs[r["seed"]]) for r in mine if r["seed"] in theirs]
            rows.append({"l1": l1, "budgeted": PAIRS[l1], "lam": lam, "eta": etas[l1], "target": chosen[l1][lam],
                         "features": mean_std([a["n_features"] for a, _ in paired]),
                         "runs_without_features": sum(r["n_features"] == 0 for r in mine),
                         "l1_test_acc": mean_std([a["test_acc"] for a, _ in paired]),
                         "budgeted_test_acc": mean_std([b["test_acc"] for _, b in paired]),
                         "paired_diff": mean_std([b["test_acc"] - a["test_acc"] for a, b in paired
                                                  if b["test_acc"] is not None]),
                         "runs": len(paired)})
    return {"path": {l1: [(r["lam"], r["n_features"], r["test_acc"]) for r in recs] for l1, recs in zip(PAIRS, paths)},
            "chosen": chosen, "rows": rows}


def l1_path(profile, name, data, l1, eta):
    """Run 0 of ``l1`` at l1 weights ``lam = 10^e``: ``e`` up from 0 by decades to the first that leaves
    no feature, down by decades until more than the largest target survive, then, per target count, a
    bisection on ``e`` between the nearest points with too many and too few features, until a count
    within a factor ``L1_TOLERANCE`` of the target (at most ``L1_STEPS`` fits per target)."""
    recs, counts = [], {}

    def at(e):
        rec = fit_one(data, {"dataset": name, "phase": "l1-path", "algorithm": l1, "budget": None,
                             "seed": profile["tune_seed"], "params": {"eta": eta, "lam": 10.0 ** e}})
        recs.append(rec)
        counts[e] = rec["n_features"] if rec["test_acc"] is not None else None
        return counts[e]

    targets = profile["l1_targets"]
    e = 0.0
    while (at(e) or 0) > 0 and e < 12:
        e += 1.0
    while e > -12:
        e -= 1.0
        c = counts[e] if e in counts else at(e)
        if c is not None and c > max(targets):
            break
    for target in targets:
        for _ in range(L1_STEPS):
            known = {x: c for x, c in counts.items() if c is not None}
            if any(target / L1_TOLERANCE <= c <= target * L1_TOLERANCE for c in known.values()):
                break
            many = [x for x, c in known.items() if c > target]          # lam too small
            if not many:
                break
            a = max(many)
            few = [x for x, c in known.items() if c < target and x > a]
            if not few or min(few) - a < 0.005:     # bracket closed: the count jumps over the target
                break
            at(0.5 * (a + min(few)))
    return recs


# -- verdicts ---------------------------------------------------------------------------------------
def word(k, n):
    if n == 0:
        return "n/a"
    return "holds" if k == n else "mostly" if 2 * k > n else "partly" if k > 0 else "fails"


def verdicts(ds, profile):
    table = ds["accuracy_vs_budget"]
    m = lambda b, a: table[b][a]["test_acc"][0]  # noqa: E731
    out = {}
    small = [b for b in profile["small_budgets"] if b in table]
    wins = [b for b in small if m(b, "b-arda") is not None
            and all(m(b, o) is None or m(b, "b-arda") >= m(b, o) for o in ("b-amd", "ofs", "sofs"))]
    out["barda_best_small"] = {"verdict": word(len(wins), len(small)), "wins": wins, "of": small,
                               "text": f"B-ARDA has the best mean test accuracy at {len(wins)}/{len(small)} small "
                                       f"budgets {small}" + (f" (not at {[b for b in small if b not in wins]})"
                                                             if len(wins) < len(small) else "")}
    large = [b for b in profile["large_budgets"] if b in table]
    better = [b for b in large if None not in (m(b, "b-amd"), m(b, "ofs")) and m(b, "b-amd") > m(b, "ofs")]
    every = sorted(table)
    cross = next((b for b in every if all(None not in (m(c, "b-amd"), m(c, "ofs")) and m(c, "b-amd") > m(c, "ofs")
                                          for c in every if c >= b)), None)
    out["bamd_beats_ofs_large"] = {
        "verdict": word(len(better), len(large)), "wins": better, "of": large, "from_budget": cross,
        "text": f"B-AMD beats OFS at {len(better)}/{len(large)} larger budgets {large}; "
                + (f"at every budget >= {cross}" if cross is not None else "not at the largest budget")}
    for l1, b in PAIRS.items():
        rows = [r for r in ds["l1_comparison"]["rows"] if r["l1"] == l1 and r["runs"]
                and None not in (r["budgeted_test_acc"][0], r["l1_test_acc"][0])]
        ok = [r for r in rows if r["budgeted_test_acc"][0] >= r["l1_test_acc"][0]]
        diffs = ", ".join(f"{r['features'][0]:.0f} features: {r['paired_diff'][0]:+.3f}" for r in rows)
        out[f"{b}_vs_{l1}"] = {"verdict": word(len(ok), len(rows)), "wins": len(ok), "of": len(rows),
                               "text": f"{b.upper()} >= {l1} at {len(ok)}/{len(rows)} equal feature counts"
                                       + (f" (mean paired difference {diffs})" if rows else "")}
    return out


CLAIMS = [("barda_best_small", "(1) B-ARDA best at small budgets"),
          ("bamd_beats_ofs_large", "(2) B-AMD > OFS at larger budgets"),
          ("b-arda_vs_l1-arda", "(3a) B-ARDA >= l1-ARDA at equal counts"),
          ("b-amd_vs_ada-fobos", "(3b) B-AMD >= Ada-FOBOS at equal counts")]


def overall_verdicts(per_dataset):
    out = {}
    for key, label in CLAIMS:
        words = {name: ds["verdicts"][key]["verdict"] for name, ds in per_dataset.items()}
        held = sum(w == "holds" for w in words.values())
        out[key] = {"claim": label, "per_dataset": words,
                    "text": f"{label}: holds on {held}/{len(words)} data sets "
                            f"({', '.join(f'{n} {w}' for n, w in words.items())})"}
    return out


# -- printing and plotting --------------------------------------------------------------------------
def report_dataset(name, ds, profile):
    rows = []
    for algo in BUDGETED:
        info, params = ds["tuning"][algo], [f"{k}={v:.3g}" for k, v in ds["tuned"][algo].items()]
        lo, hi = info["test_acc_range_over_ties"]
        rows.append([algo, *(params + [""])[:2], fmt(info["train_acc"]), info["ties_at_best"],
                     f"{lo:.3f}" if info["ties_at_best"] == 1 else f"{lo:.3f}..{hi:.3f}", info["points"],
                     info["failed_points"], f"{info['seconds']:.0f}"])
    print_table(f"{name}: tuned at B = {profile['tune_budget']} on training accuracy (run {profile['tune_seed']}; "
                f"ties in train acc go to the better online accuracy, then the larger eta, then lam; test acc of the points tied in train acc shown for diagnosis only)",
                ["algorithm", "param", "param", "train acc", "ties", "test acc (ties)", "points", "failed",
                 "fit s"], rows)
    table = ds["accuracy_vs_budget"]
    rows = []
    for b in sorted(table):
        cells = table[b]
        tag = "small" if b in profile["small_budgets"] else "larger"
        rows.append([b, tag, *(fmt(*cells[a]["test_acc"]) + (f" ({cells[a]['failed']} failed)" if cells[a]["failed"]
                                                             else "") for a in BUDGETED)])
    print_table(f"{name}: test accuracy vs budget B, mean±std over {profile['seeds']} runs "
                f"({ds['passes']} passes, raw features)", ["B", "range", *BUDGETED], rows)
    rows = [[r["l1"], f"{r['lam']:.4g}", r["target"], fmt(*r["features"], digits=1), fmt(*r["l1_test_acc"]),
             r["budgeted"], fmt(*r["budgeted_test_acc"]), fmt(*r["paired_diff"]),
             f"{r['runs']}" + (f" (+{r['runs_without_features']} empty)" if r["runs_without_features"] else "")]
            for r in ds["l1_comparison"]["rows"]]
    if rows:
        print_table(f"{name}: equal feature counts (the budgeted learner at the count the l1 learner reached, "
                    f"same run; accuracies over the runs with at least one feature)",
                    ["l1 learner", "lam", "target", "features", "l1 acc", "budgeted", "budgeted acc",
                     "paired diff", "runs"], rows)
    else:
        print(f"{name}: no lam of the l1 paths came within 2x of {profile['l1_targets']} features\n")
    for key, label in CLAIMS:
        v = ds["verdicts"][key]
        print(f"  {label}: {v['verdict'].upper()} -- {v['text']}")
    print(flush=True)


def print_overall(summary):
    names = list(summary["datasets"])
    rows = [[label, *(summary["datasets"][n]["verdicts"][key]["verdict"] for n in names)] for key, label in CLAIMS]
    print_table("Claims of the paper, per data set (computed from the means above)", ["claim", *names], rows)
    for v in summary["verdicts"].values():
        print(v["text"])
    print("reductions of the full protocol: " + "; ".join(summary["reductions"]))


def draw(run, per_dataset):
    colors = {"b-arda": "C0", "b-amd": "C1", "ofs": "C2", "sofs": "C3", "l1-arda": "C4", "ada-fobos": "C5"}

    def draw_fn(plt):
        from matplotlib.ticker import NullFormatter, ScalarFormatter
        names = list(per_dataset)
        fig, axes = plt.subplots(2, len(names), figsize=(4 * len(names), 7), squeeze=False)
        for col, name in enumerate(names):
            ds = per_dataset[name]
            ax = axes[0][col]
            budgets = sorted(ds["accuracy_vs_budget"])
            for algo in BUDGETED:
                cells = [ds["accuracy_vs_budget"][b][algo]["test_acc"] for b in budgets]
                ax.errorbar(budgets, [c[0] if c[0] is not None else np.nan for c in cells],
                            yerr=[c[1] or 0.0 for c in cells], marker="o", capsize=3, label=algo, color=colors[algo])
            ax.set_xscale("log")
            ax.set_xlabel("budget B (features)")
            ax.set_ylabel("test accuracy")
            ax.set_title(f"{name} (Fig. 1-2)")
            ax.legend(fontsize=8)
            ax = axes[1][col]
            for l1, b in PAIRS.items():
                rows = sorted((r for r in ds["l1_comparison"]["rows"] if r["l1"] == l1 and r["runs"]),
                              key=lambda r: r["features"][0])
                if not rows:
                    continue
                xs = [r["features"][0] for r in rows]
                ax.plot(xs, [r["l1_test_acc"][0] for r in rows], marker="s", ls="--", color=colors[l1], label=l1)
                ax.plot(xs, [r["budgeted_test_acc"][0] for r in rows], marker="o", color=colors[b],
                        label=f"{b} at {l1}'s count")
            ax.set_xscale("log")
            ax.set_xlabel("selected features")
            ax.set_ylabel("test accuracy")
            ax.set_title(f"{name}: equal counts (Fig. 3)")
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(NullFormatter())
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
    plot(os.path.join(run.args.output, "ecml.png"), draw_fn)


if __name__ == "__main__":
    main()
