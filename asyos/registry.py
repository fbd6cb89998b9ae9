"""Registry of algorithms: name -> how to build it from a ``RunConfig``, and its family.

The CLI, the common tests and the benchmarks iterate over ``all_algorithms()``, so registering
an algorithm here is what makes it reachable from ``--algorithm`` and tested.

The family says how an algorithm is run (one process, the simulator, MPI ranks); the CLI looks
the family's runner up in ``asyos.runners``. The runners are not stored here because the MPI
drivers themselves look algorithms up in this registry: the registry stays below them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .errors import InputError

FAMILIES = {
    "substitution": "Online Substitution and Asy-OS: sequential, in the staleness simulator, or on MPI ranks",
    "baselines": "batch baselines, in one process",
    "stream": "samples arrive (fit/partial_fit/learn_one); in one process or simulated as data-parallel workers",
    "averages": "a sum over samples: streamed from files, reduced across MPI ranks",
    "path": "a regularized model whose feature set changes, followed along its solution path (no budget)",
}


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str
    description: str
    build: Callable          # (config, loss_name, budget) -> estimator
    family: str              # a key of FAMILIES
    test_params: dict = None  # small, fast parameters for the common test battery
    tasks: tuple = ("regression", "classification")

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ValueError(f"algorithm {self.name!r}: unknown family {self.family!r}; "
                             f"choose one of: {', '.join(FAMILIES)}")

    @property
    def runs_on_mpi(self) -> bool:
        """Asy-OS's MPI driver (``asyos.distributed.driver``) runs it: the substitution family."""
        return self.family == "substitution"


_REGISTRY: dict[str, AlgorithmSpec] = {}


def register(spec: AlgorithmSpec) -> AlgorithmSpec:
    if spec.name in _REGISTRY:
        raise ValueError(f"algorithm {spec.name!r} registered twice")
    _REGISTRY[spec.name] = spec
    return spec


