"""The global budget for Asy-OS (``budget_mode="global"``): workers hold up to a cap, the central
node records every worker's retained |w| and sends each the others' top s, a worker drops its
features below ``theta`` (the s-th largest |w| over those and its own current weights), and the
union is cut to the top ``s`` at the end."""
import numpy as np
import pytest

from asyos import AsyncOnlineSubstitution, make_regression
from asyos.learners.protocol.central import Central
from asyos.learners.protocol.threshold import GlobalThreshold, worker_threshold
from asyos.learners.protocol.simulator import simulate
from asyos.errors import InputError
from asyos.learners.substitution.asy_os import build_workers
from asyos.learners.protocol.plan import AsyOSPlan, default_cap, worker_budgets
from asyos.learners.substitution.workers import SubstitutionOptions
from asyos.learners.substitution.substitution import REJECT, SubstitutionState
from asyos.losses import get_loss


@pytest.fixture(scope="module")
def uneven():
    """The true features crowd into the first shard of four (contiguous sharding, asked for in the
    tests): the split budget must lose some."""
    d = make_regression(n_features=400, n_informative=16, n_samples=200, seed=5)
    order = np.r_[np.flatnonzero(d.true_coef), np.flatnonzero(d.true_coef == 0)]
    return d.X[:, order], d.y, np.arange(16)


def recall(model, true):
    return np.isin(true, model.support_).mean()


def test_threshold_is_the_budget_th_largest_retained_weight():
    t = GlobalThreshold(budget=3, n_workers=2, cap=3)
    t.update(0, [0.5, -2.0])
    assert t.value == 0.0                                     # fewer than 3 retained: no threshold
    t.update(1, [1.0, -0.1, 3.0])
    assert t.value == 1.0                                     # |w| = 3, 2, 1, 0.5, 0.1 -> the 3rd
    t.update(0, [])
    assert t.value == 0.1                                     # worker 0 now holds nothing
    assert t.updates == 3
    with pytest.raises(ValueError, match="cap"):
        t.update(0, [1.0, 2.0, 3.0, 4.0])


def test_the_age_of_the_other_workers_reports_is_tracked():
    """At each update: the version minus the mean version of the other workers' rows (and the
    oldest of them for the max)."""
    t = GlobalThreshold(budget=2, n_workers=3, cap=2)
    for worker, version in ((0, 1), (1, 2), (2, 3)):
        t.update(worker, [1.0], version)
    # others' ages: (1 - 0), (2 - (1 + 0) / 2), (3 - (1 + 2) / 2); oldest row 0, 0, 1
    assert t.age == {"mean": pytest.approx((1 + 1.5 + 1.5) / 3), "max": 2}


def test_a_worker_thresholds_its_current_weights_against_the_others_top():
    """``worker_threshold(own, others_top)`` is the s-th largest |w| of the union of the worker's
    current weights and everything the others reported: checked against sorting the union."""
    rng = np.random.default_rng(4)
    s, q, cap = 7, 5, 4
    t = GlobalThreshold(budget=s, n_workers=q, cap=cap)
    reported = [rng.standard_normal(rng.integers(0, cap + 1)) for _ in range(q)]
    for i, w in enumerate(reported):
        t.update(i, w)
    for i in range(q):
        own = rng.standard_normal(rng.integers(0, cap + 1))         # moved on since it last reported
        others = t.others_top(i)
        assert others.size == s
        union = np.abs(np.concatenate([own] + [w for k, w in enumerate(reported) if k != i]))
        expected = np.sort(union)[::-1][s - 1] if union.size >= s else 0.0
        assert worker_threshold(own, others, s) == expected
        pool = np.abs(np.concatenate([w for k, w in enumerate(reported) if k != i]))
        np.testing.assert_array_equal(np.sort(others)[::-1][:min(s, pool.size)], np.sort(pool)[::-1][:s])


