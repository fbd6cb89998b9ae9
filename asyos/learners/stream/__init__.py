"""Sample-stream learners: samples arrive (``fit`` / ``partial_fit`` / ``learn_one``); in one process
or simulated as data-parallel workers (``asyos.learners.stream.stream_simulator``).

Modules: ``sample_stream`` (the base class and its public face), ``budgeted`` (B-ARDA, B-AMD),
``ofs`` (OFS, SOFS), ``l1`` (l1-ARDA, Ada-FOBOS, OPG, RDA), ``sfsa`` (SFSA, TSGD), ``_stream_kernels``
(the compiled row loops), ``tuning`` (the ECML'18 grid search), ``stream_learners`` (warm-up),
``resumable`` (``fit`` saved between row chunks and resumed bit for bit).
"""
from ..spec import Family, algorithm

FAMILY = Family("stream", "samples arrive (fit/partial_fit/learn_one); in one process or simulated as "
                          "data-parallel workers")


def _stream_builder(module, class_name):
    """Build a sample-stream learner from the config: budget, loss (``--loss auto`` keeps the
    learner's own default when it suits the labels, e.g. OFS's hinge), passes, seed, ``--scale``,
    ``--param name=value,...``."""
    def build(config, loss, budget):
        import importlib
        from .sample_stream import stream_loss
        cls = getattr(importlib.import_module(module), class_name)
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


def _learner(name, module, class_name, description, test_params, tasks=("regression", "classification")):
    module = f"{__name__}.{module}"
    return algorithm(name, description, module, class_name, _stream_builder(module, class_name),
                     test_params=test_params, tasks=tasks)


ALGORITHMS = (
    _learner("b-arda", "budgeted", "BudgetedARDA", "B-ARDA: budgeted adaptive dual averaging (ECML'18 Alg. 1)",
             {"passes": 2}),
    _learner("b-amd", "budgeted", "BudgetedAMD", "B-AMD: budgeted adaptive mirror descent (ECML'18 Alg. 2)",
             {"passes": 2}),
    _learner("ofs", "ofs", "OFS", "OFS / FOFS: margin update, L2 ball, keep the B largest (Wang et al. 2014)",
             {"passes": 2}),
    _learner("sofs", "ofs", "SOFS", "SOFS: diagonal AROW, keep the B most confident (Wu et al. 2017); "
             "classification", {"passes": 2}, tasks=("classification",)),
    _learner("l1-arda", "l1", "L1ARDA", "l1-ARDA, the l1 weight searched for the budget (Duchi et al. 2011)",
             {"passes": 1}),
    _learner("ada-fobos", "l1", "AdaFOBOS", "Ada-FOBOS, the l1 weight searched for the budget (Duchi et al. "
             "2011)", {"passes": 1}),
    _learner("opg", "l1", "OPG", "online proximal gradient (FOBOS) with l1 (+l2), l1 weight searched for the "
             "budget", {"passes": 1}),
    _learner("rda", "l1", "RDA", "l1-RDA (Xiao 2010), l1 weight searched for the budget", {"passes": 1}),
    _learner("sfsa", "sfsa", "SFSA", "stochastic feature selection with annealing (thesis Alg. 1; "
             "method=sgd|nesterov|adam)", {"passes": 2, "batch_size": 5}),
    _learner("tsgd", "sfsa", "TSGD", "truncated SGD (thesis Alg. 2; truncate=end|every)",
             {"passes": 2, "batch_size": 5}),
)
PUBLIC = {"AsyncSampleStream": "asyos.learners.stream.stream_simulator"}
