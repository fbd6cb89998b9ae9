"""Model files: a fitted model kept by ``--save-model FILE`` and applied by ``predict --model FILE``.

**A model file is a pickle: load only files you trust** (unpickling runs code the file names).

``save_model(path, model)`` writes a ``SavedModel``; ``load_model(path)`` reads it back. Python users
get the whole model (``SavedModel.predict`` / ``decision_function`` on arrays or sparse matrices with
the training data's columns) and, when the fit ran in the process that wrote the file, the fitted
scikit-learn estimator itself (``SavedModel.estimator``; ``None`` for Asy-OS under ``mpiexec``, whose
model is assembled by the central rank from the workers' reports).

File layout (``FORMAT_VERSION``):

1. the line ``asyos-model`` (``MAGIC``);
2. one line of JSON, the header: ``format``, ``format_version``, ``asyos`` (the writing version),
   ``algorithm``, ``task``, ``n_features``, ``n_selected``, and the size and SHA-256 of the body;
3. the body: the ``SavedModel``, pickled with cloudpickle.

The header is read and checked before anything is unpickled (as ``asyos.records.checkpoint`` does): a file
that is not a model, a format version newer than this asyos reads, or a body whose size or checksum
is not the header's (a truncated or damaged file) is refused with one line (``InputError``) instead
of failing inside the unpickling. The file is written under a temporary name and renamed into place
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
FORMAT_VERSION = 1
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
def save_model(path: str, model: SavedModel) -> None:
    """Write ``model`` to ``path`` atomically (module docstring)."""
    import cloudpickle
    from .results import atomic_file, package_version
    model.asyos_version = package_version()
    model.created = time.time()
    body = cloudpickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)
    header = {"format": FORMAT, "format_version": FORMAT_VERSION, "asyos": model.asyos_version,
              "algorithm": model.algorithm, "task": model.task, "n_features": int(model.n_features),
              "n_selected": int(np.size(model.selected)), "body_bytes": len(body),
              "body_sha256": hashlib.sha256(body).hexdigest()}
    with atomic_file(path, "wb") as fh:
        fh.write(MAGIC)
        fh.write(json.dumps(header).encode() + b"\n")
        fh.write(body)


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
            not isinstance(header.get("format_version"), int):
        raise InputError(f"model file {path} is damaged (its header cannot be read)")
    if header["format_version"] > FORMAT_VERSION:
        from .results import package_version
        raise InputError(f"model file {path} has format version {header['format_version']} (written by asyos "
                         f"{header.get('asyos')}); this asyos {package_version()} reads versions up to "
                         f"{FORMAT_VERSION}: upgrade asyos")
    return header


def load_model(path: str) -> SavedModel:
    """The ``SavedModel`` in ``path``: header checked, then the body's size and checksum, then unpickled.
    A model file is a pickle: load only trusted files."""
    try:
        with open(path, "rb") as fh:
            header = read_header(path, fh)
            body = fh.read()
    except IsADirectoryError:
        raise InputError(f"--model {path!r} is a directory, not a model file") from None
    except OSError as exc:
        raise InputError(f"cannot read model file {path!r}: {exc.strerror}") from None
    if len(body) != header.get("body_bytes"):
        raise InputError(f"model file {path} is damaged: {len(body)} bytes after its header, "
                         f"{header.get('body_bytes')} written (a truncated or appended file)")
    if hashlib.sha256(body).hexdigest() != header.get("body_sha256"):
        raise InputError(f"model file {path} is damaged: its content does not match the checksum in its header")
    try:
        model = pickle.loads(body)
    except Exception as exc:  # noqa: BLE001 - whatever the unpickling raised: the body cannot be used
        raise InputError(f"model file {path} cannot be loaded ({type(exc).__name__}: {exc})") from None
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
