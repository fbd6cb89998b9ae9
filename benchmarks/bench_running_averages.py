"""Running-averages feature selection on the thesis' correlated simulation (Sun 2019, Table 5.1).

Data as in the thesis' Sec. 4.1 / 5.1: ``x_i = alpha z_i 1_p + u_i`` with ``z_i ~ N(0, 1)``,
``u_i ~ N(0, I_p)``, ``alpha = 1`` (every pair of features has correlation 0.5); ``p = 1000``,
``k = 100`` true features, ``beta*_j = 1`` at the 1-based indices ``10 j`` (0-based 9, 19, ..., 999),
else 0 (the strong signal); ``y = X beta* + N(0, 1)``. ``n`` in {1000, 3000, 10000}; the test RMSE is
measured on ``n_test = 2000`` fresh samples of the same distribution; 20 runs (seeds) per ``n``. For
each seed one data set of ``max(n) + n_test`` rows is drawn: the training sets are its first ``n``
rows (a growing stream), the test set its last ``n_test`` rows.

**Ours (asyos).** The stream is summarized by ``asyos.learners.averages.stats.RunningAverages``, fed in mini-batches of
1000 rows (one rank-b BLAS update each); the time of that accumulation is the thesis' column RAVE
(construction + updates; the ``O(p^2)`` ``standardize()`` that follows is timed apart, ``std_seconds``
in the JSON, and counted in neither). From the standardized averages, ``k`` features are extracted by
``asyos.learners.averages.extractors`` with their defaults: OLS-th (``ols_threshold``, ridge 0.05 on the
correlation scale when ``n <= p``), OFSA (``ofsa``), OMCP / OElnet / OLasso (``penalized`` with
``penalty="mcp"`` (gamma 3), ``"elnet"`` (l1_ratio 0.5) or ``"lasso"``, solved on unit-variance ``y``,
lambda bisected until exactly ``k`` non-zeros and reported in ``y``'s units). Every one refits least
squares on its support. Their time is ``ExtractedModel.seconds`` (wall clock). ``penalized`` may emit
``asyos.errors.ConvergenceWarning`` (coordinate descent stopped at ``max_sweeps``); they are recorded
per run (JSON ``warnings``, ``unconverged_solves``), counted in the table's ``warn`` column (runs that
warned / runs) and summarised below it, not hidden.

**The batch baseline: scikit-learn Lasso, tuned to k features.** Thesis protocol: the lambda giving the
largest number of non-zeros ``<= k``. The data are standardized (columns to mean 0, variance 1; ``y``
centred), the Gram matrix ``X^T X`` and ``X^T y`` are computed once, and scikit-learn's
``lasso_path`` (``precompute=Gram``, ``tol=1e-4``, ``max_iter=10000``) is called one lambda at a time with
warm starts: first down a geometric grid of 200 values from ``lambda_max`` to ``1e-3 lambda_max`` until
exactly ``k`` or more than ``k`` features are in, then (when ``k`` was skipped) bisection (geometric
midpoint, at most 30 more solves) between the last grid value with ``<= k`` and the first with ``> k``,
stopping at exactly ``k``. The selected model is the solution with the most non-zeros ``<= k`` met, the
largest such lambda on ties (like OLasso's bisection and the authors' code, which stop at the first
lambda with ``k``); ``selected`` in the table is its mean count, ``grid_selected`` in the JSON what the
200-value grid alone would have given. Its time covers the standardization, the Gram matrix and the
whole search. The sklearn objective ``1/(2n) |y - X w|^2 + lambda |w|_1`` on standardized data is the
same problem as OLasso's on the running averages, so both find about the same lambda and largely the
same support (JSON ``same_support_as_olasso``, ``overlap_with_olasso``; OLasso always has exactly ``k``,
the sklearn search sometimes stops at ``k - 1`` or ``k - 2`` when features enter together). A digest of
the measured library files is stored (``sources_sha256``) and a change during the run is reported.

* ``Lasso`` is reported **unrefit**: the plain Lasso prediction (shrunken coefficients, mapped back to
  the original units with an intercept). Its RMSE is therefore far above the thesis' 11.63 / 9.464 /
  6.07: at ``lambda`` for ``k = 100`` the shrinkage is severe.
* ``Lasso+OLS`` is the same support with least squares refit on the training data (time = Lasso's plus
  the refit). The authors' public code (barbua/OFSA, ``Regression/Lasso_num_exp.py``) refits OLS on
  the Lasso support before the test RMSE; this row is the one comparable with the thesis' Lasso RMSE.

**Thesis figures** (Table 5.1, strong signal, 100 runs; times from Table 5.2 / Appendix Table A.1,
Core i5-4460S, measured there with ``time.process_time``) are printed next to ours when ``p`` and
``k`` are the thesis' (not in ``--quick``). Table 5.2's ``n = 1e3`` row is garbled in our copy; its
Lasso time 4.332 s and OLS-th 0.052 s come from Table A.1 (5.326 s there is SADMM's). The thesis has
no OLasso column. Known differences of protocol in the authors' public code, not tuned away here: their
OElnet has an l2 weight of 0.001 (nearly the Lasso, hence its DR equal to Lasso's; ours: ``l1_ratio =
0.5``); their OMCP uses ``b = 100`` (nearly the Lasso again; ours: ``gamma = 3``) with at most 500
proximal-gradient steps of 0.001; their OLS-th ridge 0.05 is added to the *unnormalized* ``n S_xx``, i.e.
5e-5 on the correlation scale at ``n = 1000`` (ours: 0.05). At ``n = p`` OLS-th hinges on that ridge: on
this data a ridge of 0.05 (correlation scale) detects 100%, 5e-5 about 97%, 1e-5 about 80% (the
thesis' 77.4%), 0 about 20%.

**BLAS threads.** On a shared 2-core machine OpenBLAS' spinning threads made OLS-th (a 1000 x 1000
Cholesky) 10-30x slower and the running-average updates 2x slower than one thread. The script sets
``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` to 1 before numpy is imported
(``asyos._env.pin_blas_threads``; a value the user has set is kept), so every method, scikit-learn's
included, runs on one core. The thesis' times are from a 4-core i5 (``time.process_time``).

    python benchmarks/bench_running_averages.py            # p = 1000, k = 100, 20 seeds (~2 min CPU, 2-3 min
                                                           # wall on a shared 2-core machine; peak RSS ~0.55 GB)
    python benchmarks/bench_running_averages.py --quick    # p = 200, k = 10, 2 seeds: seconds, for CI
"""
from __future__ import annotations

