"""Asy-OS with the split budget vs the global budget under real ``mpiexec``.

The KDD'16 MPI setting (Sec. 5.3): ``n`` = 1000, ``p`` = 8192, regression ``s`` = 64 (squared loss)
and classification ``s`` = 32 (squared hinge), 2 passes over the features, ``q`` in {1, 2, 4, 8, 12}
workers (``mpiexec -n q+1``), both transports (``shared-memory``, the single-node default, and
``messages``, pipelined pushes as across nodes), ``--budget-mode split`` (``s/q`` per worker, KDD'16)
and ``global`` (default cap and slack), 5 seeds (data seed = run seed). Sequential OS
(``python -m asyos.run --algorithm os``, same data) in the same invocation is the baseline.

Reported per (task, transport, q): recall mean±std for split, global and OS; the paired gap
global - OS; test error (RMSE / error rate) of the refit model; the asynchronous phase's wall time
for both modes and their ratio; staleness (mean, in versions of ``u_C``); for the global budget the
age of the other workers' ``|w|`` carried by the replies (messages; on shared memory they are
published after every step, as fresh as ``u_C``), the drops and the final ``theta``; the central
rank's utilization and service time per push (messages). Then the checks: the goal "global-budget
recall at q = 12 within 0.03 of sequential OS and >= 0.85 on regression" per transport, and
``|selected| <= s`` in every run.

Runs with more ranks than cores are oversubscribed (13 ranks on 2 cores here): the workers share
the cores and the times are those of this machine, not of a cluster.

    python benchmarks/bench_global_budget_mpi.py                  # the setting above (~15 min on 2 cores)
    python benchmarks/bench_global_budget_mpi.py --quick          # tiny, regression, q = 2, 1 seed
    python benchmarks/bench_global_budget_mpi.py --seeds 3 --output DIR

Writes ``<output>/global_budget_mpi.jsonl`` (one line per run), ``global_budget_mpi.json`` and
``global_budget_mpi.png`` (recall vs q per task: split and global per transport, OS as a band).
"""
from __future__ import annotations

import os

import numpy as np

from asyos.benchmarking.common import (Run, choose_profile, fmt, mean_std, parser, plot, print_table,
                                      run_asyos, usable_cores)

TASKS = {
    "regression": {"synthetic": "regression", "s": 64, "loss": "squared"},
    "classification": {"synthetic": "classification", "s": 32, "loss": "squared_hinge"},
}
PROFILES = {
    "paper": {"n": 1000, "p": 8192, "passes": 2, "seeds": 5, "workers": [1, 2, 4, 8, 12],
              "tasks": ["regression", "classification"], "transports": ["shared-memory", "messages"], "s": None},
    # quick: one transport (both budget modes), to show the benchmark runs end to end
    "quick": {"n": 200, "p": 600, "passes": 2, "seeds": 1, "workers": [2], "tasks": ["regression"],
              "transports": ["shared-memory"], "s": 8},
}
MODES = ("split", "global")
GOAL_GAP, GOAL_RECALL = 0.03, 0.85


def cli_args(task, profile, seed):
    spec = TASKS[task]
    s = profile["s"] or spec["s"]
    return ["--synthetic", spec["synthetic"], "--n-samples", profile["n"], "--n-features", profile["p"],
            "--n-informative", s, "--budget", s, "--loss", spec["loss"], "--passes", profile["passes"],
            "--seed", seed]


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    profile = choose_profile(args, PROFILES)
    cores = usable_cores()
    run = Run("global_budget_mpi", args, {**profile, "cores": cores})
    for task in profile["tasks"]:
        for seed in range(profile["seeds"]):
            record, _ = run_asyos(cli_args(task, profile, seed) + ["--algorithm", "os"])
            run.unit(unit(task, seed, "os", None, 0, record, cores))
            for transport in profile["transports"]:
                for q in profile["workers"]:
                    for mode in MODES:
                        record, _ = run_asyos(cli_args(task, profile, seed) + ["--transport", transport,
                                                                               "--budget-mode", mode], ranks=q + 1)
                        run.unit(unit(task, seed, transport, mode, q, record, cores))
            print(f"  {task} seed {seed} done", flush=True)
    summary = summarise(run.units, profile, cores)
    path = run.finish(summary)
    draw(run, summary, profile)
    print(f"results: {path}")


