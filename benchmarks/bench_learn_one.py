"""One sample at a time: B-ARDA's learn_one on array rows and dict rows, next to Vowpal Wabbit's and River's
in the same run, on the same rows.

The stream: ``d`` = 10^4 features, 50 non-zeros per row (10 among 200 informative features, 40 among the
rest, N(0, 1) values), labels ``sign(x . w*)`` with ``w*`` N(0, 1) on the informative features and 5% of
them flipped. Every learner reads the rows in the same order, once, from a fresh model:

* asyos ``BudgetedARDA(budget=100)`` with its defaults (``scale="maxabs"``, the squared hinge), on dense
  1-D float64 rows, on one-row CSR matrices (the row's columns and values, as a parsed example holds
  them; made with the chunk, untimed) and on dict rows ``{"f<j>": value}`` (``learn_one``); also with
  ``scale=None`` on arrays, to show what the running max-abs scale costs;
* Vowpal Wabbit (``vowpalwabbit.Workspace("--quiet --loss_function logistic -b 18")``), ``learn`` of the
  row's text line ``"<y> | j:v ..."``, its native input (the parse included); and, in a workspace of its
  own, ``learn`` of an example it has already parsed (``parse`` before and ``finish_example`` after the
  timed call, both untimed): its learning step alone;
* River ``linear_model.LogisticRegression(l1=1e-4)`` (its defaults otherwise: SGD with step 0.01) on the
  same dict rows.

Rows are made (dense, dict, text) 16 at a time, right before every learner takes them, so a dense row is in
the cache as a row just built would be; only the learners' calls are timed. Rates are rows per second of
``learn_one`` (``learn`` for VW). The accuracy is the progressive (online) accuracy, each row predicted
before it is learned: asyos counts it inside its step (``online_accuracy_``); River's ``predict_one`` is
called before each timed ``learn_one``, untimed; VW's comes from a second workspace fed the same rows with
``predict`` then ``learn``, untimed. Goals: asyos on arrays and on CSR rows >= 1x VW's rate, text and parsed;
on dicts >= 3x River's.
A peer that is not installed is named in one line and left out.

    python benchmarks/bench_learn_one.py [--quick] [--output DIR]
"""
from __future__ import annotations

import tempfile
import time

import numpy as np
import scipy.sparse as sp

from asyos.benchmarking.common import Run, choose_profile, parser, print_table
from asyos.learners.stream.budgeted import BudgetedARDA
from asyos.learners.stream.stream_learners import warm_up

PROFILES = {
    "paper": {"n_samples": 300000, "n_features": 10000, "nnz_informative": 10, "nnz_other": 40,
              "n_informative": 200, "flip": 0.05, "budget": 100, "river_l1": 1e-4, "chunk": 16, "seed": 0},
    "quick": {"n_samples": 4000, "n_features": 10000, "nnz_informative": 10, "nnz_other": 40,
              "n_informative": 200, "flip": 0.05, "budget": 100, "river_l1": 1e-4, "chunk": 16, "seed": 0},
    "smoke": {"n_samples": 1000, "n_features": 2000, "nnz_informative": 10, "nnz_other": 40,
              "n_informative": 50, "flip": 0.05, "budget": 20, "river_l1": 1e-4, "chunk": 16, "seed": 0},
}
GOALS = {"asyos arrays": ("vw", 1.0), "asyos CSR rows": ("vw", 1.0), "asyos dicts": ("river", 3.0)}
PARSED_GOALS = {"asyos arrays": 1.0, "asyos CSR rows": 1.0}   # against VW's learning step on parsed examples


def make_stream(p):
    """``(X, y)``: CSR rows with distinct sorted columns, labels of a sparse linear model, some flipped."""
    rng = np.random.default_rng(p["seed"])
    n, d, k = p["n_samples"], p["n_features"], p["n_informative"]
    informative = rng.choice(d, k, replace=False)
    others = np.setdiff1d(np.arange(d), informative)
    a, b = p["nnz_informative"], p["nnz_other"]
    cols = np.empty((n, a + b), dtype=np.int64)
    for i in range(n):
        cols[i, :a] = informative[rng.choice(k, a, replace=False)]
        cols[i, a:] = others[rng.choice(others.size, b, replace=False)]
    cols.sort(axis=1)
    X = sp.csr_matrix((rng.standard_normal(n * (a + b)), cols.ravel(), np.arange(0, n * (a + b) + 1, a + b)),
                      shape=(n, d))
    w = np.zeros(d)
    w[informative] = rng.standard_normal(k)
    y = np.where(X @ w >= 0, 1.0, -1.0)
    y[rng.random(n) < p["flip"]] *= -1
    return X, y


