"""The transports simulated in one process (``asyos.learners.protocol.replay``): the engine's own worker and
central objects moved in simulated time, as ``--simulate --transport X`` runs them."""
import numpy as np
import pytest

from asyos import AsyncOnlineSubstitution, OnlineSubstitution, make_regression
from asyos.errors import InputError
from asyos.learners.substitution.asy_os import build_workers
from asyos.learners.substitution.workers import SubstitutionOptions
from asyos.losses import get_loss
from asyos.learners.protocol.central import Central
from asyos.learners.protocol.plan import AsyOSPlan
from asyos.learners.protocol.replay import DEFAULT_COSTS, Machine, SimulatedClock, _Cpu, replay

TRANSPORTS = [("shared-memory", {}), ("messages", {"push_mode": "pipelined"}),
              ("messages", {"push_mode": "each-step"}), ("node-aggregated", {"nodes": 2})]


@pytest.fixture(scope="module")
def problem():
    return make_regression(n_features=400, n_informative=16, n_samples=150, seed=11)


def fit(d, transport, n_workers=4, **kw):
    return AsyncOnlineSubstitution(budget=16, n_workers=n_workers, transport=transport, refit=False,
                                   **kw).fit(d.X, d.y)


@pytest.mark.parametrize("transport, kw", [("shared-memory", {}), ("messages", {"push_mode": "each-step"})])
def test_one_worker_is_sequential_os_bit_for_bit(problem, transport, kw):
    """Alone, a worker reads u_C = the sum of its own deltas in the order it made them."""
    seq = OnlineSubstitution(budget=16, refit=False).fit(problem.X, problem.y)
    sim = fit(problem, transport, n_workers=1, **kw)
    np.testing.assert_array_equal(seq.support_, sim.support_)
    assert np.array_equal(seq.raw_coef_, sim.raw_coef_) and seq.raw_intercept_ == sim.raw_intercept_
    assert sim.staleness_["max"] == 0 and sim.n_steps_ == seq.n_steps_


@pytest.mark.parametrize("transport, kw", [("messages", {"push_mode": "pipelined"}), ("node-aggregated", {})])
def test_one_worker_is_sequential_os_up_to_rounding(problem, transport, kw):
    """Pipelined: its view sums its pending steps; node-aggregated: base = u_C less what it sent."""
    seq = OnlineSubstitution(budget=16, refit=False).fit(problem.X, problem.y)
    sim = fit(problem, transport, n_workers=1, **kw)
    np.testing.assert_array_equal(seq.support_, sim.support_)
    np.testing.assert_allclose(sim.raw_coef_, seq.raw_coef_, rtol=1e-9, atol=1e-12)
    assert sim.staleness_["max"] == 0


@pytest.mark.parametrize("transport, kw", TRANSPORTS)
def test_the_same_seed_gives_the_same_run(problem, transport, kw):
    a, b = (fit(problem, transport, random_state=3, cores=2, **kw) for _ in range(2))
    assert np.array_equal(a.raw_coef_, b.raw_coef_) and a.staleness_ == b.staleness_
    assert a.simulated_time_ == b.simulated_time_
    c = fit(problem, transport, random_state=4, cores=2, **kw)
    assert c.simulated_time_ != a.simulated_time_              # the seed draws the delays


@pytest.mark.parametrize("transport, kw", TRANSPORTS)
def test_no_step_is_lost_and_u_C_is_the_workers_model(problem, transport, kw):
    """u_C at the end = sum over workers of X_S w_S (+ b): every step written once."""
    d = problem
    plan = AsyOSPlan.build(d.X.shape[1], 16, 4, budget_mode="global")
    workers, _ = build_workers(d.X, d.y, get_loss("squared"), plan, SubstitutionOptions(passes=2), 0)
    central = Central(d.n_samples)
    mode = kw.get("push_mode", transport)
    report = replay(workers, central, DEFAULT_COSTS, SimulatedClock(), mode, threshold=plan.new_threshold(),
                    machine=Machine(cores=2, jitter=0.25), seed=1, nodes=kw.get("nodes", 1))
    total = sum(w.contribution() for w in workers)
    np.testing.assert_allclose(central.u, total, atol=1e-9 * max(1.0, np.abs(total).max()))
    assert central.steps == sum(w.steps for w in workers) == report.steps
    assert all(w.state.size <= plan.cap for w in workers)
    if transport == "node-aggregated":      # one push per node and round trip, never more than the steps
        assert 0 < central.accepted < central.steps


@pytest.mark.parametrize("transport, kw", [("shared-memory", {}), ("messages", {"push_mode": "each-step"}),
                                           ("node-aggregated", {"nodes": 2})])
@pytest.mark.parametrize("bound", [0, 2])
def test_the_staleness_bound_is_enforced_by_redoing_steps(problem, transport, kw, bound):
    sim = fit(problem, transport, max_staleness=bound, **kw)
    assert sim.staleness_["max"] <= bound and sim.refused_ > 0
    assert len(sim.support_) == 16


def test_a_time_sliced_machine_makes_staleness_spikes(problem):
    """12 workers on 2 cores wait for their turn while the others step: a few steps see far more
    of the others' steps than on a core each, as under mpiexec on this machine."""
    own = fit(problem, "shared-memory", n_workers=12)
    shared = fit(problem, "shared-memory", n_workers=12, cores=2)
    assert shared.staleness_["max"] > 3 * own.staleness_["max"]
    assert shared.simulated_time_ > 3 * own.simulated_time_


def test_cpu_turns_hold_the_work_and_wait_out_the_others():
    cpu = _Cpu(Machine(cores=1, quantum_s=1.0), 2, np.random.default_rng(0))
    cpu.phase[:] = 0.0                      # rank 0 runs in [0, 1), [2, 3), ...
    assert cpu.finish(0, 0.0, 0.5, runnable=2) == 0.5
    assert cpu.finish(0, 0.5, 1.0, runnable=2) == pytest.approx(2.5)     # 0.5 now, 0.5 in the next turn
    assert cpu.finish(0, 1.2, 0.1, runnable=2) == pytest.approx(2.1)     # waits for its turn
    assert cpu.finish(0, 1.2, 0.1, runnable=1) == pytest.approx(1.3)     # alone: no waiting


@pytest.mark.parametrize("kw, message", [
    ({"transport": "carrier-pigeon"}, "The 'transport' parameter of AsyncOnlineSubstitution must be a str among"),
    ({"transport": "messages", "push_mode": "eventually"}, "'push_mode' parameter of AsyncOnlineSubstitution"),
    ({"transport": "messages", "max_staleness": 1}, "max_staleness is enforced step by step"),
    ({"transport": "shared-memory", "nodes": 2}, "nodes applies to transport='node-aggregated'"),
    ({"transport": "shared-memory", "costs": {"warp_s": 1.0}}, "unknown fields"),
])
def test_bad_settings_are_refused(problem, kw, message):
    with pytest.raises(InputError, match=message):
        AsyncOnlineSubstitution(budget=16, n_workers=2, **kw).fit(problem.X, problem.y)
