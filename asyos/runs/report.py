"""A picture of a finished run: ``DIR/run.png`` from ``DIR/results.json`` and ``DIR/selection_log.csv``.

``python -m asyos.report DIR [--output FILE.png]`` draws it again; every ``--output DIR`` run of
``python -m asyos.run`` draws it at its end (``draw_after_run``; a failure to draw never fails the run:
one warning line). ``panels(record, log, directory)`` decides what is drawn, only what the run has data
for:

* ``progress_time`` / ``progress_steps``: the training objective and error of ``u_C`` against time and
  against worker steps (``trace`` of OS, the simulator and the MPI central rank, ``asyos.learners.trace``);
* ``stream_learning`` / ``stream_support``: a sample-stream learner's mistake rate before learning each
  sample (per interval and over everything seen) and its support size with the features entering and
  leaving, against the rows seen (``StreamTrace``);
* ``selection_count`` / ``selection_raster``: the number of features held against each worker's step,
  and one line per feature ever selected, from its entry to its exit (``selection_log.csv``);
* ``staleness`` / ``workers``: parallel runs: the staleness histogram (versions of ``u_C`` a step's read
  missed, counts on a log scale) and the steps of each worker;
* ``dfls_path``: DFLS, the coefficients along the solution path (``path.csv``);
* ``coefficients``: the model, ``|coef|`` of the selected features (in the grid's free place, if any).

matplotlib is optional (``pip install 'asyos[plot]'``): without it nothing is drawn and one line says so.
The Agg backend is used, never a display; the PNG is written atomically (``results.atomic_file``).
"""
from __future__ import annotations

import csv
import json
import os
import sys

import numpy as np

from ..errors import InputError
from .summary import histogram_counts

PICTURE = "run.png"
NO_MATPLOTLIB = "matplotlib is not installed (pip install 'asyos[plot]')"
MAX_RASTER_FEATURES = 300       # features shown in the raster (the final selection first, then the busiest)


class NoMatplotlib(RuntimeError):
    pass


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError:
        raise NoMatplotlib(NO_MATPLOTLIB) from None
    return plt


# ----------------------------------------------------------------------------------------- data
def read_run(directory: str):
    """``(record, log rows as dicts or None)`` of the run in ``directory``."""
    path = os.path.join(directory, "results.json")
    try:
        with open(path) as fh:
            record = json.load(fh)
    except FileNotFoundError:
        raise InputError(f"{directory!r} holds no results.json (not the --output of a finished run)") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {path!r}: {exc}") from None
    log = None
    log_path = os.path.join(directory, "selection_log.csv")
    if os.path.exists(log_path):
        with open(log_path, newline="") as fh:
            log = list(csv.DictReader(fh))
    return record, log


def _trace(record):
    trace = record.get("trace")
    return trace if isinstance(trace, dict) and trace.get("time_s") else None


def _is_stream_trace(trace) -> bool:
    return trace is not None and trace.get("kind") == "stream"


def _workers(record):
    workers = record.get("workers")
    return workers if isinstance(workers, list) and workers and "steps" in workers[0] else None


def panels(record: dict, log=None, directory=None) -> list:
    """The names of the panels a run's data supports (module docstring), in drawing order."""
    out = []
    trace = _trace(record)
    if trace is not None and _is_stream_trace(trace):
        if any(m is not None for m in trace.get("mistakes", ())):
            out.append("stream_learning")
        out.append("stream_support")
    elif trace is not None and len(trace["time_s"]) >= 1:
        out += ["progress_time", "progress_steps"]
    if log and not _is_stream_trace(trace):
        out.append("selection_count")
    if log:
        out.append("selection_raster")
    staleness = record.get("staleness")
    if isinstance(staleness, dict) and histogram_counts(staleness.get("histogram")).sum() > 0:
        out.append("staleness")
    if _workers(record) is not None:
        out.append("workers")
    if record.get("algorithm") == "dfls" and directory and os.path.exists(os.path.join(directory, "path.csv")):
        out.append("dfls_path")
    if len(out) % 2 == 1 or not out:            # alone, or in the free place of the grid
        if len(record.get("coef") or ()) > 0:
            out.append("coefficients")
    return out


