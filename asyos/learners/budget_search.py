"""The search for the l1 weight whose model meets a budget of ``s`` non-zero features.

Used by the l1 stream learners (``lam="auto"``, ``asyos.learners.stream.l1``), the running-averages OLasso /
OElnet / OMCP (thesis Alg. 5, ``extractors.penalized_path``) and the batch ``LassoToBudget``
(scikit-learn's Lasso, and the C of its L1 classifiers, searched as the weight ``1/C``).

The caller gives ``fit(weight, warm) -> (model, nnz)``: the model fitted at l1 weight ``weight``
(``warm`` is the model of the nearest larger weight fitted so far, for a warm start along the path,
or ``None``) and its number of non-zeros; ``nnz=None`` says that fit failed (a diverged stream), which
is counted as too many features and never chosen. A larger weight is assumed to give fewer non-zeros,
but the count need not be monotone: every fit is a candidate.

**The rule.** Of all the fits (and the ``known`` ones), ``under`` is the one with the most non-zeros
``<= s`` and ``over`` the one with the fewest ``> s``; ties go to the end of the bracket (``under``:
the smallest weight, the least shrunk model; ``over``: the largest weight). ``at_most()`` is
``under`` (the ECML'18 protocol and the thesis' "largest number of non-zeros smaller than or equal to
k"); ``at_least()`` is ``under`` when it has exactly ``s``, else ``over`` (KDD'16's "lambda is set to
guarantee ... selecting at least s features", to be cut to its ``s`` largest coefficients).

**The steps.**

1. *Bracket*: ``lo`` is the largest weight known with more than ``s`` non-zeros, ``hi`` the smallest
   above ``lo`` with at most ``s``. Without a ``lo``, the weight is divided by ``factor`` from ``hi``
   (or ``start``) until the count exceeds ``s``, at most ``max_expand`` times and never below
   ``lowest``; without a ``hi``, multiplied by ``factor`` from ``lo`` (or ``start``) until it is at
   most ``s``, at most ``max_expand`` times. With nothing known, ``start`` is fitted first.
2. *Bisection* in ``log weight``: the geometric mean of ``lo`` and ``hi`` replaces the end on its side.

**One stopping rule**, checked before every fit: stop when a fit has exactly ``s`` non-zeros
(``"exact"``), when ``hi / lo < 1 + precision`` or their geometric mean is not strictly between
them in floating point (``"precision"``; ``precision=0`` bisects to the float resolution), when
``max_steps`` fits have run or ``max_bisect`` bisection steps (``"max_steps"``), or when the
expansion found no bracket within its limits (``"range"``). ``steps`` records every fit run, in order,
as ``(weight, nnz, phase)``.

**Settings of the callers**: the l1 stream learners start at 1 with ``factor=10``, 12 decades each
way, then 30 bisection steps to ``precision=1e-4`` (``l1.SEARCH``); OLasso/OElnet/OMCP halve
``lambda`` from ``lam_max`` (down to ``1e-8 lam_max``) and bisect to the float resolution,
``max_steps`` solves in all; ``LassoToBudget`` walks scikit-learn's ``n_alphas`` grid (``factor`` its
ratio, ``max_bisect=0``: the first ``alpha`` with at least ``s``), and doubles C from ``2 l1_min_c``
then bisects 8 times. All but the stream learners' bracket and the early stop of the C search are
the settings of the searches each caller had before.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional


@dataclass(frozen=True)
class Step:
    """One fit of the search: ``phase`` is ``"start"``, ``"expand"`` or ``"bisect"``."""

    weight: float
    nnz: Optional[int]
    phase: str


@dataclass(frozen=True)
class Candidate:
    weight: float
    nnz: int
    model: Any


@dataclass
class BudgetSearch:
    """What the search found: ``under``/``over`` (see the module), the fits run, and why it stopped."""

    budget: int
    under: Optional[Candidate] = None
    over: Optional[Candidate] = None
    steps: list = field(default_factory=list)
    stop: str = ""

    @property
    def exact(self) -> bool:
        return self.under is not None and self.under.nnz == self.budget

    @property
    def path(self) -> list:
        """``[(weight, nnz), ...]`` of the fits run, in order."""
        return [(step.weight, step.nnz) for step in self.steps]

    def at_most(self) -> Optional[Candidate]:
        return self.under

    def at_least(self) -> Optional[Candidate]:
        return self.under if self.exact or self.over is None else self.over


def search_l1_weight(fit: Callable, budget: int, start: float = 1.0, *, factor: float = 10.0,
                     max_expand: int = 12, max_bisect: Optional[int] = None, max_steps: int = 42,
                     precision: float = 1e-4, lowest: float = 0.0, known: Optional[dict] = None,
                     warm: bool = True) -> BudgetSearch:
    """Search the l1 weight for ``budget`` non-zeros (module docstring: the rule, the steps, the stop).

    ``known`` maps weights already fitted to ``(model, nnz)``: it seeds the bracket and the candidates,
    and every fit run is added to it (so that several budgets can share one path, as
    ``extractors.penalized_path`` does). ``warm=False`` passes no warm start and keeps only the models
    of ``under`` and ``over`` (a stream learner's state is as large as the data's width).
    """
    if not (factor > 1.0 and math.isfinite(factor)):
        raise ValueError(f"factor must be a finite number > 1; got {factor!r}")
    if not start > 0.0:
        raise ValueError(f"start must be > 0; got {start!r}")
    known = {} if known is None else known
    result = BudgetSearch(budget=budget)
    for weight, (model, nnz) in sorted(known.items()):
        _consider(result, weight, nnz, model)

    def run(weight, phase):
        larger = [w for w, (m, c) in known.items() if w > weight and c is not None]
        model, nnz = fit(weight, known[min(larger)][0] if warm and larger else None)
        nnz = None if nnz is None else int(nnz)
        known[weight] = (model if warm else None, nnz)
        result.steps.append(Step(float(weight), nnz, phase))
        _consider(result, weight, nnz, model)
        return nnz

    def too_many(nnz):
        return nnz is None or nnz > budget

    def bracket():
        many = [w for w, (_, c) in known.items() if too_many(c)]
        lo = max(many) if many else None
        few = [w for w, (_, c) in known.items() if not too_many(c) and (lo is None or w > lo)]
        return lo, (min(few) if few else None)

    if result.exact:
        result.stop = "exact"
        return result
    lo, hi = bracket()
    if lo is None and hi is None:
        if max_steps < 1:
            result.stop = "max_steps"
            return result
        run(float(start), "start")
        lo, hi = bracket()
    expanded = 0
    while lo is None or hi is None:            # 1. expand until the budget is bracketed
        if result.exact:
            result.stop = "exact"
            return result
        if len(result.steps) >= max_steps:
            result.stop = "max_steps"
            return result
        weight = hi / factor if lo is None else lo * factor
        if expanded >= max_expand or weight < lowest or not math.isfinite(weight) or weight <= 0.0:
            result.stop = "range"
            return result
        expanded += 1
        run(weight, "expand")
        lo, hi = bracket()
    tolerance = math.log1p(precision)
    bisected = 0
    while True:                                 # 2. bisect in log weight
        if result.exact:
            result.stop = "exact"
            return result
        mid = math.sqrt(lo * hi)
        if not lo < mid < hi or math.log(hi) - math.log(lo) < tolerance:
            result.stop = "precision"
            return result
        if len(result.steps) >= max_steps or (max_bisect is not None and bisected >= max_bisect):
            result.stop = "max_steps"
            return result
        bisected += 1
        if too_many(run(mid, "bisect")):
            lo = mid
        else:
            hi = mid


def _consider(result, weight, nnz, model):
    """Keep the fit if it is the best ``under`` or ``over`` so far (ties: the end of the bracket)."""
    if nnz is None:
        return
    if nnz <= result.budget:
        best = result.under
        if best is None or nnz > best.nnz or (nnz == best.nnz and weight < best.weight):
            result.under = Candidate(float(weight), nnz, model)
    else:
        best = result.over
        if best is None or nnz < best.nnz or (nnz == best.nnz and weight > best.weight):
            result.over = Candidate(float(weight), nnz, model)
