"""The node-aggregated transport: measured on MPICH's virtual nodes, projected to 16 x 4 and 64 x 4.

1. Measured: ``mpiexec -n 13 python -m asyos.run`` (12 workers, the mission's default problem) with
   ``--transport node-aggregated`` on 2, 3 and 4 virtual nodes (``MPIR_CVAR_NUM_CLIQUES``; MPICH
   places the ranks round-robin), next to shared memory and pipelined messages on one node, per
   seed: recall, the pushes per second reaching the central rank, its utilization (time serving
   pushes over the asynchronous phase), the workers' staleness and, node-aggregated, the central
   rank's per-push staleness. All ranks share this machine's cores: the figures compare the
   transports' behaviour, not a cluster's speed.
2. Projected: the discrete-event replay (``asyos.learners.protocol.replay``) on dedicated cores, with costs
   measured at the start of this run (``asyos.benchmarking.calibration.measure_costs``; the network
   is this machine's shared-memory messages, an optimistic stand-in for a cluster's), for
   ``nodes x workers per node`` = 16 x 4 and 64 x 4 on a larger problem (p = 16384, s = 128, n by
   KDD'16's rule), node-aggregated against pipelined messages with as many workers: the central
   rank's utilization and push rate against its capacity (``1 / central_service_s`` pushes per
   second), the workers' steps per second, the recall of their candidates and the speedup of the
   whole asynchronous phase over sequential OS replayed with the same costs (sequential OS on the
   same problem is the baseline).

    python benchmarks/bench_node_aggregated.py [--quick] [--seeds K]
"""
from __future__ import annotations

import os
import statistics

import numpy as np

from asyos.benchmarking.calibration import measure_costs
from asyos.benchmarking.common import Run, choose_profile, parser, plot, print_table, run_asyos
from asyos import OnlineSubstitution
from asyos.data.synthetic import SyntheticSource
from asyos.learners.substitution.asy_os import build_workers
from asyos.learners.substitution.workers import SubstitutionOptions
from asyos.losses import get_loss
from asyos.learners.protocol.central import Central
from asyos.learners.protocol.plan import AsyOSPlan
from asyos.learners.protocol.replay import Costs, Machine, SimulatedClock, replay, sequential_time

MEASURED = [                     # label, CLI flags, virtual nodes
    ("shared-memory, 1 node", ["--transport", "shared-memory"], 1),
    ("messages, 1 node", ["--transport", "messages"], 1),
    ("node-aggregated, 2 nodes", ["--transport", "node-aggregated"], 2),
    ("node-aggregated, 3 nodes", ["--transport", "node-aggregated"], 3),
    ("node-aggregated, 4 nodes", ["--transport", "node-aggregated"], 4),
]
PROFILES = {
    "paper": {"ranks": 13, "seeds": 3, "size": [2000, 100], "layouts": [[16, 4], [64, 4]], "max_nodes": 4,
              "projected_problem": {"n_features": 16384, "n_informative": 128, "n_samples": None}},
    "quick": {"ranks": 5, "seeds": 1, "size": [400, 12], "layouts": [[2, 2]], "max_nodes": 2,
              "projected_problem": {"n_features": 800, "n_informative": 16, "n_samples": None}},
    "smoke": {"ranks": 3, "seeds": 1, "size": [200, 8], "layouts": [[2, 2]], "max_nodes": 2,
              "projected_problem": {"n_features": 400, "n_informative": 8, "n_samples": None}},
}


def measured_layouts(profile):
    """The rows of ``MEASURED`` on at most the profile's ``max_nodes`` virtual nodes (the quick profile
    keeps one node-aggregated layout: 3 and 4 nodes take the same path, two more mpiexec runs)."""
    return [row for row in MEASURED if row[2] <= profile["max_nodes"]]


def measured_rows(run, profile):
    p, s = profile["size"]
    for label, flags, nodes in measured_layouts(profile):
        for seed in range(profile["seeds"]):
            record, wall = run_asyos(["--n-features", p, "--n-informative", s, "--seed", seed, *flags],
                                     ranks=profile["ranks"], env_extra={"MPIR_CVAR_NUM_CLIQUES": str(nodes)})
            run.unit({"part": "measured", "layout": label, "seed": seed, "wall_s": wall,
                      "transport": record["transport"], "recall": record["metrics"]["recall"],
                      "pushes_per_s": record["pushes_per_s"], "pushes": record["pushes"], "steps": record["steps"],
                      "utilization": record["central"]["utilization"], "staleness": record["staleness"],
                      "push_staleness": record.get("push_staleness"), "async_s": record["timing"]["async_s"]})
    rows = []
    for label, _, _ in measured_layouts(profile):
        units = [u for u in run.units if u.get("part") == "measured" and u["layout"] == label]
        med = lambda key: statistics.median(u[key] for u in units)          # noqa: E731
        push = [u["push_staleness"] for u in units if u["push_staleness"]]
        rows.append([label, units[0]["transport"], f"{statistics.mean(u['recall'] for u in units):.3f}",
                     f"{med('pushes_per_s'):.0f}", f"{med('steps') / med('pushes'):.1f}",
                     f"{med('utilization'):.3f}",
                     f"{statistics.median(u['staleness']['mean'] for u in units):.1f}/"
                     f"{statistics.median(u['staleness']['max'] for u in units):.0f}",
                     f"{statistics.median(x['mean'] for x in push):.1f}/{statistics.median(x['max'] for x in push):.0f}"
                     if push else "-", f"{med('async_s'):.2f}"])
    print_table(f"Measured: mpiexec -n {profile['ranks']} on this machine ({len(os.sched_getaffinity(0))} cores), "
                f"{profile['seeds']} seeds; recall mean, the rest medians",
                ["layout", "transport", "recall", "pushes/s at central", "steps/push", "central util.",
                 "staleness mean/max", "push staleness mean/max", "async s"], rows)