def title(record: dict) -> str:
    """Algorithm, mode, data, budget; the result (recall, errors)."""
    if record.get("algorithm") == "dfls":
        d, ref = record.get("dfls", {}), record.get("reference", {})
        return (f"dfls ({record.get('direction')}, {record.get('penalty')}, alpha {record.get('alpha'):g}) on "
                f"{record.get('n_samples')} x {record.get('n_features')}; {len(record.get('support', []))} non-zero; "
                f"test RMSE {_g(d.get('test_rmse'))} (retrained {_g(ref.get('test_rmse'))}); "
                f"path {_g(d.get('seconds'))} s" + _time_line(record))
    pr, m = record.get("problem", {}), record.get("metrics", {})
    head = f"{record.get('algorithm')} ({record.get('mode')}"
    if record.get("n_workers"):
        head += f", {record['n_workers']} workers"
    if record.get("transport"):
        head += f", {record['transport']}"
    head += f") on {pr.get('name')}: n = {pr.get('n_samples')}, p = {pr.get('n_features')}, " \
            f"budget {pr.get('budget')}, loss {pr.get('loss')}"
    err = "RMSE" if pr.get("loss") == "squared" else "error rate"
    result = [f"selected {m.get('n_selected', len(record.get('selected', [])))}"]
    for key, name in (("recall", "recall"), ("train_error", f"train {err}"), ("test_error", f"test {err}")):
        if m.get(key) is not None:
            result.append(f"{name} {_g(m[key])}")
    return head + "\n" + "; ".join(result) + _time_line(record)


def _time_line(record) -> str:
    """The summary's time line, word for word (a third line of the title), where the record has it."""
    timing = record.get("timing") or {}
    if "command_s" not in timing and "wall_s" not in timing:
        return ""
    from ..utils.timing import describe
    return "\n" + describe(timing)


def _g(value) -> str:
    return "-" if value is None else (f"{value:.4g}" if isinstance(value, (int, float)) else str(value))


# -------------------------------------------------------------------------------------- drawing
def draw_run(directory: str, output=None):
    """Draw ``directory``'s run into ``output`` (default ``DIR/run.png``); returns the path, or ``None``
    when there is nothing to draw. Raises ``NoMatplotlib`` without matplotlib, ``InputError`` when
    ``directory`` holds no run."""
    record, log = read_run(directory)
    names = panels(record, log, directory)
    if not names:
        return None
    plt = _pyplot()
    output = output or os.path.join(directory, PICTURE)
    columns = 2 if len(names) > 1 else 1
    rows = (len(names) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(6.4 * columns, 3.6 * rows + 0.85), squeeze=False)
    for ax, name in zip(axes.ravel(), names):
        DRAW[name](ax, record, log, directory)
    for ax in axes.ravel()[len(names):]:
        ax.set_visible(False)
    for ax in fig.axes:              # twin axes included: the log axes' minor ticks cost 0.25-0.3 s a picture
        ax.minorticks_off()
    fig.suptitle(title(record), fontsize=10)
    _fixed_layout(fig, rows, columns)
    from ..records.results import atomic_file
    with atomic_file(output, "wb") as fh:
        fig.savefig(fh, format="png", dpi=90)
    plt.close(fig)
    return output


# Margins and gaps in inches, room for what every panel puts there: tick labels and a label on the
# left, a twin axis's on the right, a two-line panel title above and an axis label below; the top
# also holds the three-line title of the run. Fixed rather than ``tight_layout``, which measures every
# text by drawing the figure once more: 0.9 of the 2.1 s of CPU a four-panel picture took (measured).
# A panel's title at a fixed height (the top of the axes, where matplotlib puts it when no tick labels
# are there): placed automatically, each title measures its axes' tick labels at every draw; fixed,
# ``python -m asyos.report`` on an arcene run takes 2.6 s of CPU instead of 2.9 (4 runs each).
TITLE = {"fontsize": 9, "y": 1.0}
LAYOUT_IN = {"left": 0.85, "right": 0.85, "bottom": 0.6, "top": 1.0, "wspace": 1.75, "hspace": 1.05}


def _fixed_layout(fig, rows: int, columns: int) -> None:
    width, height = fig.get_size_inches()
    m = LAYOUT_IN
    axes_width = (width - m["left"] - m["right"] - (columns - 1) * m["wspace"]) / columns
    axes_height = (height - m["bottom"] - m["top"] - (rows - 1) * m["hspace"]) / rows
    fig.subplots_adjust(left=m["left"] / width, right=1 - m["right"] / width, bottom=m["bottom"] / height,
                        top=1 - m["top"] / height, wspace=m["wspace"] / axes_width,
                        hspace=m["hspace"] / axes_height)


