"""Does the simulator predict the engine? ``--simulate --transport T`` next to ``mpiexec`` with ``T``.

For each transport (shared memory; messages, pipelined and each-step; node-aggregated on MPICH's
virtual nodes, ``MPIR_CVAR_NUM_CLIQUES``) and ``q`` in {4, 12} workers, the mission's default
problem (``python -m asyos.run``'s embedded KDD'16 regression, one per seed) runs

* under ``mpiexec -n q+1 python -m asyos.run --transport T --seed k``, and
* in the simulator, ``python -m asyos.run --simulate --workers q --transport T --cores C --costs F
  --seed k``, whose costs ``F`` are measured at the start of this same run: a worker step against
  its retained size (``speedup.step_times``), one-way message times (``pingpong`` under
  ``mpiexec -n 2``), the central rank's service time per push (a one-worker messages run, another
  seed), the loops' own costs per step (one-worker runs of the pipelined and shared-memory
  transports: their time beyond the worker's compute), reading ``u_C`` from shared rows; ``C`` is
  the cores this process may use.

Compared per transport and ``q`` over the seeds: recall, the loss at the final ``u_C``
(``objective_candidates``: every worker's features, before the finish), and the staleness
histogram (mean, p95, max, and the total-variation distance between the two histograms). The
simulated runs also report the simulated time next to the real asynchronous phase. JSON and a PNG
of the staleness histograms.

    python benchmarks/bench_simulator_mpi.py [--quick] [--seeds K]
"""
from __future__ import annotations

import json
import os
import statistics
import tempfile

import numpy as np

from asyos.benchmarking.calibration import measure_costs, measure_quantum
from asyos.benchmarking.common import Run, choose_profile, parser, plot, print_table, run_asyos

TRANSPORTS = {                         # label: (CLI flags, virtual nodes under mpiexec)
    "shared-memory": (["--transport", "shared-memory"], 1),
    "messages pipelined": (["--transport", "messages", "--push-mode", "pipelined"], 1),
    "messages each-step": (["--transport", "messages", "--push-mode", "each-step"], 1),
    "node-aggregated x3": (["--transport", "node-aggregated"], 3),
}
PROFILES = {
    "paper": {"workers": [4, 12], "seeds": 5, "transports": list(TRANSPORTS), "size": [2000, 100]},
    "quick": {"workers": [2], "seeds": 1, "transports": ["shared-memory", "node-aggregated x3"], "size": [400, 12]},
    # smoke (tests/test_benchmarks.py): one pair of runs; node-aggregated takes the code path of both layers
    "smoke": {"workers": [2], "seeds": 1, "transports": ["node-aggregated x3"], "size": [200, 8]},
}


# ------------------------------------------------------------------------------------- runs
def brief(record) -> dict:
    m = record["metrics"]
    return {"recall": m["recall"], "objective": m["objective_candidates"], "staleness": record["staleness"],
            "pushes": record["pushes"], "refused": record["refused_pushes"],
            "time_s": record.get("simulated_time_s", record["timing"].get("async_s")),
            "transport": record.get("transport"), "central": record.get("central"),
            "push_staleness": record.get("push_staleness")}


