"""Ingesting libsvm text and Parquet row groups, and learning from a file as it is read, next to
scikit-learn's ``load_svmlight_file`` (and SGD) and Vowpal Wabbit in the same run.

A synthetic libsvm file in a temporary directory: ``n`` rows x ``d`` = 10^6 features, 100 distinct
random columns per row (1-based), values N(0, 1) written with 4 decimals, labels ``sign(X w*)`` for
a ``w*`` with ``d / 100`` N(0, 1) non-zeros (a random sign where the row meets none). The same rows
are written for Vowpal Wabbit (``label | idx:val ...``) and as Parquet in the sparse-lists layout of
``asyos.data.parquet_rows`` (a ``y`` column and ``indices``/``values`` list columns, one row group per
generated block: 10^6 features cannot be 10^6 Parquet columns). Writing the files is not timed.

Every measurement runs in its own Python process, which reports its seconds and its peak RSS
(``VmHWM`` of ``/proc/self/status``: interpreter and imports included; ``ru_maxrss`` is not used, Linux
carries the parent's peak over ``fork`` + ``exec``). Measurements are repeated (``repeats``), each
round running every measurement once, and the fastest of each is kept (the machine is shared):

(a) ingest, rows per second: our reader (``LibsvmSource``: the scan, then the whole CSR), scikit-learn's
    ``load_svmlight_file``, Vowpal Wabbit's parser (the Python package's ``Workspace("--noop -d FILE")``
    and ``run_parser``: VW's own C++ driver over the file, no learning; the ``vw`` executable is not
    installed), and our Parquet row stream (``ParquetRowSource.iter_rows``, 4096-row chunks);
(b) ingest + learn, the whole process timed from outside: ``python -m asyos.run --algorithm b-arda
    --data FILE --budget 100 --passes 1`` (scan, one streamed pass of ``partial_fit`` over 4096-row
    chunks, a streamed pass for the training metrics), the same on the Parquet file, against
    ``load_svmlight_file`` + one epoch of ``SGDClassifier(penalty='l1', loss='squared_hinge',
    max_iter=1, tol=None, shuffle=False).partial_fit``; the ratio is scikit-learn's seconds over ours
    (goal >= 1). Vowpal Wabbit learning one pass (``-d FILE``, default squared loss) is reported as a
    further reference.

    python benchmarks/bench_ingest.py [--quick] [--rows N] [--repeats R]

Measured (``--repeats 2``, the full profile: 1.44 GB of libsvm text; 2 cores shared with other jobs,
``OMP_NUM_THREADS=1``): ingest 103k rows/s against scikit-learn's 35k (2.9x; peak RSS 1.35 GB against
1.72 GB for the whole CSR), Vowpal Wabbit's parser 246k, the Parquet row stream 359k (peak 195 MB);
ingest + learn 28.4 s for the streamed B-ARDA run (scan 3.8 s, learning pass 18.6 s, metrics pass
4.6 s; peak RSS 450 MB) against 31.9 s for scikit-learn's load + SGD epoch (peak 2.1 GB): 1.13x;
from Parquet 21.0 s (1.52x); Vowpal Wabbit's pass 5.2 s.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.sparse as sp
from numba import njit

from asyos.benchmarking.common import Run, choose_profile, parser, print_table

PROFILES = {
    "paper": {"n_samples": 1_000_000, "n_features": 1_000_000, "nnz_per_row": 100, "block_rows": 50_000,
              "budget": 100, "seed": 0, "repeats": 1},
    "quick": {"n_samples": 20_000, "n_features": 1_000_000, "nnz_per_row": 100, "block_rows": 10_000,
              "budget": 100, "seed": 0, "repeats": 1},
    "smoke": {"n_samples": 4_000, "n_features": 100_000, "nnz_per_row": 50, "block_rows": 2_000,
              "budget": 20, "seed": 0, "repeats": 1},
}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------------------------------- the data
def blocks(profile):
    """``(X CSR, y)`` blocks of the profile's rows; values are multiples of 1e-4 (what the text holds)."""
    rng = np.random.default_rng(profile["seed"])
    n, d, k = profile["n_samples"], profile["n_features"], profile["nnz_per_row"]
    w = np.zeros(d)
    informative = rng.choice(d, max(1, d // 100), replace=False)
    w[informative] = rng.standard_normal(informative.size)
    for lo in range(0, n, profile["block_rows"]):
        rows = min(profile["block_rows"], n - lo)
        gaps = rng.integers(1, max(2, d // k), size=(rows, k))          # span < d: distinct after the modulo
        cols = np.sort((rng.integers(0, d, size=(rows, 1)) + np.cumsum(gaps, axis=1)) % d, axis=1)
        vals = np.round(rng.standard_normal(rows * k) * 1e4) / 1e4
        X = sp.csr_matrix((vals, cols.ravel(), np.arange(0, rows * k + 1, k)), shape=(rows, d))
        y = np.sign(X @ w)
        ties = y == 0
        y[ties] = rng.choice([-1.0, 1.0], size=int(ties.sum()))
        yield X, y


@njit(cache=True)
def _put_int(out, pos, v):
    if v == 0:
        out[pos] = 48
        return pos + 1
    start = pos
    while v > 0:
        out[pos] = 48 + v % 10
        v //= 10
        pos += 1
    i, j = start, pos - 1
    while i < j:
        out[i], out[j] = out[j], out[i]
        i += 1
        j -= 1
    return pos


@njit(cache=True)
def _format(labels, indptr, indices, ticks, out, vw):
    """libsvm (or VW) text of CSR rows with values ``ticks * 1e-4``; returns the bytes written."""
    pos = 0
    for r in range(labels.shape[0]):
        if labels[r] < 0:
            out[pos] = 45
            pos += 1
        out[pos] = 49
        pos += 1
        if vw:
            out[pos] = 32
            out[pos + 1] = 124
            pos += 2
        for q in range(indptr[r], indptr[r + 1]):
            out[pos] = 32
            pos = _put_int(out, pos + 1, indices[q] + 1)
            out[pos] = 58
            pos += 1
            v = ticks[q]
            if v < 0:
                out[pos] = 45
                pos += 1
                v = -v
            pos = _put_int(out, pos, v // 10000)
            out[pos] = 46
            frac = v % 10000
            for e in (1000, 100, 10, 1):
                pos += 1
                out[pos] = 48 + (frac // e) % 10
            pos += 1
        out[pos] = 10
        pos += 1
    return pos


def write_files(profile, directory):
    """The libsvm, VW and Parquet files of the profile; returns their paths and the nnz."""
    from asyos.data.parquet_rows import write_sparse_parquet_blocks
    paths = {"libsvm": os.path.join(directory, "ingest.svm"), "vw": os.path.join(directory, "ingest.vw"),
             "parquet": os.path.join(directory, "ingest.parquet")}
    nnz = 0

    def text_blocks():
        nonlocal nnz
        with open(paths["libsvm"], "wb") as svm, open(paths["vw"], "wb") as vw:
            for X, y in blocks(profile):
                ticks = np.rint(X.data * 1e4).astype(np.int64)
                out = np.empty(X.nnz * 24 + X.shape[0] * 8, dtype=np.uint8)
                for fh, as_vw in ((svm, False), (vw, True)):
                    fh.write(out[:_format(y, X.indptr.astype(np.int64), X.indices.astype(np.int64), ticks, out,
                                          as_vw)].tobytes())
                nnz += X.nnz
                yield X, y
    write_sparse_parquet_blocks(paths["parquet"], text_blocks(), profile["n_features"])
    return paths, nnz


# ----------------------------------------------------------------------------------- measurements
CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
kind, path, extra = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
out = {}
if kind == "asyos":
    from asyos.data.io import open_source
    source = open_source(path)
    out["scan_s"] = time.perf_counter() - t0
    X = source.load(with_test=False).X
    out["rows"], out["nnz"] = X.shape[0], X.nnz
elif kind == "sklearn":
    from sklearn.datasets import load_svmlight_file
    X, y = load_svmlight_file(path, n_features=extra["d"] + 1)
    out["rows"], out["nnz"] = X.shape[0], X.nnz
    if extra.get("learn"):
        from sklearn.linear_model import SGDClassifier
        X.indices, X.indptr = X.indices.astype("int32"), X.indptr.astype("int32")   # SGD takes 32-bit ones
        t1 = time.perf_counter()
        out["load_s"] = t1 - t0
        model = SGDClassifier(penalty="l1", loss="squared_hinge", max_iter=1, tol=None, shuffle=False)
        model.partial_fit(X, y, classes=[-1.0, 1.0])
        out["learn_s"] = time.perf_counter() - t1
        out["n_selected"] = int((model.coef_ != 0).sum())
elif kind == "vw":
    import vowpalwabbit
    ws = vowpalwabbit.Workspace(("" if extra.get("learn") else "--noop ") + f"-d {path} --quiet -b 24")
    ws.run_parser()
    ws.finish()
elif kind == "parquet":
    from asyos.data.io import open_source
    rows = nnz = 0
    for X, y in open_source(path, rows=True).iter_rows(0, None, 4096):
        rows += X.shape[0]
        nnz += X.nnz
    out["rows"], out["nnz"] = rows, nnz
elif kind == "cli":                        # the command's main in this process (its __main__ ends the process)
    from asyos.cli.run import main
    sys.argv = ["asyos.run", "--data", path, *extra["args"]]
    try:
        out["status"] = main(sys.argv[1:])
    except SystemExit as exc:
        out["status"] = exc.code
out["inner_s"] = time.perf_counter() - t0
with open("/proc/self/status") as fh:      # VmHWM: this process's peak (ru_maxrss keeps the parent's)
    out["peak_rss_mb"] = next(int(l.split()[1]) for l in fh if l.startswith("VmHWM:")) / 1024
print("RESULT " + json.dumps(out))
"""


def measure(kind, path, **extra):
    """Run one measurement in a fresh process: its report, plus ``wall_s`` timed from outside."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, kind, path, json.dumps(extra)], capture_output=True,
                          text=True, env=env)
    wall = time.perf_counter() - t0
    match = re.search(r"^RESULT (.*)$", proc.stdout, re.M)
    if proc.returncode != 0 or match is None:
        raise SystemExit(f"{kind} on {path} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return {**json.loads(match.group(1)), "wall_s": wall}


def measure_unit(kind, path, extra, directory):
    """``measure``, and for a CLI run its record's timing and selection."""
    with tempfile.TemporaryDirectory(dir=directory) as out_dir:
        if kind == "cli":
            extra = {"args": [*extra["args"], "--output", out_dir]}
        res = measure(kind, path, **extra)
        if kind == "cli":
            if res.get("status") not in (0, None):
                raise SystemExit(f"the CLI on {path}: exit status {res['status']}")
            with open(os.path.join(out_dir, "results.json")) as fh:
                record = json.load(fh)
            res.update(timing=record["timing"], n_selected=record["metrics"]["n_selected"],
                       train_error=record["metrics"]["train_error"])
    return res


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, help="rows of the file (default: the profile's)")
    p.add_argument("--repeats", type=int, help="rounds of measurements, the fastest kept (default: the profile's)")
    p.add_argument("--keep", help="directory to write the files to and keep (default: a temporary one)")
    args = p.parse_args()
    profile = choose_profile(args, PROFILES)
    if args.rows:
        profile["n_samples"] = args.rows
    if args.repeats:
        profile["repeats"] = args.repeats
    run = Run("ingest", args, profile)
    n, d = profile["n_samples"], profile["n_features"]
    with tempfile.TemporaryDirectory(dir=args.keep or "/tmp") as tmp:
        directory = args.keep or tmp
        t0 = time.perf_counter()
        paths, nnz = write_files(profile, directory)
        sizes = {k: os.path.getsize(v) / 1e6 for k, v in paths.items()}
        print(f"files: {n} rows x {d} features, {nnz / n:.0f} values a row; libsvm {sizes['libsvm']:.0f} MB, "
              f"VW {sizes['vw']:.0f} MB, Parquet {sizes['parquet']:.0f} MB (written in "
              f"{time.perf_counter() - t0:.1f} s)\n", flush=True)
        measure("asyos", paths["libsvm"])                   # numba's cache is filled before timing
        budget = str(profile["budget"])
        cli = ["--algorithm", "b-arda", "--budget", budget, "--passes", "1", "--quiet"]
        ingest = [("asyos libsvm reader (scan + CSR)", "asyos", paths["libsvm"], {}),
                  ("scikit-learn load_svmlight_file", "sklearn", paths["libsvm"], {"d": d}),
                  ("Vowpal Wabbit parser (--noop, VW text)", "vw", paths["vw"], {}),
                  ("asyos Parquet row stream (sparse lists)", "parquet", paths["parquet"], {})]
        learn = [("asyos b-arda streamed from libsvm", "cli", paths["libsvm"], {"args": cli}),
                 ("asyos b-arda streamed from Parquet", "cli", paths["parquet"], {"args": cli}),
                 ("scikit-learn load + SGD l1 epoch", "sklearn", paths["libsvm"], {"d": d, "learn": True}),
                 ("Vowpal Wabbit one pass (VW text)", "vw", paths["vw"], {"learn": True})]
        results = {}
        for rep in range(profile["repeats"]):
            for phase, items in (("ingest", ingest), ("learn", learn)):
                for label, kind, path, extra in items:
                    res = measure_unit(kind, path, extra, directory)
                    seconds = res["inner_s"] if phase == "ingest" else res["wall_s"]
                    res.update(label=label, phase=phase, kind=kind, repeat=rep, seconds=seconds, rows_per_s=n / seconds)
                    run.unit(res)
                    if (phase, label) not in results or seconds < results[(phase, label)]["seconds"]:
                        results[(phase, label)] = res
                    print(f"  {phase:>6}  {label:<42} {seconds:8.2f} s  {n / seconds:10.0f} rows/s  peak RSS "
                          f"{res['peak_rss_mb']:7.0f} MB", flush=True)
    summary = summarise(results, profile, sizes)
    path = run.finish(summary)
    print(f"results: {path}")


def summarise(results, profile, sizes):
    n = profile["n_samples"]
    ours_in = results[("ingest", "asyos libsvm reader (scan + CSR)")]
    sk_in = results[("ingest", "scikit-learn load_svmlight_file")]
    ours = results[("learn", "asyos b-arda streamed from libsvm")]
    sk = results[("learn", "scikit-learn load + SGD l1 epoch")]
    rows = []
    for (phase, label), r in results.items():
        base = sk_in if phase == "ingest" else sk
        rows.append([phase, label, f"{r['seconds']:.2f}", f"{r['rows_per_s']:.0f}",
                     f"{base['seconds'] / r['seconds']:.2f}", f"{r['peak_rss_mb']:.0f}"])
    print_table(f"{n} rows x {profile['n_features']} features ({profile['nnz_per_row']} values a row; libsvm "
                f"{sizes['libsvm']:.0f} MB): ingest = inside the process (imports excluded); learn = the whole "
                f"process, timed from outside; 'x sklearn' = scikit-learn's seconds / the row's (same phase); "
                f"peak RSS of the process", ["phase", "what", "seconds", "rows/s", "x sklearn", "peak RSS MB"], rows)
    ratio = sk["seconds"] / ours["seconds"]
    return {"ingest_rows_per_s": {label: r["rows_per_s"] for (phase, label), r in results.items() if phase == "ingest"},
            "ingest_ratio_vs_sklearn": sk_in["seconds"] / ours_in["seconds"],
            "learn_seconds": {label: r["seconds"] for (phase, label), r in results.items() if phase == "learn"},
            "peak_rss_mb": {f"{phase}: {label}": r["peak_rss_mb"] for (phase, label), r in results.items()},
            "ingest_learn_ratio_vs_sklearn": ratio, "goal": "ingest + learn >= 1x scikit-learn",
            "goal_met": bool(ratio >= 1.0), "asyos_timing": ours.get("timing"), "file_mb": sizes}


if __name__ == "__main__":
    main()
