"""Asy-OS with a global budget vs the KDD'16 split budget, in the staleness simulator.

KDD'16 gives each of the ``q`` workers a fixed budget ``s/q``: when the true features fall unevenly
over the shards, a worker cannot keep all of its own and recall drops as ``q`` grows.
``budget_mode="global"`` lets a worker hold up to ``cap = min(s, ceil(3 s/q))`` features; the
central node keeps ``theta``, the ``s``-th largest ``|w|`` over all workers' retained weights, and
sends it with every pull; a worker drops its features below ``theta``; the union is cut to the top
``s`` at the end and refit.

The KDD'16 MPI setting (Sec. 5.3), run here in the simulator: ``n`` = 1000, ``p`` = 8192,
regression ``s`` = 64 (noise 0.1) and classification ``s`` = 32 (squared hinge, noise 0), 2 passes,
``q`` in {1, 2, 4, 8, 12} workers, ``max_staleness = tau = q`` with policy ``max`` and round-robin
(the paper's simulation: every worker reads the stalest state the bound allows), split vs global,
5 seeds (data seed = run seed), sequential OS (2 passes) on the same data as the reference. At the
largest ``q`` both modes also run with ``tau = 0`` (the same budgets without staleness, which
separates the loss due to the split from the loss due to staleness).

Then the pipelined message protocol replayed in-process on dedicated cores
(``asyos.learners.protocol.replay.replay``, deterministic; costs of this machine's order) at the
largest ``q``, regression, for the global budget with ``slack`` in {1, 0.8, 0.7, 0.5, 0.3} and the
split budget: there the workers see each other's weights one or two round trips late, and dropping
exactly at ``theta`` (slack 1) makes the union of retained features oscillate; the table gives
recall, the smallest and largest union size seen during the run, and the drops.

Reported per (task, q, tau, mode): recall (fraction of the true features in ``support_``) mean±std,
sequential OS recall mean±std, the gap to OS (paired by seed), test error of the refit model on the
independent test split (RMSE for regression, error rate for classification), fit seconds
(``fit_time_``, after an untimed warm-up fit of every estimator), ``n_dropped_`` (drop events
below ``theta``, summed over workers and passes: a feature can be dropped once per pass), the
final ``theta`` (``threshold_``) and the staleness mean / max. Then two checks computed from the
numbers: the goal "global-budget recall at q = 12 within 0.03 of sequential OS and >= 0.85 on
regression", and ``|support_| <= s`` for every global run; plus a determinism check (seed 0,
largest ``q``, global, fitted twice must agree exactly).

    python benchmarks/bench_global_budget.py                      # the setting above, a few minutes
    python benchmarks/bench_global_budget.py --quick              # p = 1000, s = 16, q in {1, 4}, 2 seeds
    python benchmarks/bench_global_budget.py --seeds 10 --output DIR

Pin BLAS to one thread for comparable times (``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1``).
Writes ``<output>/global_budget.jsonl`` (one line per fit), ``global_budget.json`` (summary) and
``global_budget.png`` (recall vs ``q``: split, global and sequential OS, one panel per task).
"""
from __future__ import annotations

import os

import numpy as np

from asyos.benchmarking.common import Run, choose_profile, fmt, mean_std, parser, plot, print_table

from asyos import AsyncOnlineSubstitution, OnlineSubstitution
from asyos.learners.protocol.replay import Costs, SimulatedClock, replay
from asyos.learners.protocol.central import Central
from asyos.learners.protocol.threshold import GlobalThreshold
from asyos.learners.substitution.asy_os import build_workers, gather_selection
from asyos.learners.protocol.plan import AsyOSPlan, worker_budgets
from asyos.learners.substitution.workers import SubstitutionOptions
from asyos.data.synthetic import SyntheticSource
from asyos.losses import get_loss
from asyos.metrics import recall
from asyos.learners.base import decision_values

