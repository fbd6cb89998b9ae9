"""Online Substitution out of core: time, peak memory and bytes read per rank as p grows, next to abess and LARS.

For each p of the profile, two column-major data sets are written to a temporary directory (never
the repository): **dense**, an ``(n, p)`` float32 ``X.npy`` saved Fortran-ordered, and **sparse**, a
CSC ``X.npz`` (float32 values, ``density`` non-zeros per column, stored uncompressed); ``k`` columns
carry the signal, ``y = X_S w + 0.5 e``. Each is learned by ``python -m asyos.run --data DIR --budget
k`` sequentially (OS reads the columns on demand) and under ``mpiexec -n 3`` and ``-n 5`` (Asy-OS:
each worker reads its shard once); the run records give the wall time of the command, the peak
resident memory of every rank (``VmHWM``) and the bytes each worker read, against its shard's bytes
in the file: ``read`` is the kernel's count (``/proc/self/io``, from opening the data to the end,
so it includes the code a rank loads meanwhile: numba's cache files, about 8 MB), ``reader`` the
column reader's own (the shard's bytes, the headers and, for CSC, the ``p + 1`` column pointers),
and recall is measured against the planted support.
Where ``X`` fits in memory as dense float64 (``peer_limit_gb``), abess (``LinearRegression(support_size=k)``)
and LARS (scikit-learn's ``Lars(n_nonzero_coefs=k)``) run on the same data in a fresh process (time
includes loading; peak memory is theirs; sparse data are densified for both: abess's sparse input
path took 107 s at p = 20000, n = 200, where the dense one took 1 s). Goals (the issue's): sequential
OS at p = 10^6 peak RSS
<= 0.5 GB; under ``-n 5`` bytes read per worker <= 1.2x its shard and RSS per worker <= 1.5x its shard.

Two more sections run the benchmarks that own them, each in its own process, and fold their
summaries into this one (their tables are printed as they run; their JSON files land next to it):

* ``stream``: ``bench_stream_throughput.py --profile wide`` (B-ARDA, B-AMD, OFS, SOFS on the 10^6 x
  10^6 sparse stream, 100 non-zeros per row: samples/s and peak memory of a pass next to
  scikit-learn's SGD epoch) and its default profile (d = 2e4);
* ``ingest``: ``bench_ingest.py`` (libsvm and Parquet rows/s next to scikit-learn's
  ``load_svmlight_file`` and Vowpal Wabbit's parser; a streamed B-ARDA run against load + one SGD epoch).

    python benchmarks/bench_scale.py [--quick] [--ps 10000,100000] [--sections os,stream,ingest] [--keep DIR]
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np
import scipy.sparse as sp

from asyos.benchmarking.common import Run, choose_profile, mpiexec_path, parser, plot, print_table, run_asyos

PROFILES = {
    "paper": {"ps": [10_000, 100_000, 1_000_000], "n": 1000, "k": 10, "density": 0.05, "ranks": [3, 5],
              "peer_limit_gb": 4.0, "seed": 0, "timeout": 3600},
    # quick: one p (every method on both layouts; the growth with p is the paper profile's)
    "quick": {"ps": [2_000], "n": 200, "k": 5, "density": 0.1, "ranks": [3], "peer_limit_gb": 1.0,
              "seed": 0, "timeout": 600},
    # smoke (tests/test_benchmarks.py): the quick profile's runs on a quarter of its p
    "smoke": {"ps": [500], "n": 100, "k": 5, "density": 0.1, "ranks": [3], "peer_limit_gb": 1.0,
              "seed": 0, "timeout": 600},
}
GB = 1e9


def _planted(rng, p, k):
    support = np.sort(rng.choice(p, size=k, replace=False))
    return support, rng.choice([-1.0, 1.0], size=k) * rng.uniform(1.0, 2.0, size=k)


def write_dense(path, n, p, k, seed, block=8192):
    """A Fortran-ordered float32 ``X.npy`` written block of columns by block (never held whole)."""
    os.makedirs(path, exist_ok=True)
    rng = np.random.default_rng(seed)
    support, w = _planted(rng, p, k)
    X = np.lib.format.open_memmap(os.path.join(path, "X.npy"), mode="w+", dtype=np.float32, shape=(n, p),
                                  fortran_order=True)
    u = np.zeros(n)
    for lo in range(0, p, block):
        hi = min(p, lo + block)
        B = rng.standard_normal((hi - lo, n), dtype=np.float32)
        X[:, lo:hi] = B.T
        inside = (support >= lo) & (support < hi)
        u += B[support[inside] - lo].T.astype(np.float64) @ w[inside]
    X.flush()
    del X
    np.save(os.path.join(path, "y.npy"), u + 0.5 * rng.standard_normal(n))
    return support


def write_sparse(path, n, p, k, density, seed, block=8192):
    """A CSC ``X.npz`` (float32 values, int32 row indices), ``density * n`` non-zeros per column."""
    os.makedirs(path, exist_ok=True)
    rng = np.random.default_rng(seed)
    support, w = _planted(rng, p, k)
    per = max(1, int(round(density * n)))
    indices, data = [], []
    u = np.zeros(n)
    for lo in range(0, p, block):
        hi = min(p, lo + block)
        rows = np.sort(rng.integers(0, n, size=(hi - lo, per), dtype=np.int32), axis=1)
        vals = rng.standard_normal((hi - lo, per), dtype=np.float32)
        vals[np.diff(rows, axis=1, prepend=-1) == 0] = 0.0          # a repeated row keeps its first value
        indices.append(rows.ravel())
        data.append(vals.ravel())
        for j in support[(support >= lo) & (support < hi)]:
            np.add.at(u, rows[j - lo], vals[j - lo].astype(np.float64) * w[np.searchsorted(support, j)])
    X = sp.csc_matrix((np.concatenate(data), np.concatenate(indices), np.arange(0, p * per + 1, per, dtype=np.int64)),
                      shape=(n, p))
    X.eliminate_zeros()
    sp.save_npz(os.path.join(path, "X.npz"), X, compressed=False)
    np.save(os.path.join(path, "y.npy"), u + 0.5 * rng.standard_normal(n))
    return support


PEER = textwrap.dedent("""
    import json, resource, sys, time, warnings
    import numpy as np, scipy.sparse as sp
    warnings.simplefilter("ignore")
    path, kind, method, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    t0 = time.perf_counter()
    y = np.load(path + "/y.npy")
    if kind == "dense":
        X = np.asarray(np.load(path + "/X.npy"), dtype=np.float64)
    else:                       # densified: abess's sparse path took 100 s where its dense one took 1 s
        X = sp.load_npz(path + "/X.npz").astype(np.float64).toarray()
    if method == "abess":
        from abess.linear import LinearRegression
        model = LinearRegression(support_size=k).fit(X, y)
    else:
        from sklearn.linear_model import Lars
        model = Lars(n_nonzero_coefs=k).fit(X, y)
    seconds = time.perf_counter() - t0
    with open("/proc/self/status") as fh:
        peak = next(int(l.split()[1]) * 1024 for l in fh if l.startswith("VmHWM"))
    print(json.dumps({"seconds": seconds, "peak_rss_bytes": peak,
                      "selected": np.flatnonzero(np.ravel(model.coef_)).tolist()}))
