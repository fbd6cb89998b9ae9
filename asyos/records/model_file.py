"""Model files: a fitted model kept by ``--save-model FILE`` and applied by ``predict --model FILE``.

``save_model(path, model)`` writes a ``SavedModel``; ``load_model(path)`` reads it back. **Reading a model
runs no code of the file's**: what a prediction needs (the selected columns, coefficients, intercept,
scaling, classes, settings) is JSON, checked field by field. The fitted scikit-learn estimator itself
(``SavedModel.estimator``; ``None`` for Asy-OS under ``mpiexec``, whose model the central rank assembles
from the workers' reports) is kept beside it, pickled: ``load_model(path, trust_estimator=True)``
unpickles it for Python users who trust the file (unpickling runs the code a pickle names); ``predict``
never does.

File layout (``FORMAT_VERSION`` 2):

1. the line ``asyos-model`` (``MAGIC``);
2. one line of JSON, the header: ``format``, ``format_version``, ``asyos`` (the writing version),
   ``algorithm``, ``task``, ``n_features``, ``n_selected``, and the size and SHA-256 of each section:
   ``model_bytes``, ``model_sha256``, ``estimator_bytes`` (0: none), ``estimator_sha256``;
3. the model: JSON (UTF-8), the ``SavedModel``'s fields but the estimator, arrays as lists (a float's
   JSON text is its shortest exact decimal: it reads back bit for bit);
4. the estimator, pickled with cloudpickle (absent when ``estimator_bytes`` is 0).

The header is read and checked before anything else: a file that is not a model, a format version this
asyos does not read (version 1 files were a single pickle: only ``trust_estimator=True`` reads them), a
section whose size or checksum is not the header's (a truncated or damaged file), or a model whose
fields disagree with the header (algorithm, task, feature counts) or with each other (a column out of
range, coefficients not one per selected column, a non-finite number) is refused with one line
(``InputError``). The file is written under a temporary name and renamed into place
(``asyos.records.results.atomic_file``): a killed run never leaves half a model.

**Contents.** ``selected`` (global column indices, sorted), ``coef`` (their coefficients in the
data's own units) and ``intercept``: the decision value of a sample ``x`` is
``u = x[selected] @ coef + intercept``, as every runner of the CLI computes it. ``task`` is
``regression`` (the prediction is ``u``) or ``classification`` (the prediction is ``classes[1]``
when ``u >= 0``, else ``classes[0]``; the CLI's labels are -1/+1, so ``classes`` is ``[-1, 1]``).
``scaling`` says how the learner saw the selected columns, ``z = (x - offsets) * scales``
(``kind``: ``standard`` for OS/Asy-OS, ``maxabs`` for the sample-stream learners, ``standard`` for
DFLS), with ``raw_coef``, the learner's weights on ``z`` (before any refit); ``None`` when the
learner did not scale or the runner cannot know it. Also kept: ``loss``, ``n_features`` seen in
training, ``algorithm``, ``settings`` (the run's ``RunConfig.as_dict()``), ``data`` (the training
data's path), ``index_base`` (libsvm training data: the index base it was read with, which
``predict`` reads new libsvm data with) and ``estimator_columns`` (DFLS: the global columns, in the
order the estimator takes them; ``None``: all columns in order).
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..errors import InputError

MAGIC = b"asyos-model\n"
FORMAT = "asyos-model"
FORMAT_VERSION = 2
PICKLED_VERSION = 1            # a single pickle: read only with trust_estimator=True
HEADER_MAX_BYTES = 1 << 16      # a header line longer than this is not ours


@dataclass
class SavedModel:
    """A fitted linear model over ``n_features`` columns (module docstring)."""
    algorithm: str
    task: str
    loss: str
    n_features: int
    selected: np.ndarray
    coef: np.ndarray
    intercept: float
    classes: Optional[list] = None
    scaling: Optional[dict] = None
    settings: dict = field(default_factory=dict)
    data: Optional[str] = None
    estimator: object = None
    estimator_columns: Optional[np.ndarray] = None
    index_base: Optional[int] = None        # libsvm training data: the index base it was read with
    asyos_version: Optional[str] = None
    created: Optional[float] = None

    def decision_function(self, X):
        """``u = X[:, selected] @ coef + intercept`` for ``X`` with ``n_features`` columns (an array,
        or a scipy sparse matrix)."""
        if X.shape[1] != self.n_features:
            raise InputError(f"X has {X.shape[1]} columns; the model was fitted on {self.n_features}")
        return decision_of_columns(_columns(X, self.selected), self.coef, self.intercept)

    def predict(self, X):
        """Class labels (classification) or values (regression)."""
        return self.predictions(self.decision_function(X))

    def predictions(self, u):
        """The predictions from decision values ``u``."""
        u = np.asarray(u, dtype=float)
        if self.task == "classification":
            return np.asarray(self.classes)[(u >= 0.0).astype(np.intp)]
        return u

    def summary(self) -> dict:
        """What ``results.json`` of ``predict`` records about the model."""
        return {"algorithm": self.algorithm, "task": self.task, "loss": self.loss, "n_features": self.n_features,
                "features": np.asarray(self.selected).tolist(), "coef": np.asarray(self.coef).tolist(),
                "intercept": self.intercept, "classes": self.classes, "trained_on": self.data,
                "asyos": self.asyos_version}


def decision_of_columns(columns, coef, intercept):
    """``columns @ coef + intercept`` as a flat float64 vector (``columns``: the selected columns)."""
    return np.asarray(columns @ np.asarray(coef, dtype=float), dtype=float).ravel() + float(intercept)


def _columns(X, selected):
    import scipy.sparse as sp
    if sp.issparse(X):
        return sp.csr_matrix(X)[:, selected].astype(np.float64)
    return np.asarray(X, dtype=np.float64)[:, selected]


# --------------------------------------------------------------------------------- the file
ARRAYS = ("selected", "coef", "estimator_columns")          # JSON lists, numpy arrays in a SavedModel
SCALING_ARRAYS = ("offsets", "scales", "raw_coef")


def _model_json(model: SavedModel) -> bytes:
    fields = {k: v for k, v in vars(model).items() if k != "estimator"}
    for name in ARRAYS:
        if fields[name] is not None:
            fields[name] = np.asarray(fields[name]).tolist()
    if fields["scaling"] is not None:
        fields["scaling"] = {k: (np.asarray(v).tolist() if k in SCALING_ARRAYS else v)
                             for k, v in fields["scaling"].items()}
    from .results import to_jsonable
    fields["settings"] = to_jsonable(fields["settings"])
    fields["classes"] = None if fields["classes"] is None else [float(c) for c in fields["classes"]]
    return json.dumps(fields, allow_nan=True).encode()     # NaN and Infinity kept as such (a scale may be)


def save_model(path: str, model: SavedModel) -> None:
    """Write ``model`` to ``path`` atomically (module docstring)."""
    from .results import atomic_file, package_version
    model.asyos_version = package_version()
    model.created = time.time()
    body = _model_json(model)
    estimator = b""
    if model.estimator is not None:
        import cloudpickle
        estimator = cloudpickle.dumps(model.estimator, protocol=pickle.HIGHEST_PROTOCOL)
    header = {"format": FORMAT, "format_version": FORMAT_VERSION, "asyos": model.asyos_version,
              "algorithm": model.algorithm, "task": model.task, "n_features": int(model.n_features),
              "n_selected": int(np.size(model.selected)), "model_bytes": len(body),
              "model_sha256": hashlib.sha256(body).hexdigest(), "estimator_bytes": len(estimator),
              "estimator_sha256": hashlib.sha256(estimator).hexdigest()}
    with atomic_file(path, "wb") as fh:
        fh.write(MAGIC)
        fh.write(json.dumps(header).encode() + b"\n")
        fh.write(body)
        fh.write(estimator)


def read_header(path: str, fh) -> dict:
    """The header of the model file open as ``fh`` (checked; ``InputError`` otherwise)."""
    if fh.read(len(MAGIC)) != MAGIC:
        raise InputError(f"{path} is not an asyos model file (save one with --save-model)")
    line = fh.readline(HEADER_MAX_BYTES)
    try:
        header = json.loads(line)
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT or \
            not isinstance(header.get("format_version"), int) or isinstance(header["format_version"], bool):
        raise InputError(f"model file {path} is damaged (its header cannot be read)")
    version = header["format_version"]
    if version > FORMAT_VERSION:
        from .results import package_version
        raise InputError(f"model file {path} has format version {version} (written by asyos "
                         f"{header.get('asyos')}); this asyos {package_version()} reads versions up to "
                         f"{FORMAT_VERSION}: upgrade asyos")
    if version < PICKLED_VERSION:
        raise InputError(f"model file {path} is damaged (format version {version}: no asyos writes it)")
    return header


def _section(path, data, header, name) -> bytes:
    """``data``'s first ``header[name_bytes]`` bytes, their checksum checked."""
    size = header.get(f"{name}_bytes")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0 or len(data) < size:
        raise InputError(f"model file {path} is damaged: its {name} section is shorter than its header says "
                         f"(a truncated file)")
    part = data[:size]
    if hashlib.sha256(part).hexdigest() != header.get(f"{name}_sha256"):
        raise InputError(f"model file {path} is damaged: its {name} section does not match the checksum in "
                         f"its header")
    return part