PROFILES = {
    "paper": {"n": 1000, "p": 8192, "s": {"regression": 64, "classification": 32},
              "noise": {"regression": 0.1, "classification": 0.0}, "passes": 2, "seeds": 5,
              "workers": [1, 2, 4, 8, 12], "fresh_workers": 12, "replay_seeds": 3,
              "slacks": [1.0, 0.8, 0.7, 0.5, 0.3]},
    "quick": {"n": 200, "p": 1000, "s": {"regression": 16, "classification": 16},
              "noise": {"regression": 0.1, "classification": 0.0}, "passes": 2, "seeds": 2,
              "workers": [1, 4], "fresh_workers": 4, "replay_seeds": 1, "slacks": [1.0, 0.5]},
    # smoke (tests/test_benchmarks.py): the quick profile's code paths on one seed of a smaller problem
    "smoke": {"n": 120, "p": 400, "s": {"regression": 8, "classification": 8},
              "noise": {"regression": 0.1, "classification": 0.0}, "passes": 2, "seeds": 1,
              "workers": [1, 4], "fresh_workers": 4, "replay_seeds": 1, "slacks": [1.0, 0.5]},
}
REPLAY_COSTS = Costs(step_base_s=20e-6, step_per_retained_s=0.35e-6, step_protocol_s=1e-6, push_send_s=2e-6,
                     latency_s=2e-6, bandwidth_bytes_per_s=5e9, central_service_s=24e-6)
TASKS = ("regression", "classification")
LOSSES = {"regression": "squared", "classification": "squared_hinge"}
MODES = ("split", "global")
GOAL_GAP, GOAL_RECALL = 0.03, 0.85


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    profile = choose_profile(args, PROFILES)
    run = Run("global_budget", args, profile)
    q_max = max(profile["workers"])
    warm_up()
    for task in TASKS:
        s, loss = profile["s"][task], LOSSES[task]
        for seed in range(profile["seeds"]):
            d = SyntheticSource(task, n_features=profile["p"], n_informative=s, n_samples=profile["n"],
                                noise=profile["noise"][task], seed=seed).load()
            model = OnlineSubstitution(budget=s, loss=loss, passes=profile["passes"], random_state=seed)
            record(run, d, task, seed, s, "os", None, 1, 0, model.fit(d.X, d.y))
            for q in profile["workers"]:
                taus = (q, 0) if q == profile["fresh_workers"] and q > 0 else (q,)
                for tau in taus:
                    for mode in MODES:
                        model = asy_os(s, loss, q, tau, mode, profile["passes"], seed).fit(d.X, d.y)
                        record(run, d, task, seed, s, "asy-os", mode, q, tau, model)
            if seed == 0:
                determinism(run, d, task, s, loss, q_max, profile["passes"])
    summary = summarise(run.units, profile)
    summary["replay"] = replay_slack(run, profile)
    path = run.finish(summary)
    draw(run, summary, profile)
    print(f"results: {path}")


def warm_up():
    """Fit every estimator once on a tiny problem, untimed, so that loading the compiled kernels
    (numba's cache, or compiling them) is not charged to the first measured fit."""
    for task in TASKS:
        d = SyntheticSource(task, n_features=64, n_informative=4, n_samples=60, n_test=0, seed=0).load()
        OnlineSubstitution(budget=4, loss=LOSSES[task], passes=2).fit(d.X, d.y)
        for mode in MODES:
            asy_os(4, LOSSES[task], 2, 2, mode, 2, 0).fit(d.X, d.y)


def asy_os(s, loss, q, tau, mode, passes, seed):
    return AsyncOnlineSubstitution(budget=s, n_workers=q, max_staleness=tau, policy="max",
                                   schedule="round-robin", loss=loss, passes=passes, random_state=seed,
                                   budget_mode=mode)


def held_out_error(model, d, loss):
    if d.X_test is None or d.y_test is None:
        return None
    return get_loss(loss).error(d.y_test, decision_values(model, d.X_test))


