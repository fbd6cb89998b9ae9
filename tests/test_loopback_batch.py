"""Sequential OS's compiled visits (``Worker.visit_batch``, ``loopback.BATCH_VISITS`` steps a call)
against the same loop one Python call a step. With ``Worker.gram_visits`` off the arithmetic is the
same in the same order, so the model is the same to the last bit, with the same selection log,
trace rows and counters, whatever the batch size. With it on (the default), the squared loss's
visits run on maintained products (``_compiled_step.gram_visit``): the same decisions, the numbers
equal to rounding. A run stopped between batches resumes to the same model; a diverging step is
reported as in the step-by-step loop."""
import numpy as np
import pytest
import scipy.sparse as sp

from asyos import OnlineSubstitution
from asyos.records.checkpoint import Checkpointer, RunInterrupted
from asyos.data.synthetic import make_classification, make_regression
from asyos.errors import DivergenceError
from asyos.learners.protocol import loopback
from asyos.learners.protocol.central import Central
from asyos.learners.substitution.asy_worker import Worker
from asyos.data.shard import FeatureShard
from asyos.losses import get_loss

def sparse(data, keep, seed):
    """``data.X`` with all but a ``keep`` share of its entries zeroed, as CSR (text-like columns)."""
    rng = np.random.default_rng(seed)
    return sp.csr_matrix(np.where(rng.random(data.X.shape) < keep, data.X, 0.0))


_REG = make_regression(n_features=600, n_informative=20, n_samples=150, seed=3)
_CLS = make_classification(n_features=500, n_informative=20, n_samples=160, seed=4)
_LOG = make_classification(n_features=400, n_informative=15, n_samples=140, seed=5)
# X, y, loss, fit_intercept (a sparse X is scaled without centring; with centring its columns are
# shifted as they are read, FeatureShard.column)
PROBLEMS = {
    "squared": (_REG.X, _REG.y, "auto", True),
    "squared_hinge": (_CLS.X, _CLS.y, "auto", True),
    "logistic": (_LOG.X, _LOG.y, "logistic", False),
    "sparse squared": (sparse(_REG, 0.2, 1), _REG.y, "auto", True),
    "sparse squared_hinge": (sparse(_CLS, 0.1, 2), _CLS.y, "auto", True),
}


def fitted(monkeypatch, batch, problem, gram=False, **params):
    X, y, loss, intercept = PROBLEMS[problem]
    monkeypatch.setattr(Worker, "gram_visits", gram)
    monkeypatch.setenv("ASYOS_KERNELS", "numba")
    monkeypatch.setattr(loopback, "BATCH_VISITS", batch)
    calls = []
    visit_batch = Worker.visit_batch
    monkeypatch.setattr(Worker, "visit_batch", lambda self, *a: calls.append(1) or visit_batch(self, *a))
    model = OnlineSubstitution(budget=12, loss=loss, fit_intercept=intercept, trace_every=37,
                              **params).fit(X, y)
    assert (len(calls) > 0) == (batch > 1)                      # the compiled visits ran (or not)
    return model


@pytest.mark.parametrize("problem, ridge", [(name, 0.0) for name in sorted(PROBLEMS)]
                         + [("squared_hinge", 0.5), ("sparse squared", 0.5)])
def test_batches_give_the_step_by_step_model_to_the_last_bit(problem, ridge, monkeypatch):
    one = fitted(monkeypatch, 1, problem, ridge=ridge)
    assert one.n_steps_ > 500                                   # several passes, substitutions among them
    assert sum(row["event"] == "leave" for row in one.selection_log_) > 0
    for batch in (7, 256):
        many = fitted(monkeypatch, batch, problem, ridge=ridge)
        assert np.array_equal(many.coef_, one.coef_) and many.intercept_ == one.intercept_
        assert np.array_equal(many.raw_coef_, one.raw_coef_)
        assert many.n_steps_ == one.n_steps_ and many.n_passes_ == one.n_passes_
        assert many.selection_log_ == one.selection_log_
        for key in ("steps", "version", "objective", "train_error"):
            assert many.trace_[key] == one.trace_[key], key
        assert many.objective_selection_ == one.objective_selection_


