"""The sample-stream learners as River models: ``to_river(learner)``.

The learners already take River's loop (``learn_one(x, y)``, ``predict_one(x)`` before any learning,
``predict_proba_one``, dict rows); River's evaluation and pipelines also ask what a model *is*
(``isinstance(model, river.base.Classifier)``: ``river.evaluate.progressive_val_score`` refuses a metric
otherwise). ``to_river`` wraps a learner, or ``AsyncSampleStream`` around one, in a ``river.base.Classifier``
or ``Regressor`` chosen by its loss, as ``river.compat.convert_sklearn_to_river`` does for scikit-learn's
incremental models. River is imported when this is called, not before (it is the ``bench`` extra's).
"""
from __future__ import annotations


def to_river(learner):
    """``learner`` as a River classifier (a classification loss) or regressor (``squared``); the wrapper's
    ``learner`` attribute is the learner itself, which it updates in place."""
    from river import base
    from ...errors import InputError
    task = learner._task() if hasattr(learner, "_task") else None
    if task not in ("classification", "regression"):
        raise InputError(f"to_river needs a learner whose loss names its task; {type(learner).__name__} has "
                         f"loss {getattr(learner, 'loss', None)!r}")

    class Learner(base.Classifier if task == "classification" else base.Regressor):
        __doc__ = f"{type(learner).__name__} as a River {task} model."

        def __init__(self, learner):
            self.learner = learner

        def learn_one(self, x, y, **kwargs):
            self.learner.learn_one(x, y)

        def predict_one(self, x, **kwargs):
            return self.learner.predict_one(x)

        if task == "classification":
            def predict_proba_one(self, x, **kwargs):
                return self.learner.predict_proba_one(x)

    Learner.__name__ = Learner.__qualname__ = f"River{type(learner).__name__}"
    return Learner(learner)
