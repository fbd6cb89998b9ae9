"""``asyos predict``: apply a model kept by ``--save-model FILE`` to new data.

``asyos predict --model FILE --data NEW [--output DIR]`` (also ``python -m asyos predict`` and
``python -m asyos.run predict``). ``NEW`` is anything ``--data`` of a run takes, read by the same
readers (``asyos.runs.problem.open_data_source``), and only the model's selected columns are read:

* a dense ``.npz`` with ``X_train, y_train, X_test, y_test`` (its test split is predicted by default;
  ``--split train`` for the other) or ``X, y`` (its rows);
* a directory with sparse ``X_train.npz`` + ``y_train.npy`` (+ ``X_test.npz``), or ``X.npz`` + ``y.npy``,
  a column-major directory, or a ``.parquet`` file (``--label-column``);
* libsvm text, ``.gz`` or ``-`` (standard input). It is read with the index base the training data
  was read with (recorded in the model) unless ``--index-base`` says otherwise. A libsvm file's width
  is its largest index, so a file narrower than the training data is padded with zero columns (absent
  values are zeros in libsvm).

A file with more columns than the model was fitted on, or (other than libsvm) fewer, is refused: its
columns are not the model's. Output: ``predictions.csv`` (``row`` within the predicted split,
``prediction``: the class label or the value, ``decision``: ``u = x[selected] @ coef + intercept``)
and, the labels being known, the test metrics (regression: RMSE and R^2; classification: accuracy and
error rate). With ``--output DIR`` both go to ``DIR/predictions.csv`` and ``DIR/results.json`` and the
summary to stdout; without, the CSV goes to stdout and the summary to stderr, so that
``asyos predict ... > predictions.csv`` works as a filter does. Bad input exits with status 2 and one
line.
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import sys
import time

import numpy as np

from ..errors import EXIT_OK, EXIT_USAGE, InputError
from ..utils.logs import configure

SPLITS = ("auto", "train", "test")


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise InputError(message)


def make_parser(prog: str) -> argparse.ArgumentParser:
    p = _Parser(prog=prog, description="Apply a model saved by --save-model FILE to new data: predictions, and "
                                       "test metrics when the data have labels.",
                epilog="Without --output the predictions (CSV) go to stdout and the summary to stderr. "
                       "A model file is a pickle: use only model files you trust.")
    p.add_argument("--model", required=True, metavar="FILE", help="the model file (written by --save-model FILE)")
    p.add_argument("--data", required=True, metavar="NEW", help="the data to predict: an .npz file, a directory, "
                                                                "libsvm text (.gz, or - for standard input) or "
                                                                "a .parquet file, with the training data's columns")
    p.add_argument("--split", default="auto", choices=SPLITS, help="a file with a train/test split: its test "
                                                                   "split (auto, the default) or train; a file "
                                                                   "without one: its rows")
    p.add_argument("--index-base", choices=("auto", "0", "1"), help="libsvm feature indices: auto, 0 or 1 "
                                                                    "(default: the training data's)")
    p.add_argument("--label-column", help="Parquet: the column holding the labels (default: the training run's, "
                                          "else y)")
    p.add_argument("--output", metavar="DIR", help="write DIR/predictions.csv and DIR/results.json (without it: "
                                                   "the predictions on stdout)")
    p.add_argument("--overwrite", action="store_true", help="replace a previous run's files in --output")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary")
    p.add_argument("-v", "--verbose", action="count", default=0, help="progress lines on stderr")
    return p


def main(argv=None, prog: str = "asyos predict") -> int:
    """Run ``predict`` with the arguments ``argv``; the exit status (2: bad input, one line)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = make_parser(prog).parse_args(argv)
        if args.quiet and args.verbose:
            raise InputError("--quiet and --verbose contradict each other; pass one")
        if args.overwrite and args.output is None:
            raise InputError("--overwrite goes with --output (the directory whose previous files it replaces)")
        configure(quiet=args.quiet, verbose=args.verbose)
        return predict(args)
    except InputError as exc:
        print(f"asyos: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE


def predict(args) -> int:
    from ..records.model_file import load_model
    from ..records.results import prepare_output_dir
    t0 = time.perf_counter()
    if args.output is not None:
        prepare_output_dir(args.output, overwrite=args.overwrite)
    model = load_model(args.model)
    X, y, where = read_columns(model, args)
    u = _decision(X, model)
    predicted = model.predictions(u)
    metrics = _metrics(model, y, predicted, u) if y is not None else None
    record = {"command": "predict", "model_file": args.model, "model": model.summary(), "data": args.data,
              "split": where, "n_samples": int(u.size), "metrics": metrics,
              "timing": {"wall_s": time.perf_counter() - t0}}
    text = _summary(record)
    if args.output is None:
        _write_predictions(sys.stdout, u, predicted, model)
        sys.stdout.flush()
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)
        return EXIT_OK
    from ..records.results import atomic_file, environment, write_json_atomic
    with atomic_file(os.path.join(args.output, "predictions.csv"), newline="") as fh:
        _write_predictions(fh, u, predicted, model)
    record["predictions"] = "predictions.csv"
    record["environment"] = environment()
    path = os.path.join(args.output, "results.json")
    write_json_atomic(path, record)
    if not args.quiet:
        print(f"{text}\n  predictions: {os.path.join(args.output, 'predictions.csv')}\n  results: {path}", flush=True)
    return EXIT_OK