@pytest.mark.parametrize("problem", ["squared", "sparse squared"])
@pytest.mark.parametrize("check", [True, False])
@pytest.mark.parametrize("intercept, ridge", [(True, 0.0), (False, 0.0), (True, 0.05)])
def test_maintained_products_make_the_same_decisions(problem, check, intercept, ridge, monkeypatch):
    X, y, _, _ = PROBLEMS[problem]
    runs = []
    for batch, gram in ((1, False), (256, True)):
        monkeypatch.setattr(Worker, "gram_visits", gram)
        monkeypatch.setenv("ASYOS_KERNELS", "numba")
        monkeypatch.setattr(loopback, "BATCH_VISITS", batch)
        runs.append(OnlineSubstitution(budget=12, fit_intercept=intercept, decrease_check=check,
                                       trace_every=37, ridge=ridge).fit(X, y))
    one, many = runs
    assert sum(row["event"] == "leave" for row in one.selection_log_) > 10
    events = [[(r["step"], r["feature"], r["event"]) for r in run.selection_log_] for run in runs]
    assert events[0] == events[1]
    weights = [[r["weight"] for r in run.selection_log_] for run in runs]
    np.testing.assert_allclose(weights[1], weights[0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(many.coef_, one.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(many.intercept_, one.intercept_, rtol=1e-9, atol=1e-12)
    assert many.n_steps_ == one.n_steps_ and many.trace_["steps"] == one.trace_["steps"]
    np.testing.assert_allclose(many.trace_["objective"], one.trace_["objective"], rtol=1e-9)


@pytest.mark.parametrize("gram", [False, True])
@pytest.mark.parametrize("problem, center", [("squared", None), ("sparse squared", False),
                                             ("sparse squared", True)])
def test_the_worker_and_central_counters_match(problem, center, gram, monkeypatch):
    X, y, _, _ = PROBLEMS[problem]
    monkeypatch.setenv("ASYOS_KERNELS", "numba")
    monkeypatch.setattr(Worker, "gram_visits", gram)
    runs = []
    for batch in (1, 5):
        shard = FeatureShard(X, standardize=True, center=center)
        assert (shard._shift is not None) == bool(center)
        worker = Worker(shard, y - y.mean(), get_loss("squared"), 10, 0.01, passes=3,
                        variant="exchange", owns_intercept=True)
        assert worker.batchable()
        central = Central(shard.n_samples)
        loopback.run_loopback(worker, central, batch=batch)
        runs.append((worker, central))
    (w1, c1), (w5, c5) = runs
    for name in ("steps", "proposals", "passes_run", "_pass", "_pos", "_pass_changes"):
        assert getattr(w5, name) == getattr(w1, name), name
    assert w5.intercept == pytest.approx(w1.intercept, rel=1e-9, abs=1e-12)
    assert (w5.state.checks, w5.state.check_rejections) == (w1.state.checks, w1.state.check_rejections)
    assert w1.state.checks > 0
    assert (c5.version, c5.steps, c5.accepted, c5._hist) == (c1.version, c1.steps, c1.accepted, c1._hist)
    assert np.array_equal(w5.state.XS, w1.state.XS) and np.array_equal(w5.state.slots, w1.state.slots)
    if gram:
        np.testing.assert_allclose(c5.u_ext, c1.u_ext, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(w5.state.w, w1.state.w, rtol=1e-9, atol=1e-12)
    else:
        assert np.array_equal(c5.u_ext, c1.u_ext) and np.array_equal(w5.state.w, w1.state.w)


@pytest.mark.parametrize("stop_after", [1, 2, 5])
@pytest.mark.parametrize("problem", ["squared", "squared_hinge", "sparse squared_hinge"])
def test_a_run_stopped_between_batches_resumes_to_the_same_model(problem, stop_after, monkeypatch, tmp_path):
    reference = fitted(monkeypatch, 16, problem, gram=True)
    X, y, loss, intercept = PROBLEMS[problem]
    path = str(tmp_path / "state.ckpt")

    def make():
        return OnlineSubstitution(budget=12, loss=loss, fit_intercept=intercept, trace_every=37)
    with pytest.raises(RunInterrupted) as stopped:
        make().fit(X, y, checkpoint=Checkpointer(path, None, {}, stop_after=stop_after))
    assert 0 < stopped.value.progress["steps"] <= 16 * (stop_after - 1) or stop_after == 1
    resumed = make().fit(X, y, checkpoint=Checkpointer(path, None, {}, resume=True))
    assert np.array_equal(resumed.coef_, reference.coef_) and resumed.intercept_ == reference.intercept_
    assert resumed.selection_log_ == reference.selection_log_
    assert resumed.trace_["objective"] == reference.trace_["objective"]


def test_a_diverging_step_is_reported_with_its_pass_and_feature(monkeypatch):
    X, y, _, _ = PROBLEMS["squared"]
    monkeypatch.setenv("ASYOS_KERNELS", "numba")
    messages = []
    for batch in (1, 64):
        shard = FeatureShard(X)               # a retained step 1e4 times too long: |w| grows 1e4-fold a step
        worker = Worker(shard, y, get_loss("squared"), 10, 1e4 * 0.5 / 150, passes=2, variant="exchange")
        with pytest.raises(DivergenceError) as err:
            loopback.run_loopback(worker, Central(shard.n_samples), batch=batch)
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "(pass 1, feature" in messages[0]


def test_a_product_taken_ahead_has_the_bits_of_the_same_product_taken_alone():
    """``column_products`` computes ``X_S x_j`` for four features at once, before their visits; a visit
    after a change of ``X_S``, a new batch or a resume computes it again with other companions, in
    another lane, its rows in other places of the groups of four: every way must give the same bits."""
    from asyos.learners.substitution import _compiled_step as compiled
    rng = np.random.default_rng(0)
    n, cap = 203, 9
    XS, Z = rng.standard_normal((cap, n)), rng.standard_normal((6, n))
    reference = np.zeros((4, cap))
    compiled.column_products(XS, 7, Z[0], Z[1], Z[2], Z[3], reference)
    np.testing.assert_allclose(reference[:, :7], Z[:4] @ XS[:7].T, rtol=1e-12)
    for lanes in ((3, 2, 1, 0), (0, 0, 0, 0), (5, 4, 0, 1)):
        got = np.zeros((4, cap))
        compiled.column_products(XS, 7, *(Z[b] for b in lanes), got)
        for b, column in enumerate(lanes):
            if column < 4:
                assert np.array_equal(got[b, :7], reference[column, :7]), (lanes, b)
    rows = np.array([6, 2, 0, 5, 1, 3, 4])                 # the rows in other places of the groups of four
    got = np.zeros((4, cap))
    compiled.column_products(np.ascontiguousarray(XS[rows]), 7, Z[0], Z[1], Z[2], Z[3], got)
    assert np.array_equal(got[:, :7], reference[:, rows])
    alone = np.zeros((4, cap))                              # one row: every group's tail
    compiled.column_products(np.ascontiguousarray(XS[[4]]), 1, Z[1], Z[1], Z[1], Z[1], alone)
    assert alone[0, 0] == reference[1, 4]


def test_one_sweep_gives_the_three_products_of_the_exchange_score():
    from asyos.learners.substitution import _compiled_step as compiled
    rng = np.random.default_rng(1)
    n, cap = 157, 8
    XS, (g, v, h) = rng.standard_normal((cap, n)), rng.standard_normal((3, n))
    for m, with_c in ((7, True), (4, True), (1, False), (6, False)):
        gS, a, c = np.full(cap, np.nan), np.full(cap, np.nan), np.full(cap, np.nan)
        compiled.row_products(XS, m, g, v, h, with_c, gS, a, c)
        np.testing.assert_allclose(gS[:m], XS[:m] @ g, rtol=1e-12)
        np.testing.assert_allclose(a[:m], XS[:m] @ v, rtol=1e-12)
        if with_c:
            np.testing.assert_allclose(c[:m], (XS[:m] ** 2) @ h, rtol=1e-12)
        assert np.isnan(gS[m:]).all() and np.isnan(a[m:]).all()    # the rows past m are left alone


def test_the_visits_counters_are_written_and_read_by_name():
    from asyos.learners.substitution import _compiled_step as compiled
    counters = np.full(compiled.N_COUNTERS, 99, dtype=np.int64)
    given = dict(pass_index=1, pos=2, changes=3, passes_run=4, size=5, steps=6, checks=7, check_rejections=8)
    compiled.set_counters(counters, **given)
    assert counters.tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 0, compiled.RUNNING, -1]    # the slots loopback_visits reads
    assert compiled.read_counters(counters) == {**given, "events": 0, "status": compiled.RUNNING, "last_j": -1}
