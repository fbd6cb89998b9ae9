"""The run record (what ``results.json`` holds) and the short human summary."""
from __future__ import annotations

import sys
import warnings as _warnings

import numpy as np

from .errors import ConvergenceWarning
from .process_stats import bytes_read, peak_rss_bytes
from .results import environment


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
    timing = f"  time {t['wall_s']:.2f} s"
    if "fit_s" in t:
        timing += f" (fit {t['fit_s']:.2f} s)"
    if "async_s" in t:
        timing += f" (asynchronous phase {t['async_s']:.2f} s)"
    lines.append(timing)
    if "n_workers" in record:
        st = record["staleness"]
        par = (f"  {record['n_workers']} workers; staleness mean {st['mean']:.2f}, p95 {st['p95']}, "
               f"max {st['max']}; refused pushes {record.get('refused_pushes', 0)}")
        if record.get("pushes_per_s") is not None:
            if record.get("simulated_time_s"):            # the engine simulated: its own clock
                par += f"; {record['pushes_per_s']:.0f} pushes/s of simulated time ({record['simulated_time_s']:.3f} s)"
            else:
                par += f"; {record['pushes_per_s']:.0f} {'simulated ' if record['mode'] == 'simulated' else ''}pushes/s"
        lines.append(par)
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
