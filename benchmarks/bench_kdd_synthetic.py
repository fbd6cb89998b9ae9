"""KDD'16 Sec. 5.1 on its synthetic problems: OS vs Proj-GD vs Lasso, same data, same refit.

Regression (``p`` = 2000, 4000, 6000; ``s`` = 100; ``n = ceil(1.2 s log2 p)``; noise 0.1): recall,
recovery error ``||w - w*|| / ||w*||`` and fit time of OS (the exchange variant with its defaults;
KDD'16's Alg. 1 literally after 2 and after 3 passes), Proj-GD and Lasso. Classification (``p`` =
1000, 3000, 5000; squared hinge): recall and test error. Times are also given relative to Proj-GD
measured in the same run.

    python benchmarks/bench_kdd_synthetic.py            # the paper's sizes, 5 seeds
    python benchmarks/bench_kdd_synthetic.py --quick    # seconds, for CI
"""
from __future__ import annotations

import os
import time

from asyos.benchmarking.common import Run, choose_profile, fmt, mean_std, parser, plot, print_table

from asyos import LassoToBudget, OnlineSubstitution, ProjectedGradient
from asyos.data.synthetic import SyntheticSource
from asyos.losses import get_loss
from asyos.metrics import evaluate

PROFILES = {
    "paper": {"regression": [2000, 4000, 6000], "classification": [1000, 3000, 5000], "s": 100, "seeds": 5},
    "quick": {"regression": [300, 600], "classification": [300], "s": 10, "seeds": 2},
}
METHODS = {
    "os": lambda s, loss, seed: OnlineSubstitution(budget=s, loss=loss, random_state=seed),
    "os-kdd16-2": lambda s, loss, seed: OnlineSubstitution(budget=s, loss=loss, passes=2, variant="kdd16",
                                                           random_state=seed),
    "os-kdd16-3": lambda s, loss, seed: OnlineSubstitution(budget=s, loss=loss, passes=3, variant="kdd16",
                                                           random_state=seed),
    "proj-gd": lambda s, loss, seed: ProjectedGradient(budget=s, loss=loss, random_state=seed),
    "lasso": lambda s, loss, seed: LassoToBudget(budget=s, loss=loss, random_state=seed),
}


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    profile = choose_profile(args, PROFILES)
    run = Run("kdd_synthetic", args, profile)
    s = profile["s"]
    for task in ("regression", "classification"):
        loss = "squared" if task == "regression" else "squared_hinge"
        for p in profile[task]:
            for seed in range(profile["seeds"]):
                d = SyntheticSource(task, n_features=p, n_informative=s, seed=seed).load()
                for name, make in METHODS.items():
                    model = make(s, loss, seed)
                    t0 = time.perf_counter()
                    model.fit(d.X, d.y)
                    seconds = time.perf_counter() - t0
                    coef, b = model.coef_, getattr(model, "intercept_", 0.0)
                    m = evaluate(get_loss(loss), coef, d.X @ coef + b, d.y, d.X_test @ coef + b, d.y_test,
                                 d.true_coef, model.support_)
                    run.unit({"task": task, "p": p, "n": d.n_samples, "s": s, "seed": seed, "method": name,
                              "seconds": seconds, **m})
    summary = summarise(run.units, profile)
    path = run.finish(summary)
    draw_recall(run, summary)
    print(f"results: {path}")


def summarise(units, profile):
    summary = {}
    for task in ("regression", "classification"):
        rows, table = [], {}
        err_key = "recovery_error" if task == "regression" else "test_error"
        for p in profile[task]:
            cell = {}
            base = mean_std([u["seconds"] for u in units if u["task"] == task and u["p"] == p
                             and u["method"] == "proj-gd"])[0]
            row = [p, next(u["n"] for u in units if u["task"] == task and u["p"] == p)]
            for method in METHODS:
                sel = [u for u in units if u["task"] == task and u["p"] == p and u["method"] == method]
                rec, err, sec = (mean_std([u[k] for u in sel]) for k in ("recall", err_key, "seconds"))
                cell[method] = {"recall": rec, err_key: err, "seconds": sec[0], "time_vs_proj_gd": sec[0] / base}
                row += [fmt(*rec), fmt(*err), f"{sec[0]:.2f} ({sec[0] / base:.1f}x)"]
            table[p] = cell
            rows.append(row)
        header = ["p", "n"]
        for method in METHODS:
            header += [f"{method} recall", f"{method} {'err' if task == 'regression' else 'test err'}",
                       f"{method} s (vs pgd)"]
        title = (f"KDD'16 {task}: s = {profile['s']}, {profile['seeds']} seeds, mean±std; "
                 f"{'recovery error ||w-w*||/||w*||' if task == 'regression' else 'test misclassification rate'}")
        print_table(title, header, rows)
        summary[task] = table
    return summary


def draw_recall(run, summary):
    def draw(plt):
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        for ax, task in zip(axes, ("regression", "classification")):
            ps = sorted(summary[task])
            for method in METHODS:
                ax.errorbar(ps, [summary[task][p][method]["recall"][0] for p in ps],
                            yerr=[summary[task][p][method]["recall"][1] for p in ps], marker="o", label=method,
                            capsize=3)
            ax.set_xlabel("p (features)")
            ax.set_ylabel("recall")
            ax.set_title(f"KDD'16 {task}, s = {run.profile['s']}")
            ax.legend()
    plot(os.path.join(run.args.output, "kdd_synthetic.png"), draw)


if __name__ == "__main__":
    main()