""")


def run_peer(path, kind, method, k, timeout):
    proc = subprocess.run([sys.executable, "-c", PEER, path, kind, method, str(k)], capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


SECTIONS = ("os", "stream", "ingest")
HERE = os.path.dirname(os.path.abspath(__file__))
OTHER_BENCHMARKS = {
    "stream": lambda quick: ([("stream_throughput", ["bench_stream_throughput.py", "--quick"])] if quick else
                             [("stream_throughput_wide", ["bench_stream_throughput.py", "--profile", "wide",
                                                          "--learners", "b-arda,b-amd,ofs,sofs"]),
                              ("stream_throughput", ["bench_stream_throughput.py", "--learners",
                                                     "b-arda,b-amd,ofs,sofs"])]),
    "ingest": lambda quick: [("ingest", ["bench_ingest.py"] + (["--quick"] if quick else []))],
}


def run_other(name, argv, output, timeout):
    """Run another benchmark script (its table goes to our stdout) and return its summary JSON."""
    cmd = [sys.executable, os.path.join(HERE, argv[0]), *argv[1:], "--output", output]
    print(f"$ {' '.join(cmd)}", flush=True)
    proc = subprocess.run(cmd, text=True, timeout=timeout)
    if proc.returncode != 0:
        return {"error": f"exit {proc.returncode}", "command": cmd}
    with open(os.path.join(output, f"{name}.json")) as fh:
        result = json.load(fh)
    return {"command": cmd, "summary": result.get("summary"), "file": os.path.join(output, f"{name}.json")}


def recall(selected, support):
    return len(set(map(int, selected)) & set(map(int, support))) / len(support)


def main():
    p_ = parser(__doc__.splitlines()[0])
    p_.add_argument("--ps", help="comma-separated feature counts (default: the profile's)")
    p_.add_argument("--keep", help="write the data sets here and keep them (default: a temporary directory)")
    p_.add_argument("--sections", help=f"which of {','.join(SECTIONS)} to run (default all; with --quick only os: "
                                       f"the other two benchmarks run their own --quick profiles in the tests)")
    args = p_.parse_args()
    profile = choose_profile(args, PROFILES)
    if args.ps:
        profile["ps"] = [int(v) for v in args.ps.split(",")]
    sections = [v for v in (args.sections or ("os" if args.quick else ",".join(SECTIONS))).split(",") if v]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        raise SystemExit(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    if mpiexec_path() is None:
        raise SystemExit("mpiexec not found: pip install 'asyos[mpi]'")
    run = Run("scale", args, profile)
    others = {}
    for section in ("stream", "ingest"):
        if section in sections:
            for name, argv in OTHER_BENCHMARKS[section](args.quick):
                others[name] = run.unit({"section": section, "benchmark": name,
                                         **run_other(name, argv, args.output, profile["timeout"])})
    if "os" not in sections:
        path = run.finish({"goals": [], "other_benchmarks": {k: v.get("summary") for k, v in others.items()}})
        print(f"summary: {path}")
        return
    root = args.keep or tempfile.mkdtemp(prefix="asyos-scale-data-")
    n, k = profile["n"], profile["k"]
    rows = []
    try:
        for p in profile["ps"]:
            for kind in ("dense", "sparse"):
                path = os.path.join(root, f"{kind}-{p}")
                t0 = time.perf_counter()
                if kind == "dense":
                    support = write_dense(path, n, p, k, profile["seed"])
                else:
                    support = write_sparse(path, n, p, k, profile["density"], profile["seed"])
                made_s = time.perf_counter() - t0
                file_bytes = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
                for ranks in [None, *profile["ranks"]]:
                    record, seconds = run_asyos(["--data", path, "--budget", k], ranks, profile["timeout"])
                    workers = record.get("workers", [])
                    unit = {"p": p, "kind": kind, "n": n, "method": "os" if ranks is None else f"asy-os -n {ranks}",
                            "file_bytes": file_bytes, "made_s": made_s, "seconds": seconds,
                            "recall": recall(record["selected"], support),
                            "peak_rss_bytes": record["resources"]["peak_rss_bytes"],
                            "worker_rss_bytes": [w["peak_rss_bytes"] for w in workers],
                            "worker_read_bytes": [w["bytes_read"] for w in workers],
                            "worker_reader_bytes": [w["shard_bytes_read"] for w in workers],
                            "worker_shard_bytes": [w["shard_bytes"] for w in workers]}
                    if workers:
                        shard = np.array(unit["worker_shard_bytes"], dtype=float)
                        unit["read_over_shard"] = float(np.max(np.array(unit["worker_read_bytes"]) / shard))
                        unit["reader_over_shard"] = float(np.max(np.array(unit["worker_reader_bytes"]) / shard))
                        unit["rss_over_shard"] = float(np.max(np.array(unit["worker_rss_bytes"]) / shard))
                    run.unit(unit)
                    rows.append(_row(unit))
                    print(" ".join(rows[-1]), flush=True)
                if n * p * 8 / GB <= profile["peer_limit_gb"]:
                    for method in ("abess", "lars"):
                        result = run_peer(path, kind, method, k, profile["timeout"])
                        unit = {"p": p, "kind": kind, "n": n, "method": method, "file_bytes": file_bytes, **result}
                        if "selected" in result:
                            unit["recall"] = recall(result["selected"], support)
                        run.unit(unit)
                        rows.append(_row(unit))
                        print(" ".join(rows[-1]), flush=True)
                else:
                    note = f"X as float64 needs {n * p * 8 / GB:.1f} GB > peer_limit_gb {profile['peer_limit_gb']:g}"
                    run.unit({"p": p, "kind": kind, "n": n, "method": "abess, lars", "skipped": note})
                    rows.append([str(p), kind, "abess, lars", "-", "-", "-", "-", "-", "-", "-", "skipped: " + note])
                if not args.keep:
                    shutil.rmtree(path, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print_table(f"Online Substitution out of core (n = {n}, budget {k}; RSS and reads per rank; shard = the "
                f"worker's columns' bytes in the file)",
                ["p", "data", "method", "seconds", "recall", "peak RSS MB", "worker RSS MB", "RSS/shard",
                 "read/shard", "reader/shard", "note"], rows)
    summary = _goals([u for u in run.units if "section" not in u], profile)
    summary["other_benchmarks"] = {k: v.get("summary") for k, v in others.items()}
    for line in summary["goals"]:
        print(line)
    path = run.finish(summary)
    plot(os.path.join(args.output, "scale.png"), lambda plt: _draw(plt, [u for u in run.units if "section" not in u]))
    print(f"summary: {path}")


def _row(unit):
    mb = lambda v: f"{v / 1e6:.0f}" if v else "-"  # noqa: E731
    return [str(unit["p"]), unit["kind"], unit["method"], f"{unit.get('seconds', float('nan')):.1f}",
            f"{unit['recall']:.2f}" if "recall" in unit else "-", mb(unit.get("peak_rss_bytes")),
            mb(max(unit["worker_rss_bytes"])) if unit.get("worker_rss_bytes") else "-",
            f"{unit['rss_over_shard']:.2f}" if "rss_over_shard" in unit else "-",
            f"{unit['read_over_shard']:.3f}" if "read_over_shard" in unit else "-",
            f"{unit['reader_over_shard']:.3f}" if "reader_over_shard" in unit else "-", unit.get("error", "")]


def _goals(units, profile):
    top = max(profile["ps"])
    if top < 1_000_000:
        return {"goals": [f"(the goals are stated at p = 10^6; this profile stops at p = {top})"]}
    lines = []
    seq = [u for u in units if u["p"] == top and u["kind"] == "dense" and u["method"] == "os"]
    if seq:
        peak = seq[0]["peak_rss_bytes"]
        lines.append(f"goal: sequential OS at p = {top} (dense float32) peak RSS <= 0.5 GB: "
                     f"{peak / GB:.3f} GB ({'met' if peak <= 0.5 * GB else 'missed'})")
    wide = max(profile["ranks"])
    for u in units:
        if u["p"] == top and u["method"] == f"asy-os -n {wide}":
            met = u["read_over_shard"] <= 1.2 and u["rss_over_shard"] <= 1.5
            lines.append(f"goal: -n {wide} at p = {top} ({u['kind']}): read/shard {u['read_over_shard']:.3f} <= 1.2, "
                         f"RSS/shard {u['rss_over_shard']:.2f} <= 1.5 ({'met' if met else 'missed'})")
    return {"goals": lines}


def _draw(plt, units):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for kind, style in (("dense", "-"), ("sparse", "--")):
        methods = sorted({u["method"] for u in units if u["kind"] == kind and "seconds" in u})
        for method in methods:
            pts = sorted((u["p"], u) for u in units if u["kind"] == kind and u["method"] == method and "seconds" in u)
            ps = [p for p, _ in pts]
            rss = [max(u.get("worker_rss_bytes") or [u.get("peak_rss_bytes") or 0]) / 1e6 for _, u in pts]
            axes[0].plot(ps, rss, style, marker="o", label=f"{method} ({kind})")
            axes[1].plot(ps, [u["seconds"] for _, u in pts], style, marker="o", label=f"{method} ({kind})")
    for ax, label in zip(axes, ("peak RSS per rank (MB; workers' max under MPI)", "wall seconds (command)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("p (features)")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=7)


if __name__ == "__main__":
    main()