def load_model(path: str, trust_estimator: bool = False) -> SavedModel:
    """The ``SavedModel`` in ``path``, read without running any code of the file's: header checked, then
    each section's size and checksum, then the model's fields against the header and each other. With
    ``trust_estimator=True`` the pickled estimator is unpickled too (and a version 1 file, a single
    pickle, is read): only for files you trust."""
    try:
        with open(path, "rb") as fh:
            header = read_header(path, fh)
            data = fh.read()
    except IsADirectoryError:
        raise InputError(f"--model {path!r} is a directory, not a model file") from None
    except OSError as exc:
        raise InputError(f"cannot read model file {path!r}: {exc.strerror}") from None
    if header["format_version"] == PICKLED_VERSION:
        return _load_pickled(path, header, data, trust_estimator)
    body = _section(path, data, header, "model")
    rest = data[len(body):]
    estimator = _section(path, rest, header, "estimator")
    if len(rest) != len(estimator):
        raise InputError(f"model file {path} is damaged: {len(rest) - len(estimator)} bytes after its last "
                         f"section (an appended file)")
    model = _model_from_json(path, body)
    _check_agrees(path, header, model)
    if trust_estimator and estimator:
        model.estimator = _unpickle(path, estimator, "estimator")
    return model


def _model_from_json(path, body) -> SavedModel:
    try:
        fields = json.loads(body.decode())
    except (UnicodeDecodeError, ValueError):
        raise InputError(f"model file {path} is damaged: its model section is not JSON") from None
    known = {f for f in SavedModel.__dataclass_fields__ if f != "estimator"}
    if not isinstance(fields, dict) or not {"algorithm", "task", "loss", "n_features", "selected", "coef",
                                            "intercept"} <= set(fields) or set(fields) - known:
        raise InputError(f"model file {path} is damaged: its model section does not hold a model's fields")
    try:
        for name in ARRAYS:
            if fields.get(name) is not None:
                fields[name] = np.asarray(fields[name], dtype=np.int64 if name != "coef" else np.float64)
        if fields.get("scaling") is not None:
            fields["scaling"] = {k: (np.asarray(v, dtype=np.float64) if k in SCALING_ARRAYS else v)
                                 for k, v in dict(fields["scaling"]).items()}
        fields["intercept"] = float(fields["intercept"])
        return SavedModel(**fields)
    except (TypeError, ValueError) as exc:
        raise InputError(f"model file {path} is damaged: a field of its model has the wrong type ({exc})") from None


