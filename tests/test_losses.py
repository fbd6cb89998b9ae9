import json
import os
import subprocess
import sys

import numpy as np
import pytest

from asyos.errors import InputError
from asyos.learners.stream import _stream_kernels
from asyos.losses import LOSSES, SMOOTH_LOSSES, TABLE, d2loss1, default_loss_for_labels, dloss1, get_loss, value1

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVERY_LOSS = pytest.mark.parametrize("cls", TABLE, ids=lambda c: c.name)      # a new loss is checked as it is added


def labels_for(loss, rng, n):
    return rng.standard_normal(n) if loss.task == "regression" else np.where(rng.random(n) < 0.5, -1.0, 1.0)


def away_from_kinks(loss, y, u):
    """Where the loss's derivatives exist (everywhere but at its kink, if it has one)."""
    return np.ones(len(u), bool) if loss.kink is None else np.abs(y * u - loss.kink) > 1e-3


def sample(loss, rng, n, scale=2.0):
    return labels_for(loss, rng, n), rng.standard_normal(n) * scale


@EVERY_LOSS
def test_dloss_is_the_gradient_of_value(cls, rng):
    loss = cls()
    n = 40
    y, u = sample(loss, rng, n)
    g = loss.dloss(y, u)
    eps = 1e-6
    numeric = np.array([(loss.value(y, u + eps * e) - loss.value(y, u - eps * e)) / (2 * eps) for e in np.eye(n)])
    mask = away_from_kinks(loss, y, u)
    assert mask.sum() > n // 2
    np.testing.assert_allclose(g[mask], numeric[mask], rtol=1e-5, atol=1e-9)


@EVERY_LOSS
def test_d2loss_matches_finite_differences_and_curvature_bound(cls, rng):
    loss = cls()
    n = 30
    y, u = sample(loss, rng, n)
    eps = 1e-6
    numeric = (loss.dloss(y, u + eps) - loss.dloss(y, u - eps)) / (2 * eps)
    mask = away_from_kinks(loss, y, u)
    np.testing.assert_allclose(loss.d2loss(y, u)[mask], numeric[mask], rtol=1e-4, atol=1e-9)
    assert np.all(n * loss.d2loss(y, u) >= 0.0)
    assert np.all(n * loss.d2loss(y, u) <= loss.curvature + 1e-12)
    if loss.smooth:                                  # the bound is reached (it is the one OS steps with)
        grid = np.linspace(-3, 3, 601)
        assert max(loss.d2loss1(1.0, v) for v in grid) == pytest.approx(loss.curvature, rel=1e-3)
    else:
        assert loss.curvature == 0.0 and not loss.d2loss_raw(y, u).any()