def _error_name(record) -> str:
    return "train RMSE" if (record.get("problem") or {}).get("loss") == "squared" else "train error rate"


def _progress(ax, record, x_key, x_label):
    trace = record["trace"]
    x = np.asarray(trace[x_key], dtype=float)
    objective = np.asarray([np.nan if v is None else v for v in trace["objective"]], dtype=float)
    error = np.asarray([np.nan if v is None else v for v in trace["train_error"]], dtype=float)
    ax.plot(x, objective, color="tab:blue", marker="." if x.size < 40 else None, label="objective L(u_C)")
    ax.set_xlabel(x_label)
    ax.set_ylabel("objective", color="tab:blue")
    if np.all(objective[np.isfinite(objective)] > 0) and np.isfinite(objective).sum() > 1:
        ax.set_yscale("log")
    twin = ax.twinx()
    twin.plot(x, error, color="tab:orange", linestyle="--", label=_error_name(record))
    twin.set_ylabel(_error_name(record), color="tab:orange")
    test = (record.get("metrics") or {}).get("test_error")
    if test is not None and x.size:             # the final model's score on the test split, where there is one
        name = _error_name(record).replace("train", "test")
        twin.plot([x[-1]], [test], color="tab:red", marker="*", markersize=10, linestyle="none",
                  label=f"{name} of the final model {_g(test)}")
        twin.annotate(f"test {_g(test)}", (x[-1], test), textcoords="offset points", xytext=(-8, 6),
                      ha="right", fontsize=7, color="tab:red")
        error = np.append(error, test)          # the axis' range and scale take it in
    finite = error[np.isfinite(error)]
    if finite.size > 1 and finite.min() > 0 and finite.max() > 10 * finite.min():
        twin.set_yscale("log")
    every = trace.get("every")
    ax.set_title(f"training objective and error of u_C ({len(x)} rows, "
                 f"{'automatic trace' if every == 'auto' else f'every {every} steps'})", **TITLE)
    ax.grid(alpha=0.3)


def _progress_time(ax, record, log, directory):
    _progress(ax, record, "time_s", "time since the start of the fit (s)")


def _progress_steps(ax, record, log, directory):
    _progress(ax, record, "steps", "worker steps applied to u_C (all workers)")


def _stream_learning(ax, record, log, directory):
    trace = record["trace"]
    rows = np.asarray(trace["rows"], dtype=float)
    mistakes = np.asarray([np.nan if v is None else v for v in trace["mistakes"]], dtype=float)
    total = mistakes / np.maximum(rows, 1)
    drows, dmis = np.diff(rows), np.diff(mistakes)
    ok = drows > 0
    recent = np.where(ok, dmis / np.where(ok, drows, 1), np.nan)
    ax.step(rows[1:], recent, where="pre", color="tab:orange", label="between two rows of the trace")
    ax.plot(rows, total, color="tab:blue", label="over every sample seen")
    ax.set_xlabel("samples seen (all passes)" + _passes_note(record))
    ax.set_ylabel("mistake rate before learning")
    ax.set_title("online (progressive) mistake rate", **TITLE)
    _pass_marks(ax, trace)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)


def _pass_marks(ax, trace):
    """The start of each pass over the samples, dotted (when there are few enough to see)."""
    passes = np.asarray(trace["pass"])
    rows = np.asarray(trace["rows"], dtype=float)
    if passes.size and passes[-1] <= 20:
        for i in np.flatnonzero(np.diff(passes) > 0):
            ax.axvline(rows[i], color="grey", linewidth=0.7, linestyle=":")


def _passes_note(record) -> str:
    passes = record.get("n_passes") or (int(record["trace"]["pass"][-1]) + 1 if record["trace"]["pass"] else None)
    n = (record.get("problem") or {}).get("n_samples")
    return f" ({passes} passes over {n} samples)" if passes and n else ""