def record(run, d, task, seed, s, kind, mode, q, tau, model):
    stale = getattr(model, "staleness_", None) or {"mean": 0.0, "max": 0, "p95": 0, "histogram": []}
    threshold = getattr(model, "threshold_", None)
    return run.unit({
        "task": task, "seed": seed, "kind": kind, "mode": mode, "q": q, "tau": tau, "s": s,
        "n": d.n_samples, "p": d.n_features,
        "recall": recall(model.support_, d.true_support),
        "n_selected": int(len(model.support_)),
        "within_budget": bool(len(model.support_) <= s),
        "test_error": held_out_error(model, d, LOSSES[task]),
        "seconds": model.fit_time_,
        "n_dropped": getattr(model, "n_dropped_", None),
        "threshold": None if threshold is None else float(threshold),
        "threshold_age": getattr(model, "threshold_age_", None),
        "n_pushes": getattr(model, "n_pushes_", None), "n_steps": getattr(model, "n_steps_", None),
        "staleness_mean": stale["mean"], "staleness_max": stale["max"], "staleness_p95": stale["p95"],
        "staleness_histogram": list(stale["histogram"]),
    })


def determinism(run, d, task, s, loss, q, passes):
    """The global budget at the largest ``q`` fitted twice with the same seed must agree exactly."""
    a = asy_os(s, loss, q, q, "global", passes, 0).fit(d.X, d.y)
    b = asy_os(s, loss, q, q, "global", passes, 0).fit(d.X, d.y)
    same = (np.array_equal(a.support_, b.support_) and np.array_equal(a.coef_, b.coef_)
            and a.threshold_ == b.threshold_ and a.n_dropped_ == b.n_dropped_ and a.n_steps_ == b.n_steps_)
    return run.unit({"task": task, "seed": 0, "kind": "determinism", "mode": "global", "q": q, "tau": q,
                     "s": s, "identical": bool(same), "n_selected": [int(len(a.support_)), int(len(b.support_))],
                     "seconds": a.fit_time_ + b.fit_time_})


def pick(units, **match):
    return [u for u in units if all(u.get(k) == v for k, v in match.items())]


def ms(units, key):
    return mean_std([u[key] for u in units])


def paired_gap(units, os_units):
    """Per seed ``recall - recall_OS`` (same data), mean±std."""
    os_by_seed = {u["seed"]: u["recall"] for u in os_units}
    return mean_std([u["recall"] - os_by_seed[u["seed"]] for u in units if u["seed"] in os_by_seed])


def summarise(units, profile):
    summary = {"tasks": {}, "checks": {}}
    q_max = max(profile["workers"])
    for task in TASKS:
        s = profile["s"][task]
        os_units = pick(units, task=task, kind="os")
        os_recall, os_err, os_sec = ms(os_units, "recall"), ms(os_units, "test_error"), ms(os_units, "seconds")
        err_name = "RMSE" if task == "regression" else "error rate"
        rows, table = [], []
        for q in profile["workers"]:
            for tau in ((q, 0) if q == profile["fresh_workers"] else (q,)):
                for mode in MODES:
                    us = pick(units, task=task, kind="asy-os", q=q, tau=tau, mode=mode)
                    if not us:
                        continue
                    r, gap = ms(us, "recall"), paired_gap(us, os_units)
                    entry = {"q": q, "tau": tau, "mode": mode, "runs": len(us), "recall": r,
                             "os_recall": os_recall, "gap_to_os": gap,
                             "gap_of_means": r[0] - os_recall[0],
                             "test_error": ms(us, "test_error"), "seconds": ms(us, "seconds"),
                             "n_dropped": ms(us, "n_dropped"), "threshold": ms(us, "threshold"),
                             "staleness_mean": ms(us, "staleness_mean")[0],
                             "staleness_max": max(u["staleness_max"] for u in us),
                             "max_selected": max(u["n_selected"] for u in us)}
                    rows.append(entry)
                    table.append([q, tau, mode, fmt(*r), fmt(*os_recall), fmt(*gap, digits=3),
                                  fmt(*entry["test_error"], digits=4), fmt(*entry["seconds"], digits=2),
                                  fmt(entry["n_dropped"][0], digits=0) if mode == "global" else "-",
                                  fmt(entry["threshold"][0], digits=4) if mode == "global" else "-",
                                  f"{entry['staleness_mean']:.2f}", entry["staleness_max"],
                                  f"{entry['max_selected']}/{s}"])
        print_table(f"{task}: n = {profile['n']}, p = {profile['p']}, s = {s}, {profile['passes']} passes, "
                    f"policy max, round-robin, {len(os_units)} seeds; sequential OS recall {fmt(*os_recall)}, "
                    f"test {err_name} {fmt(*os_err, digits=4)}, {fmt(*os_sec, digits=2)} s",
                    ["q", "tau", "mode", "recall", "OS recall", "gap to OS (paired)", f"test {err_name}",
                     "fit s", "n_dropped", "theta", "stale mean", "max", "max |S|/s"], table)
        summary["tasks"][task] = {"s": s, "os": {"recall": os_recall, "test_error": os_err, "seconds": os_sec},
                                  "rows": rows}
    summary["checks"] = checks(units, summary, q_max)
    return summary


