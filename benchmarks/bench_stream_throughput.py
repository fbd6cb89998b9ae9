"""Throughput of the sample-stream learners on a sparse stream, next to scikit-learn's SGD in the same run.

A synthetic stream: ``d`` = 20000 features, 100 non-zeros per row at random positions with N(0, 1)
values, labels ``sign(X w*)`` for a ``w*`` with 100 non-zeros (a row that meets none of them gets a
random label), CSR float64. Each learner (``all_stream_learners``: B-ARDA, B-AMD, OFS, SOFS, l1-ARDA,
Ada-FOBOS, OPG, RDA, SFSA, TSGD; ``scale=None``, a numeric ``lam`` = 1e-3 for the l1 family so that no
search runs, ``squared_hinge``, or ``hinge`` for OFS and SOFS as they default to) makes one pass
(``partial_fit`` over every row, in order) on a fresh model, after a warm-up ``partial_fit`` on a few
rows that compiles the row loop or loads it from numba's cache. The budgeted learners are measured at
every budget of the profile, the l1 family (whose cost does not depend on the budget) at the first.
Right before each pass, scikit-learn's ``SGDClassifier(penalty="l1", max_iter=1, tol=None,
shuffle=False, fit_intercept=False)`` with the same loss makes its one-epoch ``partial_fit`` over
the same CSR data, so machine noise hits both; rates are samples per second of the best of the
repeats, and the ratio is to scikit-learn's rate measured next to it. Goal: B-ARDA, B-AMD, OFS and SOFS
at >= 1x scikit-learn's rate (at B = 100, in both profiles: d = 2e4 and d = 10^6); on 2 shared cores a
ratio moves by 10-30% from run to run, so a profile is run at least twice.

``--profile wide``: d = 10^6 features, 10^6 rows of 100 non-zeros (the CSR is 1.2 GB: float64 values,
int32 indices, made in chunks in memory), budget 100. SFSA and TSGD, whose mini-batch steps cost O(d),
are timed on the first ``slow_rows`` rows (next to scikit-learn's epoch over the same rows; rates are
per sample). ``--rows`` overrides the number of rows, ``--learners`` picks learners.

Memory: after the timed passes, one more pass of a fresh model runs under ``tracemalloc`` (which sees
Python's and numpy's allocations; the compiled row loops allocate nothing): ``peak MB`` is the peak
allocated during ``partial_fit`` above what was allocated before it (the model's state plus any
transient copy of the input), ``state MB`` the arrays the model keeps; scikit-learn's pass is measured
the same way. The input's index arrays (``X.indices``, 4 bytes per non-zero) are no longer copied.

    python benchmarks/bench_stream_throughput.py [--quick | --profile wide] [--rows N] [--learners a,b]
"""
from __future__ import annotations

import hashlib
import os
import sys
import time
import tracemalloc

import numpy as np
import scipy.sparse as sp

from asyos.benchmarking.common import Run, choose_profile, parser, plot, print_table

from asyos.learners.stream import _stream_kernels
from asyos.learners.stream.stream_learners import all_stream_learners, warm_up

PROFILES = {
    "paper": {"n_features": 20000, "nnz_per_row": 100, "n_informative": 100, "n_samples": 200000,
              "budgets": [100, 1000], "lam": 1e-3, "repeats": 3, "warmup_rows": 500, "seed": 0},
    "quick": {"n_features": 20000, "nnz_per_row": 100, "n_informative": 100, "n_samples": 10000,
              "budgets": [100], "lam": 1e-3, "repeats": 2, "warmup_rows": 200, "seed": 0},
    "wide": {"n_features": 1000000, "nnz_per_row": 100, "n_informative": 100, "n_samples": 1000000,
             "budgets": [100], "lam": 1e-3, "repeats": 2, "warmup_rows": 500, "seed": 0,
             "slow_rows": {"sfsa": 5000, "tsgd": 20000}},
}
L1_FAMILY = ("l1-arda", "ada-fobos", "opg", "rda")
MARGIN_LOSS = ("ofs", "sofs")                    # their default (and the published) loss: the hinge
# goal per learner: ("rate", samples/s) or ("ratio", x scikit-learn)
GOALS = {"b-arda": ("ratio", 1.0), "b-amd": ("ratio", 1.0), "ofs": ("ratio", 1.0), "sofs": ("ratio", 1.0)}


