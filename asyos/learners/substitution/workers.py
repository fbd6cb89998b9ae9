"""What an Online Substitution worker is built from, shared by sequential OS, the simulator and the
MPI worker ranks: the options (``SubstitutionOptions``), the step size from ``L_F``
(``local_lipschitz``), the share a feature enters with under Asy-OS (``entry_scale``) and the
``Worker`` itself (``make_worker``), and the end-of-run check of the objective.

It imports no scikit-learn (the estimator, ``asyos.learners.substitution.online_substitution``,
does): an MPI worker rank needs this and not the estimator, and importing scikit-learn was 2 of the
3.3 s of CPU a rank spent starting up (measured here: a 4-rank job's start-up fell from 14 to 8 CPU
seconds without it in the workers)."""
from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from ...data.column_shard import ColumnShard
from ...data.columnar import is_column_matrix
from ...data.shard import FeatureShard
from ...errors import ConvergenceWarning, DivergenceError, InputError
from .asy_worker import Worker
from ..checks import check_positive_float, check_positive_int
from .screening import marginal_gains, order_by_gain, screening_order
from .step_size import coupling, restricted_lipschitz, step_size_from_lipschitz
from .substitution import VARIANTS

_LIPSCHITZ_STREAM = 0x4C46
KDD16_PASSES = 3          # "auto" under the kdd16 variant: the passes the KDD'16 figures were reproduced with


@dataclass(frozen=True)
class SubstitutionOptions:
    """Settings shared by every OS worker (sequential, simulated or on MPI). ``None`` takes the
    variant's default: ``fit_intercept`` and ``scale`` on for ``exchange``, off for ``kdd16``;
    ``decrease_constant`` 1 (``kdd16`` only: ``exchange`` compares the losses themselves)."""

    passes: Union[int, str] = "auto"
    step_size: Optional[float] = None       # None: 0.5 / L_F estimated from the data
    step_divisor: float = 1.0               # the paper's m >= 1 (Alg. 1 line 6)
    decrease_check: bool = True             # Alg. 1 lines 12-16 (exchange: the loss must fall)
    decrease_constant: Optional[float] = None   # the paper's c in [0, 1]
    log_selection: bool = True
    variant: str = "exchange"
    fit_intercept: Optional[bool] = None
    scale: Optional[bool] = None
    ridge: float = 0.0                      # alpha of the exchange variant's (alpha / 2) ||w||^2 (OnlineSubstitution)

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise InputError(f"unknown variant {self.variant!r}; choose one of: {', '.join(VARIANTS)}")
        kdd16 = self.variant == "kdd16"
        if self.fit_intercept is None:
            object.__setattr__(self, "fit_intercept", not kdd16)
        if self.scale is None:
            object.__setattr__(self, "scale", not kdd16)
        if self.decrease_constant is None:
            object.__setattr__(self, "decrease_constant", 1.0)
        elif not kdd16:
            raise InputError("decrease_constant is KDD'16's c (variant='kdd16'); the exchange variant keeps a "
                             "substitution only if the loss falls")
        if kdd16 and self.ridge:
            raise InputError("ridge is part of the exchange variant (variant='exchange'); KDD'16's step has none")

    @property
    def worker_passes(self):
        """What a ``Worker`` takes: a number, or ``"auto"`` (kdd16: ``KDD16_PASSES``)."""
        if self.passes == "auto":
            return KDD16_PASSES if self.variant == "kdd16" else "auto"
        return self.passes

    def validated(self):
        if self.passes != "auto":
            check_positive_int(self.passes, "passes")
        check_positive_float(self.step_size, "step_size", allow_none=True)
        if float(self.step_divisor) < 1.0:
            raise InputError(f"step_divisor (the paper's m) must be >= 1; got {self.step_divisor}")
        if not 0.0 <= float(self.decrease_constant) <= 1.0:
            raise InputError(f"decrease_constant (the paper's c) must be in [0, 1]; got {self.decrease_constant}")
        check_positive_float(self.ridge, "ridge", inclusive=True)
        return self

    def visit_order(self, shard, y, loss, gains=None):
        """The order a worker offers its features in: by decreasing marginal gain (exchange,
        ``asyos.learners.substitution.screening``; ``gains``: the shard's, when already known), or
        ``None``, the file's (kdd16)."""
        if self.variant != "exchange":
            return None
        if gains is not None:
            return order_by_gain(gains)
        return screening_order(shard, np.asarray(y, dtype=float), loss, self.fit_intercept)

    def with_ridge(self, alpha):
        """These options with ridge ``alpha`` (``ridge="auto"``'s choice)."""
        out = copy.copy(self)
        object.__setattr__(out, "ridge", float(alpha))
        return out.validated()

    def gains(self, shard, y, loss):
        """The shard's marginal gains (``screening.marginal_gains``) under these options, or ``None``
        for kdd16 (which visits in file order)."""
        if self.variant != "exchange":
            return None
        return marginal_gains(shard, np.asarray(y, dtype=float), loss, self.fit_intercept)

    def shard(self, X, columns=None, hold=False, copy=True):
        """The shard of ``X``'s columns a worker learns on, scaled as the options say (centred
        only with an intercept to absorb the offsets): a ``FeatureShard`` of an array (``copy=False``: the
        caller gives ``X`` up, which may be scaled in place), a ``ColumnShard`` of a ``ColumnMatrix``
        (columns read on demand, or read once and held in the file's dtype with ``hold``;
        ``asyos.data.column_shard``)."""
        if is_column_matrix(X):
            return ColumnShard(X, columns, standardize=self.scale, center=self.fit_intercept, hold=hold)
        return FeatureShard(X, columns, standardize=self.scale, center=self.fit_intercept, copy=copy)


