import itertools

import numpy as np
import pytest

from asyos.truncation import (annealing_schedule, argmin_magnitude, keep_top_k, project_l0, project_l2_ball,
                              soft_threshold)


@pytest.mark.parametrize("k", [0, 1, 3, 7, 10])
def test_keep_top_k_size_and_edges(k, rng):
    scores = rng.standard_normal(7)
    idx = keep_top_k(scores, k)
    assert idx.size == min(max(k, 0), 7)
    assert np.all(np.diff(idx) > 0)
    if 0 < k < 7:
        assert scores[idx].min() >= np.delete(scores, idx).max()


def test_keep_top_k_ties_go_to_lower_index():
    assert keep_top_k(np.array([1.0, 2.0, 1.0, 2.0, 1.0]), 3).tolist() == [0, 1, 3]


def test_project_l0_is_the_euclidean_projection_by_brute_force(rng):
    w = rng.standard_normal(6)
    for k in range(0, 7):
        best = min((np.linalg.norm(w - np.where(np.isin(np.arange(6), s), w, 0.0)), s)
                   for s in itertools.combinations(range(6), k))
        proj = project_l0(w, k)
        assert np.linalg.norm(w - proj) == pytest.approx(best[0])
        np.testing.assert_array_equal(project_l0(proj, k), proj)  # idempotent


def test_argmin_magnitude_ties():
    assert argmin_magnitude(np.array([2.0, -1.0, 1.0])) == 1


def test_soft_threshold_is_the_l1_prox(rng):
    v, t = rng.standard_normal(5), 0.4
    grid = np.linspace(-3, 3, 60001)
    brute = [grid[np.argmin(0.5 * (grid - vi) ** 2 + t * np.abs(grid))] for vi in v]
    np.testing.assert_allclose(soft_threshold(v, t), brute, atol=1e-4)


def test_project_l2_ball():
    np.testing.assert_allclose(project_l2_ball(np.array([0.3, 0.4]), 1.0), [0.3, 0.4])
    assert np.linalg.norm(project_l2_ball(np.array([3.0, 4.0]), 2.0)) == pytest.approx(2.0)


def test_annealing_schedule_runs_from_p_to_k():
    values = [annealing_schedule(t, 10, 200, 100, 10.0) for t in range(0, 150)]
    assert values[0] == 200 and values[100] == 10 and values[-1] == 10
    assert all(a >= b for a, b in zip(values, values[1:]))
