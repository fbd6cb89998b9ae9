"""``python -m asyos.run --algorithm dfls``: fit a group-lasso or l_p model, add or remove a block of
its features by following the solution path (DFLS), and check the result against retraining.

* ``--add-features SPEC`` (default ``20%``): the model is fitted without the block, then the block
  is added; ``--remove-features SPEC``: fitted on every column, then the block is removed.
  ``SPEC`` is a list of 0-based column indices and ranges (``3,7-9``; with ``--group-size`` each
  named column brings its whole group) or a percentage (``20%``: that share of the columns, or of
  the groups with ``--group-size``, chosen at random by ``--seed``).
* ``--group-size K``: group lasso over consecutive groups of ``K`` columns (default 1, the lasso).
* ``--param penalty=lp,alpha=0.5,exponent=4``: the ``DFLS`` parameters (default group lasso,
  ``alpha = 0.2``).
* Without ``--data``: a synthetic regression problem, 1000 samples, 50 features of which 10 are
  true, noise 1 (``--n-samples``, ``--n-features``, ``--n-informative``, ``--noise`` change it).
  Without a test split, 30% of the rows (chosen by ``--seed``) are held out as the test set, as in
  the paper's protocol (App. D).

The same run retrains on the final columns (FISTA or L-BFGS to the paper's 1e-7, cold and warm)
and solves the final problem accurately as the reference, so the printed summary shows DFLS's
time next to retraining's and how far each is from the optimum. ``--output DIR`` writes
``results.json``, ``path.csv`` (theta and every coefficient along the path) and ``path.png`` (the
path, like the paper's App. C figures; needs matplotlib).

**Checkpoints** (``--output DIR``, ``asyos.records.resume``): the run has five phases (the initial fit, the
change along the path, the reference solve, the cold and the warm retrain). After each, when
``--checkpoint-every`` seconds have passed, the model (without its standardized columns, which are
data: they are rebuilt from ``X`` on resume, by the same computations, and checked against a SHA-256
of the saved run's) and the results of the phases done are saved; the group-lasso solves (the fit,
the reference and the retrains: FISTA, ``batch_solvers.fista``) are also saved between iterations,
where a stop request is answered. The path (the fast phase, DFLS's point) and the l_p solves
(scipy's L-BFGS keeps its state to itself) are one call each: SIGTERM/SIGINT stops them at once
and the run resumes from the last save. ``--resume DIR`` skips what was saved: the
results are the uninterrupted run's, bit for bit (the ``seconds`` of the phases aside).
"""
from __future__ import annotations

import csv
import math
import os
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..records.checkpoint import RunInterrupted
from ..records.results import atomic_file
from ..errors import InputError
from ..utils.timing import describe

DEFAULT_BLOCK = "20%"
HOLD_OUT = 0.3
SYNTHETIC_DEFAULTS = dict(n_samples=1000, n_features=50, n_informative=10, noise=1.0)
RETRAIN_TOL = 1e-7
CHECKPOINT_KIND = "dfls"


def parse_block(spec: str, n_units: int, seed: int) -> np.ndarray:
    """Units (columns, or groups) named by ``spec``: ``"3,7-9"`` or ``"20%"``."""
    text = str(spec).strip()
    if text.endswith("%"):
        try:
            share = float(text[:-1])
        except ValueError:
            raise InputError(f"a block of features is a list like 3,7-9 or a share like 20%; got {spec!r}") from None
        if not 0 < share < 100:
            raise InputError(f"the share of features to move must be in (0%, 100%); got {spec!r}")
        count = min(max(1, round(share / 100 * n_units)), n_units - 1)
        if n_units < 2:
            raise InputError("the data has a single feature (group); there is nothing to add or remove")
        return np.sort(np.random.default_rng(seed).choice(n_units, count, replace=False))
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise InputError(f"a block of features is a list like 3,7-9 or a share like 20%; got {spec!r}") from None
        if a < 0 or b < a:
            raise InputError(f"bad range {part!r} in {spec!r}")
        out.extend(range(a, b + 1))
    idx = np.unique(out)
    if idx.size == 0:
        raise InputError(f"no feature named in {spec!r}")
    if idx[-1] >= n_units:
        raise InputError(f"feature {idx[-1]} is out of range: the data has {n_units} features")
    if idx.size == n_units:
        raise InputError("the block names every feature; at least one must stay")
    return idx


