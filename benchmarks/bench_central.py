"""Can the central rank keep up? Its push capacity against the rate 12 workers generate.

For n = 1000 and n = 100000:

* **capacity**: the central rank's own busy time per push (poll, apply ``u_C += delta``, copy and
  send the reply, repost the receive), measured inside the engine in a one-worker run where it has a
  core to itself; capacity = 1 / service time;
* **12 workers here**: the push and step rates of a real 12-worker run on this machine
  (oversubscribed on 2 cores), and the central rank's utilization in it;
* **12 dedicated workers, one push per step**: 12 / (a worker's step time at budget s/12, timed in
  this process), the rate Alg. 3 would demand if every step were pushed alone; pipelined pushes
  sum the steps taken while a push is in flight, which caps the demand at the central's pace;
* **12 here, shared memory**: the step rate of the same 12-worker run with ``--transport
  shared-memory`` (the single-node default), where the workers write ``u_C`` themselves and the
  central rank serves no pushes at all.

The first three use ``--transport messages``, the protocol that spans nodes. ``--quick`` runs 4 workers
instead of 12 (the profile's ``workers``), to show the benchmark runs end to end.

    python benchmarks/bench_central.py [--quick]
"""
from __future__ import annotations

import statistics

from asyos.benchmarking.common import Run, choose_profile, parser, print_table, run_asyos
from asyos.benchmarking.speedup import step_times
from asyos.data.synthetic import SyntheticSource
from asyos.losses import get_loss

PROFILES = {
    "paper": {"seeds": 3, "workers": 12, "cases": [
        {"n": 1000, "p": 8192, "s": 64, "p_capacity": 2048, "passes": 2},
        {"n": 100000, "p": 600, "s": 24, "p_capacity": 240, "passes": 1}]},
    # quick: 4 workers, so that the two many-worker runs start 5 ranks instead of 13 on a 2-core machine
    "quick": {"seeds": 1, "workers": 4, "cases": [
        {"n": 1000, "p": 1200, "s": 24, "p_capacity": 600, "passes": 1}]},
    # smoke: 2 workers (3 ranks)
    "smoke": {"seeds": 1, "workers": 2, "cases": [
        {"n": 300, "p": 400, "s": 8, "p_capacity": 200, "passes": 1}]},
}
MESSAGES = ["--transport", "messages"]      # the central rank serves pushes (shared memory bypasses it)


def args_for(case, p, s):
    return ["--n-samples", case["n"], "--n-features", p, "--n-informative", s, "--passes", case["passes"]]


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    profile = choose_profile(args, PROFILES)
    run = Run("central", args, profile)
    workers = profile["workers"]
    rows, summary = [], {}
    for case in profile["cases"]:
        n, s = case["n"], case["s"]
        service = []
        for seed in range(profile["seeds"]):
            record, _ = run_asyos(args_for(case, case["p_capacity"], s) + ["--seed", seed, *MESSAGES], ranks=2)
            service.append(record["central"]["service_us"] * 1e-6)
        service_s = statistics.median(service)
        here = []
        for seed in range(profile["seeds"]):
            record, _ = run_asyos(args_for(case, case["p"], s) + ["--seed", seed, *MESSAGES], ranks=workers + 1)
            here.append(record)
        shared = [run_asyos(args_for(case, case["p"], s) + ["--seed", seed, "--transport", "shared-memory"],
                            ranks=workers + 1)[0] for seed in range(profile["seeds"])]
        shared_steps = statistics.median(r["steps"] / r["timing"]["async_s"] for r in shared)
        pushes = statistics.median(r["pushes_per_s"] for r in here)
        steps = statistics.median(r["steps"] / r["timing"]["async_s"] for r in here)
        util = statistics.median(r["central"]["utilization"] for r in here)
        per_push = statistics.median(r["steps_per_push"] for r in here)
        data = SyntheticSource("regression", n_features=min(case["p"], 1200), n_informative=s, n_samples=n,
                               seed=1).load(with_test=False)
        local_budget = max(1, s // workers)
        levels, medians = step_times(data, get_loss("squared"), local_budget, timed_steps=200)
        step_s = float(medians[-1])
        dedicated = workers / step_s
        capacity = 1.0 / service_s
        entry = {"n": n, "central_service_us": service_s * 1e6, "capacity_pushes_per_s": capacity,
                 "here_pushes_per_s": pushes, "here_steps_per_s": steps, "here_steps_per_push": per_push,
                 "here_central_utilization": util, "capacity_over_here": capacity / pushes,
                 "worker_step_us": step_s * 1e6, "local_budget": local_budget,
                 "dedicated_one_push_per_step": dedicated, "capacity_over_dedicated": capacity / dedicated,
                 "shared_memory_here_steps_per_s": shared_steps}
        summary[n] = entry
        run.unit(entry)
        rows.append([n, f"{service_s * 1e6:.1f}", f"{capacity:,.0f}", f"{pushes:,.0f}", f"{steps:,.0f}",
                     f"{per_push:.1f}", f"{util:.2f}", f"{capacity / pushes:.1f}x", f"{step_s * 1e6:.1f}",
                     f"{dedicated:,.0f}", f"{capacity / dedicated:.2f}x", f"{shared_steps:,.0f}"])
    print_table(f"Central rank capacity vs {workers} workers (medians of {profile['seeds']} runs)",
                ["n", "service us/push", "capacity pushes/s", f"{workers} here: pushes/s", "steps/s", "steps/push",
                 "central util", "capacity / here", f"step us (budget s/{workers})",
                 f"{workers} dedicated: 1 push/step", "capacity / that", f"{workers} here, shared memory: steps/s"],
                rows)
    path = run.finish(summary)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
