import numpy as np
import pytest

from asyos.errors import InputError
from asyos.losses import LOSSES, default_loss_for_labels, get_loss


def labels_for(loss, rng, n):
    return rng.standard_normal(n) if loss.task == "regression" else np.where(rng.random(n) < 0.5, -1.0, 1.0)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_dloss_is_the_gradient_of_value(name, rng):
    loss = get_loss(name)
    n = 40
    y = labels_for(loss, rng, n)
    u = rng.standard_normal(n) * 2
    g = loss.dloss(y, u)
    eps = 1e-6
    numeric = np.array([(loss.value(y, u + eps * e) - loss.value(y, u - eps * e)) / (2 * eps) for e in np.eye(n)])
    np.testing.assert_allclose(g, numeric, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_d2loss_matches_finite_differences_and_curvature_bound(name, rng):
    loss = get_loss(name)
    n = 30
    y = labels_for(loss, rng, n)
    u = rng.standard_normal(n) * 2
    eps = 1e-6
    numeric = (loss.dloss(y, u + eps) - loss.dloss(y, u - eps)) / (2 * eps)
    mask = np.abs(1 - y * u) > 1e-3 if name == "squared_hinge" else slice(None)  # kink of the hinge
    np.testing.assert_allclose(loss.d2loss(y, u)[mask], numeric[mask], rtol=1e-4, atol=1e-9)
    assert np.all(n * loss.d2loss(y, u) <= loss.curvature + 1e-12)


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
    with pytest.raises(InputError, match="unknown loss 'hinge'.*squared"):
        get_loss("hinge")


def test_default_loss_from_labels():
    assert default_loss_for_labels(np.array([1, -1, 1])) == "squared_hinge"
    assert default_loss_for_labels(np.array([0.3, 1.0])) == "squared"


@pytest.mark.parametrize("name", sorted(LOSSES))
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
