"""Asy-OS under real ``mpiexec``, timed from outside as a user runs it.

1. The mission command ``mpiexec -n 13 python -m asyos.run --seed k`` on the embedded default, one
   run per seed, next to sequential OS (``python -m asyos.run --seed k``) on the same problem:
   recall of each and its gap, the asynchronous phase's time next to sequential OS's fit, and
   the wall time of the whole command (start-up included).
2. Asy-OS on two cores against one process on wide problems: ``mpiexec -n 3 python -m asyos.run
   --n-features p`` (the central rank and two workers, shared memory) next to ``python -m asyos.run
   --n-features p``, alternating, ``repeats`` times each at every ``p``: the median wall time of the
   whole commands, their ratio (the goal: at most 0.65), recall and objective.
3. The KDD'16 MPI setting (``n`` = 1000, ``p`` = 8192, ``s`` = 64 regression; ``s`` = 32
   classification) with 12 workers, unbounded and with ``--max-staleness 12``: recall, staleness
   histogram, refused pushes, pushes/s; sequential OS on the same problem in the same run is the
   baseline (recall and time ratio).

Every run with more ranks than cores is labelled oversubscribed.

    python benchmarks/bench_mpi.py [--quick]
"""
from __future__ import annotations

import os
import statistics

from asyos.benchmarking.common import (Run, choose_profile, fmt, mean_std, parser, plot, print_table,
                                      run_asyos)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROFILES = {
    "paper": {"ranks": 13, "seeds": 5, "wide": [20_000, 100_000], "repeats": 3,
              "settings": {"regression": "kdd16_mpi_regression.toml",
                           "classification": "kdd16_mpi_classification.toml"},
              "extra": []},
    "quick": {"ranks": 3, "seeds": 1, "wide": [3_000], "repeats": 1,
              "settings": {"regression": "kdd16_mpi_regression.toml"},
              "extra": ["--n-features", "600", "--n-samples", "200", "--n-informative", "8", "--budget", "8"]},
}


def brief(record, seconds):
    m = record["metrics"]
    out = {"wall_s": seconds, "fit_s": record["timing"].get("fit_s", record["timing"].get("async_s")),
           "recall": m.get("recall"), "objective": m["objective"], "train_error": m["train_error"],
           "test_error": m.get("test_error")}
    if record["mode"] == "mpi":
        out.update(transport=record["transport"], n_workers=record["n_workers"], pushes=record["pushes"],
                   pushes_per_s=record["pushes_per_s"],
                   refused_pushes=record["refused_pushes"], staleness=record["staleness"],
                   oversubscribed=record["oversubscribed"], max_staleness=record["max_staleness"])
    return out


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    profile = choose_profile(args, PROFILES)
    run = Run("mpi", args, profile)
    ranks, q = profile["ranks"], profile["ranks"] - 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()

    default_args = profile["extra"]
    for seed in range(profile["seeds"]):
        args_seed = [*default_args, "--seed", str(seed)]
        record, seconds = run_asyos(args_seed, ranks)
        run.unit({"part": "default", "seed": seed, "mode": "mpi", "ranks": ranks, **brief(record, seconds),
                  "async_s": record["timing"]["async_s"], "candidates": record.get("n_candidates"),
                  "finish": record.get("finish")})
        record, seconds = run_asyos(args_seed)
        run.unit({"part": "default", "seed": seed, "mode": "sequential", **brief(record, seconds)})
    rows = []
    d = [u for u in run.units if u["part"] == "default" and u["mode"] == "mpi"]
    seq = {u["seed"]: u for u in run.units if u["part"] == "default" and u["mode"] == "sequential"}
    for u in d:
        s0 = seq[u["seed"]]
        rows.append([u["seed"], f"{u['recall']:.3f}", f"{s0['recall']:.3f}", f"{u['recall'] - s0['recall']:+.3f}",
                     f"{u['async_s']:.2f}", f"{s0['fit_s']:.2f}", f"{u['async_s'] / s0['fit_s']:.2f}",
                     f"{u['wall_s']:.2f}", f"{s0['wall_s']:.2f}", u["candidates"], u["finish"],
                     f"{u['staleness']['mean']:.1f}/{u['staleness']['max']}"])
    gaps = [u["recall"] - seq[u["seed"]]["recall"] for u in d]
    rows.append(["mean", fmt(*mean_std([u["recall"] for u in d])), fmt(*mean_std([s0["recall"] for s0 in seq.values()])),
                 f"{sum(gaps) / len(gaps):+.3f}", f"{mean_std([u['async_s'] for u in d])[0]:.2f}",
                 f"{mean_std([s0['fit_s'] for s0 in seq.values()])[0]:.2f}", "", "", "", "", "", ""])
    print_table(f"The mission command, {len(d)} seeds on {cores} cores ({ranks} ranks: "
                f"{'oversubscribed' if ranks > cores else 'one core per rank'}); sequential OS on the same problem",
                ["seed", "recall mpi", "recall seq", "gap", "async s", "seq fit s", "async/seq", "mpi wall s",
                 "seq wall s", "candidates", "finish", "staleness mean/max"], rows)
    walls = sorted(u["wall_s"] for u in d)
    wide(run, profile, cores)

    for task, config in profile["settings"].items():
        cfg = ["--config", os.path.join(REPO, "cluster_configs", config), *profile["extra"]]
        record, seconds = run_asyos(cfg)
        run.unit({"part": task, "mode": "sequential", **brief(record, seconds)})
        for bound in (None, q):
            extra = [] if bound is None else ["--max-staleness", str(bound)]
            record, seconds = run_asyos(cfg + extra, ranks)
            run.unit({"part": task, "mode": "mpi", "bound": bound, **brief(record, seconds)})
    summary = {"default": {"wall_s": walls, "ranks": ranks, "cores": cores},
               "wide": [u for u in run.units if u["part"] == "wide"]}
    for task in profile["settings"]:
        seq = next(u for u in run.units if u["part"] == task and u["mode"] == "sequential")
        rows = [["sequential OS", "-", f"{seq['recall']:.3f}", f"{seq['test_error']:.4f}", f"{seq['fit_s']:.2f}",
                 "1.00", "-", "-", "-", "-"]]
        for u in (u for u in run.units if u["part"] == task and u["mode"] == "mpi"):
            st = u["staleness"]
            over = " (oversubscribed)" if u["oversubscribed"] else ""
            rows.append([f"Asy-OS q={u['n_workers']}, {u['transport']}{over}",
                         "none" if u["bound"] is None else u["bound"], f"{u['recall']:.3f}", f"{u['test_error']:.4f}",
                         f"{u['fit_s']:.2f}", f"{seq['fit_s'] / u['fit_s']:.2f}", f"{u['pushes_per_s']:.0f}",
                         u["refused_pushes"], f"{st['mean']:.1f}/{st['p95']}/{st['max']}", compact(st["histogram"])])
        print_table(f"KDD'16 MPI setting, {task} ({cores} cores)",
                    ["run", "bound", "recall", "test err", "fit/async s", "speed vs seq", "pushes/s", "refused",
                     "staleness mean/p95/max", "histogram (staleness:count, top 6)"], rows)
        summary[task] = [u for u in run.units if u["part"] == task]
    path = run.finish(summary)
    draw(run, profile)
    print(f"results: {path}")


