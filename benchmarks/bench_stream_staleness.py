"""Accuracy vs staleness for every sample-stream learner, in the staleness simulator.

Each learner runs as ``q = tau + 1`` asynchronous data-parallel workers (``asyos.distributed.
stream_simulator``: every worker reads its own part of each pass; its loss gradient is computed at the
model ``tau`` updates old -- the ``max`` policy, round-robin schedule -- and every update is applied to
the central model). ``tau = 0`` is the sequential learner (measured in the same run: the baseline).
Test accuracy (mean ± std over seeds) on one real data set, the learners' default parameters (features
scaled by their max-abs value), budget ``B``.

    python benchmarks/bench_stream_staleness.py [--quick] [--dataset dexter] [--budget 100] [--passes auto]

With the ECML'18 protocol's ``ceil(2 d / n)`` passes (134 on dexter) staleness has many passes to be
averaged out; ``--passes 1`` shows what it costs in a single pass over the stream.
"""
from __future__ import annotations

import os
import time

import numpy as np

from asyos.benchmarking.common import (Run, choose_profile, datasets_dir, fmt, mean_std, parser, plot, print_table,
                                       sparse_stand_in)

from asyos.data.io import load_dataset
from asyos.learners.stream.stream_simulator import AsyncSampleStream
from asyos.learners.stream.stream_learners import all_stream_learners

PROFILES = {
    "paper": {"taus": [0, 1, 4, 16, 64], "seeds": 3, "passes": "auto"},
    "quick": {"taus": [0, 4], "seeds": 1, "passes": 1},
}


def main():
    p = parser(__doc__.splitlines()[0], data_dir=True)
    p.add_argument("--dataset", default="dexter", help="a data set of ../shared/datasets (default dexter)")
    p.add_argument("--budget", type=int, default=100)
    p.add_argument("--passes", help="passes over the training data (default: the profile's; auto = ceil(2 d / n))")
    args = p.parse_args()
    profile = choose_profile(args, PROFILES)
    if args.passes is not None:
        profile["passes"] = args.passes if args.passes == "auto" else int(args.passes)
    path = os.path.join(datasets_dir(args.data_dir), args.dataset)
    if os.path.exists(path):
        d = load_dataset(path)
        X, y, X_test, y_test, name = d.X, d.y, d.X_test, d.y_test, args.dataset
    elif args.quick:                 # a machine without the data: exercise the code on a stand-in
        print(f"NOTE: data set not found: {path}; the quick profile runs on a synthetic sparse stand-in "
              f"(asyos.benchmarking.common.sparse_stand_in): its figures say nothing about {args.dataset}\n")
        X, y, X_test, y_test = sparse_stand_in()
        name = "synthetic stand-in"
    else:
        raise SystemExit(f"data set not found: {path} (pass --data-dir DIR or set ASYOS_DATASETS)")
    profile.update(dataset=name, budget=args.budget)
    run = Run("stream_staleness", args, profile)
    for cls in all_stream_learners():
        if "classification" not in cls.tasks:
            continue
        for seed in range(profile["seeds"]):
            for tau in profile["taus"]:
                learner = cls(budget=args.budget, passes=profile["passes"], random_state=seed)
                if learner.loss == "squared":                     # OPG, RDA, SFSA, TSGD default to regression
                    learner.set_params(loss="squared_hinge")
                start = time.perf_counter()
                model = AsyncSampleStream(learner, n_workers=tau + 1, max_staleness=tau,
                                          random_state=seed).fit(X, y)
                seconds = time.perf_counter() - start
                acc = float(np.mean(model.predict(X_test) == y_test))
                run.unit({"algorithm": cls.algorithm_name, "seed": seed, "tau": tau, "workers": tau + 1,
                          "test_accuracy": acc, "n_selected": int(model.support_.size),
                          "staleness_mean": model.staleness_["mean"], "staleness_max": model.staleness_["max"],
                          "events": model.n_events_, "seconds": seconds})
    summary = summarise(run.units, profile)
    path = run.finish(summary)
    draw(run, summary, profile)
    print(f"results: {path}")


def summarise(units, profile):
    names = list(dict.fromkeys(u["algorithm"] for u in units))
    table, rows = {}, []
    for name in names:
        cells = {}
        for tau in profile["taus"]:
            m, s = mean_std([u["test_accuracy"] for u in units if u["algorithm"] == name and u["tau"] == tau])
            cells[tau] = {"mean": m, "std": s}
        base = cells[profile["taus"][0]]["mean"]
        table[name] = {"by_tau": cells, "drop_at_max_tau": base - cells[profile["taus"][-1]]["mean"]}
        rows.append([name, *(fmt(cells[t]["mean"], cells[t]["std"]) for t in profile["taus"]),
                     fmt(table[name]["drop_at_max_tau"])])
    print_table(f"test accuracy vs staleness on {profile['dataset']}, budget {profile['budget']}, "
                f"passes {profile['passes']} "
                f"(q = tau + 1 workers; tau = 0 is the sequential learner)",
                ["algorithm", *(f"tau={t}" for t in profile["taus"]), "drop"], rows)
    return {"accuracy": table}


def draw(run, summary, profile):
    def figure(plt):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        taus = profile["taus"]
        xs = [t + 1 for t in taus]
        for name, row in summary["accuracy"].items():
            ax.plot(xs, [row["by_tau"][t]["mean"] for t in taus], marker="o", label=name)
        ax.set_xscale("log")
        ax.set_xticks(xs)
        ax.set_xticklabels([str(t) for t in taus])
        ax.set_xlabel("max staleness tau (workers = tau + 1)")
        ax.set_ylabel("test accuracy")
        ax.set_title(f"{profile['dataset']}, budget {profile['budget']}")
        ax.legend(fontsize=7, ncol=2)
    plot(os.path.join(run.args.output, "stream_staleness.png"), figure)


if __name__ == "__main__":
    main()