def _check_agrees(path, header, model) -> None:
    """The model's fields agree with the header and with each other."""
    problems = [f"{name} {getattr(model, name)!r} where its header says {header.get(name)!r}"
                for name in ("algorithm", "task", "n_features") if getattr(model, name) != header.get(name)]
    selected, coef, p = model.selected, model.coef, model.n_features
    if header.get("n_selected") != selected.size:
        problems.append(f"{selected.size} selected features where its header says {header.get('n_selected')}")
    if selected.ndim != 1 or coef.shape != selected.shape:
        problems.append(f"{coef.size} coefficients for {selected.size} selected features")
    elif selected.size and (selected.min() < 0 or selected.max() >= p or np.any(np.diff(selected) <= 0)):
        problems.append(f"selected features that are not distinct columns of 0..{p - 1} in order")
    if not (np.all(np.isfinite(coef)) and np.isfinite(model.intercept)):
        problems.append("a coefficient or the intercept that is not a finite number")
    if model.task == "classification" and (not isinstance(model.classes, list) or len(model.classes) != 2):
        problems.append(f"classes {model.classes!r} (a classifier has two)")
    if model.task not in ("classification", "regression"):
        problems.append(f"task {model.task!r}")
    if problems:
        raise InputError(f"model file {path} is damaged or was altered: " + "; ".join(problems))


def _unpickle(path, data, what):
    try:
        return pickle.loads(data)
    except Exception as exc:  # noqa: BLE001 - whatever the unpickling raised: the section cannot be used
        raise InputError(f"model file {path}: its {what} cannot be loaded ({type(exc).__name__}: {exc})") from None