def wide(run, profile, cores):
    """Part 2: ``mpiexec -n 3`` against one process at each ``p`` of ``profile["wide"]``."""
    rows = []
    for p in profile["wide"]:
        args = ["--n-features", p, "--no-picture"]
        for repeat in range(profile["repeats"]):          # alternating, so that a busy moment hits both
            for ranks in (None, 3):
                record, seconds = run_asyos(args, ranks)
                run.unit({"part": "wide", "p": p, "repeat": repeat, "mode": "sequential" if ranks is None else "mpi",
                          **brief(record, seconds)})
        seq, mpi = ([u for u in run.units if u["part"] == "wide" and u["p"] == p and u["mode"] == mode]
                    for mode in ("sequential", "mpi"))
        wall_seq, wall_mpi = (statistics.median(u["wall_s"] for u in units) for units in (seq, mpi))
        rows.append([p, f"{wall_seq:.2f}", f"{wall_mpi:.2f}", f"{wall_mpi / wall_seq:.2f}",
                     "/".join(f"{u['recall']:.3f}" for u in seq), "/".join(f"{u['recall']:.3f}" for u in mpi),
                     f"{statistics.median(u['objective'] for u in seq):.6f}",
                     f"{statistics.median(u['objective'] for u in mpi):.6f}"])
    print_table(f"Two workers against one process, whole commands, {profile['repeats']} alternating runs each on "
                f"{cores} cores (medians; goal: mpi/seq at most 0.65)",
                ["p", "seq wall s", "mpi -n 3 wall s", "mpi/seq", "recall seq", "recall mpi", "objective seq",
                 "objective mpi"], rows)


def compact(hist, top=6):
    pairs = sorted(((c, k) for k, c in enumerate(hist) if c), reverse=True)[:top]
    return " ".join(f"{k}:{c}" for c, k in sorted(pairs, key=lambda x: x[1]))


def draw(run, profile):
    units = [u for u in run.units if u.get("mode") == "mpi" and u["part"] in profile["settings"]]
    if not units:
        return

    def draw_fn(plt):
        fig, axes = plt.subplots(1, len(units), figsize=(4.2 * len(units), 3.4), squeeze=False)
        for ax, u in zip(axes[0], units):
            hist = u["staleness"]["histogram"]
            ax.bar(range(len(hist)), hist, width=1.0)
            ax.set_yscale("log")
            ax.set_title(f"{u['part']}, q={u['n_workers']}, bound={u['bound']}", fontsize=9)
            ax.set_xlabel("staleness (versions)")
            ax.set_ylabel("pushes")
    plot(os.path.join(run.args.output, "mpi_staleness.png"), draw_fn)


if __name__ == "__main__":
    main()
