"""What the automatic trace of an ``--output`` run costs (``asyos.learners.trace``, ``every="auto"``, for ``run.png``).

The same CLI run with ``--trace-every 0`` (no trace) and without it (the automatic trace), interleaved,
``seeds`` times each: sequential OS on a KDD'16 synthetic problem (``fit_s`` of the record) and Asy-OS
under ``mpiexec -n ranks`` on the same problem (``async_s``, the asynchronous phase the central rank
traces). The table gives the medians and their ratio (traced / untraced), the ratio of the fastest runs
(the noise of a shared machine only adds time) and the rows the trace kept;
the sequential selections must be identical (the trace only reads ``u_C``).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_auto_trace.py [--quick]
"""
from __future__ import annotations

import statistics

from asyos.benchmarking.common import Run, choose_profile, parser, print_table, run_asyos

PROFILES = {
    "paper": {"n_features": 20000, "mpi_features": 20000, "ranks": 5, "seeds": 3},
    "quick": {"n_features": 2000, "mpi_features": 2000, "ranks": 3, "seeds": 1},
    "smoke": {"n_features": 500, "mpi_features": 500, "ranks": 3, "seeds": 1},
}


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    profile = choose_profile(args, PROFILES)
    run = Run("auto_trace", args, profile)
    cases = [("os, sequential", ["--n-features", profile["n_features"]], None, "fit_s"),
             (f"asy-os, mpiexec -n {profile['ranks']}", ["--n-features", profile["mpi_features"]], profile["ranks"],
              "async_s")]
    rows = []
    for name, flags, ranks, timer in cases:
        times = {"none": [], "auto": []}
        kept = []
        for _ in range(profile["seeds"]):
            selections = {}
            for mode in ("none", "auto"):
                record, _ = run_asyos([*flags, *(["--trace-every", 0] if mode == "none" else [])], ranks=ranks)
                times[mode].append(record["timing"][timer])
                selections[mode] = record["selected"]
                if mode == "auto":
                    kept.append(len(record["trace"]["time_s"]))
            if ranks is None and selections["none"] != selections["auto"]:
                raise SystemExit(f"{name}: the automatic trace changed the selection")
        base, traced = statistics.median(times["none"]), statistics.median(times["auto"])
        fastest = min(times["auto"]) / min(times["none"])      # the shared machine's noise only adds time
        rows.append([name, timer, f"{base:.3f}", f"{traced:.3f}", f"{traced / base:.3f}", f"{fastest:.3f}",
                     max(kept)])
        run.unit({"case": name, "timer": timer, "seconds": times, "ratio": traced / base, "ratio_of_fastest": fastest,
                  "trace_rows": kept})
    print_table(f"the automatic trace (median of {profile['seeds']}; 2 shared cores)",
                ["run", "timer", "no trace s", "auto trace s", "x no trace", "x (fastest)", "rows kept"], rows)
    print(run.finish({"rows": rows}))


if __name__ == "__main__":
    main()
