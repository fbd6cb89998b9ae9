"""Running-averages models with k features on real regression data: test R^2 of OLS-th and OFSA against a Lasso tuned to k.

Data (``../shared/datasets`` next to the repository, ``$ASYOS_DATASETS`` or ``--data-dir``; see its
README.md): ``cpu_act`` (8192 x 21, Delve computer activity -> % CPU time in user mode) and
``satellite_image`` (6435 x 36, Landsat pixels -> class 1..7 taken as a number), dense ``.npz`` with
keys ``X, y``, cast to float64. Per data set, ``seeds`` random 80/20 train/test splits (split ``s``
permutes the rows with ``numpy.random.default_rng(SEED_BASE + s)``), and for each ``k``:

* **OLS-th** and **OFSA** (``asyos.learners.averages.extractors``, thesis Alg. 3 and 4, default settings):
  ``RunningAverages`` accumulated on the training split in mini-batches of ``batch_size`` rows (in
  the split's random order), standardized once, then each extractor picks ``k`` features and refits
  least squares on them (intercept included; the data is never seen again);
* **Lasso (as fitted)**: scikit-learn's ``lasso_path`` on the standardized training data (features
  centred and scaled to unit variance, ``y`` centred) over ``n_alphas`` values of ``lambda`` from
  ``lambda_max`` down to ``alpha_ratio * lambda_max`` (log grid); the model with the largest number
  of non-zeros ``<= k`` (the thesis' rule for its baselines; among several ``lambda`` with that count
  the smallest one, i.e. the least shrunken), its shrunken coefficients mapped back to the original
  units with an intercept -- the predictions the Lasso itself gives;
* **Lasso + OLS refit**: the same support, least squares (with intercept) refitted on it -- what
  OLS-th and OFSA do after selecting, so this column compares the selections alone.

Reported: mean ± std over the splits of the test ``R^2`` (``1 - SS_res / SS_tot``, as scikit-learn's
``r2_score``), the Lasso's non-zero count reached, and as a ceiling the full least squares on all
``p`` features (``numpy.linalg.lstsq`` with intercept; the running averages' own full OLS,
``extractors.ols``, is recorded next to it as a check). With ``p`` = 21 (cpu_act), ``k`` = 20 is almost the full model.

Without the data directory ``--quick`` runs on a labelled synthetic dense stand-in (correlated
features with assorted scales and offsets, 6 true features): its figures say nothing about the real
data. The paper profile stops with an error when the data is missing.

    python benchmarks/bench_running_averages_real.py            # 2 data sets x 20 splits, ~20 s (shared 2-core machine)
    python benchmarks/bench_running_averages_real.py --quick    # seconds, for CI
"""
from __future__ import annotations

import os
import time
import warnings

import numpy as np

from asyos.benchmarking.common import (Run, choose_profile, datasets_dir, fmt, load_dense_dataset, mean_std,
                                      missing_dense_datasets, parser, plot, print_table)

from asyos.learners.averages import extractors as E
from asyos.learners.averages.stats import RunningAverages

PROFILES = {
    "paper": {"datasets": ["cpu_act", "satellite_image"], "ks": [5, 10, 20], "seeds": 20, "test_fraction": 0.2,
              "batch_size": 100, "n_alphas": 200, "alpha_ratio": 1e-4},
    "quick": {"datasets": ["cpu_act", "satellite_image"], "ks": [5, 10], "seeds": 2, "test_fraction": 0.2,
              "batch_size": 100, "n_alphas": 50, "alpha_ratio": 1e-3},
}
SEED_BASE = 0
STAND_IN = "stand-in"
STAND_IN_LABEL = "synthetic dense stand-in (NOT real data)"
METHODS = ("OLS-th", "OFSA", "Lasso", "Lasso+OLS")
LABELS = {"OLS-th": "OLS-th (running averages)", "OFSA": "OFSA (running averages)",
          "Lasso": "Lasso tuned to <= k, as fitted (shrunken)", "Lasso+OLS": "Lasso support + OLS refit"}


