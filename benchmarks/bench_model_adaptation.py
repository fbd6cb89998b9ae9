"""Model adaptation to drifting coefficients with running averages (Sun 2019, Sec. 5.4, Table 5.5, Fig. 5.5).

Data as in the thesis' Sec. 4.1: ``x_i = alpha z_i 1_p + u_i`` with ``z_i ~ N(0, 1)``, ``u_i ~ N(0, I_p)``,
``alpha = 1`` (Sec. 5.4 says it follows "the data generation method in the simulation part" and names
no other alpha), ``p`` = 100, ``k`` = 10. The ``k`` true features sit at the 1-based positions ``10 j``
(Sec. 4.1's layout) and drift: ``beta_tj = a sin(2 pi (t - 100 j) / T) + b`` (eq. 5.1), ``a`` = 0.4,
``b`` = 0.6, ``T`` = 1000 time periods ``t = 1..T`` (one full cycle); every other coefficient is 0. In
each period 1000 observations are drawn, ``y = x . beta_t + N(0, 1)``.

Two running averages (``asyos.learners.averages.stats.RunningAverages``) see the same stream, one batch per period:

* **with adaptation**: eq. 3.11 applied once per period (the period's batch is one term,
  ``forget_by="batch"``), ``a <- (1 - alpha_m) a + alpha_m a(batch)`` with ``alpha_m = max(0.01, 1/m)``
  at the ``m``-th period: plain averages for the first 100 periods, then the rate 0.01 per period;
* **without adaptation**: plain running averages of everything seen.

At each period ``t >= 2``, *before* that period's batch is added, a model with ``k`` = 10 features is
extracted from each (OFSA, thesis Alg. 4, and OLS-th, Alg. 3; both with the final least-squares refit)
and its prediction RMSE is measured on period ``t``'s observations. Reported: the RMSE averaged over the
last ``tail`` = 300 periods (``t = 701..1000``: the thesis says "the last few hundred time steps"), then
mean ± std over 20 runs, next to Table 5.5 (1.028 with, 2.280 without adaptation); the share of those
periods whose extracted support is exactly the true one; and the **population limit**: the RMSE the
same averages would give with infinitely many observations per period and the true support,
``sqrt(1 + d^T Sigma d)`` with ``d = beta_t - beta_bar``, ``beta_bar`` the (decayed) average of the past
``beta_s`` with the weights the averages give them and ``Sigma = I + alpha^2 1 1^T`` -- what is left
of the RMSE is then the lag of the averages, not estimation noise. ``oracle`` is the RMSE of the true
``beta_t`` (the noise level, 1). The zero model's RMSE (the sd of ``y``) is about 6.4.

The plot (``model_adaptation.png``, like Fig. 5.5, left to right): the true coefficients over ``t``; the
OFSA coefficients without and with adaptation in run 0 (true features in colour, the others in grey);
the RMSE over ``t`` of both, averaged over the runs, with the population limits dashed.

**BLAS threads.** The matrices are 100 x 100: threaded BLAS only adds overhead, and on a shared
machine its spinning threads made the loop ~10x slower (150 periods: 25 s with 2 threads, 2-3 s with 1,
at a load of ~5.5 on 2 cores). The script sets ``OPENBLAS_NUM_THREADS`` /
``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` to 1 before numpy is imported (``asyos._env.pin_blas_threads``;
a value the user has set is kept).

    python benchmarks/bench_model_adaptation.py          # 20 runs x 1000 periods, every period extracted
                                                         # (~5 min wall, 1 core, on a shared 2-core machine)
    python benchmarks/bench_model_adaptation.py --quick  # seconds, for CI (p = 50, k = 5, T = 60 periods
                                                         # of 200 observations, rate 0.1, 2 runs)
"""
from __future__ import annotations

import os
import time

from asyos._env import pin_blas_threads

pin_blas_threads()                # one BLAS thread (unless the user set one) before numpy is imported

import numpy as np  # noqa: E402

from asyos.benchmarking.common import Run, choose_profile, fmt, mean_std, parser, plot, print_table  # noqa: E402