def _load_pickled(path, header, data, trust) -> SavedModel:
    """A format version 1 file (one pickle): refused unless trusted, as unpickling runs the file's code."""
    if not trust:
        raise InputError(f"model file {path} has format version 1 (written by asyos {header.get('asyos')}), a "
                         f"pickle that could run code when read: refit and save it again, or in Python "
                         f"load_model(path, trust_estimator=True) if you trust the file")
    body = _section(path, data, header, "body")
    model = _unpickle(path, body, "model")
    if not isinstance(model, SavedModel):
        raise InputError(f"model file {path} holds a {type(model).__name__}, not a model")
    return model


def check_model_path(path: Optional[str], flag: str = "--save-model") -> None:
    """The pre-flight of ``--save-model FILE``, before any fitting: not a directory, its directory
    exists and is writable, an existing file is writable."""
    if path is None:
        return
    if not path or os.path.isdir(path) or path.endswith(os.sep):
        raise InputError(f"{flag} {path!r} is a directory; give a file name")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise InputError(f"{flag} {path!r}: directory {directory!r} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {path!r}: directory {directory!r} is not writable")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise InputError(f"{flag} {path!r} exists and is not writable")


# ------------------------------------------------------------------------- from a fitted run
def model_of_run(config, record, estimator=None, X=None, scaling=None, estimator_columns=None,
                 source=None) -> SavedModel:
    """The ``SavedModel`` of a run of the CLI from its record (``asyos.runs.summary.build_record``:
    ``selected``, ``coef``, ``intercept``, ``problem``) and, when the fit ran in this process, its
    fitted ``estimator`` (``X``: the training data, for the scaling OS applied; ``source``: the
    training data's source, whose libsvm index base ``predict`` reads new data with)."""
    from ..losses import get_loss
    loss = get_loss(record["problem"]["loss"], smooth=False)
    selected = np.asarray(record["selected"], dtype=np.int64)
    classes = None
    if loss.task == "classification":
        found = getattr(estimator, "classes_", None)
        classes = [float(c) for c in found] if found is not None and len(found) == 2 else [-1.0, 1.0]
    if scaling is None and estimator is not None:
        scaling = scaling_of(estimator, selected, X)
    return SavedModel(algorithm=record["algorithm"], task=loss.task, loss=loss.name,
                      n_features=int(record["problem"]["n_features"]), selected=selected,
                      coef=np.asarray(record["coef"], dtype=float), intercept=float(record.get("intercept", 0.0)),
                      classes=classes, scaling=scaling, settings=config.as_dict(), data=config.data,
                      estimator=estimator, estimator_columns=estimator_columns,
                      index_base=getattr(source, "index_base", None))


def scaling_of(estimator, selected, X=None) -> Optional[dict]:
    """How ``estimator`` scaled the ``selected`` columns, or ``None`` (module docstring): the
    sample-stream learners' running ``maxabs`` scale (``scale_``, weights ``weights()``), OS's and
    Asy-OS's standardization (rebuilt from the selected training columns by the same
    ``SubstitutionOptions.shard`` the fit used: the shard's offsets and scales are per column)."""
    inner = getattr(estimator, "learner_", estimator)           # the simulator wraps a sample-stream learner
    if getattr(inner, "scale", None) == "maxabs" and hasattr(inner, "weights"):
        return {"kind": "maxabs", "offsets": np.zeros(selected.size), "scales": 1.0 / inner.scale_[selected],
                "raw_coef": inner.weights()[selected]}
    options = getattr(estimator, "_options", None)
    if options is None or X is None or not selected.size:
        return None
    options = options()
    if not options.scale:
        return None
    from ..learners.checks import columns_dense
    shard = options.shard(np.asarray(columns_dense(X, selected), dtype=np.float64))
    scales = shard.scales
    raw = np.divide(np.asarray(estimator.raw_coef_)[selected], scales, out=np.zeros(selected.size),
                    where=scales > 0)
    return {"kind": "standard", "offsets": shard.offsets.copy(), "scales": scales.copy(), "raw_coef": raw}


def save_run_model(config, record, estimator=None, X=None, scaling=None, estimator_columns=None,
                   source=None) -> Optional[str]:
    """With ``--save-model FILE``: write the run's model to FILE, note it in ``record`` (``model``,
    before ``results.json`` is written), print the summary's ``  model: FILE`` line (unless ``-q``)
    and return FILE (``None`` without the flag). Called by every runner after its summary."""
    if config.save_model is None:
        return None
    save_model(config.save_model, model_of_run(config, record, estimator, X, scaling, estimator_columns, source))
    record["model"] = config.save_model
    if not config.quiet:
        print(f"  model: {config.save_model}", flush=True)
    return config.save_model


__all__ = ["SavedModel", "save_model", "load_model", "check_model_path", "model_of_run", "save_run_model",
           "FORMAT_VERSION"]