def _load(config):
    from .problem import open_data_source
    if config.data is None:
        config = config.replace(**{k: v for k, v in SYNTHETIC_DEFAULTS.items() if getattr(config, k) is None})
        if config.synthetic != "regression":
            raise InputError("--algorithm dfls fits least squares: use --synthetic regression or --data")
    data = open_data_source(config).load()
    X = data.X.toarray() if sp.issparse(data.X) else np.asarray(data.X, dtype=float)
    y = np.asarray(data.y, dtype=float)
    if data.has_test:
        Xt = data.X_test.toarray() if sp.issparse(data.X_test) else np.asarray(data.X_test, dtype=float)
        return X, y, Xt, np.asarray(data.y_test, dtype=float), "given test split"
    order = np.random.default_rng(config.seed).permutation(y.size)
    cut = int(round((1 - HOLD_OUT) * y.size))
    if cut < 2 or cut == y.size:
        raise InputError(f"{y.size} samples are too few to hold out a test set")
    tr, te = order[:cut], order[cut:]
    return X[tr], y[tr], X[te], y[te], f"{HOLD_OUT:.0%} of the rows held out (seed {config.seed})"


def _rmse(model, X, y) -> float:
    return float(np.sqrt(np.mean((y - model.predict(X)) ** 2)))


def run_dfls(config) -> int:
    from .pipeline import carry_out
    return carry_out(config, DFLSRun())


@dataclass
class _Plan:
    """The data, the model to fit and the block to move."""
    model: object
    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    test_note: str
    direction: str
    labels: np.ndarray
    block: np.ndarray
    rest: np.ndarray

    @property
    def grouped(self) -> bool:
        return self.model.penalty == "group_lasso"

    def design(self, changed):
        """The standardized columns the model holds after ``fit`` (or after the change), rebuilt from ``X``
        by the same computations as the run's (``_columns`` of the same blocks)."""
        model, X = self.model, self.X
        if self.direction == "add":
            Z = model._columns(X[:, self.rest], "X")[0]
            return np.hstack([Z, model._columns(X[:, self.block], "X_new")[0]]) if changed else Z
        Z = model._columns(X, "X")[0]
        return Z[:, self.rest] if changed else Z


