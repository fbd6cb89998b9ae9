"""``Worker`` and ``Central`` as plain objects: refusal, discard, and the bookkeeping identity."""
import numpy as np

from asyos import make_regression
from asyos.data.shard import FeatureShard
from asyos.learners.protocol.central import Central, staleness_summary
from asyos.learners.substitution.asy_os import build_workers
from asyos.learners.protocol.plan import AsyOSPlan
from asyos.learners.substitution.workers import SubstitutionOptions, make_worker
from asyos.learners.protocol.loopback import run_loopback
from asyos.losses import get_loss


def test_central_refuses_pushes_beyond_the_bound():
    central = Central(3, max_staleness=1)
    ones = np.ones(3)
    assert central.apply(ones, 0) and central.apply(ones, 0)      # staleness 0, then 1
    assert not central.apply(ones, 0)                             # staleness 2 > 1: refused
    np.testing.assert_array_equal(central.u, [2, 2, 2])
    assert central.refused == 1 and central.version == 2
    assert central.staleness_summary()["histogram"] == [1, 1]
    assert central.u_ext[3] == 2                                  # the version rides in the reply


def test_staleness_summary():
    s = staleness_summary([5, 3, 0, 2])
    assert s["max"] == 3 and s["mean"] == (3 + 6) / 10 and s["p95"] == 3


def test_discard_then_redo_equals_never_refused():
    d = make_regression(n_features=200, n_informative=6, n_samples=60, seed=1)
    loss = get_loss("squared")
    opts = SubstitutionOptions(passes=2)
    a = make_worker(FeatureShard(d.X), d.y, loss, 6, 2.0, opts)
    b = make_worker(FeatureShard(d.X), d.y, loss, 6, 2.0, opts)
    ca, cb = Central(d.n_samples), Central(d.n_samples)
    run_loopback(a, ca)
    while True:       # b: every push is first refused, then redone at the same state
        push = b.propose(cb.u, cb.version)
        if push is None:
            break
        b.discard()
        push = b.propose(cb.u, cb.version)
        cb.apply(push.delta, push.version_read)
        b.commit()
    assert np.array_equal(ca.u, cb.u)
    assert np.array_equal(a.selection()[1], b.selection()[1])
    assert b.proposals == 2 * b.steps


def test_central_state_is_the_sum_of_the_workers_contributions_under_refusals():
    """However pushes are refused and redone, u_C = sum over workers of X_S w_S."""
    d = make_regression(n_features=300, n_informative=12, n_samples=80, seed=2)
    workers, _ = build_workers(d.X, d.y, get_loss("squared"), AsyOSPlan.build(d.X.shape[1], 12, 3),
                               SubstitutionOptions(passes=2), 0)
    central = Central(d.n_samples, max_staleness=2)
    rng = np.random.default_rng(0)
    snapshots = [(central.u.copy(), 0)] * 3
    active = [0, 1, 2]
    while active:
        i = int(rng.choice(active))
        u, version = snapshots[i]
        push = workers[i].propose(u, version)
        if push is None:
            active.remove(i)
            continue
        if central.apply(push.delta, version):
            workers[i].commit()
        else:
            workers[i].discard()
        snapshots[i] = (central.u.copy(), central.version)
    total = sum(w.contribution() for w in workers)
    np.testing.assert_allclose(central.u, total, rtol=1e-10, atol=1e-12)
    assert central.refused > 0
    assert sum(w.steps for w in workers) == central.accepted
