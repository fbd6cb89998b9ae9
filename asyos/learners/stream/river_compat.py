"""The sample-stream learners and the running averages as River models: ``to_river(learner)``.

The learners already take River's loop (``learn_one(x, y)``, ``predict_one(x)`` before any learning,
``predict_proba_one``, dict rows); River's evaluation and pipelines also ask what a model *is*
(``isinstance(model, river.base.Classifier)``: ``river.evaluate.progressive_val_score`` refuses a metric
otherwise). ``to_river`` wraps a learner, or ``AsyncSampleStream`` around one, in a ``river.base.Classifier``
or ``Regressor`` chosen by its loss, as ``river.compat.convert_sklearn_to_river`` does for scikit-learn's
incremental models. River is imported when this is called, not before (it is the ``bench`` extra's).
"""
from __future__ import annotations

import functools


def to_river(learner):
    """``learner`` as a River classifier (a classification loss) or regressor (``squared``); the wrapper's
    ``learner`` attribute is the learner itself, which it updates in place."""
    from ...errors import InputError
    task = learner._task() if hasattr(learner, "_task") else None
    if task not in ("classification", "regression"):
        raise InputError(f"to_river needs a learner whose loss names its task; {type(learner).__name__} has "
                         f"loss {getattr(learner, 'loss', None)!r}")
    return _wrapper(task)(learner)


@functools.cache
def _wrapper(task):
    """The River class of ``task``'s learners, made once (River is imported here) and kept at this module's
    top level by its name, so that a wrapped learner pickles."""
    from river import base

    class Wrapper(base.Classifier if task == "classification" else base.Regressor):
        def __init__(self, learner):
            self.learner = learner

        def learn_one(self, x, y, **kwargs):
            self.learner.learn_one(x, y)

        def predict_one(self, x, **kwargs):
            return self.learner.predict_one(x)

        if task == "classification":
            def predict_proba_one(self, x, **kwargs):
                return self.learner.predict_proba_one(x)

    name = "RiverClassifier" if task == "classification" else "RiverRegressor"
    Wrapper.__name__ = Wrapper.__qualname__ = name
    Wrapper.__module__ = __name__
    Wrapper.__doc__ = f"A sample-stream learner as a River {task} model (``to_river``)."
    globals()[name] = Wrapper
    return Wrapper