class DFLSRun:
    """The pipeline's part of ``--algorithm dfls``: fit, move the block along the path, solve the reference
    and retrain (cold and warm), each a checkpointed phase (``_Phases``)."""

    def check(self, config) -> None:
        if config.add_features is not None and config.remove_features is not None:
            raise InputError("give --add-features or --remove-features, not both")
        if "groups" in config.estimator_params:
            raise InputError("--param groups is not supported; use --group-size K")

    def load(self, config) -> _Plan:
        from ..learners.path.dfls import DFLS
        direction = "remove" if config.remove_features is not None else "add"
        spec = config.remove_features if direction == "remove" else (config.add_features or DEFAULT_BLOCK)
        model = DFLS(**config.estimator_params)
        model._check_params()
        X, y, X_test, y_test, test_note = _load(config)
        m, size = X.shape[1], config.group_size
        if size > 1 and model.penalty != "group_lasso":
            raise InputError("--group-size applies to the group lasso (--param penalty=group_lasso)")
        labels = np.arange(m) // size
        if str(spec).strip().endswith("%"):          # a share of the groups
            units = parse_block(spec, int(labels.max()) + 1, config.seed)
        else:                                         # columns, completed to whole groups
            units = np.unique(labels[parse_block(spec, m, config.seed)])
        block = np.flatnonzero(np.isin(labels, units))
        if block.size == m:
            raise InputError("the block's groups cover every feature; at least one must stay")
        return _Plan(model, X, y, X_test, y_test, test_note, direction, labels, block,
                     np.setdiff1d(np.arange(m), block))

    def fit(self, config, plan: _Plan) -> dict:
        from ..learners.path.dfls import DFLS
        model, X, y, labels, block, rest, grouped = (plan.model, plan.X, plan.y, plan.labels, plan.block, plan.rest,
                                                     plan.grouped)
        phases = _Phases(config, plan)
        if plan.direction == "add":
            start = phases.run("fit", lambda state, poll: model.set_params(groups=labels[rest] if grouped else None)
                               .fit(X[:, rest], y, state=state, between=poll).w_.copy(), iterations=True)
            phases.run("change", lambda: model.add_features(X[:, block], groups=labels[block] if grouped else None)
                       .path_)
            final = np.r_[rest, block]                 # the model's columns, in its order
            warm_start = np.r_[start, np.zeros(block.size)]
        else:
            start = phases.run("fit", lambda state, poll: model.set_params(groups=labels if grouped else None).fit(
                X, y, state=state, between=poll).w_.copy(), iterations=True)
            phases.run("change", lambda: model.remove_features(block).path_)
            final, warm_start = rest, start[rest]

        def solve_reference(state, poll):
            reference = DFLS(**{**model.get_params(), "groups": labels[final] if grouped else None}).fit(
                X[:, final], y, state=state, between=poll)
            return {"w": reference.w_, "kkt_residual": reference.kkt_residual_,
                    "test_rmse": _rmse(reference, plan.X_test[:, final], plan.y_test)}

        reference = phases.run("reference", solve_reference, iterations=True)
        cold = phases.run("retrain cold", lambda state, poll: model.batch_solve(tol=RETRAIN_TOL, state=state,
                                                                                between=poll), iterations=True)
        warm = phases.run("retrain warm", lambda state, poll: model.batch_solve(
            w0=warm_start, tol=RETRAIN_TOL, state=state, between=poll), iterations=True)
        return {"final": final, "reference": reference, "cold": cold, "warm": warm}

    def report(self, config, plan: _Plan, fitted: dict, clock, notes):
        from .pipeline import Outcome
        from ..records.results import environment
        from ..utils.timing import command_timing
        model, path, final, reference = plan.model, plan.model.path_, fitted["final"], fitted["reference"]
        m = plan.X.shape[1]
        coef = np.zeros(m)
        coef[final] = model.coef_
        record = {
            "algorithm": "dfls", "direction": plan.direction, "penalty": model.penalty, "alpha": float(model.alpha),
            "exponent": model.exponent_ if model.penalty == "lp" else None, "group_size": config.group_size,
            "n_samples": int(plan.X.shape[0]), "n_features": int(m), "block": plan.block, "test": plan.test_note,
            "dfls": {"seconds": path.seconds, "kkt_residual": model.kkt_residual_,
                     "kkt_residual_path": path.kkt_residual_path, "phase1_theta": path.phase1_theta,
                     "transitions": path.transitions, "rhs_evaluations": path.n_rhs, "newton_steps": path.n_newton,
                     "fallback": path.fallback, "test_rmse": _rmse(model, plan.X_test[:, final], plan.y_test)},
            "reference": {"test_rmse": reference["test_rmse"],
                          "max_coef_difference": float(np.max(np.abs(model.w_ - reference["w"]))),
                          "kkt_residual": reference["kkt_residual"]},
            "retrain_cold": _retrain_record(fitted["cold"], reference),
            "retrain_warm": _retrain_record(fitted["warm"], reference),
            "coef": coef, "intercept": model.intercept_, "support": np.flatnonzero(coef),
            "config": config.as_dict(), "environment": environment(),
            "wall_s": time.perf_counter() - clock.started,
            "timing": command_timing(clock.started, load_s=clock.load_s,
                                     fit_s=time.perf_counter() - clock.started - clock.load_s),
        }

        def files(output):
            thetas, coefs = path.sample()
            names = [f"w{c}" for c in (np.r_[plan.rest, plan.block] if plan.direction == "add" else np.arange(m))]
            with atomic_file(os.path.join(output, "path.csv"), newline="") as fh:
                writer = csv.writer(fh)
                writer.writerow(["theta", *names])
                writer.writerows([[f"{t:.10g}", *(f"{v:.10g}" for v in row)] for t, row in zip(thetas, coefs)])
            plot_path(path, os.path.join(output, "path.png"),
                      f"DFLS {plan.direction}: {model.penalty}, alpha = {model.alpha:g}")
            return ["path.csv", "path.png"]

        return Outcome(record, _summary(record), save_model=lambda: _save_model(config, record, model, final),
                       files=files)