def dense_stand_in(n=1000, p=30, n_true=6, seed=0):
    """A small dense regression problem for a ``--quick`` run without the data: correlated features
    (``z 1_p + u``) with assorted scales and offsets, ``y`` linear in ``n_true`` of them plus noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + rng.standard_normal((n, 1))
    X = X * rng.uniform(0.1, 10.0, p) + rng.uniform(-50.0, 50.0, p)
    beta = np.zeros(p)
    true = rng.choice(p, n_true, replace=False)
    beta[true] = rng.uniform(0.5, 2.0, n_true) * rng.choice([-1.0, 1.0], n_true) / X.std(axis=0)[true]
    y = X @ beta + 0.7 * rng.standard_normal(n) + 3.0
    return X, y


def load(data_dir, name):
    if name == STAND_IN:
        return dense_stand_in()
    return load_dense_dataset(data_dir, name)


# ------------------------------------------------------------------------------------------ models
def r2(y, pred):
    """Test ``R^2 = 1 - SS_res / SS_tot`` (``SS_tot`` about the test mean; scikit-learn's ``r2_score``)."""
    resid = y - pred
    return float(1.0 - (resid @ resid) / np.sum((y - y.mean()) ** 2))


def ols_fit(X, y):
    """``(coef, intercept)`` of least squares with intercept (``X`` may have no columns): ``numpy.linalg.lstsq``
    on the centred data."""
    ymean = float(y.mean())
    if X.shape[1] == 0:
        return np.zeros(0), ymean
    mean = X.mean(axis=0)
    coef = np.linalg.lstsq(X - mean, y - ymean, rcond=None)[0]
    return coef, ymean - float(mean @ coef)


def lasso_to_k(X, y, ks, n_alphas, alpha_ratio):
    """For each ``k``: ``(coef, intercept, nnz, alpha)`` of the Lasso on the standardized data with the
    most non-zeros ``<= k`` along the path (the smallest ``alpha`` with that count), in original units."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import lasso_path
    mean, sd = X.mean(axis=0), X.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    Xs = (X - mean) / sd
    ymean = float(y.mean())
    yc = y - ymean
    alpha_max = float(np.abs(Xs.T @ yc).max()) / X.shape[0]
    alphas = alpha_max * np.geomspace(1.0, alpha_ratio, n_alphas)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        alphas, coefs, _ = lasso_path(Xs, yc, alphas=alphas, max_iter=10000)
    unconverged = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
    nnz = np.count_nonzero(coefs, axis=0)
    out = {}
    for k in ks:
        reach = nnz[nnz <= k].max()
        j = int(np.flatnonzero(nnz == reach)[np.argmin(alphas[nnz == reach])])
        coef = coefs[:, j] / sd
        out[k] = (coef, ymean - float(mean @ coef), int(reach), float(alphas[j]))
    return out, unconverged


def one_split(run, profile, name, X, y, split):
    rng = np.random.default_rng(SEED_BASE + split)
    perm = rng.permutation(X.shape[0])
    n_test = int(round(profile["test_fraction"] * X.shape[0]))
    test, train = perm[:n_test], perm[n_test:]
    Xtr, ytr, Xte, yte = X[train], y[train], X[test], y[test]
    p = X.shape[1]
    ks = [k for k in profile["ks"] if k <= p]

    coef, intercept = ols_fit(Xtr, ytr)
    full_ols = r2(yte, Xte @ coef + intercept)
    t0 = time.perf_counter()
    ra = RunningAverages(p)
    for i in range(0, Xtr.shape[0], profile["batch_size"]):
        ra.update(Xtr[i:i + profile["batch_size"]], ytr[i:i + profile["batch_size"]])
    std = ra.standardize()
    rave_s = time.perf_counter() - t0
    ra_ols = E.ols(std)
    full_ols_ra = r2(yte, ra_ols.decision_function(Xte))

    t0 = time.perf_counter()
    lasso, unconverged = lasso_to_k(Xtr, ytr, ks, profile["n_alphas"], profile["alpha_ratio"])
    lasso_s = time.perf_counter() - t0
    th_models = E.ols_threshold_path(std, ks)
    for k, th in zip(ks, th_models):
        fs = E.ofsa(std, k)
        lcoef, lint, reach, alpha = lasso[k]
        support = np.flatnonzero(lcoef)
        rcoef, rint = ols_fit(Xtr[:, support], ytr)
        scores = {"OLS-th": r2(yte, th.decision_function(Xte)), "OFSA": r2(yte, fs.decision_function(Xte)),
                  "Lasso": r2(yte, Xte @ lcoef + lint), "Lasso+OLS": r2(yte, Xte[:, support] @ rcoef + rint)}
        run.unit({"dataset": name, "split": split, "k": k, "n_train": int(train.size), "n_test": int(test.size),
                  "p": p, "r2": scores, "full_ols_r2": full_ols, "full_ols_ra_r2": full_ols_ra,
                  "lasso_nnz": reach, "lasso_alpha": alpha, "lasso_unconverged_alphas": unconverged,
                  "supports": {"OLS-th": th.support.tolist(), "OFSA": fs.support.tolist(),
                               "Lasso": support.tolist()},
                  "seconds": {"rave_and_standardize": rave_s, "OLS-th": th.seconds, "OFSA": fs.seconds,
                              "lasso_path": lasso_s}})


# -------------------------------------------------------------------------------------------- main
def main():
    p = parser(__doc__.splitlines()[0], data_dir=True)
    args = p.parse_args()
    profile = choose_profile(args, PROFILES)
    try:
        import sklearn  # noqa: F401
    except ImportError:
        raise SystemExit("scikit-learn is needed for the Lasso reference: pip install scikit-learn") from None
    data_dir = datasets_dir(args.data_dir)
    problem = missing_dense_datasets(data_dir, profile["datasets"])
    if problem and not args.quick:
        raise SystemExit(problem)
    if problem:                      # --quick on a machine without the data: exercise the code on a stand-in
        print(f"NOTE: {problem}; the quick profile runs on a {STAND_IN_LABEL} instead: its figures say nothing "
              f"about cpu_act or satellite_image\n")
        profile["datasets"] = [STAND_IN]
    profile["data_dir"] = data_dir
    profile["data_source"] = STAND_IN_LABEL if problem else "real"
    run = Run("running_averages_real", args, profile)
    print(f"test R^2 over {profile['seeds']} random {1 - profile['test_fraction']:.0%}/{profile['test_fraction']:.0%} "
          f"splits, k in {profile['ks']}; data: {data_dir if not problem else STAND_IN_LABEL}\n", flush=True)
    for name in profile["datasets"]:
        X, y = load(data_dir, name)
        t0 = time.perf_counter()
        for split in range(profile["seeds"]):
            one_split(run, profile, name, X, y, split)
        print(f"{label(name)}: {X.shape[0]} x {X.shape[1]}, {profile['seeds']} splits in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
    print()
    summary = summarise(run.units, profile)
    path = run.finish(summary)
    draw(run, summary, profile)
    print(f"results: {path}")


def label(name):
    return STAND_IN_LABEL if name == STAND_IN else name


def summarise(units, profile):
    summary = {}
    for name in profile["datasets"]:
        mine = [u for u in units if u["dataset"] == name]
        ks = sorted({u["k"] for u in mine})
        p = mine[0]["p"]
        cells = {method: {k: mean_std([u["r2"][method] for u in mine if u["k"] == k]) for k in ks} for method in METHODS}
        nnz = {k: [u["lasso_nnz"] for u in mine if u["k"] == k] for k in ks}
        by_split = {u["split"]: u for u in mine}.values()
        full = mean_std([u["full_ols_r2"] for u in by_split])
        full_ra = mean_std([u["full_ols_ra_r2"] for u in by_split])
        gap = max(abs(u["full_ols_r2"] - u["full_ols_ra_r2"]) for u in by_split)
        rows = [[LABELS[m]] + [fmt(*cells[m][k]) for k in ks] for m in METHODS]
        rows.append(["Lasso non-zeros reached (mean [min, max])"] +
                     [f"{np.mean(nnz[k]):.1f} [{min(nnz[k])}, {max(nnz[k])}]" for k in ks])
        rows.append([f"full OLS, all {p} features (ceiling)"] + [fmt(*full)] * len(ks))
        n_splits = len(list(by_split))
        print_table(f"{label(name)} (n = {mine[0]['n_train'] + mine[0]['n_test']}, p = {p}): test R^2, mean±std "
                    f"over {n_splits} splits (running averages' own full OLS: {fmt(*full_ra)}, largest gap to "
                    f"numpy lstsq's {gap:.1e})", ["model"] + [f"k = {k}" for k in ks], rows)
        summary[name] = {"label": label(name), "p": p, "ks": ks,
                         "r2": {m: {str(k): {"mean": cells[m][k][0], "std": cells[m][k][1]} for k in ks}
                                for m in METHODS},
                         "lasso_nnz_mean": {str(k): float(np.mean(nnz[k])) for k in ks},
                         "full_ols_r2": {"mean": full[0], "std": full[1]},
                         "full_ols_ra_r2": {"mean": full_ra[0], "std": full_ra[1]}, "full_ols_max_gap": gap,
                         "lasso_unconverged_alphas": sum(u["lasso_unconverged_alphas"] for u in by_split)}
    return summary


def draw(run, summary, profile):
    def draw_fn(plt):
        names = list(summary)
        fig, axes = plt.subplots(1, len(names), figsize=(5.2 * len(names), 3.8), squeeze=False)
        for ax, name in zip(axes[0], names):
            s = summary[name]
            for i, method in enumerate(METHODS):
                ks = np.array(s["ks"], dtype=float) + (i - 1.5) * 0.15
                ax.errorbar(ks, [s["r2"][method][str(k)]["mean"] for k in s["ks"]],
                            yerr=[s["r2"][method][str(k)]["std"] for k in s["ks"]], marker="o", capsize=3,
                            label=LABELS[method], ls="--" if method.startswith("Lasso") else "-")
            ax.axhline(s["full_ols_r2"]["mean"], color="gray", ls=":", label=f"full OLS (all {s['p']})")
            ax.set_xticks(s["ks"])
            ax.set_xlabel("features k")
            ax.set_ylabel("test R^2")
            ax.set_title(f"{s['label']} ({profile['seeds']} splits)", fontsize=9)
            ax.legend(fontsize=7, loc="lower right")
    plot(os.path.join(run.args.output, "running_averages_real.png"), draw_fn)


if __name__ == "__main__":
    main()