def checks(units, summary, q_max):
    out = {}
    rows = [r for r in summary["tasks"]["regression"]["rows"]
            if r["q"] == q_max and r["tau"] == q_max and r["mode"] == "global"]
    if rows:
        r = rows[0]
        mean, os_mean = r["recall"][0], r["os_recall"][0]
        gap = mean - os_mean
        met = gap >= -GOAL_GAP and mean >= GOAL_RECALL
        out["goal"] = {"q": q_max, "recall": mean, "os_recall": os_mean, "gap": gap, "met": met}
        print(f"goal (regression, global budget, q = tau = {q_max}): recall {mean:.3f} vs sequential OS "
              f"{os_mean:.3f} (gap {gap:+.3f}; needs >= -{GOAL_GAP}) and recall >= {GOAL_RECALL}: "
              f"{'met' if met else 'NOT MET'}")
        if q_max != 12:
            print(f"  (this profile's largest q is {q_max}; the goal is stated for q = 12: run the full profile)")
    for task in TASKS:
        rows = [r for r in summary["tasks"][task]["rows"]
                if r["q"] == q_max and r["tau"] == q_max and r["mode"] == "global"]
        if rows and task != "regression":
            r = rows[0]
            gap = r["recall"][0] - r["os_recall"][0]
            print(f"  for information, {task} at q = tau = {q_max}: global recall {r['recall'][0]:.3f} vs "
                  f"OS {r['os_recall'][0]:.3f} (gap {gap:+.3f})")
    glob = pick(units, kind="asy-os", mode="global")
    over = [(u["task"], u["seed"], u["q"], u["tau"], u["n_selected"], u["s"])
            for u in glob if not u["within_budget"]]
    out["support_within_budget"] = {"runs": len(glob), "violations": over, "met": not over}
    print(f"|support_| <= s in every global run: {len(glob) - len(over)}/{len(glob)} runs: "
          f"{'met' if not over else 'NOT MET ' + str(over)}")
    det = pick(units, kind="determinism")
    bad = [(u["task"], u["q"]) for u in det if not u["identical"]]
    out["deterministic"] = {"runs": len(det), "differing": bad, "met": not bad}
    print(f"deterministic (global, seed 0, q = {q_max}, fitted twice): "
          f"{'met' if not bad else 'NOT MET ' + str(bad)} ({len(det)} task(s))\n")
    return out