@EVERY_LOSS
def test_the_vector_forms_are_the_scalar_definition(cls, rng):
    """The numpy methods (what numpy-facing code calls) compute the entry's scalar functions."""
    loss = cls()
    y, u = sample(loss, rng, 50, scale=3.0)
    u[:3] = [0.0, 1.0 / y[3] if y[3] else 1.0, -1.0]
    by_sample = {kind: np.array([getattr(loss, kind)(a, b) for a, b in zip(y, u)])
                 for kind in ("value1", "dloss1", "d2loss1")}
    np.testing.assert_allclose(loss.values(y, u), by_sample["value1"], rtol=1e-13, atol=1e-15)
    assert loss.value(y, u) == pytest.approx(by_sample["value1"].mean(), rel=1e-13, abs=1e-15)
    np.testing.assert_allclose(loss.dloss_raw(y, u), by_sample["dloss1"], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(loss.d2loss_raw(y, u), by_sample["d2loss1"], rtol=1e-13, atol=1e-15)
    out = np.full(50, np.nan)
    assert loss.dloss_raw(y, u, out=out) is out
    np.testing.assert_allclose(out, by_sample["dloss1"], rtol=1e-13, atol=1e-15)
    assert loss.d2loss_raw(y, u, out=out) is out
    np.testing.assert_allclose(out, by_sample["d2loss1"], rtol=1e-13, atol=1e-15)
    for kind in ("value1", "dloss1", "d2loss1"):      # the table's dispatch by code, as the kernels call it
        dispatch = {"value1": value1, "dloss1": dloss1, "d2loss1": d2loss1}[kind]
        assert [dispatch(loss.code, a, b) for a, b in zip(y, u)] == by_sample[kind].tolist()


# the sample-stream row loops compiled: not so with ASYOS_KERNELS=numpy (the suite run that way)
COMPILED_ROW_LOOPS = pytest.mark.skipif(not _stream_kernels.COMPILED,
                                        reason="ASYOS_KERNELS=numpy: the row loops run as plain Python")


@EVERY_LOSS
def test_the_compiled_kernels_compute_the_table(cls, rng):
    """The numba kernels (OS's step here, the sample-stream row loops below) dispatch on the code to
    the same functions: equal to the numpy forms to rounding."""
    from asyos.learners.substitution import _compiled_step as C
    loss = cls()
    n = 64
    y, u = sample(loss, rng, n, scale=3.0)
    out, tmp = np.empty(n), np.empty(n)
    C.dloss_raw(loss.code, y, u, out)
    np.testing.assert_allclose(out, loss.dloss_raw(y, u), rtol=1e-13, atol=1e-15)
    C.d2loss_raw(loss.code, y, u, out)
    np.testing.assert_allclose(out, loss.d2loss_raw(y, u), rtol=1e-13, atol=1e-15)
    assert C.value(loss.code, y, u, tmp) == pytest.approx(loss.value(y, u), rel=1e-13)
    assert C.intercept_step(loss.code, y, u, out, tmp) == pytest.approx(loss.intercept_step(y, u), rel=1e-12,
                                                                        abs=1e-15)


@COMPILED_ROW_LOOPS
@EVERY_LOSS
def test_the_compiled_row_loops_compute_the_table(cls, rng):
    from asyos.learners.stream import _stream_kernels as K
    loss = cls()
    n = 64
    y, u = sample(loss, rng, n, scale=3.0)
    out = np.empty(n)
    rows = np.arange(n, dtype=np.int64)
    empty = np.zeros(0, dtype=np.int64)
    K.batch_dloss(loss.code, np.zeros(n + 1, dtype=np.int64), empty, np.zeros(0), y, rows, np.zeros(1), u, True, out)
    np.testing.assert_allclose(out, loss.dloss_raw(y, u), rtol=1e-13, atol=1e-15)


@EVERY_LOSS
def test_no_overflow_or_nan_at_large_margins(cls):
    """``|u| = 1e3``: finite values and derivatives, in numpy (no floating-point warning), in the
    scalar definition and compiled."""
    from asyos.learners.substitution import _compiled_step as C
    loss = cls()
    y = np.array([1.0, -1.0, 1.0, -1.0, 0.5, -2.0]) if loss.task == "regression" else np.array([1.0, -1.0] * 3)
    u = np.array([1e3, 1e3, -1e3, -1e3, 1e3, -1e3])
    with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
        results = [loss.values(y, u), loss.dloss_raw(y, u), loss.d2loss_raw(y, u),
                   [loss.value1(a, b) for a, b in zip(y, u)], [loss.dloss1(a, b) for a, b in zip(y, u)],
                   [loss.d2loss1(a, b) for a, b in zip(y, u)]]
    out = np.empty(6)
    for kernel in (C.dloss_raw, C.d2loss_raw):
        kernel(loss.code, y, u, out)
        results.append(out.copy())
    results.append([C.value(loss.code, y, u, np.empty(6))])
    for values in results:
        assert np.all(np.isfinite(values))
    np.testing.assert_allclose(results[6], results[1], rtol=1e-13)


@COMPILED_ROW_LOOPS
def test_the_interpreted_kernels_equal_the_compiled_ones(tmp_path, rng):
    """With ``ASYOS_KERNELS=numpy`` the row loops call the table's plain Python functions: the same
    numbers as numba's compilation, for every loss (margins up to 1e3 included)."""
    n = 40
    y = {cls.name: labels_for(cls(), rng, n) for cls in TABLE}
    u = rng.standard_normal(n) * 3
    u[:4] = [1e3, -1e3, 0.0, 1.0]
    np.save(tmp_path / "u.npy", u)
    np.save(tmp_path / "y.npy", np.array([y[cls.name] for cls in TABLE]))
    script = (
        "import json, numpy as np\n"
        "from asyos.learners.stream import _stream_kernels as K\n"
        "from asyos.losses import TABLE\n"
        "assert not K.COMPILED\n"
        f"u = np.load('{tmp_path}/u.npy'); ys = np.load('{tmp_path}/y.npy'); n = u.shape[0]\n"
        "rows, out = np.arange(n), np.empty(n)\n"
        "res = {}\n"
        "for cls, y in zip(TABLE, ys):\n"
        "    K.batch_dloss(cls.code, np.zeros(n + 1, int), [], [], y, rows, None, u, True, out)\n"
        "    res[cls.name] = out.tolist()\n"
        "print(json.dumps(res))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=300,
                          env=dict(os.environ, ASYOS_KERNELS="numpy"))
    assert proc.returncode == 0, proc.stderr
    interpreted = json.loads(proc.stdout)
    from asyos.learners.stream import _stream_kernels as K
    assert sorted(interpreted) == sorted(LOSSES)
    out = np.empty(n)
    for cls in TABLE:
        K.batch_dloss(cls.code, np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0),
                      y[cls.name], np.arange(n, dtype=np.int64), np.zeros(1), u, True, out)
        np.testing.assert_allclose(out, interpreted[cls.name], rtol=1e-14, atol=1e-300)