def test_a_lone_worker_drops_nothing_while_it_holds_at_most_the_budget():
    """With q = 1 the threshold comes from the worker's own current weights only: the global mode
    takes exactly the OS steps (no feature is dropped because its weight moved since it reported)."""
    d = make_regression(n_features=120, n_informative=6, n_samples=80, seed=2)
    split = AsyncOnlineSubstitution(budget=6, n_workers=1, passes=2, budget_mode="split").fit(d.X, d.y)
    glob = AsyncOnlineSubstitution(budget=6, n_workers=1, passes=2, budget_mode="global").fit(d.X, d.y)
    np.testing.assert_array_equal(split.support_, glob.support_)
    assert np.array_equal(split.raw_coef_, glob.raw_coef_) and glob.n_dropped_ == 0


def test_dropping_keeps_the_contribution_exact():
    rng = np.random.default_rng(0)
    n = 30
    state = SubstitutionState(n, 5, 0.05, get_loss("squared"), rng.standard_normal(n), kernels="numpy")
    for j in range(5):
        delta = np.empty(n)
        state.propose(j, rng.standard_normal(n), np.zeros(n), delta)
        state.commit()
    before = state.contribution()
    weights = dict(zip(state.retained.tolist(), state.weights.tolist()))
    theta = np.sort(np.abs(state.weights))[2]
    delta = np.zeros(n)
    dropped = state.drop_below(theta, delta)
    assert len(dropped) == 2 and state.size == 3
    assert all(abs(weights[j]) < theta for j in dropped)
    assert all(abs(weights[j]) >= theta for j in state.retained)
    np.testing.assert_allclose(state.contribution(), before + delta, atol=1e-12)


def test_global_mode_recovers_what_the_split_loses(uneven):
    X, y, true = uneven
    split = AsyncOnlineSubstitution(budget=16, n_workers=4, passes=2, budget_mode="split",
                                    sharding="contiguous").fit(X, y)
    glob = AsyncOnlineSubstitution(budget=16, n_workers=4, passes=2, budget_mode="global",
                                   sharding="contiguous").fit(X, y)
    assert recall(split, true) <= 4 / 16 + 1e-12        # a 16/4 = 4 budget in the shard holding all 16
    assert recall(glob, true) >= 0.5                    # (its cap, 12, bounds it by 12/16)
    assert glob.support_.size <= 16 and glob.n_dropped_ > 0 and glob.threshold_ > 0


@pytest.mark.parametrize("q,tau", [(2, 0), (4, 4), (8, 8)])
def test_selection_never_exceeds_the_budget_and_u_c_is_the_sum_of_the_workers(uneven, q, tau):
    X, y, _ = uneven
    s = 16
    loss = get_loss("squared")
    budgets = worker_budgets(s, q, "global")
    workers, _ = build_workers(X, y, loss, AsyOSPlan.build(X.shape[1], s, q, budget_mode="global"),
                               SubstitutionOptions(passes=2), 0)
    central = Central(X.shape[0])
    threshold = GlobalThreshold(s, q, budgets[0])
    simulate(workers, central, tau, threshold=threshold)
    total = sum(w.contribution() for w in workers)          # X_S w_S, plus b on worker 0
    np.testing.assert_allclose(central.u, total, atol=1e-9 * max(1.0, np.abs(total).max()))
    assert all(w.state.size <= budgets[0] for w in workers)
    model = AsyncOnlineSubstitution(budget=s, n_workers=q, max_staleness=tau, budget_mode="global",
                                    sharding="contiguous").fit(X, y)
    assert model.support_.size <= s


def test_a_cap_of_s_over_q_is_the_split_mode(uneven):
    X, y, _ = uneven
    split = AsyncOnlineSubstitution(budget=16, n_workers=4, passes=2, budget_mode="split",
                                    sharding="contiguous").fit(X, y)
    glob = AsyncOnlineSubstitution(budget=16, n_workers=4, passes=2, budget_mode="global", cap=4,
                                   sharding="contiguous").fit(X, y)
    np.testing.assert_array_equal(split.support_, glob.support_)
    assert np.array_equal(split.raw_coef_, glob.raw_coef_)
    assert glob.n_dropped_ == 0