def sparse_stream(n, d, nnz, informative, seed, chunk=100000):
    """``(X, y)``: CSR float64 with ``nnz`` distinct random columns per row, N(0, 1) values, and
    ``y = sign(X w*)`` for ``w*`` with ``informative`` N(0, 1) non-zeros (a random sign where it is 0).
    The columns are drawn ``chunk`` rows at a time into the int32 index array (no int64 copy of it all)."""
    rng = np.random.default_rng(seed)
    dtype = np.int32 if max(d, n * nnz) < 2 ** 31 else np.int64
    indices = np.empty(n * nnz, dtype=dtype)
    for start in range(0, n, chunk):
        cols = np.sort(rng.integers(0, d, size=(min(chunk, n - start), nnz)), axis=1)
        while True:                                 # redraw the rows with a repeated column
            bad = np.flatnonzero((np.diff(cols, axis=1) == 0).any(axis=1))
            if bad.size == 0:
                break
            cols[bad] = np.sort(rng.integers(0, d, size=(bad.size, nnz)), axis=1)
        indices[start * nnz:start * nnz + cols.size] = cols.ravel()
    X = sp.csr_matrix((rng.standard_normal(n * nnz), indices, np.arange(0, n * nnz + 1, nnz, dtype=dtype)),
                      shape=(n, d))
    w = np.zeros(d)
    w[rng.choice(d, informative, replace=False)] = rng.standard_normal(informative)
    y = np.sign(X @ w)
    ties = y == 0
    y[ties] = rng.choice([-1.0, 1.0], size=int(ties.sum()))
    return X, y


def make_learner(cls, budget, lam):
    name = cls.algorithm_name
    params = {"budget": budget, "scale": None, "passes": 1}
    if name not in MARGIN_LOSS:
        params["loss"] = "squared_hinge"
    if name in L1_FAMILY:
        params["lam"] = lam
    return cls(**params)


def make_sklearn(loss):
    from sklearn.linear_model import SGDClassifier
    return SGDClassifier(penalty="l1", loss=loss, max_iter=1, tol=None, shuffle=False, fit_intercept=False,
                         random_state=0)


def one_pass(make, X, y, **fit):
    """Seconds of one ``partial_fit`` over every row of ``X`` by a fresh model, and the model."""
    model = make()
    t0 = time.perf_counter()
    model.partial_fit(X, y, **fit)
    return time.perf_counter() - t0, model


