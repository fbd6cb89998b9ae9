"""What progress lines cost a fit: the plain ``fit(X, y)`` a run without progress makes, next to
``fit(X, y, checkpoint=ProgressPoller(...))`` the CLI makes when progress lines are wanted
(``asyos.records.resume.poller_for``: a poll at each step of OS, before each chunk of rows of a
sample-stream learner, and a line every ``asyos.utils.progress.EVERY_S`` seconds, the objective computed
only for a line), in the same run on the same data, interleaved; the lines go to a null stream.

Cases: sequential OS on the KDD'16 synthetic regression problem (``p`` features, 3 passes), and
B-ARDA on a sparse classification problem (``n`` rows, ``nnz`` values a row, 2 passes). The table
gives the median time of ``seeds`` repetitions and its ratio to the plain fit's, and the fastest
of each; on a shared machine both move by more than the cost, so it also gives the cost of one
poll between lines (timed alone, a million polls), the polls of a fit, and their product as a
share of the plain fit's time: the bound on what progress lines cost.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_progress.py [--quick]
"""
from __future__ import annotations

import os
import warnings
import statistics
import time

import numpy as np

from asyos.benchmarking.common import Run, choose_profile, parser, print_table
from asyos.data.synthetic import SyntheticSource
from asyos.learners.stream.budgeted import BudgetedARDA
from asyos.learners.substitution.online_substitution import OnlineSubstitution
from asyos.utils.logs import configure
from asyos.utils.progress import Progress, ProgressPoller

PROFILES = {
    "paper": {"os_p": 20000, "n_samples": 200000, "n_features": 10000, "nnz": 50, "seeds": 3},
    "quick": {"os_p": 4000, "n_samples": 20000, "n_features": 2000, "nnz": 20, "seeds": 2},
    # smoke (tests/test_benchmarks.py): the same steps on a fifth of the quick sizes
    "smoke": {"os_p": 800, "n_samples": 4000, "n_features": 400, "nnz": 20, "seeds": 1},
}


def sparse_classification(profile):
    import scipy.sparse as sp
    rng = np.random.default_rng(0)
    n, p, k = profile["n_samples"], profile["n_features"], profile["nnz"]
    indices = np.sort(rng.integers(0, p, (n, k)), axis=1)
    X = sp.csr_matrix((rng.normal(size=n * k), indices.ravel(), np.arange(0, n * k + 1, k)), shape=(n, p))
    X.sum_duplicates()
    truth = np.zeros(p)
    truth[:20] = rng.normal(size=20)
    return X, np.where(X @ truth >= 0, 1.0, -1.0)


def time_poll(count=1_000_000) -> float:
    """Seconds of one ``ProgressPoller.poll`` between two lines (the loops' own lambda included)."""
    poller = ProgressPoller(Progress("x", enabled=True))
    poller.reporter._next = float("inf")
    state = {}

    def between():
        poller.poll("kind", lambda: state, dict, state)
    t = time.perf_counter()
    for _ in range(count):
        between()
    return (time.perf_counter() - t) / count


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    profile = choose_profile(args, PROFILES)
    run = Run("progress", args, profile)
    configure(verbose=1, stream=open(os.devnull, "w"))
    warnings.simplefilter("ignore")                               # the fits warn alike in both modes
    data = SyntheticSource(n_features=profile["os_p"], seed=0).load()
    cases = {
        f"os, p = {profile['os_p']}": (lambda: OnlineSubstitution(budget=100, passes=3), data.X, data.y),
        f"b-arda, n = {profile['n_samples']}": (lambda: BudgetedARDA(budget=50, passes=2, random_state=0),
                                                *sparse_classification(profile)),
    }
    poll_s = time_poll()
    rows = []
    for name, (make, X, y) in cases.items():
        make().fit(X[:200], y[:200])                              # compile the loops, untimed
        times, lines, coefs, polls = {"off": [], "on": []}, 0, {}, 0
        for _ in range(profile["seeds"]):
            for mode in ("off", "on"):
                poller = ProgressPoller(Progress(name, enabled=True).polled()) if mode == "on" else None
                t = time.perf_counter()
                fitted = make().fit(X, y) if poller is None else make().fit(X, y, checkpoint=poller)
                times[mode].append(time.perf_counter() - t)
                coefs[mode] = fitted.coef_
                if poller is not None:
                    lines, polls = max(lines, poller.reporter.lines), poller.polls
        same = bool(np.array_equal(coefs["off"], coefs["on"]))
        off, on = statistics.median(times["off"]), statistics.median(times["on"])
        fastest = min(times["on"]) / min(times["off"])
        bound = polls * poll_s / min(times["off"])
        rows.append([name, f"{off:.3f}", f"{on:.3f}", f"{on / off:.3f}", f"{fastest:.3f}", polls,
                     f"{100 * bound:.3f}", lines, "yes" if same else "NO"])
        run.unit({"case": name, "off_s": times["off"], "on_s": times["on"], "ratio": on / off,
                  "ratio_fastest": fastest, "polls": polls, "poll_s": poll_s, "bound": bound, "lines": lines,
                  "same_coef": same})
    configure()
    print_table(f"fit with progress lines off and on (median of {profile['seeds']}); one poll between lines: "
                f"{poll_s * 1e9:.0f} ns", ["case", "off s", "on s", "on / off", "fastest on / off", "polls",
                                          "polls x poll cost, % of fit", "lines", "same coef"], rows)
    print(run.finish({"rows": rows}))


if __name__ == "__main__":
    main()