def test_one_code_table():
    """Codes are positions in ``TABLE``; OS's kernels take the smooth ones, the row loops all."""
    from asyos.learners.substitution import kernels
    from asyos.learners.stream.sample_stream import STREAM_LOSSES, stream_loss
    assert [cls.code for cls in TABLE] == list(range(len(TABLE)))
    assert kernels.LOSS_CODES == {cls.name: cls.code for cls in TABLE if cls.smooth}
    assert set(STREAM_LOSSES) == set(LOSSES)
    assert [stream_loss(cls.name)[1] for cls in TABLE] == [cls.code for cls in TABLE]


def test_a_non_smooth_loss_is_refused_where_one_is_needed():
    from asyos.learners.substitution.online_substitution import OnlineSubstitution
    assert "hinge" in LOSSES and "hinge" not in SMOOTH_LOSSES
    assert get_loss("hinge", smooth=False).name == "hinge"
    with pytest.raises(InputError, match="hinge loss is not smooth.*squared, squared_hinge, logistic"):
        get_loss("hinge")
    X, y = np.eye(4), np.array([1.0, -1.0, 1.0, -1.0])
    with pytest.raises(InputError, match="hinge loss is not smooth"):
        OnlineSubstitution(budget=2, loss="hinge").fit(X, y)


def test_paper_formulas():
    y = np.array([1.0, -1.0, 1.0])
    u = np.array([0.5, 0.5, 2.0])
    sq = get_loss("squared")
    assert sq.value(y, u) == pytest.approx(((0.5 - 1) ** 2 + (0.5 + 1) ** 2 + 1.0) / 6)
    np.testing.assert_allclose(sq.dloss(y, u), (u - y) / 3)                        # KDD eq. 4
    sh = get_loss("squared_hinge")
    assert sh.value(y, u) == pytest.approx((0.5 ** 2 + 1.5 ** 2) / 6)              # eq. 3
    np.testing.assert_allclose(sh.dloss(y, u), -np.maximum(0, 1 - u * y) * y / 3)  # eq. 5


def test_logistic_does_not_overflow():
    loss = get_loss("logistic")
    y = np.array([1.0, -1.0, 1.0, -1.0])
    u = np.array([1e3, 1e3, -1e3, -1e3])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        assert loss.value(y, u) == pytest.approx((0 + 1e3 + 1e3 + 0) / 4)
        g = loss.dloss(y, u)
    np.testing.assert_allclose(g, [0, 0.25, -0.25, 0], atol=1e-12)


