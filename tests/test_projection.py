"""The discrete-event replay (``asyos.learners.protocol.replay``) against what it must reproduce."""
import numpy as np
import pytest

from asyos import OnlineSubstitution, make_regression
from asyos.learners.protocol.replay import Costs, SimulatedClock, replay, sequential_time
from asyos.learners.protocol.central import Central
from asyos.learners.substitution.asy_os import build_workers
from asyos.learners.protocol.plan import AsyOSPlan
from asyos.learners.substitution.workers import SubstitutionOptions
from asyos.losses import get_loss
from asyos.learners.trace import ObjectiveTrace, first_reaching

FREE = Costs(step_base_s=10e-6, step_per_retained_s=0.0, step_protocol_s=0.0, push_send_s=0.0, latency_s=0.0,
             bandwidth_bytes_per_s=float("inf"), central_service_s=0.0)
REAL = Costs(step_base_s=9e-6, step_per_retained_s=0.25e-6, step_protocol_s=1e-6, push_send_s=2e-6, latency_s=2e-6,
             bandwidth_bytes_per_s=5e9, central_service_s=6e-6)


@pytest.fixture(scope="module")
def problem():
    return make_regression(n_features=600, n_informative=12, n_samples=150, seed=2)


def workers_for(d, q, passes=2):
    return build_workers(d.X, d.y, get_loss("squared"), AsyOSPlan.build(d.X.shape[1], 12, q),
                         SubstitutionOptions(passes=passes), 0)[0]


def test_one_worker_with_free_messages_is_sequential_os(problem):
    d = problem
    seq = OnlineSubstitution(budget=12, passes=2, refit=False).fit(d.X, d.y)
    workers, central, clock = workers_for(d, 1), Central(d.n_samples), SimulatedClock()
    report = replay(workers, central, FREE, clock)
    support, coef, intercept = workers[0].selection_in_units()
    np.testing.assert_array_equal(support, seq.support_)
    np.testing.assert_allclose(coef, seq.raw_coef_[support], rtol=1e-9)
    assert intercept == pytest.approx(seq.raw_intercept_, rel=1e-9)
    assert report.steps == seq.n_steps_ and report.staleness["max"] == 0
    assert report.time_s == pytest.approx(seq.n_steps_ * 10e-6)


def test_sequential_time_is_the_sum_of_step_costs(problem):
    d = problem
    workers, central, clock = workers_for(d, 1), Central(d.n_samples), SimulatedClock()
    sizes = []
    worker = workers[0]
    original = worker.propose

    def recording_propose(u, version=0, others_top=None):
        sizes.append(worker.state.size)
        return original(u, version, others_top)
    worker.propose = recording_propose
    total = sequential_time(worker, central, REAL, clock)
    expected = sum(REAL.step_time(m, pipelined=False) for m in sizes[:-1])   # the last call finds no feature
    assert total == pytest.approx(expected)


@pytest.mark.parametrize("mode", ["pipelined", "each-step"])
def test_replay_bookkeeping_adds_up(problem, mode):
    d = problem
    workers, clock = workers_for(d, 4), SimulatedClock()
    trace = ObjectiveTrace(10, get_loss("squared"), d.y, clock=clock)
    central = Central(d.n_samples, monitor=trace)
    report = replay(workers, central, REAL, clock, mode=mode, max_batch=4)
    assert report.steps == sum(w.steps for w in workers) == central.steps
    assert report.pushes == central.accepted and 0 < report.central_utilization <= 1
    np.testing.assert_allclose(central.u, sum(w.contribution() for w in workers), rtol=1e-9, atol=1e-12)
    times = trace.as_dict()["time_s"]
    assert times == sorted(times) and times[-1] <= report.time_s
    if mode == "each-step":
        assert report.pushes == report.steps
    else:
        assert report.steps / report.pushes <= 4 + 1e-9


def test_faster_messages_reach_a_threshold_sooner(problem):
    d = problem

    def traced(costs):
        workers, clock = workers_for(d, 4), SimulatedClock()
        trace = ObjectiveTrace(5, get_loss("squared"), d.y, clock=clock)
        central = Central(d.n_samples, monitor=trace)
        trace.record(central)
        replay(workers, central, costs, clock)
        trace.record(central)
        return trace.as_dict()

    fast, slow = traced(REAL), traced(Costs(**{**REAL.as_dict(), "latency_s": 200e-6, "central_service_s": 50e-6}))
    threshold = 1.05 * max(fast["train_error"][-1], slow["train_error"][-1])     # both reach it
    assert first_reaching(fast, threshold)[0] < first_reaching(slow, threshold)[0]


def test_replay_runs_the_global_budget_as_under_mpi(problem):
    """Pushes carry the retained weights, replies the others' top |w|: the selection is cut to s,
    u_C is the sum of the workers' contributions, and one worker is sequential OS."""
    from asyos.learners.protocol.threshold import GlobalThreshold
    from asyos.learners.substitution.asy_os import gather_selection
    from asyos.learners.protocol.plan import worker_budgets
    d = problem
    seq = OnlineSubstitution(budget=12, passes=2, refit=False).fit(d.X, d.y)
    for q in (1, 4):
        budgets = worker_budgets(12, q, "global")
        plan = AsyOSPlan.build(d.X.shape[1], 12, q, budget_mode="global")
        workers = build_workers(d.X, d.y, get_loss("squared"), plan,
                                SubstitutionOptions(passes=2), 0)[0]
        central, threshold = Central(d.n_samples), GlobalThreshold(12, q, budgets[0])
        replay(workers, central, REAL, SimulatedClock(), threshold=threshold)
        total = sum(w.contribution() for w in workers)
        np.testing.assert_allclose(central.u, total, atol=1e-9 * max(1.0, np.abs(total).max()))
        support, _ = gather_selection(workers, 12)
        assert support.size <= 12 and threshold.updates == central.accepted
        if q == 1:
            np.testing.assert_array_equal(support, seq.support_)