import hashlib
import os
import re
import sys
import time
import warnings

from asyos._env import pin_blas_threads

pin_blas_threads()                # one BLAS thread (unless the user set one) before numpy is imported

import numpy as np  # noqa: E402

from asyos.benchmarking.common import Run, choose_profile, fmt, mean_std, parser, plot, print_table  # noqa: E402
from asyos.errors import ConvergenceWarning  # noqa: E402
from asyos.learners.averages import extractors as E  # noqa: E402
from asyos.learners.averages.stats import RunningAverages  # noqa: E402

PROFILES = {
    "paper": {"p": 1000, "k": 100, "alpha": 1.0, "n": [1000, 3000, 10000], "n_test": 2000, "batch_size": 1000,
              "seeds": 20, "lasso": {"grid": 200, "grid_ratio": 1e-3, "bisect": 30, "tol": 1e-4,
                                     "max_iter": 10000}},
    "quick": {"p": 200, "k": 10, "alpha": 1.0, "n": [300, 1000], "n_test": 500, "batch_size": 100,
              "seeds": 2, "lasso": {"grid": 200, "grid_ratio": 1e-3, "bisect": 30, "tol": 1e-4,
                                    "max_iter": 10000}},
}
SEED_BASE = 100

# name -> extractor on StandardizedStats (library defaults)
EXTRACTORS = {
    "OLS-th": lambda std, k: E.ols_threshold(std, k),
    "OFSA": lambda std, k: E.ofsa(std, k),
    "OMCP": lambda std, k: E.penalized(std, k, penalty="mcp"),
    "OElnet": lambda std, k: E.penalized(std, k, penalty="elnet"),
    "OLasso": lambda std, k: E.penalized(std, k, penalty="lasso"),
}
METHODS = ["Lasso", "Lasso+OLS", "OLS-th", "OFSA", "OMCP", "OElnet", "OLasso"]

