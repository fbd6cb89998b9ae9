"""``asyos.convert``: time and peak memory of the column-major conversion against same-run baselines.

Two cases, each generated under a temporary directory (``$TMPDIR``) in row chunks and deleted afterwards:

* **dense**: a row-major float32 ``X, y`` ``.npz`` (stored) of ``n x p`` to ``--format dense --dtype
  float32``. Baseline: a plain copy of the source file (``shutil.copyfile``: read and write the same
  bytes once), the I/O floor of any one-pass conversion; the external transpose writes the data twice
  (spill, then the columns) and reads it twice, so a ratio near 2-3 is what the design costs.
* **libsvm**: ``n`` rows of ``p`` features with ``k`` non-zeros each to ``--format csc``. Baseline: one
  streamed pass of ``asyos.data.io``'s ``iter_rows`` over the file (the parsing any converter from this
  source pays); the ratio shows the transpose's share on top of the parse (the header scan that counts
  the rows is a second parse, so ~2 is the floor while the parser is in Python).

Each conversion runs in a subprocess that reports its peak RSS growth (``VmHWM`` after imports, then
after) with ``--memory`` given by the profile; the baselines are timed in this process. Medians over the
profile's repeats.

    python benchmarks/bench_convert.py            # ~4 min on a shared 2-core machine, ~3 GB of disk
    python benchmarks/bench_convert.py --quick    # seconds, for CI
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy as np

from asyos.benchmarking.common import Run, choose_profile, parser, print_table
from asyos.cli.convert import _npy_header
from asyos.data.io import open_source

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROFILES = {
    "paper": {"seeds": 3, "memory_mb": 256, "dense": {"n": 1000, "p": 200000},
              "libsvm": {"n": 20000, "p": 1000000, "k": 100}},
    "quick": {"seeds": 1, "memory_mb": 8, "dense": {"n": 200, "p": 5000}, "libsvm": {"n": 2000, "p": 50000, "k": 20}},
}
PEAK = """
import sys, time
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) * 1024
import numpy, scipy.sparse, zipfile
from asyos.cli.convert import main
base, t = hwm(), time.perf_counter()
assert main(sys.argv[1:]) == 0
print(time.perf_counter() - t, hwm() - base)
"""


def write_dense(path, n, p, rng):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        with zf.open("X.npy", "w", force_zip64=True) as fh:
            fh.write(_npy_header((n, p), np.float32))
            for lo in range(0, n, 16):
                fh.write(rng.standard_normal((min(16, n - lo), p), dtype=np.float32).tobytes())
        with zf.open("y.npy", "w", force_zip64=True) as fh:
            np.lib.format.write_array(fh, rng.normal(size=n))


def write_libsvm(path, n, p, k, rng):
    with open(path, "w") as fh:
        for lo in range(0, n, 1000):
            lines = []
            for _ in range(lo, min(n, lo + 1000)):
                idx = np.sort(rng.choice(p, k, replace=False)) + 1
                val = rng.normal(size=k).round(4) + 5.0            # never 0
                lines.append("1 " + " ".join(f"{a}:{b:g}" for a, b in zip(idx.tolist(), val.tolist())))
            fh.write("\n".join(lines) + "\n")


def convert_in_subprocess(src, dst, memory_mb, extra):
    proc = subprocess.run([sys.executable, "-c", PEAK, src, dst, "--memory", str(memory_mb), "-q", *extra],
                          capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": REPO})
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    seconds, growth = proc.stdout.split()
    shutil.rmtree(dst)
    return float(seconds), int(growth)


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def parse_pass(path, p):
    source = open_source(path, n_features=p, index_base=1)
    for _ in source.iter_rows(0, source.n_train, 8192):
        pass


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    profile = choose_profile(args, PROFILES)
    run = Run("convert", args, profile)
    rng = np.random.default_rng(0)
    work = tempfile.mkdtemp(prefix="bench_convert-")
    rows, summary = [], {}
    try:
        d, s = profile["dense"], profile["libsvm"]
        dense_src, svm_src = os.path.join(work, "dense.npz"), os.path.join(work, "data.svm")
        write_dense(dense_src, d["n"], d["p"], rng)
        write_libsvm(svm_src, s["n"], s["p"], s["k"], rng)
        cases = [("dense", dense_src, d["n"], ["--dtype", "float32"],
                  lambda: shutil.copyfile(dense_src, os.path.join(work, "copy")), "file copy"),
                 ("libsvm", svm_src, s["n"], ["--index-base", "1", "--n-features", str(s["p"])],
                  lambda: parse_pass(svm_src, s["p"]), "parse pass")]
        for name, src, n, extra, baseline, baseline_name in cases:
            ours, growth, base = [], [], []
            for _ in range(profile["seeds"]):
                seconds, peak = convert_in_subprocess(src, os.path.join(work, "out"), profile["memory_mb"], extra)
                ours.append(seconds)
                growth.append(peak)
                base.append(timed(baseline))
            t, b, g = statistics.median(ours), statistics.median(base), max(growth)
            size = os.path.getsize(src)
            entry = {"case": name, "n": n, "source_bytes": size, "convert_s": t, "rows_per_s": n / t,
                     "baseline": baseline_name, "baseline_s": b, "ratio": t / b, "peak_rss_growth_bytes": g,
                     "memory_mb": profile["memory_mb"]}
            summary[name] = entry
            run.unit(entry)
            rows.append([name, n, f"{size / 1e6:.0f}", f"{t:.2f}", f"{n / t:,.0f}", baseline_name, f"{b:.2f}",
                         f"{t / b:.2f}x", f"{g / 2 ** 20:.0f}", profile["memory_mb"]])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_table(f"asyos.convert vs same-run baselines (median of {profile['seeds']})",
                ["case", "rows", "source MB", "convert s", "rows/s", "baseline", "baseline s", "ratio",
                 "peak RSS growth MB", "--memory MB"], rows)
    print(f"results: {run.finish(summary)}")


if __name__ == "__main__":
    main()
