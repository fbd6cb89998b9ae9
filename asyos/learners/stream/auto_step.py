"""A default step that adapts instead of stopping: ``eta="auto"`` (OPG, TSGD) and ``gamma="auto"`` (RDA).

With their former numeric defaults (OPG ``eta=0.01``, TSGD ``eta=0.03``, RDA ``gamma=10``) these learners
stopped with a ``DivergenceError`` on some real data sets, and the user had to find a step by hand.
``"auto"`` starts from that same value (``auto_start``; the model is unchanged where it did not
diverge) and, when the fit diverges (non-finite weights), fits again *from scratch* with a step
``SHRINK`` times smaller (``eta / 10``; ``gamma * 10``, which divides RDA's step ``1 / gamma``), at
most ``MAX_REDUCTIONS`` times. A fit whose weights stay finite but blew up counts as diverged too: its
mean training loss is more than ``BLOW_UP`` times the empty model's (TSGD with its former default on
positive data, p = 1000, 20 passes: finite weights, training R^2 = -2.4e190). A ``StepSizeWarning``
says the step used (``eta_`` / ``gamma_``). Each try is a complete fit with the same seed, so the result
depends only on the data and the parameters (deterministic), and it is the model an explicit ``eta``
equal to ``eta_`` gives. A step the user set explicitly is never changed: its divergence still raises
``DivergenceError`` (exit 2 in the CLI).

Each try restarts from scratch rather than from the last finite state, so that the model ``"auto"``
returns is exactly the one ``eta=eta_`` gives (a user can reproduce it, and a warm start from a
state that was already blowing up would carry its error into the model).

``partial_fit`` and ``learn_one`` cannot go back over rows already learned: they continue with the
step in use (``eta_``, the start value on a fresh model) and raise on divergence as before; the one
exception is the first ``partial_fit`` of an l1 learner with ``lam="auto"``, whose ``lam`` search on
that batch is a fit and adapts as ``fit`` does.
"""
from __future__ import annotations

import warnings

import numpy as np

from ...errors import DivergenceError, StepSizeWarning

SHRINK = 10.0           # the step is divided by this at each reduction
MAX_REDUCTIONS = 6      # at most a 10^6 times smaller step than the start value
BLOW_UP = 100.0         # a training loss above this many times the empty model's: diverged


class AutoStep:
    """Mixin of a ``SampleStreamLearner``: its step parameter ``step_parameter`` may be ``"auto"``.

    ``step_grows`` says whether a larger value of the parameter means a smaller step (RDA's ``gamma``);
    ``auto_start`` is the value ``"auto"`` starts from (the class's former numeric default)."""

    step_parameter = "eta"
    step_grows = False
    auto_start = 0.01

    def _step_value(self) -> float:
        """The step in use: the parameter, or with ``"auto"`` the value the last fit settled on
        (``eta_`` / ``gamma_``), else the start value."""
        value = getattr(self, self.step_parameter)
        if not isinstance(value, str):
            return float(value)
        return float(self.__dict__.get(self.step_parameter + "_", self.auto_start))

    def _keep_step(self):
        """A stream (``partial_fit``, ``learn_one``) goes on with the step in use, recorded as ``eta_`` /
        ``gamma_`` (what a ``DivergenceError`` names)."""
        name = self.step_parameter
        value = getattr(self, name)
        if isinstance(value, str):
            self.__dict__.setdefault(name + "_", float(self.auto_start))
        else:
            setattr(self, name + "_", float(value))

    def _fit_adapting(self, run, X, y):
        """``run(last)`` (a complete fit on ``(X, y)``; ``last`` is True for the final try) with the step
        reduced on divergence when the parameter is ``"auto"``; records the step used as ``<parameter>_``."""
        name = self.step_parameter
        if not isinstance(getattr(self, name), str):
            setattr(self, name + "_", float(getattr(self, name)))
            return run(True)
        start = value = float(self.auto_start)
        setattr(self, name + "_", value)
        for reduction in range(MAX_REDUCTIONS + 1):
            try:
                result = run(reduction == MAX_REDUCTIONS)
                if reduction < MAX_REDUCTIONS:
                    self._check_blow_up(X, y)
            except DivergenceError as exc:
                value = float(getattr(self, name + "_"))     # a fit resumed from a checkpoint restores its step
                if reduction == MAX_REDUCTIONS:
                    raise DivergenceError(f"{self._name()}: {name}='auto' diverged even at {name}={value:g} "
                                          f"({MAX_REDUCTIONS} reductions from {start:g}); {exc}") from None
                value = value * SHRINK if self.step_grows else value / SHRINK
                setattr(self, name + "_", value)
                continue
            value = float(getattr(self, name + "_"))
            reduction = int(round(abs(np.log10(value / start)) / np.log10(SHRINK)))
            if reduction:
                warnings.warn(f"{self._name()}: the default step {name}={start:g} diverged on this data (non-finite "
                              f"or blown-up weights); fitted with {name}_={value:g} instead ({reduction} "
                              f"reduction(s) by {SHRINK:g}). Set {name} to choose the step yourself",
                              StepSizeWarning, stacklevel=4)
            return result
        raise AssertionError("unreachable")

    def _check_blow_up(self, X, y):
        """Raise ``DivergenceError`` when the fitted model's mean training loss exceeds ``BLOW_UP`` times
        the empty model's (weights finite but useless)."""
        from ..base import _training_decision
        from .sample_stream import stream_loss
        loss = stream_loss(self.loss)[0]
        y = np.asarray(y).ravel()
        labels = np.where(y == self.classes_[1], 1.0, -1.0) if loss.task == "classification" \
            else y.astype(np.float64)
        with np.errstate(all="ignore"):
            fitted = loss.value(labels, _training_decision(self, X))
        empty = loss.value(labels, np.zeros(labels.shape[0]))
        if not fitted <= BLOW_UP * max(empty, 1e-12):
            raise DivergenceError(f"{self._name()} blew up: mean training loss {fitted:.3g} against {empty:.3g} for "
                                  f"the empty model")
