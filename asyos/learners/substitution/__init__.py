"""Online Substitution and Asy-OS: sequential, in the staleness simulator, or on MPI ranks.

Modules: ``online_substitution`` (the estimator, KDD'16 Alg. 1), ``asy_os`` (Alg. 2-3 in one process),
``substitution`` (one OS step on a retained set), ``kernels`` / ``_compiled_step`` (the compiled step),
``step_size`` (``eta = 0.5 / L_F``), ``screening`` (the visit order of the exchange variant), ``ridge_choice``
(``ridge="auto"``: the ridge chosen by cross-validation when samples are few).
"""
from ..spec import Family, algorithm

FAMILY = Family("substitution", "Online Substitution and Asy-OS: sequential, in the staleness simulator, "
                                "or on MPI ranks")


def os_kwargs(config, loss, budget):
    return dict(budget=budget, loss=loss, passes=config.feature_passes, variant=config.variant,
                fit_intercept=config.fit_intercept, scale=config.feature_scale, step_size=config.step_size,
                step_divisor=config.step_divisor, decrease_check=config.decrease_check,
                decrease_constant=config.decrease_constant, refit=config.refit, random_state=config.seed,
                trace_every=config.resolved_trace_every, ridge="auto" if config.ridge is None else config.ridge)


def _build_os(config, loss, budget):
    from .online_substitution import OnlineSubstitution
    return OnlineSubstitution(**os_kwargs(config, loss, budget))


def _build_asy_os(config, loss, budget):
    from .asy_os import AsyncOnlineSubstitution
    return AsyncOnlineSubstitution(n_workers=config.simulated_workers, max_staleness=config.max_staleness,
                                   policy=config.staleness_policy, schedule=config.schedule,
                                   sharding=config.sharding, budget_mode=config.resolved_budget_mode, cap=config.cap,
                                   slack=config.slack, transport=config.simulated_transport,
                                   push_mode=config.resolved_push_mode, max_batch=config.max_batch,
                                   nodes=config.nodes or 1, costs=config.costs, cores=config.cores,
                                   **os_kwargs(config, loss, budget))


ALGORITHMS = (
    algorithm("os", "Online Substitution (KDD'16 Alg. 1); Asy-OS under mpiexec", f"{__name__}.online_substitution",
              "OnlineSubstitution", _build_os, test_params={"passes": 2}),
    algorithm("asy-os", "Asy-OS (KDD'16 Alg. 2-3): MPI under mpiexec, else the simulator", f"{__name__}.asy_os",
              "AsyncOnlineSubstitution", _build_asy_os, test_params={"passes": 2, "n_workers": 2}),
)
PUBLIC = {name: f"{__name__}.online_substitution"                  # is_classifier / is_regressor before fit
          for name in ("OnlineSubstitutionClassifier", "OnlineSubstitutionRegressor")}