def histogram_distance(a, b) -> float:
    """Total variation between two staleness histograms (0: the same distribution, 1: disjoint)."""
    size = max(len(a), len(b))
    pa, pb = np.zeros(size), np.zeros(size)
    pa[:len(a)], pb[:len(b)] = a, b
    return 0.5 * float(np.abs(pa / max(pa.sum(), 1) - pb / max(pb.sum(), 1)).sum())


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    profile = choose_profile(args, PROFILES)
    run = Run("simulator_mpi", args, profile)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    costs = measure_costs(*profile["size"])
    problem = ["--n-features", str(profile["size"][0]), "--n-informative", str(profile["size"][1])]
    quantum = costs["quantum_s"] = measure_quantum(cores)
    run.unit({"part": "calibration", "cores": cores, "quantum_s": quantum, **costs})
    costs_file = os.path.join(tempfile.mkdtemp(prefix="asyos-costs-"), "costs.json")
    with open(costs_file, "w") as fh:
        json.dump(costs, fh)
    for label in profile["transports"]:
        flags, nodes = TRANSPORTS[label]
        env = {"MPIR_CVAR_NUM_CLIQUES": str(nodes)}
        for q in profile["workers"]:
            for seed in range(profile["seeds"]):
                common = [*problem, "--seed", str(seed), *flags]
                real, seconds = run_asyos(common, ranks=q + 1, env_extra=env)
                sim_flags = ["--simulate", "--workers", str(q), "--cores", str(cores), "--costs", costs_file]
                if nodes > 1:
                    sim_flags += ["--nodes", str(nodes)]
                simulated, _ = run_asyos([*common, *sim_flags])
                run.unit({"part": "pair", "transport": label, "q": q, "seed": seed, "mpi": brief(real),
                          "mpi_wall_s": seconds, "sim": brief(simulated)})
    rows, summary = [], []
    for label in profile["transports"]:
        for q in profile["workers"]:
            pairs = [u for u in run.units if u.get("part") == "pair" and u["transport"] == label and u["q"] == q]
            if not pairs:
                continue

            def med(side, key, sub=None):
                values = [u[side][key][sub] if sub else u[side][key] for u in pairs]
                return statistics.mean(values) if key in ("recall", "objective") else statistics.median(values)
            tv = statistics.median(histogram_distance(u["mpi"]["staleness"]["histogram"],
                                                      u["sim"]["staleness"]["histogram"]) for u in pairs)
            line = {"transport": label, "q": q, "seeds": len(pairs), "total_variation": tv}
            for side in ("mpi", "sim"):
                line[side] = {"recall": med(side, "recall"), "objective": med(side, "objective"),
                              "staleness_mean": med(side, "staleness", "mean"),
                              "staleness_p95": med(side, "staleness", "p95"),
                              "staleness_max": med(side, "staleness", "max"), "time_s": med(side, "time_s")}
            summary.append(line)
            m, s = line["mpi"], line["sim"]
            rows.append([label, q, len(pairs), f"{m['recall']:.3f} / {s['recall']:.3f}",
                         f"{m['objective']:.5f} / {s['objective']:.5f}",
                         f"{m['staleness_mean']:.1f} / {s['staleness_mean']:.1f}",
                         f"{m['staleness_p95']:.0f} / {s['staleness_p95']:.0f}",
                         f"{m['staleness_max']:.0f} / {s['staleness_max']:.0f}", f"{tv:.2f}",
                         f"{m['time_s']:.2f} / {s['time_s']:.2f}"])
    print_table(f"mpiexec / simulator on the default problem, {cores} cores (quantum {quantum * 1e3:.2f} ms); "
                f"means (recall, objective) and medians (the rest) over seeds",
                ["transport", "q", "seeds", "recall", "objective at u_C", "staleness mean", "p95", "max",
                 "hist. TV", "async s (real / simulated)"], rows)
    path = run.finish({"rows": summary, "costs": costs, "cores": cores, "quantum_s": quantum})
    print(f"JSON: {path}")

    def draw(plt):
        pairs = [u for u in run.units if u.get("part") == "pair" and u["seed"] == 0]
        fig, axes = plt.subplots(1, len(pairs), figsize=(3.2 * len(pairs), 3), squeeze=False)
        for ax, u in zip(axes[0], pairs):
            for side, style in (("mpi", "-"), ("sim", "--")):
                hist = np.asarray(u[side]["staleness"]["histogram"], dtype=float)
                ax.plot(np.arange(hist.size), np.cumsum(hist) / max(hist.sum(), 1), style, label=side)
            ax.set_xscale("symlog")
            ax.set_title(f"{u['transport']}, q={u['q']}", fontsize=8)
            ax.set_xlabel("staleness (steps or pushes)")
        axes[0][0].set_ylabel("cumulative share")
        axes[0][0].legend()
        fig.tight_layout()
        return fig
    png = os.path.join(args.output, "simulator_mpi.png")
    if plot(png, draw):
        print(f"PNG: {png}")


if __name__ == "__main__":
    main()