def _stream_support(ax, record, log, directory):
    trace = record["trace"]
    rows = np.asarray(trace["rows"], dtype=float)
    drows = np.maximum(np.diff(rows), 1)
    entered = 1000 * np.diff(trace["entered"]) / drows
    left = 1000 * np.diff(trace["left"]) / drows
    ax.step(rows[1:], entered, where="pre", color="tab:green", label="entering")
    ax.step(rows[1:], -left, where="pre", color="tab:red", label="leaving (negative)")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xlabel("samples seen (all passes)" + _passes_note(record))
    ax.set_ylabel("features per 1000 samples")
    support = np.asarray(trace["support"])
    budget = (record.get("problem") or {}).get("budget")
    if support.size and support.min() != support.max():
        twin = ax.twinx()
        twin.plot(rows, support, color="tab:blue", label="support size")
        if budget:
            twin.axhline(budget, color="tab:blue", linestyle=":", linewidth=0.8)
        twin.set_ylabel("support size", color="tab:blue")
        held = f"support {support.min()}-{support.max()}"
    else:
        held = f"support {support[-1] if support.size else 0} throughout"
    if len(rows) > 1 and max(np.abs(entered).max(), np.abs(left).max()) > 0:
        ax.set_yscale("symlog", linthresh=1)
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(f"selection over the stream: {trace['entered'][-1]} entries, {trace['left'][-1]} exits, {held}",
                 **TITLE)
    _pass_marks(ax, trace)
    ax.grid(alpha=0.3)


def _log_arrays(log):
    worker = np.asarray([int(r["worker"]) for r in log])
    step = np.asarray([float(r["step"]) for r in log])
    feature = np.asarray([int(r["feature"]) for r in log])
    enter = np.asarray([r["event"] == "enter" for r in log])
    return worker, step, feature, enter


def _step_label(record, stream) -> str:
    if stream:
        return "samples seen"
    return "the worker's own step" if record.get("n_workers") else "step"


def _worker_name(record, worker) -> str:
    """Under MPI worker ``k`` is rank ``k + 1`` (the name the per-worker panel uses)."""
    return f"rank {worker + 1}" if _workers(record) is not None else f"worker {worker}"


def _selection_count(ax, record, log, directory):
    worker, step, feature, enter = _log_arrays(log)
    workers = np.unique(worker)
    twin = ax.twinx()
    for i, w in enumerate(workers):
        mine = worker == w
        order = np.argsort(step[mine], kind="stable")
        held = np.cumsum(np.where(enter[mine][order], 1, -1))
        color = f"C{i % 10}"
        ax.step(step[mine][order], held, where="post", linewidth=1.2, color=color,
                label=_worker_name(record, w) if len(workers) > 1 else "features held")
        twin.step(step[mine][order], np.cumsum(~enter[mine][order]), where="post", linewidth=0.8, color=color,
                  linestyle="--")
    twin.set_ylabel("exits so far (dashed)")
    _steps_axis(ax, record, log)
    ax.set_ylabel("features held (solid)")
    n_enter, n_leave = int(enter.sum()), int((~enter).sum())
    ax.set_title(f"features held ({n_enter} entries, {n_leave} exits, {np.unique(feature).size} distinct)",
                 **TITLE)
    if 1 < len(workers) <= 16:
        ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)


def _steps_axis(ax, record, log):
    """A worker-step x axis: logarithmic beyond 10 steps (most entries and exits come early), the
    start of each pass over the features dotted (worker 0's)."""
    ax.set_xscale("symlog", linthresh=10)
    ax.set_xlabel(_step_label(record, False) + " (log scale beyond 10)")
    first = {}
    for row in log:
        if row["worker"] == "0" and row.get("pass", "") != "":
            first.setdefault(int(row["pass"]), float(row["step"]))
    starts = sorted(first.items())[1:]
    for i, (k, at) in enumerate(starts):
        ax.axvline(at, color="grey", linewidth=0.7, linestyle=":")
        if i in (0, len(starts) - 1):                   # the first and the last named (log axis: crowded)
            ax.text(at, ax.get_ylim()[1], f" pass {k + 1}", fontsize=7, va="top", color="grey",
                    ha="left" if i == 0 else "right")
    ax.grid(alpha=0.3)