COMPILED = Costs(step_base_s=0.0, step_per_retained_s=0.0, step_protocol_s=0.0, push_send_s=1e-6, latency_s=2e-6,
                 bandwidth_bytes_per_s=5e9, central_service_s=5e-6, read_value_s=1e-9, shared_protocol_s=2e-6,
                 visit_base_s=8e-6, visit_per_retained_s=0.5e-6, batch_call_s=20e-6)


def test_compiled_sequential_time_is_the_sum_of_its_calls(problem, monkeypatch):
    """Sequential OS in compiled calls: the same model as a step at a time, each call costing
    ``batch_time`` (one visit each: the number of steps)."""
    monkeypatch.setenv("ASYOS_KERNELS", "numba")
    d = problem
    one_visit = Costs(**{**COMPILED.as_dict(), "visit_per_retained_s": 0.0, "batch_call_s": 0.0})
    workers, clock = workers_for(d, 1), SimulatedClock()
    trace = ObjectiveTrace(25, get_loss("squared"), d.y, clock=clock)
    central = Central(d.n_samples, monitor=trace)
    total = sequential_time(workers[0], central, one_visit, clock, compiled=True)
    seq = OnlineSubstitution(budget=12, passes=2, refit=False).fit(d.X, d.y)
    assert workers[0].batchable() and central.steps == seq.n_steps_
    assert total == pytest.approx(seq.n_steps_ * 8e-6)
    np.testing.assert_allclose(central.u, seq.raw_coef_ @ d.X.T + seq.raw_intercept_, rtol=1e-9, atol=1e-9)
    rows = trace.as_dict()
    # the trace's rows fall every 25 steps (a call ends where one is due), each at the time of the
    # steps before it
    steps = np.asarray(rows["steps"][1:-1])
    assert len(steps) > 10 and np.all(np.diff(steps) == 25)
    np.testing.assert_allclose(rows["time_s"][1:-1], steps * 8e-6)


def test_one_batched_worker_on_shared_memory_is_sequential_os(problem, monkeypatch):
    monkeypatch.setenv("ASYOS_KERNELS", "numba")
    d = problem
    seq = OnlineSubstitution(budget=12, passes=2, refit=False).fit(d.X, d.y)
    workers, central, clock = workers_for(d, 1), Central(d.n_samples), SimulatedClock()
    report = replay(workers, central, COMPILED, clock, mode="shared-memory", batch=32)
    support, coef, _ = workers[0].selection_in_units()
    np.testing.assert_array_equal(support, seq.support_)
    np.testing.assert_allclose(coef, seq.raw_coef_[support], rtol=1e-9)
    assert report.steps == seq.n_steps_ and report.staleness["max"] == 0
    assert report.pushes == -(-seq.n_steps_ // 32) or report.pushes > seq.n_steps_ // 32   # batches, not steps
    assert report.time_s > seq.n_steps_ * 8e-6


@pytest.mark.parametrize("mode, nodes, q", [("shared-memory", 1, 4), ("node-aggregated", 2, 4),
                                            ("node-aggregated", 4, 8), ("node-aggregated", 8, 16)])
@pytest.mark.parametrize("budget_mode", ["split", "global"])
def test_batched_replay_loses_no_step(problem, mode, nodes, q, budget_mode, kernels):
    """Workers in batches of 8: u_C at the end is the workers' model, every step counted once with
    its staleness, and on the compiled step batches make fewer writes than steps (the numpy step:
    one step a read, as the engine runs it). With 8 and 16 workers under the global budget some
    write only the drops of features fallen below the threshold after their last step: a node
    must push those too (they were lost from u_C, 0.28 and 0.82 away from the workers' model)."""
    d = problem
    plan = AsyOSPlan.build(d.X.shape[1], max(12, q), q, budget_mode=budget_mode)
    workers, _ = build_workers(d.X, d.y, get_loss("squared"), plan, SubstitutionOptions(passes=2), 0)
    central, clock = Central(d.n_samples), SimulatedClock()
    report = replay(workers, central, COMPILED, clock, mode=mode, batch=8, nodes=nodes,
                    threshold=plan.new_threshold() if plan.keeps_threshold else None)
    total = sum(w.contribution() for w in workers)
    np.testing.assert_allclose(central.u, total, atol=1e-9 * max(1.0, np.abs(total).max()))
    extra = central.steps - sum(w.steps for w in workers)
    # a step at a time, a worker's last push of drops alone counts as a node's step (as under MPI)
    assert extra == 0 if kernels == "numba" or mode == "shared-memory" else 0 <= extra <= q
    assert report.steps == central.steps
    assert sum(report.staleness["histogram"]) == report.steps
    assert report.staleness["max"] > 0
    assert all(w.batchable(shared=True) for w in workers) == (kernels == "numba")
    if mode == "shared-memory":
        assert (report.pushes < report.steps) == (kernels == "numba")
    assert all(w.state.size <= b for w, b in zip(workers, plan.budgets))