from asyos.learners.averages import extractors as E  # noqa: E402
from asyos.learners.averages.stats import RunningAverages  # noqa: E402

PROFILES = {
    "paper": {"p": 100, "k": 10, "alpha": 1.0, "a": 0.4, "b": 0.6, "T": 1000, "shift": 100,
              "n_per_period": 1000, "forgetting": 0.01, "tail": 300, "seeds": 20},
    "quick": {"p": 50, "k": 5, "alpha": 1.0, "a": 0.4, "b": 0.6, "T": 60, "shift": 12,
              "n_per_period": 200, "forgetting": 0.1, "tail": 20, "seeds": 2},
}
EXTRACTORS = {"OFSA": lambda std, k: E.ofsa(std, k), "OLS-th": lambda std, k: E.ols_threshold(std, k)}
MODES = ("adapt", "plain")
MODE_LABEL = {"adapt": "with adaptation", "plain": "without adaptation"}
THESIS = {"adapt": 1.028, "plain": 2.280}       # Table 5.5 (20 runs, "the last few hundred time steps")
SEED_BASE = 5400


def true_positions(k):
    return 10 * np.arange(1, k + 1) - 1            # 0-based positions of the features 10, 20, ..., 10 k


def coefficients(profile):
    """``B[t - 1] = beta_t`` for ``t = 1..T`` (``T x p``), eq. 5.1 at the positions ``10 j``."""
    p, k, T = profile["p"], profile["k"], profile["T"]
    t = np.arange(1, T + 1)[:, None]
    j = np.arange(1, k + 1)[None, :]
    B = np.zeros((T, p))
    B[:, true_positions(k)] = profile["a"] * np.sin(2 * np.pi * (t - profile["shift"] * j) / T) + profile["b"]
    return B


def population_limit(profile, B):
    """Per period (``t = 2..T``, NaN at ``t = 1``): ``sqrt(1 + d^T Sigma d)`` for both modes, ``d = beta_t -
    beta_bar``, ``beta_bar`` the average of ``beta_1..beta_{t-1}`` with the running averages' weights."""
    alpha, rate = profile["alpha"], profile["forgetting"]
    out = {mode: np.full(B.shape[0], np.nan) for mode in MODES}
    bar = {mode: np.zeros(B.shape[1]) for mode in MODES}
    for m in range(1, B.shape[0] + 1):                   # period m = t - 1 is added before t is predicted
        if m >= 2:
            for mode in MODES:
                d = B[m - 1] - bar[mode]
                out[mode][m - 1] = np.sqrt(1.0 + d @ d + alpha ** 2 * d.sum() ** 2)
        step = {"plain": 1.0 / m, "adapt": max(rate, 1.0 / m)}
        for mode in MODES:
            bar[mode] += step[mode] * (B[m - 1] - bar[mode])
    return out