def peers():
    """The installed peers, and one line for each one missing."""
    found = {}
    try:
        import vowpalwabbit
        found["vw"] = vowpalwabbit
    except ImportError:
        print("Vowpal Wabbit is not installed (pip install vowpalwabbit): its rows are left out")
    try:
        import river.linear_model
        found["river"] = river
    except ImportError:
        print("River is not installed (pip install river): its rows are left out")
    return found


class Timed:
    """One learner over the stream: seconds spent in its learning calls, and its right predictions."""

    def __init__(self, name, rows_kind, learn):
        self.name, self.rows_kind, self.learn = name, rows_kind, learn
        self.seconds, self.right, self.rows = 0.0, 0, 0


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    if args.output == "benchmarks/results":          # this benchmark's default: a fresh temporary directory
        args.output = tempfile.mkdtemp(prefix="asyos-learn-one-")
    profile = choose_profile(args, PROFILES)
    run = Run("learn_one", args, profile)
    found = peers()
    t0 = time.perf_counter()
    X, y = make_stream(profile)
    n, d = X.shape
    warm_up()
    print(f"stream: {n} rows x {d} features, {X.nnz / n:.0f} non-zeros per row, {np.mean(y > 0):.1%} positive "
          f"(made and row loops compiled in {time.perf_counter() - t0:.1f} s)\n", flush=True)
    budget = profile["budget"]
    ours = {"asyos arrays": BudgetedARDA(budget=budget), "asyos arrays, scale=None": BudgetedARDA(budget=budget,
                                                                                                  scale=None),
            "asyos CSR rows": BudgetedARDA(budget=budget), "asyos dicts": BudgetedARDA(budget=budget)}
    kinds = {"asyos CSR rows": "csr", "asyos dicts": "dicts"}
    learners = [Timed(name, kinds.get(name, "arrays"), model.learn_one) for name, model in ours.items()]
    if "vw" in found:
        vw, vw_eval = (found["vw"].Workspace("--quiet --loss_function logistic -b 18") for _ in range(2))
        learners.append(Timed("vowpal wabbit", "text", vw.learn))
        vw_parsed = found["vw"].Workspace("--quiet --loss_function logistic -b 18")
        learners.append(Timed("vowpal wabbit, parsed", "text", vw_parsed.learn))
    if "river" in found:
        river_model = found["river"].linear_model.LogisticRegression(l1=profile["river_l1"])
        learners.append(Timed("river", "dicts", river_model.learn_one))
    warm = X[:1].toarray()[0]                         # first calls (numba dispatch, River's set-up) untimed
    for model in (BudgetedARDA(budget=budget), BudgetedARDA(budget=budget, scale=None)):
        model.learn_one(warm, 1.0)
    BudgetedARDA(budget=budget).learn_one({"f0": 1.0}, 1.0)
    BudgetedARDA(budget=budget).learn_one(X[:1], 1.0)
    clock = time.perf_counter
    chunk = profile["chunk"]
    for start in range(0, n, chunk):
        block = X[start:start + chunk]
        labels = y[start:start + chunk]
        rows = {"arrays": block.toarray(), "csr": [block[r] for r in range(block.shape[0])], "dicts": [], "text": []}
        for r in range(block.shape[0]):
            lo, hi = block.indptr[r], block.indptr[r + 1]
            cols, vals = block.indices[lo:hi].tolist(), block.data[lo:hi].tolist()
            rows["dicts"].append({f"f{j}": v for j, v in zip(cols, vals)})
            rows["text"].append(f"{int(labels[r])} | " + " ".join(f"{j}:{v!r}" for j, v in zip(cols, vals)))
        for timed in learners:
            given, learn = rows[timed.rows_kind], timed.learn
            if timed.name == "river":                 # its prediction before learning, untimed
                for x, label in zip(given, labels):
                    timed.right += river_model.predict_one(x) == (label > 0)
                    t = clock()
                    learn(x, label > 0)
                    timed.seconds += clock() - t
            elif timed.name == "vowpal wabbit, parsed":      # parse and finish untimed: the step alone
                examples = [vw_parsed.parse(line) for line in given]
                t = clock()
                for example in examples:
                    learn(example)
                timed.seconds += clock() - t
                for example in examples:
                    vw_parsed.finish_example(example)
                timed.right = None
            elif timed.name == "vowpal wabbit":
                t = clock()
                for line in given:
                    learn(line)
                timed.seconds += clock() - t
                for line, label in zip(given, labels):
                    timed.right += (vw_eval.predict(line) >= 0) == (label > 0)
                    vw_eval.learn(line)
            else:
                t = clock()
                for x, label in zip(given, labels):
                    learn(x, label)
                timed.seconds += clock() - t
            timed.rows += len(given)
    for name, model in ours.items():
        timed = next(t for t in learners if t.name == name)
        timed.right = round(model.online_accuracy_ * model.n_samples_seen_)
    rates = {t.name: t.rows / t.seconds for t in learners}
    for timed in learners:
        goal = GOALS.get(timed.name)
        ratio = None
        if goal is not None:
            peer = {"vw": "vowpal wabbit", "river": "river"}[goal[0]]
            ratio = rates[timed.name] / rates[peer] if peer in rates else None
        run.unit({"learner": timed.name, "rows": timed.rows_kind, "n_samples": timed.rows, "seconds": timed.seconds,
                  "rows_per_s": rates[timed.name], "us_per_row": 1e6 / rates[timed.name],
                  "online_accuracy": None if timed.right is None else timed.right / timed.rows,
                  "goal": None if goal is None else f">= {goal[1]:g}x {goal[0]}", "ratio_to_goal_peer": ratio,
                  "goal_met": None if ratio is None else bool(ratio >= goal[1])})
    if "vowpal wabbit, parsed" in rates:
        for name, goal in PARSED_GOALS.items():
            mine = next(u for u in run.units if u["learner"] == name)
            mine["ratio_to_vw_parsed"] = rates[name] / rates["vowpal wabbit, parsed"]
            mine["goal_vw_parsed_met"] = bool(mine["ratio_to_vw_parsed"] >= goal)
    table = [[u["learner"], u["rows"] if u["learner"] != "vowpal wabbit, parsed" else "parsed",
              f"{u['rows_per_s']:.0f}", f"{u['us_per_row']:.2f}",
              "-" if u["online_accuracy"] is None else f"{u['online_accuracy']:.4f}",
              "" if u["goal"] is None else (f"{u['ratio_to_goal_peer']:.2f}x ({u['goal']}: "
                                            f"{'met' if u['goal_met'] else 'MISSED'})"
                                            if u["ratio_to_goal_peer"] is not None else f"{u['goal']}: no peer")
              + ("" if "ratio_to_vw_parsed" not in u else
                 f"; {u['ratio_to_vw_parsed']:.2f}x (>= {PARSED_GOALS[u['learner']]:g}x vw parsed: "
                 f"{'met' if u['goal_vw_parsed_met'] else 'MISSED'})")]
             for u in run.units]
    print_table(f"learn_one over {n} rows x {d} features ({X.nnz // n} non-zeros per row), one pass, same rows "
                f"for all: rows/s of the learning calls, progressive accuracy", ["learner", "rows", "rows/s",
                                                                                   "us / row", "online accuracy",
                                                                                   "goal"], table)
    maxabs_cost = rates["asyos arrays, scale=None"] / rates["asyos arrays"]
    print(f"scale='maxabs' (default) vs scale=None on arrays: {maxabs_cost:.2f}x the time")
    path = run.finish({"rows_per_s": rates, "online_accuracy": {u["learner"]: u["online_accuracy"] for u in run.units},
                       "maxabs_time_ratio": maxabs_cost, "peers_missing": [p for p in ("vw", "river")
                                                                             if p not in found],
                       "goals": {u["learner"]: {"goal": u["goal"], "ratio": u["ratio_to_goal_peer"],
                                                "met": u["goal_met"], "ratio_vw_parsed": u.get("ratio_to_vw_parsed"),
                                                "met_vw_parsed": u.get("goal_vw_parsed_met")}
                                 for u in run.units if u["goal"]}})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