def test_global_mode_is_deterministic(uneven):
    X, y, _ = uneven
    runs = [AsyncOnlineSubstitution(budget=16, n_workers=4, passes=2, budget_mode="global", schedule="random",
                                    policy="uniform", random_state=3).fit(X, y) for _ in range(2)]
    np.testing.assert_array_equal(runs[0].support_, runs[1].support_)
    assert np.array_equal(runs[0].raw_coef_, runs[1].raw_coef_)
    assert runs[0].selection_log_ == runs[1].selection_log_


def test_a_budget_below_the_worker_count_is_fine_when_global():
    """Split needs s >= q (s/q each); the global budget does not: 8 workers share a budget of 3
    and find the 3 true features."""
    d = make_regression(n_features=200, n_informative=3, n_samples=100, seed=0)
    model = AsyncOnlineSubstitution(budget=3, n_workers=8, passes=2).fit(d.X, d.y)
    np.testing.assert_array_equal(model.support_, np.flatnonzero(d.true_coef))


def test_the_default_cap_holds_a_shard_s_share_of_a_random_selection():
    """The cap is at most s and 3 s/q; where it is below them, a shard gets more than cap of s features
    that fall at random over q shards with a probability below 1e-3 (the binomial tail, from scipy)."""
    from scipy.stats import binom
    tightened = 0
    for s in (5, 10, 50, 100, 500):
        for q in (2, 3, 4, 8, 12, 64):
            cap, before = default_cap(s, q), min(s, -(-3 * s // q))
            assert cap <= before
            if cap < before:
                tightened += 1
                assert binom.sf(cap, s, 1.0 / q) < 1e-3, (s, q, cap)
    assert tightened >= 10


def test_budget_mode_settings_are_checked(uneven):
    X, y, _ = uneven
    # s/q + 5 sd by hand: 100/12 + 5 * 2.764 = 22.2; 32 + 5 * 4; 50 + 5 * 5; 3 s/q where smaller (64/12 + 5 * 2.211)
    assert (default_cap(100, 12), default_cap(64, 2), default_cap(100, 2), default_cap(64, 12)) == (23, 52, 75, 16)
    with pytest.raises(InputError, match="The 'budget_mode' parameter of AsyncOnlineSubstitution must be a str among"):
        AsyncOnlineSubstitution(budget=16, budget_mode="shared").fit(X, y)
    with pytest.raises(InputError, match="cap 20 is larger than the budget"):
        AsyncOnlineSubstitution(budget=16, budget_mode="global", cap=20).fit(X, y)
    with pytest.raises(InputError, match="cap applies"):
        AsyncOnlineSubstitution(budget=16, cap=4, budget_mode="split", sharding="contiguous").fit(X, y)
    with pytest.raises(InputError, match="slack applies"):
        AsyncOnlineSubstitution(budget=16, slack=0.5, budget_mode="split", sharding="contiguous").fit(X, y)
    message = "The 'slack' parameter of AsyncOnlineSubstitution must be a float in the range \\(0.0, 1.0\\] or None"
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(InputError, match=message):
            AsyncOnlineSubstitution(budget=16, budget_mode="global", slack=bad).fit(X, y)


def test_cli_runs_the_global_budget_in_the_simulator(tmp_path):
    """The global budget is the default for Asy-OS."""
    import json

    from test_cli import run
    rc, out, err = run("--simulate", "--workers", "4", "--n-features", "300",
                       "--n-informative", "12", "--passes", "2", "--output", str(tmp_path), "--quiet")
    assert rc == 0, err
    record = json.loads((tmp_path / "results.json").read_text())
    assert record["budget_mode"] == "global" and len(record["selected"]) <= 12
    assert record["threshold"] > 0 and record["n_dropped"] >= 0
    assert record["slack"] == 0.5
    assert record["n_candidates"] >= len(record["selected"])
    rc, out, err = run("--simulate", "--workers", "4", "--n-features", "300", "--n-informative", "12")
    assert rc == 0 and "budget global:" in out and "slack 0.5" in out
    assert "candidates cut to" in out or "candidates exchanged down to" in out
    rc, out, err = run("--simulate", "--workers", "4", "--n-features", "300", "--budget-mode", "split")
    assert rc == 0 and "budget split: s/q per worker" in out
    rc, out, err = run("--budget-mode", "global", "--n-features", "300", "--n-informative", "12")
    assert rc == 2 and "applies to Asy-OS" in err
    rc, out, err = run("--simulate", "--budget-mode", "global", "--slack", "0", "--n-features", "300")
    assert rc == 2 and "--slack must be in (0, 1]" in err
    rc, out, err = run("--simulate", "--budget-mode", "split", "--slack", "0.5", "--n-features", "300")
    assert rc == 2 and "--slack goes with --budget-mode global" in err


def test_the_slack_keeps_more_than_theta_and_one_gives_the_exact_threshold(uneven):
    """``slack = 1`` drops everything below theta; a smaller slack keeps a band below it (more
    features held during the run, never more than the cap; the selection is still cut to s)."""
    X, y, _ = uneven
    fits = {slack: AsyncOnlineSubstitution(budget=16, n_workers=4, passes=2, budget_mode="global",
                                           slack=slack).fit(X, y) for slack in (1.0, 0.5, 0.1)}
    assert fits[1.0].n_dropped_ > fits[0.1].n_dropped_
    assert all(f.support_.size <= 16 for f in fits.values())
    for f in fits.values():        # the selection's own loss: the refit starts from it
        u = X[:, f.support_] @ f.raw_coef_[f.support_] + f.raw_intercept_
        assert f.objective_selection_ == pytest.approx(get_loss("squared").value(y, u), rel=1e-9)


def test_a_new_feature_below_the_drop_level_does_not_enter():
    """The admission rule: with the others holding s large weights, a worker's new feature (whose
    one-step weight is far below slack x theta) is rejected, so nothing enters only to be dropped."""
    d = make_regression(n_features=40, n_informative=4, n_samples=30, seed=1)
    workers, _ = build_workers(d.X, d.y, get_loss("squared"), AsyOSPlan.build(d.X.shape[1], 8, 1),
                               SubstitutionOptions(passes=1), 0)
    worker = workers[0]
    u = np.zeros(d.n_samples)
    for _ in range(5):
        push = worker.propose(u, 0, np.full(8, 1e3))
        assert push.action == REJECT
        np.testing.assert_allclose(push.delta, push.delta[0], atol=1e-12)   # x_j w_j taken out: the intercept's step
        worker.commit()
    assert worker.state.size == 0 and worker.dropped == 0 and worker.threshold == 1e3


def test_worker_drops_below_slack_times_its_threshold():
    d = make_regression(n_features=40, n_informative=4, n_samples=30, seed=1)
    loss = get_loss("squared")
    plan = AsyOSPlan.build(d.X.shape[1], 8, 1, budget_mode="global", slack=0.5)
    workers, _ = build_workers(d.X, d.y, loss, plan, SubstitutionOptions(passes=1), 0)
    worker = workers[0]
    u = np.zeros(d.n_samples)
    for _ in range(8):                                   # fill the 8 slots
        push = worker.propose(u, 0)
        u += push.delta
        worker.commit()
    w = np.sort(np.abs(worker.state.weights))
    others = np.full(8, w[4])                            # the others hold 8 weights equal to the 5th smallest
    theta = worker_threshold(worker.state.weights, others, 8)
    expected_drops = int(np.sum(np.abs(worker.state.weights) < 0.5 * theta))
    worker.propose(u, 0, others)
    assert worker.threshold == theta and worker.dropped == expected_drops