class _Phases:
    """The run's phases, each done once: skipped when the resumed run did it, saved after it when
    ``--checkpoint-every`` says so. A phase of FISTA ``iterations`` (the group-lasso solves) also saves
    between iterations and answers a stop request at the next; the others (the path, and the l_p solves)
    are one call each, stopped at once by a signal, and resume from the last save."""

    def __init__(self, config, plan: _Plan):
        from ..records.resume import checkpointer_for, with_progress
        self.plan, self.model = plan, plan.model
        self.checkpoint = with_progress(checkpointer_for(config), "dfls")
        saved = self.checkpoint.take(CHECKPOINT_KIND) if self.checkpoint is not None else None
        self.done = {} if saved is None else saved["phases"]
        self.inside = {} if saved is None or saved.get("inside") is None else dict([saved["inside"]])
        self.where = None                   # (phase, solver state) while inside an iterated phase
        if saved is not None:
            self.model.__dict__.update(saved["model"])
            self.model._store_design(plan.design("change" in self.done))
            if _digest(self.model.X_) != saved["design"]:
                raise InputError(f"checkpoint {self.checkpoint.path}: the data's columns differ from the saved "
                                 f"run's; rerun without --resume")

    def progress(self) -> dict:
        done = {"phases done": ", ".join(self.done) or "none"}
        if self.where is None:
            return done
        name, state = self.where
        return {**done, "in": f"{name}, iteration {(state['fista'] if 'fista' in state else state)['k']}"}

    def capture(self) -> dict:
        return {"phases": self.done, "model": {k: v for k, v in self.model.__dict__.items() if k != "_design"},
                "design": _digest(self.model.X_), "inside": self.where}

    def between(self, name):
        def poll(state):
            self.where = (name, state)
            self.checkpoint.poll(CHECKPOINT_KIND, self.capture, self.progress)
        return poll

    def run(self, name, compute, iterations=False):
        checkpoint = self.checkpoint
        if name not in self.done:
            polled = iterations and checkpoint is not None and self.plan.grouped
            try:
                if polled:
                    with checkpoint.watching():
                        self.done[name] = compute(self.inside.pop(name, None), self.between(name))
                else:
                    self.done[name] = compute(None, None) if iterations else compute()
            except RunInterrupted as exc:
                if exc.path is not None:
                    raise
                kept = checkpoint is not None and os.path.exists(checkpoint.path)
                raise RunInterrupted(exc.signum, checkpoint.path if kept else None, self.progress()) from None
            self.where = None
            if checkpoint is not None:
                checkpoint.poll(CHECKPOINT_KIND, self.capture, self.progress)
        return self.done[name]


def _save_model(config, record, model, final) -> None:
    """``--save-model FILE``: the final model over the global columns (``model``'s own columns are
    ``final``, in its order), with its standardization (``x_mean_``, ``x_scale_``) and weights on it."""
    from ..records.model_file import save_run_model
    support = np.asarray(record["support"], dtype=np.intp)
    position = np.empty(record["n_features"], dtype=np.intp)
    position[final] = np.arange(len(final))
    at = position[support]
    spread = np.asarray(model.x_scale_, dtype=float)[at]
    scaling = {"kind": "standard", "offsets": np.asarray(model.x_mean_, dtype=float)[at],
               "scales": np.divide(1.0, spread, out=np.zeros(at.size), where=spread > 0),
               "raw_coef": np.asarray(model.w_, dtype=float)[at]}
    run = {"algorithm": "dfls", "problem": {"loss": "squared", "n_features": record["n_features"]},
           "selected": support, "coef": np.asarray(record["coef"])[support], "intercept": record["intercept"]}
    if save_run_model(config, run, model, scaling=scaling, estimator_columns=np.asarray(final, dtype=np.int64)):
        record["model"] = config.save_model