def pass_memory(make, X, y, **fit):
    """``(peak, kept)`` bytes: the peak allocated (``tracemalloc``) during a fresh model's ``partial_fit``
    over ``X`` above what was allocated before, and the bytes of the arrays the model keeps."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        model = make()
        model.partial_fit(X, y, **fit)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    state = getattr(model, "_state", None)
    arrays = vars(state if state is not None else model).values()
    return peak, sum(a.nbytes for a in arrays if isinstance(a, np.ndarray))


def sources_digest():
    """A digest of the learners' source (row loops, facade, classes), to tell runs of different code apart
    and to catch an edit in the middle of a run."""
    files = sorted({_stream_kernels.__file__, *(sys.modules[cls.__module__].__file__ for cls in all_stream_learners())})
    digest = hashlib.sha256()
    for path in files:
        with open(path, "rb") as fh:
            digest.update(fh.read())
    return digest.hexdigest()[:12]


def goal_status(name, rate, ratio):
    if name not in GOALS:
        return None, None
    kind, target = GOALS[name]
    value = rate if kind == "rate" else ratio
    text = f">= {target:g} samples/s" if kind == "rate" else f">= {target:g}x scikit-learn"
    return text, bool(value >= target)


def main():
    cli = parser(__doc__.splitlines()[0])
    cli.add_argument("--profile", choices=sorted(PROFILES), help="a profile by name (default: paper, or quick)")
    cli.add_argument("--rows", type=int, help="rows of the stream (default: the profile's)")
    cli.add_argument("--learners", help="comma-separated learner names (default: all)")
    args = cli.parse_args()
    profile = dict(PROFILES[args.profile]) if args.profile else choose_profile(args, PROFILES)
    if args.rows:
        profile["n_samples"] = args.rows
    wanted = args.learners.split(",") if args.learners else None
    try:
        import sklearn  # noqa: F401
    except ImportError:
        raise SystemExit("scikit-learn is needed for the reference: pip install scikit-learn") from None
    run = Run("stream_throughput" + (f"_{args.profile}" if args.profile not in (None, "paper") else ""), args,
              profile)
    digest = sources_digest()
    n, d, reps = profile["n_samples"], profile["n_features"], profile["repeats"]
    t0 = time.perf_counter()
    X, y = sparse_stream(n, d, profile["nnz_per_row"], profile["n_informative"], profile["seed"])
    data_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    warm_up()                                       # compile every row loop, or load it from the cache
    compile_s = time.perf_counter() - t0
    print(f"stream: {n} rows x {d} features, {X.nnz / n:.0f} non-zeros per row, {np.mean(y > 0):.1%} positive "
          f"(made in {data_s:.1f} s); row loops compiled or loaded in {compile_s:.1f} s "
          f"({'numba' if _stream_kernels.COMPILED else 'plain Python'})\n", flush=True)

    warm = profile["warmup_rows"]
    Xw, yw = X[:warm], y[:warm]
    classes = np.array([-1.0, 1.0])
    for loss in ("hinge", "squared_hinge"):         # scikit-learn's first call pays its own set-up
        make_sklearn(loss).partial_fit(Xw, yw, classes=classes)
    rows, sk_memory = [], {}
    for cls in all_stream_learners():
        name = cls.algorithm_name
        if wanted is not None and name not in wanted:
            continue
        m = min(n, profile.get("slow_rows", {}).get(name, n))     # O(d) per mini-batch: a prefix
        Xl, yl = (X, y) if m == n else (X[:m], y[:m])
        budgets = profile["budgets"][:1] if name in L1_FAMILY else profile["budgets"]
        for budget in budgets:
            make = lambda: make_learner(cls, budget, profile["lam"])  # noqa: E731
            model = make()
            loss = model.loss
            sk_loss = "hinge" if loss == "hinge" else "squared_hinge"
            model.partial_fit(Xw, yw)               # warm-up: the loop is compiled before any timing
            ours, ref = [], []
            for _ in range(reps):                   # interleaved: scikit-learn's epoch, then our pass
                ref.append(one_pass(lambda: make_sklearn(sk_loss), Xl, yl, classes=classes)[0])
                seconds, model = one_pass(make, Xl, yl)
                ours.append(seconds)
            rate, sk_rate = m / min(ours), m / min(ref)
            peak, kept = pass_memory(make, Xl, yl)
            if (sk_loss, m) not in sk_memory:
                sk_memory[sk_loss, m] = pass_memory(lambda: make_sklearn(sk_loss), Xl, yl, classes=classes)
            ratio = rate / sk_rate
            goal, met = goal_status(name, rate, ratio)
            unit = run.unit({"learner": name, "budget": budget, "loss": loss, "sklearn_loss": sk_loss,
                             "n_samples": m, "n_features": d, "nnz_per_row": profile["nnz_per_row"],
                             "peak_mb": peak / 2 ** 20, "state_mb": kept / 2 ** 20,
                             "sklearn_peak_mb": sk_memory[sk_loss, m][0] / 2 ** 20,
                             "input_indices_mb": Xl.indices.nbytes / 2 ** 20,
                             "lam": profile["lam"] if name in L1_FAMILY else None,
                             "seconds": ours, "sklearn_seconds": ref, "samples_per_s": rate,
                             "sklearn_samples_per_s": sk_rate, "ratio": ratio, "us_per_sample": 1e6 / rate,
                             "n_updates": model.n_updates_, "support": int(model.support_.size),
                             "params": model.get_params(),
                             "goal": goal, "goal_met": met})
            rows.append(unit)
            print(f"  {name:>9} B = {budget:<5} {rate:>10.0f} samples/s  {ratio:5.2f}x scikit-learn "
                  f"({sk_loss}, {sk_rate:.0f} samples/s{'' if m == n else f', first {m} rows'}); "
                  f"peak {peak / 2 ** 20:.0f} MB (state {kept / 2 ** 20:.0f} MB; scikit-learn "
                  f"{sk_memory[sk_loss, m][0] / 2 ** 20:.0f} MB)", flush=True)
    summary = summarise(rows, profile, compile_s)
    summary["sources_sha256"] = digest
    if sources_digest() != digest:
        summary["sources_changed_during_run"] = True
        print("warning: the learners' source changed during the run (the timings used the code imported at the "
              "start)", flush=True)
    path = run.finish(summary)
    draw(run, rows, profile)
    print(f"results: {path}")


def summarise(rows, profile, compile_s):
    sk = {}
    for u in rows:
        sk.setdefault(u["sklearn_loss"], []).append(u["sklearn_samples_per_s"])
    sk_rates = {loss: max(rates) for loss, rates in sk.items()}
    table = [[u["learner"], u["budget"], u["loss"], u["n_samples"], f"{u['samples_per_s']:.0f}",
              f"{u['us_per_sample']:.2f}", f"{u['sklearn_samples_per_s']:.0f}", f"{u['ratio']:.3f}",
              f"{u['n_updates'] / u['n_samples']:.2f}", u["support"], f"{u['peak_mb']:.1f}", f"{u['state_mb']:.1f}",
              f"{u['sklearn_peak_mb']:.1f}",
              "" if u["goal"] is None else f"{u['goal']}: {'met' if u['goal_met'] else 'MISSED'}"] for u in rows]
    table += [[f"scikit-learn SGD ({loss})", "-", loss, "-", f"{rate:.0f}", f"{1e6 / rate:.2f}", f"{rate:.0f}",
               "1.000", "-", "-", "-", "-", "-", "best of all its epochs"] for loss, rate in sk_rates.items()]
    print_table(f"One pass over {profile['n_samples']} rows x {profile['n_features']} features "
                f"({profile['nnz_per_row']} non-zeros per row), best of {profile['repeats']}: samples/s, and x "
                f"scikit-learn's SGDClassifier(penalty='l1') epoch measured next to it (same loss)",
                ["learner", "B", "loss", "rows", "samples/s", "us / sample", "sklearn samples/s", "x sklearn",
                 "updates / row", "support", "peak MB", "state MB", "sklearn peak MB", "goal"], table)
    goals = {f"{u['learner']} B={u['budget']}": {"goal": u["goal"], "met": u["goal_met"],
                                                  "samples_per_s": u["samples_per_s"], "ratio": u["ratio"]}
             for u in rows if u["goal"] is not None}
    return {"compile_s": compile_s, "sklearn_samples_per_s": sk_rates,
            "samples_per_s": {f"{u['learner']} B={u['budget']}": u["samples_per_s"] for u in rows},
            "ratio": {f"{u['learner']} B={u['budget']}": u["ratio"] for u in rows},
            "goals": goals, "goals_met_at_first_budget": all(
                g["met"] for key, g in goals.items() if key.endswith(f"B={profile['budgets'][0]}"))}


def draw(run, rows, profile):
    def draw_fn(plt):
        names = list(dict.fromkeys(u["learner"] for u in rows))
        budgets = profile["budgets"]
        fig, ax = plt.subplots(figsize=(10, 4))
        width = 0.8 / len(budgets)
        for b, budget in enumerate(budgets):
            xs, vals = [], []
            for i, name in enumerate(names):
                match = [u for u in rows if u["learner"] == name and u["budget"] == budget]
                if match:
                    xs.append(i + (b - (len(budgets) - 1) / 2) * width)
                    vals.append(match[0]["ratio"])
            ax.bar(xs, vals, width=width, label=f"B = {budget}")
        ax.axhline(1.0, color="gray", ls="--", lw=1, label="scikit-learn SGD (l1)")
        ax.axhline(0.25, color="red", ls=":", lw=1, label="goal 0.25x (B-AMD, OFS, SOFS)")
        ax.set_yscale("log")
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names)
        ax.set_ylabel("samples/s, x scikit-learn")
        ax.set_title(f"one pass, {profile['n_samples']} x {profile['n_features']} CSR, "
                     f"{profile['nnz_per_row']} non-zeros per row")
        ax.legend(fontsize=8)
    plot(os.path.join(run.args.output, "stream_throughput.png"), draw_fn)


if __name__ == "__main__":
    main()