def unit(task, seed, transport, mode, q, record, cores):
    m = record["metrics"]
    out = {"task": task, "seed": seed, "transport": transport, "mode": mode, "q": q,
           "s": record["problem"]["budget"] if "problem" in record else None,
           "recall": m.get("recall"), "test_error": m.get("test_error"), "n_selected": len(record["selected"]),
           "seconds": record["timing"].get("async_s", record["timing"].get("fit_s"))}
    if q:
        central = record["central"]
        age = record.get("threshold_age")
        out.update(oversubscribed=q + 1 > cores, staleness_mean=record["staleness"]["mean"],
                   staleness_max=record["staleness"]["max"], steps_per_push=record["steps_per_push"],
                   n_dropped=record.get("n_dropped"), threshold=record.get("threshold"),
                   theta_age_mean=age["mean"] if age else None, theta_age_max=age["max"] if age else None,
                   central_utilization=central["utilization"], central_service_us=central["service_us"])
    return out


def pick(units, **match):
    return [u for u in units if all(u.get(k) == v for k, v in match.items())]


def ms(units, key):
    return mean_std([u.get(key) for u in units])


def paired_gap(units, os_units):
    os_by_seed = {u["seed"]: u["recall"] for u in os_units}
    return mean_std([u["recall"] - os_by_seed[u["seed"]] for u in units if u["seed"] in os_by_seed])


def summarise(units, profile, cores):
    summary = {"cores": cores, "tasks": {}, "checks": {}}
    q_max = max(profile["workers"])
    for task in profile["tasks"]:
        os_units = pick(units, task=task, transport="os")
        os_recall = ms(os_units, "recall")
        err_name = "RMSE" if task == "regression" else "error rate"
        summary["tasks"][task] = {"os": {"recall": os_recall, "test_error": ms(os_units, "test_error"),
                                         "seconds": ms(os_units, "seconds")}, "rows": []}
        for transport in profile["transports"]:
            table = []
            for q in profile["workers"]:
                split, glob = (pick(units, task=task, transport=transport, q=q, mode=m) for m in MODES)
                t_split, t_glob = ms(split, "seconds")[0], ms(glob, "seconds")[0]
                entry = {"transport": transport, "q": q, "runs": len(glob), "oversubscribed": q + 1 > cores,
                         "split_recall": ms(split, "recall"), "global_recall": ms(glob, "recall"),
                         "os_recall": os_recall, "global_gap_to_os": paired_gap(glob, os_units),
                         "split_gap_to_os": paired_gap(split, os_units),
                         "split_test_error": ms(split, "test_error"), "global_test_error": ms(glob, "test_error"),
                         "split_seconds": t_split, "global_seconds": t_glob,
                         "time_ratio_global_split": t_glob / t_split if t_glob and t_split else None,
                         "split_staleness": ms(split, "staleness_mean")[0],
                         "global_staleness": ms(glob, "staleness_mean")[0],
                         "theta_age_mean": ms(glob, "theta_age_mean")[0],
                         "theta_age_max": max((u["theta_age_max"] for u in glob if u.get("theta_age_max") is not None),
                                              default=None),
                         "n_dropped": ms(glob, "n_dropped")[0], "threshold": ms(glob, "threshold")[0],
                         "split_central_us": ms(split, "central_service_us")[0],
                         "global_central_us": ms(glob, "central_service_us")[0],
                         "global_central_utilization": ms(glob, "central_utilization")[0],
                         "max_selected": max(u["n_selected"] for u in split + glob)}
                summary["tasks"][task]["rows"].append(entry)
                table.append([f"{q}" + ("*" if entry["oversubscribed"] else ""), fmt(*entry["split_recall"]),
                              fmt(*entry["global_recall"]), fmt(*entry["global_gap_to_os"]),
                              fmt(entry["split_test_error"][0], digits=4), fmt(entry["global_test_error"][0], digits=4),
                              fmt(t_split, digits=2), fmt(t_glob, digits=2),
                              fmt(entry["time_ratio_global_split"], digits=2),
                              f"{fmt(entry['split_staleness'], digits=1)}/{fmt(entry['global_staleness'], digits=1)}",
                              fmt(entry["theta_age_mean"], digits=1), fmt(entry["n_dropped"], digits=0),
                              (f"{fmt(entry['split_central_us'], digits=0)}/{fmt(entry['global_central_us'], digits=0)}"
                               if transport == "messages" else "-"),
                              f"{entry['max_selected']}"])
            print_table(f"{task}, --transport {transport}: n = {profile['n']}, p = {profile['p']}, "
                        f"{profile['passes']} passes, {len(os_units)} seeds; sequential OS recall {fmt(*os_recall)} "
                        f"(* = more ranks than the {cores} cores)",
                        ["q", "split recall", "global recall", "global - OS", f"split test {err_name}",
                         f"global test {err_name}", "split s", "global s", "global/split", "staleness s/g",
                         "theta age", "drops", "central us s/g", "max |S|"], table)
    summary["checks"] = checks(units, summary, q_max, profile)
    for name, check in summary["checks"].items():
        print(f"check {name}: {'yes' if check['ok'] else 'NO'} ({check['detail']})")
    return summary