def _retrain_record(result, reference) -> dict:
    return {"seconds": result.seconds, "iterations": result.n_iter, "converged": result.converged,
            "kkt_residual": result.kkt_residual,
            "max_coef_difference": float(np.max(np.abs(result.coef - reference["w"])))}


def _digest(Z) -> str:
    """A checksum of the model's standardized columns (checked when they are rebuilt on resume)."""
    import hashlib
    return hashlib.sha256(np.ascontiguousarray(Z).tobytes()).hexdigest()


def _summary(r) -> str:
    d, c, w = r["dfls"], r["retrain_cold"], r["retrain_warm"]
    moved = len(r["block"])
    what = f"{r['penalty']}" + (f" (p = {r['exponent']:g})" if r["exponent"] else "") + \
        (f", groups of {r['group_size']}" if r["group_size"] > 1 else "")
    lines = [
        f"asyos dfls: {r['direction']} {moved} of {r['n_features']} features; {what}, alpha = {r['alpha']:g}; "
        f"n = {r['n_samples']} ({r['test']})",
        f"  DFLS          {d['seconds'] * 1e3:9.2f} ms   KKT residual {d['kkt_residual']:.1e} "
        f"(path before the last Newton step {d['kkt_residual_path']:.1e}), {len(d['transitions'])} transition points, "
        f"{d['rhs_evaluations']} ODE evaluations{', FINISHED BY FISTA' if d['fallback'] else ''}",
        f"  retrain warm  {w['seconds'] * 1e3:9.2f} ms   ({w['iterations']} iterations, tol {RETRAIN_TOL:g}) "
        f"= {_ratio(w['seconds'], d['seconds'])} DFLS",
        f"  retrain cold  {c['seconds'] * 1e3:9.2f} ms   ({c['iterations']} iterations) = "
        f"{_ratio(c['seconds'], d['seconds'])} DFLS",
        f"  max |w - optimum|: DFLS {r['reference']['max_coef_difference']:.1e}, warm {w['max_coef_difference']:.1e}, "
        f"cold {c['max_coef_difference']:.1e}",
        f"  test RMSE: DFLS {d['test_rmse']:.6g}, optimum {r['reference']['test_rmse']:.6g}; "
        f"{len(r['support'])} non-zero coefficients",
    ]
    if d["phase1_theta"] is not None:
        lines.append(f"  Phase I (eq. 7) ended at theta = {d['phase1_theta']:.4g}")
    lines.append("  " + describe(r["timing"]) + " (fitting: the first fit, DFLS and both retrainings)")
    return "\n".join(lines)


def _ratio(a, b) -> str:
    return f"{a / b:.1f}x" if b > 0 and math.isfinite(a / b) else "-"


def plot_path(path, filename, title) -> bool:
    """The coefficients along theta, transition points marked (the paper's App. C figures)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(matplotlib is not installed: no plot written to {filename})")
        return False
    thetas, coefs = path.sample(301)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for j in range(coefs.shape[1]):
        if np.any(coefs[:, j]):
            ax.plot(thetas, coefs[:, j], lw=1.2, color="tab:red" if path.moving[j] else "tab:blue", alpha=0.85)
    for t in path.transition_thetas:
        ax.axvline(t, color="0.6", lw=0.6, ls=":")
    ax.axhline(0, color="k", lw=0.5)
    ax.set_xlabel("theta (0: without the block, 1: with it)")
    ax.set_ylabel("coefficient (standardized)")
    ax.set_title(f"{title}\nred: the block's features, blue: the others; dotted: transition points", fontsize=9)
    fig.tight_layout()
    from ..records.results import atomic_file
    with atomic_file(filename, "wb") as fh:
        fig.savefig(fh, dpi=110, format="png")
    plt.close(fig)
    return True