def replay_slack(run, profile):
    """The pipelined protocol replayed at the largest q (regression): recall and the range of the
    union's size for each slack, and for the split budget."""
    q, s = max(profile["workers"]), profile["s"]["regression"]
    loss = get_loss(LOSSES["regression"])
    rows, table = [], []
    for slack in [None] + list(profile["slacks"]):
        units = []
        for seed in range(profile["replay_seeds"]):
            d = SyntheticSource("regression", n_features=profile["p"], n_informative=s, n_samples=profile["n"],
                                noise=profile["noise"]["regression"], seed=seed).load()
            mode = "split" if slack is None else "global"
            budgets = worker_budgets(s, q, mode)
            plan = AsyOSPlan.build(d.X.shape[1], s, q, budget_mode=mode, slack=slack)
            workers, _ = build_workers(d.X, d.y, loss, plan, SubstitutionOptions(passes=profile["passes"]), seed)
            sizes = []
            central = Central(d.n_samples, monitor=lambda c: sizes.append(sum(w.state.size for w in workers)))
            keeper = GlobalThreshold(s, q, budgets[0]) if slack is not None else None
            replay(workers, central, REPLAY_COSTS, SimulatedClock(), mode="pipelined", threshold=keeper)
            support, _ = gather_selection(workers, s if keeper is not None else None)
            half = sizes[len(sizes) // 2:]                # the second half, once the sets have filled
            units.append(run.unit({"kind": "replay", "task": "regression", "seed": seed, "q": q, "slack": slack,
                                   "recall": recall(support, d.true_support), "union_min": min(half),
                                   "union_max": max(half), "n_dropped": sum(w.dropped for w in workers)}))
        r = ms(units, "recall")
        entry = {"slack": slack, "recall": r, "union_min": min(u["union_min"] for u in units),
                 "union_max": max(u["union_max"] for u in units), "n_dropped": ms(units, "n_dropped")[0]}
        rows.append(entry)
        table.append(["split" if slack is None else f"global, slack {slack:g}", fmt(*r),
                      f"{entry['union_min']}-{entry['union_max']}", fmt(entry["n_dropped"], digits=0)])
    print_table(f"Pipelined protocol replayed on dedicated cores, regression, q = {q}, "
                f"{profile['replay_seeds']} seeds (union: retained features over all workers, second half of "
                f"the run)", ["budget", "recall", "union size", "drops"], table)
    return rows


def draw(run, summary, profile):
    def draw_fn(plt):
        fig, axes = plt.subplots(1, len(TASKS), figsize=(5 * len(TASKS), 3.8), squeeze=False)
        for ax, task in zip(axes[0], TASKS):
            t = summary["tasks"][task]
            for mode, marker in (("split", "o"), ("global", "s")):
                rows = [r for r in t["rows"] if r["mode"] == mode and r["tau"] == r["q"]]
                ax.errorbar([r["q"] for r in rows], [r["recall"][0] for r in rows],
                            yerr=[r["recall"][1] for r in rows], marker=marker, capsize=3,
                            label=f"{mode} (tau = q)")
                fresh = [r for r in t["rows"] if r["mode"] == mode and r["tau"] == 0 and r["q"] > 0]
                if fresh:
                    ax.scatter([r["q"] for r in fresh], [r["recall"][0] for r in fresh], marker=marker,
                               facecolors="none", edgecolors="k", zorder=3, label=f"{mode} (tau = 0)")
            os_mean, os_std = t["os"]["recall"]
            ax.axhline(os_mean, color="gray", ls="--", label="sequential OS")
            ax.axhspan(os_mean - os_std, os_mean + os_std, color="gray", alpha=0.15)
            ax.set_xscale("log", base=2)
            ax.set_xticks(profile["workers"])
            ax.set_xticklabels([str(q) for q in profile["workers"]])
            ax.set_xlabel("workers q")
            ax.set_ylabel("recall")
            ax.set_title(f"{task}: p = {profile['p']}, s = {t['s']}", fontsize=10)
            ax.legend(fontsize=8)
    plot(os.path.join(run.args.output, "global_budget.png"), draw_fn)


if __name__ == "__main__":
    main()
