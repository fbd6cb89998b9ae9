"""The run record (what ``results.json`` holds) and the short human summary."""
from __future__ import annotations

import sys
import warnings as _warnings

import numpy as np

from ..errors import ConvergenceWarning
from ..utils.process_stats import bytes_read, peak_rss_bytes
from ..records.results import environment
from ..utils.timing import describe


def build_record(config, problem, mode, selected, coef, metrics, timing, warnings=(), **extra) -> dict:
    """``selected`` are global feature indices (sorted) and ``coef`` their coefficients."""
    record = {
        "algorithm": "asy-os" if mode == "mpi" or (mode == "simulated" and config.algorithm in ("os", "asy-os"))
        else config.algorithm,
        "mode": mode,
        "config": config.as_dict(),
        "problem": {
            "name": problem.name,
            "n_samples": problem.n_samples,
            "n_features": problem.n_features,
            "budget": problem.budget,
            "loss": problem.loss.name,
        },
        "selected": np.asarray(selected, dtype=np.int64).tolist(),
        "coef": np.asarray(coef, dtype=float).tolist(),
        "metrics": metrics,
        "timing": timing,
        "warnings": list(warnings),
    }
    record.update(extra)
    # this process's (the central rank's under MPI; each worker's are in ``workers``)
    record["resources"] = {"peak_rss_bytes": peak_rss_bytes(), "bytes_read": bytes_read()}
    record["environment"] = environment()
    return record


def format_summary(record: dict) -> str:
    m, t, pr = record["metrics"], record["timing"], record["problem"]
    err_name = "RMSE" if pr["loss"] == "squared" else "error rate"
    variant = f", variant {record['variant']}" if record.get("variant") else ""
    lines = [f"asyos: {record['algorithm']} ({record['mode']}) on {pr['name']}, loss {pr['loss']}, "
             f"budget {pr['budget']}{variant}"]
    quality = [f"selected {m['n_selected']} features"]
    if "recall" in m:
        quality.append(f"recall {m['recall']:.3f}")
    if "recovery_error" in m:
        quality.append(f"recovery error {m['recovery_error']:.4f}")
    quality.append(f"objective {m['objective']:.5g}")
    if "train_error" in m:
        quality.append(f"train {err_name} {m['train_error']:.4g}")
    if "test_error" in m:
        quality.append(f"test {err_name} {m['test_error']:.4g}")
    lines.append("  " + "; ".join(quality))
    if record.get("ridge_scores"):                     # --ridge auto chose
        scores = ", ".join(f"{float(a):g}: {v:.4g}" for a, v in record["ridge_scores"].items())
        lines.append(f"  ridge {record['ridge']:g}, chosen by cross-validation (mean held-out loss at the best "
                     f"scale {scores})")
    lines.append("  " + describe(t))
    if "n_workers" in record:
        unit = "versions of u_C" if record["algorithm"] == "asy-os" else "versions of the shared model"
        par = f"  {record['n_workers']} workers; refused pushes {record.get('refused_pushes', 0)}"
        if record.get("pushes_per_s") is not None:
            if record.get("simulated_time_s"):            # the engine simulated: its own clock
                par += f"; {record['pushes_per_s']:.0f} pushes/s of simulated time ({record['simulated_time_s']:.3f} s)"
            else:
                par += f"; {record['pushes_per_s']:.0f} {'simulated ' if record['mode'] == 'simulated' else ''}pushes/s"
        lines.append(par)
        lines.append("  " + staleness_line(record["staleness"], unit))
        if record.get("budget_mode") == "split":
            lines.append("  budget split: s/q per worker")
        elif record.get("budget_mode") == "global":
            how = "exchanged down" if record.get("finish") == "exchange" else "cut"
            budget = f"  budget global: {record.get('n_candidates')} candidates {how} to {len(record['selected'])}"
            if record.get("threshold") is not None:
                budget += f"; theta {record['threshold']:.4g} (slack {record['slack']:g}), " \
                          f"{record.get('n_dropped', 0)} features dropped"
            lines.append(budget)
    shown = record["selected"][:12]
    more = len(record["selected"]) - len(shown)
    lines.append(f"  features: {', '.join(map(str, shown))}{f' ... (+{more})' if more > 0 else ''}")
    return "\n".join(lines)


STALENESS_BUCKETS = (0, 1, 4, 16, 64, 256, 1024)     # powers of 4: a long tail stays one short line


def histogram_counts(hist) -> np.ndarray:
    """A staleness histogram as counts by staleness: the list the engine and the Asy-OS simulator
    write, or the sample-stream simulator's ``{staleness: count}`` (string keys once read from JSON)."""
    if isinstance(hist, dict):
        counts = np.zeros(max(map(int, hist), default=0) + 1, dtype=np.int64)
        for k, c in hist.items():
            counts[int(k)] = c
        return counts
    return np.asarray(hist if hist else [0], dtype=np.int64)


def staleness_line(st: dict, unit: str) -> str:
    """The staleness distribution, readable: its unit, the percentiles, why the mean may exceed the
    95th percentile, and the share of steps in buckets 0, 1-3, 4-15, ... (powers of 4)::

        staleness (versions of u_C a read was behind): median 0, p95 2, p99 9, max 2437;
        mean 7.78, above p95: 1.2% of steps were more than 2 behind; 0: 61%, 1-3: 35%, 4-15: 3.4%, ...
    """
    counts = histogram_counts(st.get("histogram"))
    total = int(counts.sum())
    text = f"staleness ({unit} a read was behind):"
    if total == 0:
        return f"{text} no steps recorded"
    pct = "median {}, ".format(st["median"]) if "median" in st else ""
    text += f" {pct}p95 {st['p95']}" + (f", p99 {st['p99']}" if "p99" in st else "") + f", max {st['max']}"
    text += f"; mean {st['mean']:.2f}"
    if st["mean"] > st["p95"]:
        tail = counts[st["p95"] + 1:].sum() / total
        text += f" (above p95: {_share(tail)} of steps were more than {st['p95']} behind)"
    edges = [e for e in STALENESS_BUCKETS if e <= st["max"]] + [st["max"] + 1]
    shares = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        count = counts[lo:hi].sum()
        if count:
            label = str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}"
            shares.append(f"{label}: {_share(count / total)}")
    return text + "; " + ", ".join(shares)


def _share(fraction: float) -> str:
    return f"{100 * fraction:.2g}%" if fraction < 0.1 else f"{100 * fraction:.0f}%"


def report_warnings(caught) -> list:
    """Print the run's ``ConvergenceWarning``s as ``asyos: warning:`` lines; return their texts.

    ``caught`` is the list from ``warnings.catch_warnings(record=True)`` around a fit (a warning
    repeated, e.g. by every simulated worker, is reported once); other warnings are shown as
    Python would have shown them."""
    notes = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)))
    for note in notes:
        print(f"asyos: warning: {note}", file=sys.stderr, flush=True)
    for w in caught:
        if not issubclass(w.category, ConvergenceWarning):
            _warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return notes
