"""Running-averages learners (thesis Ch. 3): a sum over samples (``stats.RunningAverages``), streamed
from files or reduced across MPI ranks, from which a model with ``k`` features is extracted
(``extractors``; coordinate descent on the Gram matrix in ``_gram_kernels``); the estimators are in
``running_averages``.
"""
from ..spec import Family, algorithm

FAMILY = Family("averages", "a sum over samples: streamed from files, reduced across MPI ranks")


def _running_averages_builder(class_name):
    """Build a running-averages learner: the loss only says the task (the criterion is least
    squares for both, thesis Sec. 3.2.6); ``--param`` sets the rest (``forgetting=0.01``, ...)."""
    def build(config, loss, budget):
        from ...losses import get_loss
        from . import running_averages
        estimator = getattr(running_averages, class_name)(budget=budget, task=get_loss(loss).task)
        return estimator.set_params(**config.estimator_params)
    return build


def _learner(name, class_name, description):
    return algorithm(name, description, f"{__name__}.running_averages", class_name,
                     _running_averages_builder(class_name))


ALGORITHMS = (
    _learner("ols-th", "OLSThreshold", "OLS with thresholding on running averages (thesis Alg. 3)"),
    _learner("ofsa", "OFSA", "online FSA on running averages, annealing to the budget (thesis Alg. 4)"),
    _learner("olasso", "OLasso", "online Lasso on running averages, lambda bisected to the budget (thesis Alg. 5)"),
    _learner("oelnet", "OElasticNet", "online elastic net on running averages, lambda bisected to the budget "
             "(thesis Alg. 5)"),
    _learner("omcp", "OMCP", "online MCP on running averages, lambda bisected to the budget (thesis Alg. 5, "
             "eq. 3.10)"),
)
PUBLIC = {"RunningAverages": f"{__name__}.stats"}
