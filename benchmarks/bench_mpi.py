"""Asy-OS under real ``mpiexec``, timed from outside as a user runs it.

1. The mission command ``mpiexec -n 13 python -m asyos.run`` on the embedded default (repeated;
   wall time of the whole command, start-up included).
2. The KDD'16 MPI setting (``n`` = 1000, ``p`` = 8192, ``s`` = 64 regression; ``s`` = 32
   classification) with 12 workers, unbounded and with ``--max-staleness 12``: recall, staleness
   histogram, refused pushes, pushes/s; sequential OS on the same problem in the same run is the
   baseline (recall and time ratio).

Every run with more ranks than cores is labelled oversubscribed.

    python benchmarks/bench_mpi.py [--quick]
"""
from __future__ import annotations

import os

from asyos.benchmarking.common import (Run, choose_profile, fmt, mean_std, parser, plot, print_table,
                                      run_asyos)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROFILES = {
    "paper": {"ranks": 13, "repeats": 3,
              "settings": {"regression": "kdd16_mpi_regression.toml",
                           "classification": "kdd16_mpi_classification.toml"},
              "extra": []},
    "quick": {"ranks": 3, "repeats": 1, "settings": {"regression": "kdd16_mpi_regression.toml"},
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
    for repeat in range(profile["repeats"]):
        record, seconds = run_asyos(default_args, ranks)
        run.unit({"part": "default", "repeat": repeat, "ranks": ranks, **brief(record, seconds)})
    rows = []
    d = [u for u in run.units if u["part"] == "default"]
    walls = sorted(u["wall_s"] for u in d)
    rows.append([f"mpiexec -n {ranks} python -m asyos.run{' ' + ' '.join(default_args) if default_args else ''}",
                 f"{walls[len(walls) // 2]:.2f}", f"{max(walls):.2f}", fmt(*mean_std([u['recall'] for u in d])),
                 f"{mean_std([u['pushes_per_s'] for u in d])[0]:.0f}",
                 f"{mean_std([u['staleness']['mean'] for u in d])[0]:.1f}", max(u["staleness"]["max"] for u in d)])
    print_table(f"The mission command, {len(d)} runs on {cores} cores ({ranks} ranks: "
                f"{'oversubscribed' if ranks > cores else 'one core per rank'})",
                ["command", "median wall s", "max wall s", "recall", "pushes/s", "staleness mean", "max"], rows)

    for task, config in profile["settings"].items():
        cfg = ["--config", os.path.join(REPO, "cluster_configs", config), *profile["extra"]]
        record, seconds = run_asyos(cfg)
        run.unit({"part": task, "mode": "sequential", **brief(record, seconds)})
        for bound in (None, q):
            extra = [] if bound is None else ["--max-staleness", str(bound)]
            record, seconds = run_asyos(cfg + extra, ranks)
            run.unit({"part": task, "mode": "mpi", "bound": bound, **brief(record, seconds)})
    summary = {"default": {"wall_s": walls, "ranks": ranks, "cores": cores}}
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


def compact(hist, top=6):
    pairs = sorted(((c, k) for k, c in enumerate(hist) if c), reverse=True)[:top]
    return " ".join(f"{k}:{c}" for c, k in sorted(pairs, key=lambda x: x[1]))


def draw(run, profile):
    units = [u for u in run.units if u.get("mode") == "mpi"]
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