def one_run(profile, B, seed, keep_coef):
    p, k, T, n, alpha = profile["p"], profile["k"], profile["T"], profile["n_per_period"], profile["alpha"]
    true = true_positions(k)
    rng = np.random.default_rng(seed)
    averages = {"adapt": RunningAverages(p, forgetting=profile["forgetting"], forget_by="batch"),
                "plain": RunningAverages(p)}
    rmse = {(mode, name): np.full(T, np.nan) for mode in MODES for name in EXTRACTORS}
    exact = {(mode, name): np.zeros(T, dtype=bool) for mode in MODES for name in EXTRACTORS}
    hits = {(mode, name): np.zeros(T, dtype=int) for mode in MODES for name in EXTRACTORS}
    seconds = {name: 0.0 for name in EXTRACTORS}
    oracle = np.full(T, np.nan)
    coef = {mode: np.full((T, p), np.nan) for mode in MODES} if keep_coef else None
    for t in range(1, T + 1):
        X = rng.standard_normal((n, p))
        X += alpha * rng.standard_normal((n, 1))
        noise = rng.standard_normal(n)
        y = X @ B[t - 1] + noise
        oracle[t - 1] = np.sqrt(np.mean(noise ** 2))
        if t >= 2:                                    # extract from periods 1..t-1, predict period t
            for mode in MODES:
                std = averages[mode].standardize()
                for name, extract in EXTRACTORS.items():
                    t0 = time.perf_counter()
                    model = extract(std, k)
                    seconds[name] += time.perf_counter() - t0
                    rmse[mode, name][t - 1] = np.sqrt(np.mean((model.decision_function(X) - y) ** 2))
                    common = np.intersect1d(model.support, true).size
                    hits[mode, name][t - 1] = common
                    exact[mode, name][t - 1] = common == k and model.support.size == k
                    if keep_coef and name == "OFSA":
                        coef[mode][t - 1] = model.coef
        for mode in MODES:
            averages[mode].update(X, y)
    return rmse, exact, hits, seconds, oracle, coef


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    profile = choose_profile(args, PROFILES)
    run = Run("model_adaptation", args, profile)
    p, k, T, tail = profile["p"], profile["k"], profile["T"], profile["tail"]
    B = coefficients(profile)
    limit = population_limit(profile, B)
    window = slice(T - tail, T)                         # periods T - tail + 1 .. T (1-based)
    print(f"thesis Sec. 5.4 drift simulation: p = {p}, k = {k}, alpha = {profile['alpha']}, "
          f"beta_tj = {profile['a']} sin(2 pi (t - {profile['shift']} j)/{T}) + {profile['b']}, T = {T} periods of "
          f"{profile['n_per_period']} observations, adaptation rate {profile['forgetting']} per period, "
          f"{profile['seeds']} runs; RMSE over t = {T - tail + 1}..{T}\n", flush=True)
    start = time.perf_counter()
    curves = {(mode, name): [] for mode in MODES for name in EXTRACTORS}
    example = None
    for rep in range(profile["seeds"]):
        t0 = time.perf_counter()
        rmse, exact, hits, seconds, oracle, coef = one_run(profile, B, SEED_BASE + rep, keep_coef=rep == 0)
        if rep == 0:
            example = coef
        unit = {"seed": rep, "periods": [T - tail + 1, T], "oracle_rmse": float(np.mean(oracle[window])),
                "seconds": time.perf_counter() - t0,
                "extract_ms": {name: 1e3 * s / (2 * (T - 1)) for name, s in seconds.items()}}
        for (mode, name), r in rmse.items():
            curves[mode, name].append(r)
            unit[f"{mode}/{name}"] = {
                "rmse_tail": float(np.mean(r[window])),
                "rmse_all": float(np.nanmean(r)),
                "exact_support_tail": float(np.mean(exact[mode, name][window])),
                "true_selected_tail": float(np.mean(hits[mode, name][window])),
                "rmse_curve": [None if np.isnan(v) else round(float(v), 5) for v in r]}
        run.unit(unit)
        print(f"run {rep}: " + ", ".join(f"{mode}/{name} {unit[f'{mode}/{name}']['rmse_tail']:.3f}"
                                         for mode in MODES for name in EXTRACTORS)
              + f"  ({unit['seconds']:.1f} s)", flush=True)
    wall = time.perf_counter() - start
    summary = summarise(run.units, profile, limit, window, curves, wall)
    path = run.finish(summary)
    draw(run, profile, B, example, curves, limit)
    print(f"results: {path}")