def projected_rows(run, profile, costs: Costs):
    settings = profile["projected_problem"]
    data = SyntheticSource("regression", settings["n_features"], settings["n_informative"], settings["n_samples"],
                           seed=0).load(with_test=False)
    truth = set(np.flatnonzero(data.true_coef))
    loss, budget = get_loss("squared"), settings["n_informative"]
    options = SubstitutionOptions()
    sequential = OnlineSubstitution(budget=budget, refit=False).fit(data.X, data.y)
    plan = AsyOSPlan.build(data.X.shape[1], budget, 1)
    worker = build_workers(data.X, data.y, loss, plan, options, 0)[0][0]
    sequential_s = sequential_time(worker, Central(data.n_samples), costs, SimulatedClock())
    run.unit({"part": "projected", "nodes": 1, "per_node": 1, "mode": "sequential OS", "q": 1,
              "time_s": sequential_s, "candidate_recall": len(truth & set(int(f) for f in sequential.support_))
              / len(truth)})
    for nodes, per_node in profile["layouts"]:
        q = nodes * per_node
        for mode in ("node-aggregated", "pipelined"):
            plan = AsyOSPlan.build(data.X.shape[1], budget, q, budget_mode="global")
            workers, _ = build_workers(data.X, data.y, loss, plan, options, 0)
            central = Central(data.n_samples)
            report = replay(workers, central, costs, SimulatedClock(), mode, threshold=plan.new_threshold(),
                            machine=Machine(jitter=0.25), seed=0, nodes=nodes)
            found = set(int(f) for w in workers for f in w.selection()[0])
            run.unit({"part": "projected", "nodes": nodes, "per_node": per_node, "mode": mode, "q": q,
                      "time_s": report.time_s, "speedup": sequential_s / report.time_s, "steps": report.steps,
                      "pushes": report.pushes,
                      "utilization": report.central_utilization, "pushes_per_s": report.pushes / report.time_s,
                      "steps_per_s": report.steps / report.time_s, "candidate_recall": len(found & truth) / len(truth),
                      "capacity_pushes_per_s": 1.0 / costs.central_service_s})
    rows = []
    for u in (u for u in run.units if u.get("part") == "projected"):
        if "utilization" not in u:
            rows.append(["-", 1, u["mode"], "-", "-", "-", "-", "-", f"{u['candidate_recall']:.3f}",
                         f"{u['time_s']:.3f}", "1"])
            continue
        rows.append([f"{u['nodes']} x {u['per_node']}", u["q"], u["mode"], f"{u['utilization']:.3f}",
                     f"{u['pushes_per_s']:.0f}", f"{u['capacity_pushes_per_s']:.0f}", f"{u['steps_per_s']:.0f}",
                     f"{u['steps'] / u['pushes']:.1f}", f"{u['candidate_recall']:.3f}", f"{u['time_s']:.3f}",
                     f"{u['speedup']:.1f}"])
    print_table(f"Projected on dedicated cores (replay; p = {settings['n_features']}, s = {budget}): the central rank",
                ["nodes x per node", "workers", "transport", "central util.", "pushes/s", "capacity/s",
                 "steps/s", "steps/push", "candidates' recall", "simulated s", "speedup (to the end)"], rows)


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    profile = choose_profile(args, PROFILES)
    run = Run("node_aggregated", args, profile)
    costs = Costs(**measure_costs(*profile["size"]))
    run.unit({"part": "calibration", **costs.as_dict()})
    measured_rows(run, profile)
    projected_rows(run, profile, costs)
    path = run.finish({"costs": costs.as_dict()})
    print(f"JSON: {path}")

    def draw(plt):
        units = [u for u in run.units if u.get("part") == "measured"]
        labels = [label for label, _, _ in measured_layouts(profile)]
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
        for ax, key, title in ((axes[0], "pushes_per_s", "pushes/s reaching the central rank"),
                               (axes[1], "recall", "recall")):
            values = [[u[key] for u in units if u["layout"] == label] for label in labels]
            ax.boxplot(values)
            ax.set_xticks(range(1, len(labels) + 1), [label.replace(", ", "\n") for label in labels], fontsize=7)
            ax.set_title(title)
        axes[0].set_yscale("log")
        return fig
    plot(os.path.join(args.output, "node_aggregated.png"), draw)


if __name__ == "__main__":
    main()