def read_columns(model, args):
    """``(X_selected, y, split)``: the model's selected columns of the data (zero columns where a
    narrower libsvm file has none), its labels and which split was read."""
    from ..runs.config import RunConfig
    from ..runs.problem import _is_parquet, open_data_source
    index_base = args.index_base if args.index_base is not None else \
        ("auto" if model.index_base is None else str(model.index_base))
    stdin = args.data == "-"
    label = args.label_column
    if label is None and not stdin and _is_parquet(args.data):      # the training run's, for Parquet data
        label = model.settings.get("label_column")
    config = RunConfig(data=args.data, index_base=index_base, label_column=label,
                       n_features=model.n_features if stdin else None)
    config.validated()
    source = open_data_source(config)
    p, name = int(source.n_features), args.data
    libsvm = hasattr(source, "index_base")
    if p > model.n_features:
        raise InputError(f"{name} has {p} feature columns; the model was fitted on {model.n_features}: "
                         f"predict data with the training data's columns")
    if p < model.n_features and not libsvm:
        raise InputError(f"{name} has {p} feature columns; the model was fitted on {model.n_features}: "
                         f"predict data with the training data's columns")
    selected = np.asarray(model.selected, dtype=np.intp)
    present = selected < p                          # a narrower libsvm file: the others are zero columns
    columns = selected[present]
    data = source.load(columns if columns.size else np.zeros(1, dtype=np.intp), with_test=args.split != "train")
    if args.split == "test" and not data.has_test:
        raise InputError(f"{name} has no test split (--split test); predict its rows with --split auto")
    test = data.has_test and args.split != "train"
    X, y = (data.X_test, data.y_test) if test else (data.X, data.y)
    split = "test" if test else ("train" if data.has_test or args.split == "train" else "all")
    return _widen(X, present, columns.size), y, split


def _widen(X, present, n_present):
    """The selected columns, with zero columns where ``present`` is False (or no column at all)."""
    import scipy.sparse as sp
    X = X[:, :n_present] if n_present == 0 else X
    if present.all():
        return X
    n = X.shape[0]
    if sp.issparse(X):                              # X @ P, P putting column i at the i-th present place
        place = sp.csr_matrix((np.ones(n_present), (np.arange(n_present), np.flatnonzero(present))),
                              shape=(n_present, present.size))
        return sp.csr_matrix(X) @ place
    out = np.zeros((n, present.size))
    out[:, present] = np.asarray(X, dtype=np.float64)
    return out


def _decision(X, model):
    from ..records.model_file import decision_of_columns
    import scipy.sparse as sp
    X = X.astype(np.float64) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    return decision_of_columns(X, model.coef, model.intercept)


def _metrics(model, y, predicted, u) -> dict:
    y = np.asarray(y, dtype=float)
    if model.task == "classification":
        unknown = np.setdiff1d(np.unique(y), np.asarray(model.classes, dtype=float))
        if unknown.size:
            raise InputError(f"the data's labels include {', '.join(f'{v:g}' for v in unknown[:5])}, not among "
                             f"the model's classes {', '.join(f'{c:g}' for c in model.classes)}")
        accuracy = float(np.mean(predicted == y))
        return {"accuracy": accuracy, "error_rate": 1.0 - accuracy}
    residual = u - y
    spread = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(residual @ residual) / spread if spread > 0 else float("nan")
    return {"rmse": float(np.sqrt(np.mean(residual ** 2))), "r2": r2}


def _write_predictions(fh, u, predicted, model) -> None:
    """``row,prediction,decision``: decision values as the shortest text that reads back to the same
    float64 (``repr``); class labels as numbers (``-1``, ``1``)."""
    writer = csv.writer(fh, lineterminator="\n")
    writer.writerow(["row", "prediction", "decision"])
    label = (lambda v: f"{v:g}") if model.task == "classification" else (lambda v: repr(float(v)))
    buffer = io.StringIO()
    rows = csv.writer(buffer, lineterminator="\n")
    for start in range(0, u.size, 65536):           # in blocks: one string per block, not per row
        stop = min(start + 65536, u.size)
        rows.writerows(zip(range(start, stop), map(label, predicted[start:stop]), map(repr, u[start:stop].tolist())))
        fh.write(buffer.getvalue())
        buffer.seek(0)
        buffer.truncate()


def _summary(record) -> str:
    m, model = record["metrics"], record["model"]
    head = (f"asyos predict: {model['algorithm']} model ({len(model['features'])} features of "
            f"{model['n_features']}, {model['task']}) on {record['data']} ({record['split']}): "
            f"{record['n_samples']} samples")
    if m is None:
        return head
    if model["task"] == "classification":
        return f"{head}\n  accuracy {m['accuracy']:.4f} (error rate {m['error_rate']:.4f})"
    return f"{head}\n  RMSE {m['rmse']:.5g}; R^2 {m['r2']:.4f}"
