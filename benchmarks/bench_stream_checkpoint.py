"""What checkpointing costs a sample-stream ``fit``: the plain ``fit`` next to ``fit(X, y, checkpoint=...)``
(chunks of rows adapted to ``resumable.POLL_SECONDS``, a poll before each), never saving and saving every
0.25 s (far more often than the default 60 s), in the same run on the same data; how long a stop request
waits (the longest chunk), and the saves made and the time spent writing them (median over the repetitions).

Data: a sparse classification problem (``n`` rows, ``p`` features, ``nnz`` values a row); learners B-ARDA
(a compiled row loop) and SFSA (a Python loop over mini-batches with ``O(p)`` thresholding each), 2 passes.
Each configuration runs ``seeds`` times, interleaved; the table gives the median time and its ratio to the
plain fit's.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_stream_checkpoint.py [--quick]
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time

import numpy as np
import scipy.sparse as sp

from asyos.benchmarking.common import Run, choose_profile, parser, print_table
from asyos.records.checkpoint import Checkpointer
from asyos.learners.stream import resumable
from asyos.learners.stream.budgeted import BudgetedARDA
from asyos.learners.stream.sfsa import SFSA

PROFILES = {
    "paper": {"n_samples": 300000, "n_features": 10000, "nnz": 50, "passes": 2, "budget": 50, "seeds": 3},
    "quick": {"n_samples": 20000, "n_features": 2000, "nnz": 20, "passes": 2, "budget": 20, "seeds": 2},
}


def make_data(profile):
    rng = np.random.default_rng(0)
    n, p, k = profile["n_samples"], profile["n_features"], profile["nnz"]
    indices = np.sort(rng.random((n, p)).argsort(axis=1)[:, :k], axis=1) if p <= 4096 else \
        np.sort(rng.integers(0, p, (n, k)), axis=1)
    X = sp.csr_matrix((rng.normal(size=n * k), indices.ravel(), np.arange(0, n * k + 1, k)), shape=(n, p))
    X.sum_duplicates()
    truth = np.zeros(p)
    truth[:20] = rng.normal(size=20)
    y = np.where(X @ truth >= 0, 1.0, -1.0)
    return X, y


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    profile = choose_profile(args, PROFILES)
    run = Run("stream_checkpoint", args, profile)
    X, y = make_data(profile)
    learners = {"b-arda": lambda: BudgetedARDA(budget=profile["budget"], passes=profile["passes"]),
                "sfsa": lambda: SFSA(budget=profile["budget"], passes=profile["passes"], loss="squared_hinge")}
    modes = ("plain", "checkpoint, no save", "checkpoint, save every 0.25 s")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cp.pkl")
        for name, make in learners.items():
            make().fit(X[:200], y[:200])                      # compile the loops, untimed
            times = {mode: [] for mode in modes}
            saves, saving, longest = 0, [], 0.0
            for _ in range(profile["seeds"]):
                for mode in modes:
                    checkpoint = None if mode == "plain" else Checkpointer(path, None if "no save" in mode else 0.25)
                    chunk_times = []
                    run_chunk = resumable.RowChunks.run

                    def timed(self, step, order, pos, _run=run_chunk, _times=chunk_times):
                        t = time.perf_counter()
                        end = _run(self, step, order, pos)
                        _times.append(time.perf_counter() - t)
                        return end

                    resumable.RowChunks.run = timed
                    try:
                        t = time.perf_counter()
                        make().fit(X, y, checkpoint=checkpoint)
                        times[mode].append(time.perf_counter() - t)
                    finally:
                        resumable.RowChunks.run = run_chunk
                    if checkpoint is not None and "every" in mode:
                        saves = max(saves, checkpoint.saves)
                        saving.append(checkpoint.save_seconds)
                        longest = max(longest, max(chunk_times))
            base = statistics.median(times["plain"])
            for mode in modes:
                med = statistics.median(times[mode])
                every = "every" in mode
                rows.append([name, mode, f"{med:.3f}", f"{med / base:.3f}", f"{longest * 1e3:.0f}" if every else "",
                             saves if every else "", f"{statistics.median(saving):.3f}" if every else ""])
                run.unit({"learner": name, "mode": mode, "seconds": times[mode], "ratio": med / base,
                          "longest_chunk_s": longest if every else None, "saves": saves if every else None,
                          "save_seconds": saving if every else None})
    print_table(f"fit with checkpoints, n = {profile['n_samples']}, p = {profile['n_features']}, "
                f"{profile['passes']} passes (median of {profile['seeds']})",
                ["learner", "mode", "seconds", "x plain", "longest chunk ms", "saves", "saving s"], rows)
    print(run.finish({"rows": rows}))


if __name__ == "__main__":
    main()