def summarise(units, profile, limit, window, curves, wall):
    T, tail = profile["T"], profile["tail"]
    summary = {"periods": [T - tail + 1, T], "wall_seconds": wall,
               "oracle_rmse": mean_std([u["oracle_rmse"] for u in units]), "thesis": THESIS, "cells": {},
               "population_limit_tail": {mode: float(np.mean(limit[mode][window])) for mode in MODES},
               "mean_curves": {f"{mode}/{name}": [None if np.isnan(v) else round(float(v), 5)
                                                  for v in np.mean(c, axis=0)]
                               for (mode, name), c in curves.items()},
               "extract_ms": {name: mean_std([u["extract_ms"][name] for u in units]) for name in EXTRACTORS}}
    rows = []
    for mode in MODES:
        for name in EXTRACTORS:
            key = f"{mode}/{name}"
            cell = {field: mean_std([u[key][field] for u in units])
                    for field in ("rmse_tail", "rmse_all", "exact_support_tail", "true_selected_tail")}
            summary["cells"][key] = cell
            rows.append([name, MODE_LABEL[mode], fmt(*cell["rmse_tail"]), fmt(*cell["rmse_all"]),
                         f"{100 * cell['exact_support_tail'][0]:.1f}", f"{cell['true_selected_tail'][0]:.2f}",
                         f"{summary['population_limit_tail'][mode]:.3f}", f"{THESIS[mode]:.3f}"])
    rows.append(["oracle beta_t", "-", fmt(*summary["oracle_rmse"]), "-", "-", "-", "1.000", "-"])
    header = ["extractor", "averages", f"RMSE t={T - tail + 1}..{T}", "RMSE t=2..T", "exact support %",
              f"true of {profile['k']}", "population limit", "thesis Table 5.5"]
    print_table(f"prediction RMSE on the next period, mean±std over {len(units)} runs (ours; the thesis' "
                f"Table 5.5 is 20 runs over 'the last few hundred time steps'); wall {wall:.0f} s", header, rows)
    ms = summary["extract_ms"]
    print("mean extraction time per model: " + ", ".join(f"{name} {ms[name][0]:.2f} ms" for name in EXTRACTORS))
    return summary


def draw(run, profile, B, example, curves, limit):
    T, k = profile["T"], profile["k"]
    true = true_positions(k)
    t = np.arange(1, T + 1)

    def draw_fn(plt):
        colors = [plt.get_cmap("tab10")(j % 10) for j in range(k)]
        fig, axes = plt.subplots(1, 4, figsize=(19, 4.2))
        lo = min(0.0, np.nanmin(B) - 0.1)
        hi = max(np.nanmax(B), *(np.nanmax(example[m]) for m in MODES)) + 0.1
        ax = axes[0]
        for j, col in enumerate(true):
            ax.plot(t, B[:, col], color=colors[j], lw=1.2, label=f"x{col + 1}")
        ax.set_title("true coefficients beta_t", fontsize=10)
        ax.legend(fontsize=6, ncol=2, loc="lower right")
        for ax, mode in zip(axes[1:3], ("plain", "adapt")):
            coef = example[mode]
            others = np.setdiff1d(np.arange(B.shape[1]), true)
            ax.plot(t, coef[:, others], color="0.7", lw=0.6)
            for j, col in enumerate(true):
                ax.plot(t, coef[:, col], color=colors[j], lw=1.2)
            ax.set_title(f"OFSA coefficients {MODE_LABEL[mode]} (run 0)", fontsize=10)
        for ax in axes[:3]:
            ax.set_ylim(lo, hi)
            ax.set_xlabel("time period t")
            ax.set_ylabel("coefficient")
        ax = axes[3]
        style = {"OFSA": "-", "OLS-th": ":"}
        color = {"adapt": "tab:blue", "plain": "tab:red"}
        for (mode, name), c in curves.items():
            ax.plot(t, np.mean(c, axis=0), ls=style[name], color=color[mode], lw=1.2,
                    label=f"{name}, {MODE_LABEL[mode]}")
        for mode in MODES:
            ax.plot(t, limit[mode], ls="--", color=color[mode], lw=0.8, alpha=0.7,
                    label=f"population limit, {MODE_LABEL[mode]}")
        ax.axhline(1.0, color="k", lw=0.6)
        ax.axvspan(T - profile["tail"] + 0.5, T + 0.5, color="0.92", zorder=0)
        ax.set_xlabel("time period t")
        ax.set_ylabel(f"RMSE on period t (mean of {len(next(iter(curves.values())))} runs)")
        ax.set_title("prediction RMSE (shaded: the periods averaged)", fontsize=10)
        ax.legend(fontsize=7)
    plot(os.path.join(run.args.output, "model_adaptation.png"), draw_fn)


if __name__ == "__main__":
    main()
