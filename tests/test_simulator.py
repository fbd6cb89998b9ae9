"""Invariants of the staleness simulator (``asyos.learners.protocol.simulator``)."""
import numpy as np
import pytest

from asyos import AsyncOnlineSubstitution, OnlineSubstitution, make_regression
from asyos.data.shard import FeatureShard
from asyos.data.sharding import shard_columns, split_budget
from asyos.learners.protocol.central import Central
from asyos.learners.protocol.simulator import simulate
from asyos.errors import InputError
from asyos.learners.substitution.asy_os import build_workers
from asyos.learners.protocol.plan import AsyOSPlan
from asyos.learners.substitution.workers import SubstitutionOptions, make_worker
from asyos.losses import get_loss


@pytest.fixture(scope="module")
def problem():
    return make_regression(n_features=400, n_informative=16, n_samples=150, seed=11)


@pytest.mark.parametrize("variant, ridge", [("exchange", 0.0), ("kdd16", 0.0), ("exchange", 0.2)])
@pytest.mark.parametrize("passes", [3, "auto"])
def test_one_worker_without_staleness_is_sequential_os_bit_for_bit(problem, variant, ridge, passes):
    d = problem
    seq = OnlineSubstitution(budget=16, passes=passes, refit=False, variant=variant, ridge=ridge).fit(d.X + 2.0, d.y)
    sim = AsyncOnlineSubstitution(budget=16, n_workers=1, max_staleness=0, passes=passes, refit=False,
                                  decrease_check=True, variant=variant, ridge=ridge).fit(d.X + 2.0, d.y)
    np.testing.assert_array_equal(seq.support_, sim.support_)
    assert np.array_equal(seq.raw_coef_, sim.raw_coef_)          # exact, not approximate
    assert seq.raw_intercept_ == sim.raw_intercept_ and (seq.raw_intercept_ != 0) == (variant == "exchange")
    assert sim.finish_ == "union" and seq.n_passes_ == sim.n_passes_
    assert seq.selection_log_ == sim.selection_log_
    assert sim.staleness_["max"] == 0


def test_zero_staleness_equals_a_round_robin_over_the_shards(problem):
    d, q, s = problem, 4, 16
    loss = get_loss("squared")
    options = SubstitutionOptions(passes=2)

    def workers():
        cols = [shard_columns(d.X.shape[1], q, w) for w in range(q)]
        return [make_worker(FeatureShard(d.X[:, c], c), d.y, loss, b, 2.0, options, worker_id=w)
                for w, (c, b) in enumerate(zip(cols, split_budget(s, q)))]

    # the round-robin written out: each worker in turn steps at the current state
    manual, central = workers(), Central(d.n_samples)
    active, turn = list(manual), 0
    while active:
        w = active[turn % len(active)]
        push = w.propose(central.u, central.version)
        if push is None:
            active.remove(w)
            continue
        central.apply(push.delta, push.version_read)
        w.commit()
        turn += 1
    simulated, central2 = workers(), Central(d.n_samples)
    report = simulate(simulated, central2, max_staleness=0)
    assert np.array_equal(central.u, central2.u)
    for a, b in zip(manual, simulated):
        np.testing.assert_array_equal(a.selection()[0], b.selection()[0])
        assert np.array_equal(a.selection()[1], b.selection()[1])
    assert report.staleness["max"] == 0 and report.steps == central.accepted


@pytest.mark.parametrize("policy", ["max", "uniform", "fresh"])
@pytest.mark.parametrize("schedule", ["round-robin", "random"])
@pytest.mark.parametrize("tau", [0, 1, 3, 9])
def test_the_staleness_bound_is_never_exceeded(problem, policy, schedule, tau):
    d = problem
    workers, _ = build_workers(d.X, d.y, get_loss("squared"), AsyOSPlan.build(d.X.shape[1], 16, 4),
                               SubstitutionOptions(passes=1), 0)
    report = simulate(workers, Central(d.n_samples), tau, policy, schedule, seed=3)
    assert report.staleness["max"] <= tau
    assert sum(report.staleness["histogram"]) == report.steps > 0
    if policy == "max" and schedule == "random" and tau > 0:
        assert report.staleness["max"] == tau          # the bound is reached, so it is the binding one
    if policy == "fresh":
        assert report.staleness["max"] == 0


def test_paper_setting_staleness_is_q_minus_one_with_round_robin(problem):
    model = AsyncOnlineSubstitution(budget=16, n_workers=4, passes=1).fit(problem.X, problem.y)
    assert model.staleness_["max"] == 3 and model.staleness_["mean"] > 2.9


def test_same_seed_same_result_other_seed_other_schedule(problem):
    d = problem
    kw = dict(budget=16, n_workers=5, max_staleness=6, policy="uniform", schedule="random", passes=2)
    a = AsyncOnlineSubstitution(random_state=1, **kw).fit(d.X, d.y)
    b = AsyncOnlineSubstitution(random_state=1, **kw).fit(d.X, d.y)
    c = AsyncOnlineSubstitution(random_state=2, **kw).fit(d.X, d.y)
    assert np.array_equal(a.coef_, b.coef_) and a.selection_log_ == b.selection_log_
    assert a.staleness_ == b.staleness_
    assert a.selection_log_ != c.selection_log_