def get_algorithm(name: str) -> AlgorithmSpec:
    _load_builtin()
    if name not in _REGISTRY:
        raise InputError(f"unknown algorithm {name!r}; choose one of: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def all_algorithms() -> list[AlgorithmSpec]:
    _load_builtin()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def _os_kwargs(config, loss, budget):
    return dict(budget=budget, loss=loss, passes=config.feature_passes, variant=config.variant,
                fit_intercept=config.fit_intercept, scale=config.feature_scale, step_size=config.step_size,
                step_divisor=config.step_divisor, decrease_check=config.decrease_check,
                decrease_constant=config.decrease_constant, refit=config.refit, random_state=config.seed,
                trace_every=config.trace_every)


def _build_os(config, loss, budget):
    from .learners.online_substitution import OnlineSubstitution
    return OnlineSubstitution(**_os_kwargs(config, loss, budget))


def _build_asy_os(config, loss, budget):
    from .learners.asy_os import AsyncOnlineSubstitution
    return AsyncOnlineSubstitution(n_workers=config.simulated_workers, max_staleness=config.max_staleness,
                                   policy=config.staleness_policy, schedule=config.schedule,
                                   sharding=config.sharding, budget_mode=config.resolved_budget_mode, cap=config.cap,
                                   slack=config.slack, transport=config.simulated_transport,
                                   push_mode=config.resolved_push_mode, max_batch=config.max_batch,
                                   nodes=config.nodes or 1, costs=config.costs, cores=config.cores,
                                   **_os_kwargs(config, loss, budget))


def _build_proj_gd(config, loss, budget):
    from .learners.baselines import ProjectedGradient
    return ProjectedGradient(budget=budget, loss=loss, refit=config.refit, random_state=config.seed)


def _build_lasso(config, loss, budget):
    from .learners.baselines import LassoToBudget
    return LassoToBudget(budget=budget, loss=loss, refit=config.refit, random_state=config.seed)


def _stream_builder(module, class_name):
    """Build a sample-stream learner from the config: budget, loss (``--loss auto`` keeps the
    learner's own default when it suits the labels, e.g. OFS's hinge), passes, seed, ``--scale``,
    ``--param name=value,...``."""
    def build(config, loss, budget):
        import importlib
        from .learners.sample_stream import stream_loss
        cls = getattr(importlib.import_module(module, __package__), class_name)
        estimator = cls(budget=budget, random_state=config.seed)
        default = estimator.loss
        if config.loss != "auto" or stream_loss(default)[0].task != stream_loss(loss)[0].task:
            estimator.set_params(loss=loss)
        if config.passes is not None:
            estimator.set_params(passes=config.passes)
        if config.scale is not None:
            estimator.set_params(scale=None if config.scale == "none" else config.scale)
        return estimator.set_params(**config.estimator_params)
    return build


_STREAM_LEARNERS = (
    ("b-arda", ".learners.budgeted", "BudgetedARDA", "B-ARDA: budgeted adaptive dual averaging (ECML'18 Alg. 1)",
     {"passes": 2}),
    ("b-amd", ".learners.budgeted", "BudgetedAMD", "B-AMD: budgeted adaptive mirror descent (ECML'18 Alg. 2)",
     {"passes": 2}),
    ("ofs", ".learners.ofs", "OFS", "OFS / FOFS: margin update, L2 ball, keep the B largest (Wang et al. 2014)",
     {"passes": 2}),
    ("sofs", ".learners.ofs", "SOFS", "SOFS: diagonal AROW, keep the B most confident (Wu et al. 2017); "
     "classification", {"passes": 2}),
    ("l1-arda", ".learners.l1", "L1ARDA", "l1-ARDA, the l1 weight searched for the budget (Duchi et al. 2011)",
     {"passes": 1}),
    ("ada-fobos", ".learners.l1", "AdaFOBOS", "Ada-FOBOS, the l1 weight searched for the budget (Duchi et al. "
     "2011)", {"passes": 1}),
    ("opg", ".learners.l1", "OPG", "online proximal gradient (FOBOS) with l1 (+l2), l1 weight searched for the "
     "budget", {"passes": 1}),
    ("rda", ".learners.l1", "RDA", "l1-RDA (Xiao 2010), l1 weight searched for the budget", {"passes": 1}),
    ("sfsa", ".learners.sfsa", "SFSA", "stochastic feature selection with annealing (thesis Alg. 1; "
     "method=sgd|nesterov|adam)", {"passes": 2, "batch_size": 5}),
    ("tsgd", ".learners.sfsa", "TSGD", "truncated SGD (thesis Alg. 2; truncate=end|every)",
     {"passes": 2, "batch_size": 5}),
)

_RUNNING_AVERAGES = (
    ("ols-th", "OLS with thresholding on running averages (thesis Alg. 3)"),
    ("ofsa", "online FSA on running averages, annealing to the budget (thesis Alg. 4)"),
    ("olasso", "online Lasso on running averages, lambda bisected to the budget (thesis Alg. 5)"),
    ("oelnet", "online elastic net on running averages, lambda bisected to the budget (thesis Alg. 5)"),
    ("omcp", "online MCP on running averages, lambda bisected to the budget (thesis Alg. 5, eq. 3.10)"),
)


def _running_averages_builder(name):
    """Build a running-averages learner: the loss only says the task (the criterion is least
    squares for both, thesis Sec. 3.2.6); ``--param`` sets the rest (``forgetting=0.01``, ...)."""
    def build(config, loss, budget):
        from .learners.running_averages import LEARNERS
        from .losses import get_loss
        estimator = LEARNERS[name](budget=budget, task=get_loss(loss).task)
        return estimator.set_params(**config.estimator_params)
    return build


def _build_dfls(config, loss, budget):
    """DFLS has no budget: ``--param penalty=...,alpha=...,exponent=...`` sets it."""
    from .learners.dfls import DFLS
    return DFLS(**config.estimator_params)


_LOADED = False


def _load_builtin():
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    register(AlgorithmSpec("os", "Online Substitution (KDD'16 Alg. 1); Asy-OS under mpiexec", _build_os,
                           "substitution", test_params={"passes": 2}))
    register(AlgorithmSpec("asy-os", "Asy-OS (KDD'16 Alg. 2-3): MPI under mpiexec, else the simulator",
                           _build_asy_os, "substitution", test_params={"passes": 2, "n_workers": 2}))
    register(AlgorithmSpec("proj-gd", "Projected gradient / IHT onto the L0 ball (batch baseline)",
                           _build_proj_gd, "baselines", test_params={"max_iter": 50}))
    register(AlgorithmSpec("lasso", "L1 path tuned to the budget, scikit-learn (batch baseline)",
                           _build_lasso, "baselines", test_params={}))
    for name, module, class_name, description, test_params in _STREAM_LEARNERS:
        tasks = ("classification",) if name == "sofs" else ("regression", "classification")
        register(AlgorithmSpec(name, description, _stream_builder(module, class_name), "stream",
                               test_params=test_params, tasks=tasks))
    for name, description in _RUNNING_AVERAGES:
        register(AlgorithmSpec(name, description, _running_averages_builder(name), "averages", test_params={}))
    register(AlgorithmSpec("dfls", "DFLS: group-lasso or l_p least squares; add or remove a block of features by "
                                    "following the solution path (Li & Gu)", _build_dfls, "path", test_params={},
                           tasks=("regression",)))
