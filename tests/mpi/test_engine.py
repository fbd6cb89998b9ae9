"""Asy-OS inside an MPI job (``mpiexec -n 3 python -m mpi4py -m pytest --with-mpi tests/mpi``)."""
import numpy as np
import pytest

from asyos.runs.config import RunConfig
from asyos.errors import InputError

CONFIG = RunConfig(n_features=300, n_informative=8, passes=2, quiet=True, seed=4)


def world():
    from mpi4py import MPI
    return MPI.COMM_WORLD


def run_on_two_ranks(config):
    """``run_asy_os`` on world ranks 0 and 1 (one worker); the record on rank 0, else None."""
    from asyos.runs.mpi_run import run_asy_os
    comm = world()
    pair = comm.Split(0 if comm.Get_rank() < 2 else 1, comm.Get_rank())
    try:
        return run_asy_os(config, pair) if comm.Get_rank() < 2 else None
    finally:
        pair.Free()
        comm.Barrier()


def sequential_os(config):
    from asyos import OnlineSubstitution
    from asyos.runs.problem import open_data_source
    d = open_data_source(config).load()
    return OnlineSubstitution(budget=8, passes=2, refit=False, random_state=4, variant=config.variant).fit(d.X, d.y)


VARIANTS = ["exchange", "kdd16"]


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("variant", VARIANTS)
def test_one_worker_stepping_one_by_one_is_sequential_os_bit_for_bit(variant):
    """The intercept (exchange), stepped by worker 0 = rank 1, rides in its pushes exactly as in OS."""
    record = run_on_two_ranks(CONFIG.replace(push_mode="each-step", variant=variant))
    if world().Get_rank() == 0:
        seq = sequential_os(CONFIG.replace(variant=variant))
        assert record["selected"] == seq.support_.tolist()
        assert record["raw_coef"] == seq.raw_coef_[seq.support_].tolist()     # exact
        assert record["raw_intercept"] == seq.raw_intercept_
        assert (seq.raw_intercept_ != 0.0) == (variant == "exchange")
        assert record["staleness"]["max"] == 0 and record["steps_per_push"] == 1


@pytest.mark.mpi(min_size=2)
def test_one_pipelined_worker_is_sequential_os_up_to_rounding():
    """Its view holds every step of its own, so only the summation order differs."""
    record = run_on_two_ranks(CONFIG.replace(transport="messages"))
    if world().Get_rank() == 0:
        seq = sequential_os(CONFIG)
        assert record["push_mode"] == "pipelined" and record["staleness"]["max"] == 0
        assert record["selected"] == seq.support_.tolist()
        np.testing.assert_allclose(record["raw_coef"], seq.raw_coef_[seq.support_], rtol=1e-9)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("variant", VARIANTS)
def test_one_worker_on_shared_memory_is_sequential_os_bit_for_bit(variant):
    """It reads u_C = its own row, which it built by adding each step's delta, as sequential OS does."""
    record = run_on_two_ranks(CONFIG.replace(variant=variant))          # auto: one node, so shared memory
    if world().Get_rank() == 0:
        seq = sequential_os(CONFIG.replace(variant=variant))
        assert record["transport"] == "shared-memory" and record["push_mode"] is None
        assert record["selected"] == seq.support_.tolist()
        assert record["raw_coef"] == seq.raw_coef_[seq.support_].tolist()     # exact
        assert record["raw_intercept"] == seq.raw_intercept_
        assert record["staleness"]["max"] == 0 and record["pushes"] == record["steps"]


@pytest.mark.mpi(min_size=2)
def test_one_worker_on_a_node_aggregated_window_is_sequential_os_up_to_rounding():
    """Its view is base + its own row, base being u_C less what its node sent: zero up to the
    rounding of summing the same changes in another order."""
    record = run_on_two_ranks(CONFIG.replace(transport="node-aggregated"))
    if world().Get_rank() == 0:
        seq = sequential_os(CONFIG)
        assert record["transport"] == "node-aggregated" and record["staleness"]["max"] == 0
        assert record["selected"] == seq.support_.tolist()
        np.testing.assert_allclose(record["raw_coef"], seq.raw_coef_[seq.support_], rtol=1e-9)
        assert record["steps"] == seq.n_steps_ and record["pushes"] <= record["steps"]


TRANSPORTS = ["shared-memory", "messages", "node-aggregated"]