def checks(units, summary, q_max, profile):
    out = {}
    if "regression" in summary["tasks"]:
        for row in summary["tasks"]["regression"]["rows"]:
            if row["q"] != q_max:
                continue
            recall, gap = row["global_recall"][0], row["global_gap_to_os"][0]
            os_recall = row["os_recall"][0]
            out[f"goal regression q={q_max} {row['transport']}"] = {
                "ok": bool(recall >= GOAL_RECALL and os_recall - recall <= GOAL_GAP),
                "detail": f"global recall {recall:.3f}, OS {os_recall:.3f}, paired gap {gap:+.3f}; "
                          f"goal >= {GOAL_RECALL} and within {GOAL_GAP} of OS"}
    runs = [u for u in units if u.get("q")]
    worst = max((u["n_selected"] - (u["s"] or 0) for u in runs), default=0)
    out["selection within the budget"] = {"ok": bool(worst <= 0),
                                          "detail": f"{len(runs)} MPI runs, largest |S| - s = {worst}"}
    return out


def draw(run, summary, profile):
    tasks = list(summary["tasks"])

    def draw_fn(plt):
        fig, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4), squeeze=False)
        for ax, task in zip(axes[0], tasks):
            res = summary["tasks"][task]
            qs = profile["workers"]
            mean, std = res["os"]["recall"]
            ax.axhspan(mean - std, mean + std, color="gray", alpha=0.2, label=f"sequential OS {mean:.3f}")
            for transport in profile["transports"]:
                rows = [r for r in res["rows"] if r["transport"] == transport]
                for mode, style in (("split", "o--"), ("global", "s-")):
                    m = [r[f"{mode}_recall"][0] for r in rows]
                    e = [r[f"{mode}_recall"][1] for r in rows]
                    ax.errorbar([r["q"] for r in rows], m, yerr=e, fmt=style, capsize=3, label=f"{mode}, {transport}")
            ax.set_xscale("log", base=2)
            ax.set_xticks(qs)
            ax.set_xticklabels([str(q) for q in qs])
            ax.set_xlabel("workers q (mpiexec -n q+1)")
            ax.set_ylabel("recall")
            ax.set_title(f"{task} ({summary['cores']} cores)")
            ax.legend(fontsize=7)
    plot(os.path.join(run.args.output, "global_budget_mpi.png"), draw_fn)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