def _selection_raster(ax, record, log, directory):
    from matplotlib.collections import LineCollection
    worker, step, feature, enter = _log_arrays(log)
    stream = _is_stream_trace(_trace(record))
    final = set(record.get("selected") or record.get("support") or [])
    end = float(step.max()) if step.size else 1.0
    if stream:
        end = float(record["trace"]["rows"][-1])
    elif record.get("workers"):
        end = max(end, max(float(w["steps"]) for w in record["workers"]))
    elif not record.get("n_workers") and _trace(record) is not None:
        end = max(end, float(record["trace"]["steps"][-1]))
    distinct, first = np.unique(feature, return_index=True)
    events = np.bincount(np.searchsorted(distinct, feature), minlength=distinct.size)
    # the final selection first, then the features with the most entries/exits, each group by first entry
    kept = np.asarray([f in final for f in distinct])
    rank = np.lexsort((step[first], -events, ~kept))
    shown = distinct[rank[:MAX_RASTER_FEATURES]]
    row_of = {int(f): i for i, f in enumerate(shown)}
    segments = {True: [], False: []}
    opened = {}
    for s, f, e in sorted(zip(step.tolist(), feature.tolist(), enter.tolist())):
        if f not in row_of:
            continue
        if e:
            opened[f] = s
        elif f in opened:
            segments[f in final].append([(opened.pop(f), row_of[f]), (s, row_of[f])])
    for f, s in opened.items():
        segments[f in final].append([(s, row_of[f]), (end, row_of[f])])
    ax.add_collection(LineCollection(segments[False], colors="tab:gray", linewidths=1.2, label="held, then left"))
    ax.add_collection(LineCollection(segments[True], colors="tab:blue", linewidths=1.2, label="in the final model"))
    mask = np.isin(feature, shown)
    ys = np.asarray([row_of.get(int(f), -1) for f in feature[mask]])
    ax.scatter(step[mask][enter[mask]], ys[enter[mask]], marker="|", s=12, color="tab:green", label="entered")
    ax.scatter(step[mask][~enter[mask]], ys[~enter[mask]], marker="x", s=8, color="tab:red", label="left")
    ax.set_xlim(0, end * 1.05 if end > 0 else 1)
    ax.set_ylim(-1, max(len(shown), 1))
    if stream:
        ax.set_xlabel(_step_label(record, stream))
        _pass_marks(ax, record["trace"])
    else:
        _steps_axis(ax, record, log)
    ax.set_ylabel("features ever selected (final ones at the bottom)")
    more = f", {distinct.size - len(shown)} more not shown" if distinct.size > len(shown) else ""
    ax.set_title(f"when each feature was held: {distinct.size} ever selected, {kept.sum()} kept{more}\n"
                 f"blue: in the final model, grey: held then left; green |: entered, red x: left", **TITLE)


def _staleness(ax, record, log, directory):
    st = record["staleness"]
    hist = histogram_counts(st["histogram"]).astype(float)
    _bars(ax, hist, "tab:purple", bottom=0.8)
    ax.axvline(st["mean"], color="black", linestyle="--", linewidth=0.8, label=f"mean {st['mean']:.2f}")
    ax.axvline(st["p95"], color="tab:red", linestyle=":", linewidth=0.8, label=f"95% of pushes <= {st['p95']}")
    ax.legend(fontsize=8)
    ax.set_yscale("log")
    shared = "u_C" if record.get("algorithm") == "asy-os" else "the shared model"     # as the summary says it
    ax.set_xlabel(f"staleness: versions of {shared} a push's read missed")
    ax.set_ylabel("pushes (log scale)")
    ax.set_title(f"staleness: mean {st['mean']:.2f}, p95 {st['p95']}, max {st['max']}; "
                 f"{record.get('refused_pushes', 0)} refused", **TITLE)
    ax.grid(alpha=0.3, axis="y")


def _workers_panel(ax, record, log, directory):
    workers = record["workers"]
    ranks = [w.get("rank", i + 1) for i, w in enumerate(workers)]
    steps = [w["steps"] for w in workers]
    x = np.arange(len(workers))
    ax.bar(x, steps, color="tab:cyan", label="steps")
    ax.set_xticks(x, [str(r) for r in ranks])
    ax.set_xlabel("worker rank")
    ax.set_ylabel("steps (features visited)")
    finished = [w.get("finished_s") for w in workers]
    if all(f is not None for f in finished):
        twin = ax.twinx()
        twin.plot(x, finished, "o", color="tab:red", label="finished at (s)")
        twin.set_ylabel("finished at (s since the start)", color="tab:red")
        twin.set_ylim(0, max(finished) * 1.15 if max(finished) > 0 else 1)
    ax.set_title("per-worker progress: steps taken, and when each finished", **TITLE)