@pytest.mark.mpi(min_size=3)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_central_state_equals_the_workers_final_model(transport):
    """No push is lost or applied twice: L(u_C) at the end equals L(X w) of the workers' final
    weights (all of them: under the global budget, the candidates before the cut to s)."""
    from asyos.runs.mpi_run import run_asy_os
    from asyos.runs.problem import open_data_source
    from asyos.losses import get_loss

    record = run_asy_os(CONFIG.replace(passes=3, transport=transport), world())
    if world().Get_rank() == 0:
        assert record["transport"] == transport
        d = open_data_source(CONFIG).load()
        candidates = record["candidates"]
        assert set(record["selected"]) <= set(candidates["features"])
        u = d.X[:, candidates["features"]] @ np.array(candidates["coef"]) + candidates["intercept"]
        expected = get_loss("squared").value(d.y, u)
        assert record["metrics"]["objective_candidates"] == pytest.approx(expected, rel=1e-9)
        assert record["n_workers"] == world().Get_size() - 1
        assert sum(w["steps"] for w in record["workers"]) == record["steps"] >= record["pushes"]
        # the workers of a shared window measure staleness per step (a write may hold a batch of them)
        counted = record["pushes"] if transport == "messages" else record["steps"]
        assert sum(record["staleness"]["histogram"]) == counted


@pytest.mark.mpi(min_size=3)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_staleness_bound_under_mpi(transport):
    from asyos.runs.mpi_run import run_asy_os
    record = run_asy_os(CONFIG.replace(max_staleness=1, transport=transport), world())
    if world().Get_rank() == 0:
        assert record["staleness"]["max"] <= 1
        assert len(record["selected"]) == 8
        assert sum(w["refused"] for w in record["workers"]) == record["refused_pushes"]


@pytest.mark.mpi(min_size=2)
def test_shared_state_counts_a_write_in_progress_as_unseen():
    """A step whose read may have caught another worker's write half-way is stale: with
    --max-staleness 0 it is refused, and so is one whose read began before that write finished;
    the step read after it is taken, and no change is lost."""
    from asyos.data.shard import FeatureShard
    from asyos.distributed.mpi_shared import SharedState, shared_steps
    from asyos.learners.substitution.workers import SubstitutionOptions, local_lipschitz, make_worker
    from asyos.losses import get_loss
    from asyos.runs.problem import open_data_source
    from mpi4py import MPI

    d = open_data_source(CONFIG).load()
    shard, loss = FeatureShard(d.X, np.arange(d.X.shape[1])), get_loss("squared")
    worker = make_worker(shard, d.y, loss, 8, local_lipschitz(shard, 8, loss, 0, 0), SubstitutionOptions(passes=1))
    state = SharedState(MPI.COMM_SELF, d.X.shape[0], 2)    # two rows; row 1's writer is played here
    other = np.random.default_rng(0).standard_normal(d.X.shape[0])
    events = []

    def begin_write_after_step_3(st):               # called after each committed step of worker 0
        if int(st.steps[0]) == 3:
            st.started[1] += 1
            st.rows[1] += other
            events.append(("begun", int(st.refused[0])))

    original = worker.propose

    def propose(u, version=0, others_top=None):
        if state.refused[0] == 1 and state.steps[1] == 0:   # finish it during the redo's step
            state.steps[1] += 1
            events.append(("finished", int(state.refused[0])))
        return original(u, version, others_top)

    worker.propose = propose
    try:
        _, hist = shared_steps(state, 0, worker, max_staleness=0, monitor=begin_write_after_step_3)
        assert events == [("begun", 0), ("finished", 1)]
        assert int(state.refused[0]) == 2 and int(state.proposals[0]) == worker.proposals + 1
        assert sum(hist) == worker.steps and sum(hist[1:]) == 0
        u = np.empty(d.X.shape[0])
        np.testing.assert_allclose(state.read(u), worker.contribution() + other, rtol=1e-9, atol=1e-12)
    finally:
        state.free()