class CountingWorker:
    """A worker without learning: pushes +1 into its own coordinate, and records what it read."""

    def __init__(self, index, n_steps):
        self.index, self.left, self.reads, self.done = index, n_steps, [], False
        self.delta = None

    def propose(self, u, version):
        if self.left == 0:
            self.done = True
            return None
        self.reads.append((version, u.copy()))
        from asyos.learners.protocol.wire import PUSH_STEPS, push_buffer
        from asyos.learners.substitution.asy_worker import Push
        n = u.shape[0]
        buffer = push_buffer(n)                      # the wire layout: delta, then the header
        buffer[self.index] = 1.0
        buffer[n + PUSH_STEPS] = 1
        self.delta = buffer[:n]
        return Push(self.delta, buffer, version, self.index, 0)

    def commit(self):
        self.left -= 1


@pytest.mark.parametrize("policy", ["max", "uniform"])
def test_reads_are_real_past_states_that_include_the_workers_own_pushes(policy):
    q, tau = 4, 5
    workers = [CountingWorker(i, 30) for i in range(q)]
    central = Central(q)
    simulate(workers, central, tau, policy, "random", seed=7)
    np.testing.assert_array_equal(central.u, np.full(q, 30.0))
    for w in workers:
        for k, (version, u) in enumerate(w.reads):
            assert u.sum() == version                    # the snapshot is the state at that version
            assert u[w.index] == k                       # it holds all of this worker's own pushes


def test_simulator_rejects_bad_settings(problem):
    d = problem
    with pytest.raises(InputError, match=r"'max_staleness' parameter .* an int in the range \[0, inf\) or None"):
        AsyncOnlineSubstitution(budget=16, n_workers=2, max_staleness=-1).fit(d.X, d.y)
    with pytest.raises(InputError, match="The 'policy' parameter of AsyncOnlineSubstitution must be a str among"):
        AsyncOnlineSubstitution(budget=16, n_workers=2, policy="oldest").fit(d.X, d.y)
    with pytest.raises(InputError, match="budget 3 is smaller than the number of workers"):
        AsyncOnlineSubstitution(budget=3, n_workers=4, budget_mode="split").fit(d.X, d.y)
    with pytest.warns(UserWarning, match="n_workers=401 is greater than n_features=400: 400 workers"):
        many = AsyncOnlineSubstitution(budget=16, n_workers=401).fit(d.X, d.y)
    assert many.n_workers == 401 and many.n_workers_ == 400


@pytest.mark.filterwarnings("ignore::asyos.errors.SelectionWarning")
def test_workers_stop_once_the_data_are_fitted(monkeypatch):
    """A budget as large as the sample count fits the training data exactly; once the gradient is
    below ``SETTLED_GRADIENT`` of the empty model's, a pass that changed nothing ends the workers
    whatever the others still move (they only polish the fit): the same training error in a fifth of
    the steps. Without that floor (and the loss's, ``Worker._objective_settled``) the same run goes on
    to the ``MAX_AUTO_PASSES`` cap. (A cap of 60
    features a worker lets the workers' union reach the budget; the default, 36 here, stops short of it
    and of the exact fit.)"""
    from asyos import make_classification
    from asyos.learners.substitution import asy_worker as W
    d = make_classification(n_features=2000, n_informative=10, n_samples=80, seed=2)

    def fit():
        return AsyncOnlineSubstitution(budget=80, n_workers=4, max_staleness=8, cap=60, random_state=0).fit(d.X, d.y)
    settled = fit()
    monkeypatch.setattr(W, "SETTLED_GRADIENT", 0.0)
    monkeypatch.setattr(W.Worker, "_objective_settled", lambda self, u: False)   # the other floor
    capped = fit()
    assert capped.n_passes_ == W.MAX_AUTO_PASSES
    assert settled.n_passes_ < W.MAX_AUTO_PASSES and settled.n_steps_ < capped.n_steps_ / 3
    assert np.mean(settled.predict(d.X) != d.y) == np.mean(capped.predict(d.X) != d.y) == 0.0


@pytest.mark.filterwarnings("ignore::asyos.errors.SelectionWarning")
def test_workers_stop_when_their_pass_no_longer_moves_the_loss(monkeypatch):
    """Two workers whose changes only trade noise features against each other's moves stop once a
    pass moved the loss at ``u_C`` by less than ``QUIET_GAIN`` of itself: a pass fewer than without
    that rule, for the same selection and objective."""
    from asyos.learners.substitution import asy_worker as W
    d = make_regression(n_features=6000, n_informative=40, seed=1)

    def fit():
        return AsyncOnlineSubstitution(budget=40, n_workers=2, random_state=0).fit(d.X, d.y)
    settled = fit()
    monkeypatch.setattr(W.Worker, "_objective_settled", lambda self, u: False)
    longer = fit()
    assert settled.n_passes_ < longer.n_passes_ and settled.n_steps_ < longer.n_steps_
    np.testing.assert_array_equal(settled.support_, longer.support_)
    assert settled.objective_selection_ == pytest.approx(longer.objective_selection_, rel=1e-6)


def test_asy_os_refits_its_selection_with_its_ridge(problem):
    """The finish's refit is the ridge refit of the selected columns (``refit_with_intercept``), the
    exchange run over the candidates penalised like the workers were."""
    from asyos.learners.refit import refit_with_intercept
    d = problem
    sim = AsyncOnlineSubstitution(budget=16, n_workers=4, ridge=0.5).fit(d.X, d.y)
    assert sim.finish_ == "exchange" and sim.support_.size == 16
    coef, b = refit_with_intercept(d.X[:, sim.support_], d.y, get_loss("squared"), ridge=0.5)
    np.testing.assert_allclose(sim.coef_[sim.support_], coef, rtol=1e-9)
    assert sim.intercept_ == pytest.approx(b, rel=1e-9, abs=1e-12)
    plain = AsyncOnlineSubstitution(budget=16, n_workers=4).fit(d.X, d.y)
    assert np.linalg.norm(sim.coef_) < np.linalg.norm(plain.coef_)