def _dfls_path(ax, record, log, directory):
    with open(os.path.join(directory, "path.csv"), newline="") as fh:
        reader = csv.reader(fh)
        next(reader)                               # theta, w...: the names
        values = np.asarray([[float(v) for v in row] for row in reader])
    if values.size == 0:
        return
    theta, coefs = values[:, 0], values[:, 1:]
    moving = np.flatnonzero(np.ptp(coefs, axis=0) > 0)[:200]
    for j in moving:
        ax.plot(theta, coefs[:, j], linewidth=0.8)
    ax.set_xlabel("theta (0: before the change, 1: after)")
    ax.set_ylabel("coefficient")
    ax.set_title(f"DFLS solution path: {len(moving)} of {coefs.shape[1]} coefficients move", **TITLE)
    ax.grid(alpha=0.3)


def _bars(ax, heights, color, bottom=0.0):
    """A bar per value: ``ax.bar`` for a few, one filled step outline beyond 50 (700 bar patches of a
    long staleness tail took 3 s of ``tight_layout`` and ``savefig``; ``ax.stairs``, a patch whose data
    limits matplotlib finds segment by segment in Python, 0.35 s for a tail of 2,500 values)."""
    heights = np.asarray(heights, dtype=float)
    x = np.arange(heights.size)
    if heights.size <= 50:
        ax.bar(x, heights, width=0.9, color=color)
    else:
        top = np.maximum(heights, bottom)
        ax.fill_between(np.arange(heights.size + 1) - 0.5, bottom, np.append(top, top[-1]), step="post",
                        color=color, linewidth=0)


def _coefficients(ax, record, log, directory):
    coef = np.abs(np.asarray(record.get("coef") or [], dtype=float))
    features = np.asarray(record.get("selected", record.get("support", [])))
    if features.size != coef.size:          # DFLS: coef is over every feature
        features = np.flatnonzero(coef)
        coef = coef[features]
    order = np.argsort(-coef)
    _bars(ax, coef[order], "tab:blue")
    ax.set_xlabel("selected features, by |coefficient|" + (" (their indices)" if 0 < coef.size <= 20 else ""))
    if 0 < coef.size <= 20:
        ax.set_xticks(np.arange(coef.size), [str(f) for f in features[order]], rotation=90, fontsize=7)
    ax.set_ylabel("|coefficient|")
    ax.set_title(f"the model: {coef.size} features", **TITLE)


DRAW = {"progress_time": _progress_time, "progress_steps": _progress_steps, "stream_learning": _stream_learning,
        "stream_support": _stream_support, "selection_count": _selection_count,
        "selection_raster": _selection_raster, "staleness": _staleness, "workers": _workers_panel,
        "dfls_path": _dfls_path, "coefficients": _coefficients}


# ---------------------------------------------------------------------------------------- entry points
PICTURE_ENV = "ASYOS_PICTURE"


def pictures_wanted() -> bool:
    """``ASYOS_PICTURE=0`` in the environment turns the end-of-run picture off, as ``--no-picture``
    does (the test suite sets it, except for the tests of the pictures and of the commands of README and docs/:
    drawing costs 1-4 s a run, mostly matplotlib's import and layout, measured on 2 loaded cores)."""
    return os.environ.get(PICTURE_ENV, "1") != "0"


def draw_after_run(config) -> None:
    """End of an ``--output`` run: draw ``run.png`` and say where; never raises (a failure is one line
    on stderr, the run's exit status is unchanged)."""
    if not getattr(config, "output", None) or not getattr(config, "picture", True) or not pictures_wanted():
        return
    import time
    started = time.perf_counter()
    try:
        path = draw_run(config.output)
    except NoMatplotlib as exc:
        print(f"asyos: no picture drawn: {exc}", file=sys.stderr, flush=True)
        return
    except Exception as exc:  # noqa: BLE001 - drawing must never fail a finished run
        print(f"asyos: warning: no picture drawn: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return
    if path is not None and not config.quiet:
        # after results.json: the time in the record and the summary leaves this out, so it is said here
        print(f"  picture: {path} (drawn in {time.perf_counter() - started:.2f} s)", flush=True)