@pytest.mark.parametrize("kernels", ["numpy", "numba"])
def test_shared_state_carries_the_global_budget(kernels, monkeypatch):
    """Under the global budget every worker publishes its |w| in the window and thresholds against
    the others' rows: another worker holding s large weights makes this one refuse every entry
    (its row of u_C stays 0); an empty one leaves it as OS, its published |w| current. The same
    one step at a time (numpy) and in compiled batches (numba: the refusal inside the kernel)."""
    monkeypatch.setenv("ASYOS_KERNELS", kernels)
    from asyos.data.shard import FeatureShard
    from asyos.distributed.mpi_shared import OthersTop, SharedState, shared_steps
    from asyos.learners.substitution.workers import SubstitutionOptions, local_lipschitz, make_worker
    from asyos.losses import get_loss
    from asyos.runs.problem import open_data_source
    from mpi4py import MPI

    d = open_data_source(CONFIG).load()
    shard, loss = FeatureShard(d.X, np.arange(d.X.shape[1])), get_loss("squared")
    lipschitz = local_lipschitz(shard, 8, loss, 0, 0)
    for other_weight in (10.0, 0.0):
        worker = make_worker(shard, d.y, loss, 8, lipschitz, SubstitutionOptions(passes=1))
        state = SharedState(MPI.COMM_SELF, d.X.shape[0], 2, cap=8)
        try:
            state.weights[1] = other_weight
            shared_steps(state, 0, worker, threshold=OthersTop(state, 8))
            assert (int(state.writes[0]) < worker.steps) == (kernels == "numba")     # batches: fewer writes
            u = state.read(np.empty(d.X.shape[0]))
            if other_weight:
                assert worker.state.size == 0 and worker.steps > 0     # every entry refused
                np.testing.assert_allclose(u, worker.intercept, atol=1e-9)   # the intercept alone
            else:
                assert worker.state.size == 8 and worker.dropped == 0
                np.testing.assert_allclose(u, worker.contribution(), rtol=1e-9, atol=1e-12)
            np.testing.assert_array_equal(np.sort(state.weights[0][:worker.state.size]),
                                          np.sort(np.abs(worker.state.weights)))
            assert not state.weights[0][worker.state.size:].any()
        finally:
            state.free()