# Thesis Table 5.1 (strong signal beta = 1, p = 1000, k = 100) and Table 5.2 / A.1 (times, s).
# Lasso+OLS is compared with the thesis' Lasso column (the authors' code refits); no OLasso column.
THESIS = {
    "dr": {1000: {"Lasso": 32.14, "OLS-th": 77.40, "OFSA": 99.81, "OMCP": 73.71, "OElnet": 32.12},
           3000: {"Lasso": 46.05, "OLS-th": 100, "OFSA": 100, "OMCP": 98.02, "OElnet": 45.19},
           10000: {"Lasso": 72.40, "OLS-th": 100, "OFSA": 100, "OMCP": 100, "OElnet": 72.42}},
    "rmse": {1000: {"Lasso": 11.63, "OLS-th": 5.592, "OFSA": 1.136, "OMCP": 6.282, "OElnet": 11.61},
             3000: {"Lasso": 9.464, "OLS-th": 1.017, "OFSA": 1.017, "OMCP": 1.745, "OElnet": 9.557},
             10000: {"Lasso": 6.07, "OLS-th": 1.003, "OFSA": 1.003, "OMCP": 1.003, "OElnet": 6.042}},
    "seconds": {1000: {"Lasso": 4.332, "OLS-th": 0.052, "OFSA": 0.289, "OMCP": 15.49, "OElnet": 9.648,
                       "RAVE": 0.026},
                3000: {"Lasso": 26.91, "OLS-th": 0.051, "OFSA": 0.288, "OMCP": 13.86, "OElnet": 7.113,
                       "RAVE": 0.076},
                10000: {"Lasso": 47.32, "OLS-th": 0.051, "OFSA": 0.288, "OMCP": 6.508, "OElnet": 5.885,
                        "RAVE": 0.246}},
}
THESIS_NAME = {"Lasso+OLS": "Lasso"}        # our row -> the thesis column it is compared with


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    profile = choose_profile(args, PROFILES)
    try:
        import sklearn  # noqa: F401
    except ImportError:
        raise SystemExit("scikit-learn is needed for the batch Lasso baseline: pip install scikit-learn") from None
    run = Run("running_averages", args, profile)
    digest = sources_digest()
    p, k, alpha = profile["p"], profile["k"], profile["alpha"]
    warm_up(p, profile["batch_size"])
    true = 10 * np.arange(1, k + 1) - 1             # 0-based positions of the features 10, 20, ..., 10 k
    beta = np.zeros(p)
    beta[true] = 1.0
    n_max, n_test = max(profile["n"]), profile["n_test"]
    print(f"thesis Sec. 5.1 simulation: p = {p}, k = {k}, alpha = {alpha}, strong signal beta = 1, "
          f"n in {profile['n']}, n_test = {n_test}, mini-batch {profile['batch_size']}, {profile['seeds']} seeds\n",
          flush=True)
    for rep in range(profile["seeds"]):
        X, noise = draw(n_max + n_test, p, alpha, SEED_BASE + rep)
        y = X @ beta + noise
        X_test, y_test = X[n_max:], y[n_max:]
        for n in profile["n"]:
            X_train, y_train = X[:n], y[:n]
            stats, rave = accumulate(X_train, y_train, profile["batch_size"])
            t0 = time.perf_counter()
            std = stats.standardize()
            std_seconds = time.perf_counter() - t0
            run.unit({"n": n, "seed": rep, "method": "RAVE", "seconds": rave, "std_seconds": std_seconds,
                      "batch_size": profile["batch_size"]})
            supports = {}
            for name, extract in EXTRACTORS.items():
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", ConvergenceWarning)
                    model = extract(std, k)
                conv = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
                for w in caught:                    # anything else is shown as usual
                    if not issubclass(w.category, ConvergenceWarning):
                        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
                supports[name] = model.support
                record(run, n, rep, name, model.support, model.decision_function(X_test), y_test, true, k,
                       model.seconds, lam=model.lam, n_iter=model.n_iter, solves=model.info.get("solves"),
                       warnings=len(conv), unconverged_solves=unconverged(conv),
                       warning_text=conv[0] if conv else None)
            lasso = sklearn_lasso(X_train, y_train, k, **profile["lasso"])
            same = bool(np.array_equal(lasso["support"], supports["OLasso"]))
            overlap = int(np.intersect1d(lasso["support"], supports["OLasso"]).size)
            record(run, n, rep, "Lasso", lasso["support"], X_test @ lasso["coef"] + lasso["intercept"], y_test,
                   true, k, lasso["seconds"], lam=lasso["lam"], solves=lasso["solves"],
                   grid_selected=lasso["grid_selected"], warnings=lasso["warnings"], refit=False,
                   same_support_as_olasso=same, overlap_with_olasso=overlap, warning_text=lasso["warning_text"])
            t0 = time.perf_counter()
            coef, intercept = ols_refit(X_train, y_train, lasso["support"])
            refit_s = time.perf_counter() - t0
            record(run, n, rep, "Lasso+OLS", lasso["support"], X_test @ coef + intercept, y_test, true, k,
                   lasso["seconds"] + refit_s, lam=lasso["lam"], refit=True, refit_seconds=refit_s,
                   warnings=lasso["warnings"], same_support_as_olasso=same, overlap_with_olasso=overlap)
        done = [u for u in run.units if u["seed"] == rep and u["method"] != "RAVE"]
        print(f"seed {rep + 1}/{profile['seeds']} done ({sum(u['seconds'] for u in done):.1f} s of extraction)",
              flush=True)
    summary = summarise(run.units, profile)
    summary["sources_sha256"] = digest
    if sources_digest() != digest:
        summary["sources_changed_during_run"] = True
        print("warning: the library's source (stats, extractors, kernels) changed during the run; the results "
              "are those of the code imported at the start", flush=True)
    path = run.finish(summary)
    draw_plot(run, summary, profile)
    print(f"results: {path}")