def test_dloss_writes_into_out(rng):
    loss = get_loss("squared_hinge")
    y = np.array([1.0, -1.0, 1.0])
    u = rng.standard_normal(3)
    out = np.empty(3)
    assert loss.dloss(y, u, out=out) is out
    np.testing.assert_allclose(out, loss.dloss(y, u))


@pytest.mark.parametrize("name", ["squared_hinge", "logistic"])
def test_classification_losses_reject_other_labels(name):
    with pytest.raises(InputError, match="must be -1 or \\+1.*found 0, 2"):
        get_loss(name).check_labels(np.array([0.0, 1.0, 2.0]))


def test_unknown_loss_names_the_choices():
    with pytest.raises(InputError, match="unknown loss 'hinges'; choose one of: squared, squared_hinge, logistic$"):
        get_loss("hinges")
    with pytest.raises(InputError, match="unknown loss 'hinges'; choose one of: .*logistic, hinge$"):
        get_loss("hinges", smooth=False)


def test_default_loss_from_labels():
    assert default_loss_for_labels(np.array([1, -1, 1])) == "squared_hinge"
    assert default_loss_for_labels(np.array([0.3, 1.0])) == "squared"


@pytest.mark.parametrize("name", SMOOTH_LOSSES)
def test_the_best_intercept_minimises_the_empty_models_loss(name, rng):
    """Newton on the intercept alone reaches the minimiser of L(b 1) (a 1-D convex function):
    checked against a fine grid; for the squared loss it is the mean of y."""
    loss = get_loss(name)
    y = labels_for(loss, rng, 50)
    if loss.task == "classification":
        y[:35] = 1.0                                 # imbalanced: the intercept is far from 0
    b = loss.best_intercept(y)
    grid = np.linspace(b - 1.0, b + 1.0, 2001)
    values = [loss.value(y, np.full(50, v)) for v in grid]
    assert loss.value(y, np.full(50, b)) <= min(values) + 1e-12
    assert loss.intercept_step(y, np.full(50, b)) == pytest.approx(0.0, abs=1e-9)
    if name == "squared":
        assert b == pytest.approx(y.mean(), rel=1e-12)


def test_the_intercept_step_is_zero_without_curvature():
    """Squared hinge with every margin met: no sample is active, nothing to step on."""
    loss = get_loss("squared_hinge")
    y = np.array([1.0, -1.0, 1.0])
    assert loss.intercept_step(y, 2.0 * y) == 0.0
    np.testing.assert_array_equal(loss.d2loss_raw(y, 2.0 * y), 0.0)


def test_the_kernel_cache_is_emptied_when_the_table_changes(tmp_path, monkeypatch):
    """numba keys a cached kernel on its own file only: ``refresh_cache`` empties a kernel module's
    cache when the table's fingerprint differs from the one recorded beside it, and only then."""
    from asyos.losses import compiled as _compiled_losses
    (tmp_path / "loss_probe.py").write_text(
        "import numba\n"
        "from asyos.losses import compiled as _compiled_losses\n"
        "from asyos.losses import dloss1\n\n\n"
        "@numba.njit(cache=True)\n"
        "def probe(code, y, u):\n"
        "    return dloss1(code, y, u)\n\n\n"
        "_compiled_losses.refresh_cache(globals())\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import loss_probe
    assert loss_probe.probe(get_loss("logistic").code, 1.0, 0.0) == -0.5
    index = loss_probe.probe._cache._cache_file._load_index
    stamp = tmp_path / "__pycache__" / "loss_probe.losses"
    assert index() and stamp.read_text() == _compiled_losses.fingerprint()
    _compiled_losses.refresh_cache(vars(loss_probe))
    assert index()                                                  # same table: the cache stays
    monkeypatch.setattr(_compiled_losses, "fingerprint", lambda: "another table")
    _compiled_losses.refresh_cache(vars(loss_probe))
    assert not index() and stamp.read_text() == "another table"