@pytest.mark.parametrize("loss", ["squared", "squared_hinge"])
def test_a_worker_in_compiled_batches_on_a_shared_window_steps_as_one_step_at_a_time(loss, monkeypatch):
    """``shared_batches`` (one read of ``u_C`` and one write per batch of steps) against ``shared_steps``
    (a read and a write per step) for a worker alone on its window: the same entries and departures
    in the same steps, the same weights up to the rounding of writing a batch's sum, no change lost."""
    from asyos.data.shard import FeatureShard
    from asyos.distributed.mpi_shared import SharedState, shared_batches, shared_steps
    from asyos.learners.substitution.workers import SubstitutionOptions, local_lipschitz, make_worker
    from asyos.losses import get_loss
    from asyos.runs.problem import open_data_source
    from mpi4py import MPI

    monkeypatch.setenv("ASYOS_KERNELS", "numba")
    d = open_data_source(CONFIG).load()
    y = np.sign(d.y - np.median(d.y)) if loss == "squared_hinge" else d.y
    shard = FeatureShard(d.X, np.arange(d.X.shape[1]))
    lipschitz = local_lipschitz(shard, 8, get_loss(loss), 0, 0)
    runs = []
    for batch in (None, 1, 7):
        worker = make_worker(shard, y, get_loss(loss), 8, lipschitz, SubstitutionOptions(passes=3, variant="exchange"))
        worker.gram_visits = False          # the step's own arithmetic (the maintained products are tested elsewhere)
        assert worker.batchable(shared=True)
        state = SharedState(MPI.COMM_SELF, d.X.shape[0], 1)
        try:
            if batch is None:
                shared_steps(state, 0, worker, monitor=lambda st: None)      # a monitor: one step at a time
            else:
                _, hist = shared_batches(state, 0, worker, batch=batch)
                assert sum(hist) == worker.steps == int(state.steps[0]) and sum(hist[1:]) == 0
                assert int(state.writes[0]) == -(-worker.steps // batch)
            u = state.read(np.empty(d.X.shape[0]))
            np.testing.assert_allclose(u, worker.contribution(), rtol=1e-9, atol=1e-12)
            runs.append((worker.steps, worker.log.rows, worker.selection(), worker.intercept))
        finally:
            state.free()
    (steps, log, (features, coef), intercept), *batched = runs
    assert steps > 300 and len(features) == 8
    for other_steps, other_log, (other_features, other_coef), other_intercept in batched:
        assert other_steps == steps
        assert [row[:5] for row in other_log] == [row[:5] for row in log]
        np.testing.assert_array_equal(other_features, features)
        np.testing.assert_allclose(other_coef, coef, rtol=1e-9)
        assert other_intercept == pytest.approx(intercept, rel=1e-9, abs=1e-12)


def test_a_batch_of_one_step_keeps_the_global_budget_as_a_step_does(monkeypatch):
    """Under the global budget a batch thresholds at its read (the drops, then the admission rule
    inside the kernel): with one step a batch, exactly where ``propose`` does it. Another worker's
    published |w| (a fifth of this one's unconstrained run's) make it drop features and
    refuse entries; the batched run drops, enters and leaves the same features in the same steps."""
    from asyos.data.shard import FeatureShard
    from asyos.distributed.mpi_shared import OthersTop, SharedState, shared_batches, shared_steps
    from asyos.learners.substitution.workers import SubstitutionOptions, local_lipschitz, make_worker
    from asyos.losses import get_loss
    from mpi4py import MPI

    monkeypatch.setenv("ASYOS_KERNELS", "numba")
    from asyos.runs.problem import open_data_source
    d = open_data_source(CONFIG).load()
    shard, loss = FeatureShard(d.X, np.arange(d.X.shape[1])), get_loss("squared")
    lipschitz = local_lipschitz(shard, 8, loss, 0, 0)

    def worker():
        w = make_worker(shard, d.y, loss, 8, lipschitz, SubstitutionOptions(passes=3), n_workers=2, slack=0.5)
        w.gram_visits = False
        return w

    free = worker()
    free_state = SharedState(MPI.COMM_SELF, d.X.shape[0], 2, cap=8)
    try:
        shared_steps(free_state, 0, free, monitor=lambda st: None)
    finally:
        free_state.free()
    others = 0.2 * np.sort(np.abs(free.state.weights))[::-1]
    runs = []
    for batched in (False, True):
        w = worker()
        state = SharedState(MPI.COMM_SELF, d.X.shape[0], 2, cap=8)
        try:
            state.weights[1] = others
            if batched:
                shared_batches(state, 0, w, batch=1, threshold=OthersTop(state, 8))
            else:
                shared_steps(state, 0, w, threshold=OthersTop(state, 8), monitor=lambda st: None)
            u = state.read(np.empty(d.X.shape[0]))
            np.testing.assert_allclose(u, w.contribution(), rtol=1e-9, atol=1e-12)
            runs.append((w.log.rows, w.selection(), w.dropped))
        finally:
            state.free()
    (log, (features, coef), dropped), (batched_log, (batched_features, batched_coef), batched_dropped) = runs
    assert dropped > 0 and 0 < len(features) < 8                   # the threshold bit: drops, refused entries
    assert [row[:5] for row in batched_log] == [row[:5] for row in log] and batched_dropped == dropped
    np.testing.assert_array_equal(batched_features, features)
    np.testing.assert_allclose(batched_coef, coef, rtol=1e-9)


@pytest.mark.mpi(min_size=3)
@pytest.mark.parametrize("transport", ["shared-memory", "node-aggregated"])
@pytest.mark.parametrize("passes", [3, None])
def test_workers_in_compiled_batches_lose_no_change(transport, passes, monkeypatch):
    """The workers' compiled batches under the global budget (drops carried, entries refused inside
    the kernel) and, with ``auto`` passes, the pass-end rules that watch the other workers: L(u_C)
    at the end equals L(X w) of the workers' final weights, and every feature is offered."""
    from asyos.runs.mpi_run import run_asy_os
    from asyos.runs.problem import open_data_source
    from asyos.losses import get_loss

    monkeypatch.setenv("ASYOS_KERNELS", "numba")
    record = run_asy_os(CONFIG.replace(passes=passes, transport=transport), world())
    if world().Get_rank() == 0:
        d = open_data_source(CONFIG).load()
        candidates = record["candidates"]
        u = d.X[:, candidates["features"]] @ np.array(candidates["coef"]) + candidates["intercept"]
        assert record["metrics"]["objective_candidates"] == pytest.approx(get_loss("squared").value(d.y, u), rel=1e-9)
        assert record["steps"] > record["pushes"]                      # batches: several steps a write
        assert sum(record["staleness"]["histogram"]) == record["steps"]
        assert len(record["selected"]) == 8 and record["passes"] >= 2


@pytest.mark.mpi(min_size=2)
def test_input_errors_are_raised_on_every_rank():
    from asyos.runs.mpi_run import run_asy_os
    with pytest.raises(InputError, match="larger than the number of features"):
        run_asy_os(CONFIG.replace(budget=301), world())