def sources_digest():
    """A digest of the code measured (running averages, extractors, coordinate descent), to tell runs of
    different code apart and to catch an edit in the middle of a run."""
    digest = hashlib.sha256()
    for module in ("asyos.learners.averages.stats", "asyos.learners.averages.extractors", "asyos.learners.averages._gram_kernels"):
        with open(sys.modules[module].__file__, "rb") as fh:
            digest.update(fh.read())
    return digest.hexdigest()[:12]


def draw(n, p, alpha, seed):
    """``X`` (``n x p``, rows ``alpha z 1_p + u``) and the response noise, from one generator."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    X += alpha * rng.standard_normal((n, 1))
    return X, rng.standard_normal(n)


def accumulate(X, y, batch_size):
    """Running averages of ``(X, y)`` fed in mini-batches; ``(stats, seconds)`` (the thesis' RAVE)."""
    t0 = time.perf_counter()
    stats = RunningAverages(X.shape[1])
    for start in range(0, X.shape[0], batch_size):
        stats.update(X[start:start + batch_size], y[start:start + batch_size])
    return stats, time.perf_counter() - t0


def warm_up(p, batch_size):
    """Compile (or load) the coordinate-descent kernel and start BLAS before anything is timed."""
    rng = np.random.default_rng(0)
    accumulate(rng.standard_normal((2 * batch_size, p)), rng.standard_normal(2 * batch_size), batch_size)
    X = rng.standard_normal((40, 20))
    std = RunningAverages(20).update(X, X[:, :3].sum(axis=1) + rng.standard_normal(40)).standardize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for extract in EXTRACTORS.values():
            extract(std, 3)


def unconverged(messages):
    """Solves that stopped at ``max_sweeps``, read from the warnings' text (None when not stated)."""
    counts = [re.search(r"in (\d+) of (\d+) solves", m) for m in messages]
    return sum(int(c.group(1)) for c in counts if c) if counts and all(counts) else (0 if not messages else None)


def sklearn_lasso(X, y, k, grid=200, grid_ratio=1e-3, bisect=30, tol=1e-4, max_iter=10000):
    """scikit-learn's Lasso with the most non-zeros ``<= k`` (see the module docstring): a warm-started
    walk down a geometric grid, then bisection of lambda. Coefficients in the original units (unrefit)."""
    from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning
    from sklearn.linear_model import lasso_path

    t0 = time.perf_counter()
    n, p = X.shape
    mean_x, scale = X.mean(axis=0), X.std(axis=0)
    scale[scale == 0] = 1.0
    Xs = np.asfortranarray((X - mean_x) / scale)
    mean_y = float(y.mean())
    yc = y - mean_y
    gram = Xs.T @ Xs
    xy = Xs.T @ yc
    lam_max = float(np.abs(xy).max()) / n
    messages = []
    solves = 0

    def solve(lam, start):
        nonlocal solves
        solves += 1
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", SklearnConvergenceWarning)
            _, coefs, _ = lasso_path(Xs, yc, alphas=[lam], precompute=gram, Xy=xy, coef_init=start.copy(),
                                     tol=tol, max_iter=max_iter, check_input=False)
        messages.extend(str(w.message) for w in caught if issubclass(w.category, SklearnConvergenceWarning))
        for w in caught:
            if not issubclass(w.category, SklearnConvergenceWarning):
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        return coefs[:, 0].copy()

    best = (lam_max, np.zeros(p))                 # the first (largest) lambda with the most non-zeros <= k
    over = None                                   # the first (lambda, coef) with more than k
    coef = best[1]
    for lam in lam_max * np.geomspace(1.0, grid_ratio, grid)[1:]:
        coef = solve(lam, coef)
        count = np.count_nonzero(coef)
        if count > k:
            over = (lam, coef)
            break
        if count > np.count_nonzero(best[1]):
            best = (lam, coef)
            if count == k:
                break
    grid_selected = int(np.count_nonzero(best[1]))
    hi, lo = best, over
    for _ in range(bisect if lo is not None else 0):
        if np.count_nonzero(best[1]) == k:
            break
        mid = float(np.sqrt(hi[0] * lo[0]))
        if not hi[0] > mid > lo[0]:
            break
        coef = solve(mid, hi[1])
        count = np.count_nonzero(coef)
        if count > k:
            lo = (mid, coef)
        else:
            hi = (mid, coef)
            if count > np.count_nonzero(best[1]):
                best = hi
    lam, w = best
    coef = w / scale
    return {"lam": lam, "coef": coef, "intercept": mean_y - float(mean_x @ coef), "support": np.flatnonzero(w),
            "seconds": time.perf_counter() - t0, "solves": solves, "grid_selected": grid_selected,
            "warnings": len(messages), "warning_text": messages[0] if messages else None}


def ols_refit(X, y, support):
    """Least squares with an intercept on the columns ``support`` (original units)."""
    coef = np.zeros(X.shape[1])
    mean_x, mean_y = X.mean(axis=0), float(y.mean())
    if support.size:
        coef[support] = np.linalg.lstsq(X[:, support] - mean_x[support], y - mean_y, rcond=None)[0]
    return coef, mean_y - float(mean_x @ coef)


def record(run, n, rep, name, support, prediction, y_test, true, k, seconds, **extra):
    support = np.asarray(support)
    hits = int(np.intersect1d(support, true).size)
    unit = {"n": n, "seed": rep, "method": name, "dr": hits / k, "true_selected": hits,
            "selected": int(support.size), "rmse": float(np.sqrt(np.mean((prediction - y_test) ** 2))),
            "seconds": seconds}
    unit.update({key: value for key, value in extra.items()})
    return run.unit(unit)


def thesis_value(kind, n, name, profile):
    if (profile["p"], profile["k"]) != (1000, 100):
        return None
    return THESIS[kind].get(n, {}).get(THESIS_NAME.get(name, name))


def summarise(units, profile):
    p, k = profile["p"], profile["k"]
    summary = {}
    rows = []
    for n in profile["n"]:
        for name in METHODS + ["RAVE"]:
            sel = [u for u in units if u["n"] == n and u["method"] == name]
            if not sel:
                continue
            cell = {"seconds": mean_std([u["seconds"] for u in sel]), "runs": len(sel)}
            if name != "RAVE":
                cell.update({"dr": mean_std([u["dr"] for u in sel]), "rmse": mean_std([u["rmse"] for u in sel]),
                             "selected": mean_std([u["selected"] for u in sel]),
                             "runs_warned": sum(1 for u in sel if u.get("warnings")),
                             "warnings": sum(u.get("warnings") or 0 for u in sel)})
                solves = [u.get("unconverged_solves") for u in sel]
                if all(s is not None for s in solves) and name in ("OMCP", "OElnet", "OLasso"):
                    cell["unconverged_solves"] = sum(solves)
                    cell["solves"] = sum(u.get("solves") or 0 for u in sel)
                if name == "Lasso":
                    cell["grid_selected"] = mean_std([u["grid_selected"] for u in sel])
                    cell["same_support_as_olasso"] = sum(1 for u in sel if u["same_support_as_olasso"])
                    cell["overlap_with_olasso"] = mean_std([u["overlap_with_olasso"] for u in sel])
                    cell["lam"] = mean_std([u["lam"] for u in sel])
                if name == "OLasso":
                    cell["lam"] = mean_std([u["lam"] for u in sel])
            else:
                cell["std_seconds"] = mean_std([u["std_seconds"] for u in sel])
            cell["thesis"] = {kind: thesis_value(kind, n, name, profile) for kind in ("dr", "rmse", "seconds")}
            summary.setdefault(str(n), {})[name] = cell
            th = cell["thesis"]
            cellfmt = lambda v, d: "-" if v is None else f"{v:.{d}f}"  # noqa: E731
            if name == "RAVE":
                rows.append([n, name, "", "", "", "", fmt(*cell["seconds"], digits=3), cellfmt(th["seconds"], 3),
                             "", ""])
                continue
            dr = cell["dr"]
            rows.append([n, name, fmt(100 * dr[0], 100 * dr[1], digits=1), cellfmt(th["dr"], 2),
                         fmt(*cell["rmse"], digits=3), cellfmt(th["rmse"], 3), fmt(*cell["seconds"], digits=3),
                         cellfmt(th["seconds"], 3), f"{cell['selected'][0]:.1f}",
                         f"{cell['runs_warned']}/{cell['runs']}"])
    sd_y = float(np.sqrt(k + profile["alpha"] ** 2 * k ** 2 + 1.0))
    print_table(f"Table 5.1 (strong signal beta = 1): p = {p}, k = {k}, {profile['seeds']} seeds, mean±std; "
                f"'thesis' = Sun (2019) Tables 5.1/5.2 at p = 1000, k = 100, 100 runs ('-': not in the thesis); "
                f"the zero model's RMSE is {sd_y:.2f}\n"
                "Lasso = scikit-learn, unrefit; Lasso+OLS = its support refit by least squares (compared with the "
                "thesis' Lasso, whose code refits); time = extraction only for ours, whole batch search for "
                "Lasso; RAVE = accumulating the running averages; warn = runs with a ConvergenceWarning",
                ["n", "method", "DR %", "thesis", "RMSE", "thesis", "time s", "thesis", "selected", "warn"], rows)
    notes = []
    for n in profile["n"]:
        cells = summary[str(n)]
        for name in ("OMCP", "OElnet", "OLasso", "Lasso"):
            c = cells[name]
            if c["warnings"]:
                extra = (f", {c['unconverged_solves']} of {c['solves']} lambda solves stopped at max_sweeps"
                         if c.get("unconverged_solves") is not None else "")
                notes.append(f"  n = {n}: {name} warned in {c['runs_warned']}/{c['runs']} runs{extra}")
        la, ol = cells["Lasso"], cells["OLasso"]
        notes.append(f"  n = {n}: sklearn Lasso lambda {fmt(*la['lam'], digits=2)} vs OLasso "
                     f"{fmt(*ol['lam'], digits=2)}; "
                     f"same support in {la['same_support_as_olasso']}/{la['runs']} runs, "
                     f"{la['overlap_with_olasso'][0]:.1f} of its {la['selected'][0]:.1f} features in OLasso's; "
                     f"the 200-value grid alone would select {la['grid_selected'][0]:.1f}")
    if notes:
        print("ConvergenceWarnings and the Lasso search:\n" + "\n".join(notes) + "\n", flush=True)
    return summary


def draw_plot(run, summary, profile):
    ns = profile["n"]

    def draw_fn(plt):
        from matplotlib.ticker import NullLocator
        colors = {name: plt.get_cmap("tab10")(i % 10) for i, name in enumerate(METHODS + ["RAVE"])}
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
        for ax, kind, label in zip(axes, ("dr", "rmse", "seconds"),
                                   ("detection rate DR (%)", "test RMSE", "time (s)")):
            names = METHODS + (["RAVE"] if kind == "seconds" else [])
            for name in names:
                cells = [summary[str(n)][name] for n in ns]
                scale = 100.0 if kind == "dr" else 1.0
                ax.errorbar(ns, [scale * c[kind][0] for c in cells], yerr=[scale * c[kind][1] for c in cells],
                            marker="o", capsize=3, color=colors[name], label=name)
                th = [(n, c["thesis"][kind]) for n, c in zip(ns, cells) if c["thesis"][kind] is not None]
                if th:
                    ax.plot(*zip(*th), ls=":", marker="x", color=colors[name])
            ax.set_xscale("log")
            if kind != "dr":
                ax.set_yscale("log")
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xticks(ns, [str(n) for n in ns])
            ax.set_xlabel("training samples n")
            ax.set_ylabel(label)
            ax.set_title(f"{label}: ours (solid) vs thesis (dotted, x)", fontsize=9)
            ax.legend(fontsize=7)
        fig.suptitle(f"running averages, p = {profile['p']}, k = {profile['k']}, strong signal, "
                     f"{profile['seeds']} seeds", fontsize=10)
    plot(os.path.join(run.args.output, "running_averages.png"), draw_fn)


if __name__ == "__main__":
    main()
