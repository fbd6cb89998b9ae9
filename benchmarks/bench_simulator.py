"""Asy-OS in the staleness simulator (KDD'16 Sec. 5.3): recall vs workers and vs passes.

Regression, ``p`` = 4000, ``s`` = 100 (``n`` = 1436), 5 seeds:

* recall vs ``q`` in {1, 2, 4, 8, 16} with ``tau = q`` (the paper's setting: each worker reads the
  stalest state the bound allows), next to ``tau = 0`` with the same ``q`` (the same budget split
  without staleness, so the two effects can be told apart) and sequential OS measured in the same run;
* recall vs passes in {1, 2, 3, 4} for sequential OS and for Asy-OS with ``q = tau = 8``.

    python benchmarks/bench_simulator.py [--quick]
"""
from __future__ import annotations

import os

from asyos.benchmarking.common import Run, choose_profile, fmt, mean_std, parser, plot, print_table

from asyos import AsyncOnlineSubstitution, OnlineSubstitution
from asyos.data.synthetic import SyntheticSource
from asyos.metrics import recall

PROFILES = {
    "paper": {"p": 4000, "s": 100, "seeds": 5, "workers": [1, 2, 4, 8, 16], "passes": [1, 2, 3, 4],
              "default_passes": 3, "passes_workers": 8},
    "quick": {"p": 400, "s": 12, "seeds": 2, "workers": [1, 2, 4], "passes": [1, 2],
              "default_passes": 2, "passes_workers": 4},
}


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    profile = choose_profile(args, PROFILES)
    run = Run("simulator", args, profile)
    s, passes = profile["s"], profile["default_passes"]
    for seed in range(profile["seeds"]):
        d = SyntheticSource("regression", n_features=profile["p"], n_informative=s, seed=seed).load()
        for n_passes in sorted(set(profile["passes"]) | {passes}):
            model = OnlineSubstitution(budget=s, passes=n_passes, random_state=seed).fit(d.X, d.y)
            record(run, d, seed, "sequential", 1, 0, n_passes, model)
        for q in profile["workers"]:
            for tau in sorted({q, 0}):
                model = AsyncOnlineSubstitution(budget=s, n_workers=q, max_staleness=tau, passes=passes,
                                                random_state=seed).fit(d.X, d.y)
                record(run, d, seed, "asy-os", q, tau, passes, model)
        qp = profile["passes_workers"]
        for n_passes in profile["passes"]:
            if n_passes != passes:
                model = AsyncOnlineSubstitution(budget=s, n_workers=qp, max_staleness=qp, passes=n_passes,
                                                random_state=seed).fit(d.X, d.y)
                record(run, d, seed, "asy-os", qp, qp, n_passes, model)
    summary = summarise(run.units, profile)
    path = run.finish(summary)
    draw(run, summary)
    print(f"results: {path}")


def record(run, d, seed, kind, q, tau, n_passes, model):
    stale = getattr(model, "staleness_", {"mean": 0.0, "max": 0})
    return run.unit({"kind": kind, "seed": seed, "q": q, "tau": tau, "passes": n_passes,
                     "recall": recall(model.support_, d.true_support), "seconds": model.fit_time_,
                     "staleness_mean": stale["mean"], "staleness_max": stale["max"]})


def pick(units, **match):
    return [u for u in units if all(u[k] == v for k, v in match.items())]


def summarise(units, profile):
    passes = profile["default_passes"]
    seq = mean_std([u["recall"] for u in pick(units, kind="sequential", passes=passes)])
    rows, by_q = [], {}
    for q in profile["workers"]:
        stale = pick(units, kind="asy-os", q=q, tau=q, passes=passes)
        fresh = pick(units, kind="asy-os", q=q, tau=0, passes=passes)
        r_stale, r_fresh = mean_std([u["recall"] for u in stale]), mean_std([u["recall"] for u in fresh])
        tau_mean = mean_std([u["staleness_mean"] for u in stale])[0]
        by_q[q] = {"recall_tau_q": r_stale, "recall_tau_0": r_fresh, "staleness_mean": tau_mean,
                   "staleness_max": max(u["staleness_max"] for u in stale)}
        rows.append([q, q, fmt(*r_stale), fmt(*r_fresh), f"{r_stale[0] / seq[0]:.3f}", f"{tau_mean:.2f}",
                     by_q[q]["staleness_max"]])
    print_table(f"Asy-OS simulator, regression p = {profile['p']}, s = {profile['s']}, {passes} passes, "
                f"{profile['seeds']} seeds; sequential OS recall {fmt(*seq)}",
                ["q", "tau", "recall (tau=q)", "recall (tau=0)", "vs sequential", "staleness mean", "max"], rows)
    qp = profile["passes_workers"]
    rows, by_passes = [], {}
    for n_passes in profile["passes"]:
        r_seq = mean_std([u["recall"] for u in pick(units, kind="sequential", passes=n_passes)])
        r_asy = mean_std([u["recall"] for u in pick(units, kind="asy-os", q=qp, tau=qp, passes=n_passes)])
        by_passes[n_passes] = {"sequential": r_seq, f"asy-os q={qp}": r_asy}
        rows.append([n_passes, fmt(*r_seq), fmt(*r_asy)])
    print_table(f"Recall vs passes (p = {profile['p']}, s = {profile['s']})",
                ["passes", "sequential OS", f"Asy-OS q = tau = {qp}"], rows)
    return {"sequential_recall": seq, "by_workers": by_q, "by_passes": by_passes}


def draw(run, summary):
    def draw_fn(plt):
        fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
        qs = sorted(summary["by_workers"])
        for key, label in (("recall_tau_q", "tau = q"), ("recall_tau_0", "tau = 0 (split only)")):
            a.errorbar(qs, [summary["by_workers"][q][key][0] for q in qs],
                       yerr=[summary["by_workers"][q][key][1] for q in qs], marker="o", capsize=3, label=label)
        a.axhline(summary["sequential_recall"][0], color="gray", ls="--", label="sequential OS")
        a.set_xscale("log", base=2)
        a.set_xlabel("workers q")
        a.set_ylabel("recall")
        a.legend()
        ps = sorted(summary["by_passes"])
        for key in summary["by_passes"][ps[0]]:
            b.errorbar(ps, [summary["by_passes"][p][key][0] for p in ps],
                       yerr=[summary["by_passes"][p][key][1] for p in ps], marker="o", capsize=3, label=key)
        b.set_xlabel("passes over the features")
        b.set_ylabel("recall")
        b.legend()
    plot(os.path.join(run.args.output, "simulator.png"), draw_fn)


if __name__ == "__main__":
    main()