def local_lipschitz(shard, total_budget, loss, seed, shard_index=0, order=None) -> float:
    """This shard's estimate of ``L_F`` on blocks of ``total_budget + 1`` columns (``order``: the
    visit order, which ranks the columns for the blocks; ``step_size.restricted_lipschitz``)."""
    return restricted_lipschitz(shard, total_budget + 1, loss.curvature,
                                seed=[int(seed), _LIPSCHITZ_STREAM, int(shard_index)], ranking=order)


def make_worker(shard, y, loss, local_budget, lipschitz, options: SubstitutionOptions, worker_id=0, slack=None,
                owns_intercept=None, n_workers=1, total_budget=None, order=None):
    """A ``Worker`` with the step size the options and ``L_F`` give (``slack``: the global budget's).
    The intercept, when the options fit one, is owned by worker 0 unless ``owns_intercept`` says;
    one of ``n_workers`` > 1 moves by the share ``entry_scale`` gives (exchange); ``order``: the
    visit order (default ``options.visit_order``)."""
    # the ridge adds its alpha to the loss's L_F (Theorem 1's step for the penalised objective)
    step = options.step_size if options.step_size is not None else \
        step_size_from_lipschitz(lipschitz + options.ridge if lipschitz > 0 else 0.0)
    if owns_intercept is None:
        owns_intercept = options.fit_intercept and worker_id == 0
    total_budget = local_budget if total_budget is None else total_budget
    if order is None:
        order = options.visit_order(shard, y, loss)
    return Worker(shard, y, loss, local_budget, step, passes=options.worker_passes,
                  step_divisor=options.step_divisor, decrease_check=options.decrease_check,
                  decrease_constant=options.decrease_constant,
                  lipschitz=lipschitz if lipschitz > 0 else None, worker_id=worker_id,
                  log_selection=options.log_selection, slack=slack, variant=options.variant,
                  order=order, owns_intercept=owns_intercept, n_workers=n_workers,
                  entry_scale=entry_scale(shard, lipschitz, loss, total_budget, n_workers)
                  if options.variant == "exchange" else 1.0, ridge=options.ridge)


def entry_scale(shard, lipschitz, loss, total_budget, n_workers) -> float:
    """The share of its Newton weight a feature enters with, and of line 6's step the retained
    features take (``asyos.learners.substitution.substitution``): 1 for one worker; under Asy-OS
    ``1 / (1 + (q - 1) rho)``, ``rho`` the columns' correlation implied by ``L_F``
    (``step_size.coupling``). ``q`` workers moving at once from the same stale state move ``u_C``
    like one Jacobi step over their columns, whose curvature is ``1 + (q - 1) rho`` times one
    worker's: this share keeps it from overshooting (0.94 on the KDD'16 problems' independent
    columns at q = 12, 0.1 on satellite_image's)."""
    if n_workers <= 1 or not lipschitz > 0:
        return 1.0
    norms = shard.squared_norms() / max(shard.n_samples, 1)
    mean_diag = float(norms[norms > 0].mean()) if np.any(norms > 0) else 0.0
    rho = coupling(lipschitz, loss.curvature, mean_diag, total_budget + 1)
    return 1.0 / (1.0 + (n_workers - 1) * rho)


def check_objective(loss, y, u, step_size, lipschitz) -> float:
    """The final objective ``L(u)``: a ``DivergenceError`` when it is not finite, a
    ``ConvergenceWarning`` when it is worse than the empty model's ``L(0)``."""
    value = loss.value(y, u)
    advice = (f"the step size {step_size:.4g} is too large for these data (L_F estimated {lipschitz:.4g}); "
              f"pass a smaller --step-size")
    if not np.isfinite(value):
        raise DivergenceError(f"the objective is not finite at the end of the run: {advice}")
    empty = loss.value(y, np.zeros_like(u))
    if value > empty:
        warnings.warn(f"the final objective {value:.4g} is worse than the empty model's {empty:.4g}: {advice}",
                      ConvergenceWarning, stacklevel=2)
    return value


def _nothing():
    import contextlib
    return contextlib.nullcontext()


def quiet_float_errors():
    """Overflow in a diverging run is detected by the kernel (``DivergenceError``); numpy's own
    warnings would only bury that message."""
    return np.errstate(over="ignore", invalid="ignore")
