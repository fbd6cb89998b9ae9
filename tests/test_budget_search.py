"""The l1-weight search for a budget (``asyos.learners.budget_search``) against independent counts:
a monotone synthetic count of non-zeros whose answer is known in closed form, and a brute-force grid
of scikit-learn Lasso fits."""
import math
import warnings

import numpy as np
import pytest

from asyos.learners.budget_search import search_l1_weight


def entry_points(p, seed, repeat=()):
    """The weights at which p features enter a path (a feature is non-zero below its entry point);
    the indices in ``repeat`` enter together with the next feature (the count jumps by 2 there)."""
    rng = np.random.default_rng(seed)
    points = np.sort(10.0 ** rng.uniform(-6, 2, size=p))[::-1]
    for i in repeat:
        points[i + 1] = points[i]
    return points


def counting(points, log):
    def fit(weight, warm):
        log.append((weight, warm))
        return f"model at {weight}", int(np.sum(points > weight))
    return fit


@pytest.mark.parametrize("budget", [1, 5, 17, 39])
def test_a_reachable_budget_is_met_exactly_and_the_steps_are_the_fits(budget):
    points = entry_points(40, seed=budget)
    log = []
    found = search_l1_weight(counting(points, log), budget, start=1.0)
    assert found.stop == "exact" and found.exact
    best = found.at_most()
    assert best.nnz == budget == np.sum(points > best.weight)
    assert points[budget] <= best.weight < points[budget - 1]      # the interval where exactly budget are in
    assert found.at_least() is best
    assert best.model == f"model at {best.weight}"
    assert [w for w, _ in log] == [w for w, _ in found.path]
    assert [c for _, c in found.path] == [int(np.sum(points > w)) for w, _ in log]


@pytest.mark.parametrize("start", [1e-9, 1.0, 1e5])
def test_a_jump_over_the_budget_ends_on_a_tight_bracket_around_it(start):
    """Features 10 and 11 enter together: 11 is never reached; the bracket closes on their entry point."""
    points = entry_points(30, seed=3, repeat=[10])
    found = search_l1_weight(counting(points, []), 11, start=start, precision=1e-6, max_steps=200)
    assert found.stop == "precision" and not found.exact
    under, over = found.at_most(), found.at_least()
    assert (under.nnz, over.nnz) == (10, 12)
    assert over.weight < points[10] <= under.weight
    assert math.log(under.weight / over.weight) < math.log1p(1e-6)
    # every fit is a candidate: no fit had a count closer to 11 on either side
    counts = [c for _, c in found.path]
    assert max(c for c in counts if c <= 11) == 10 and min(c for c in counts if c > 11) == 12


def test_ties_go_to_the_end_of_the_bracket_and_failures_are_never_chosen():
    """The same count at two weights, and a failed fit (nnz None: counted as too many)."""
    def fit(weight, warm):
        return weight, (3 if weight >= 0.05 else 9 if weight >= 0.02 else None)

    found = search_l1_weight(fit, 5, start=1.0, factor=10.0, max_steps=4)
    assert found.stop == "max_steps"
    assert found.path == [(1.0, 3), (0.1, 3), (0.01, None), (math.sqrt(0.1 * 0.01), 9)]
    assert (found.at_most().weight, found.at_most().nnz) == (0.1, 3)      # ties: the smallest weight
    assert found.at_least().nnz == 9 and found.over.weight == math.sqrt(0.1 * 0.01)


def test_expansion_stops_at_its_limits():
    points = entry_points(20, seed=4)                  # nothing enters above 100, everything below 1e-6
    found = search_l1_weight(counting(points, []), 25, start=1.0, factor=10.0, max_expand=3)
    assert found.stop == "range" and len(found.steps) == 4
    assert found.at_most().nnz == np.sum(points > 1e-3) and found.over is None
    found = search_l1_weight(counting(points, []), 25, start=1.0, factor=10.0, lowest=0.05)
    assert found.stop == "range" and min(w for w, _ in found.path) >= 0.05


def test_without_bisection_the_walk_stops_at_the_first_weight_with_at_least_s():
    """``max_bisect=0`` is a walk down a geometric grid (scikit-learn's path in ``LassoToBudget``)."""
    points = entry_points(40, seed=6)
    grid = 100.0 * np.geomspace(1.0, 1e-9, 60)
    counts = np.array([np.sum(points > w) for w in grid])
    for s in (3, 12, 30):
        found = search_l1_weight(counting(points, []), s, start=grid[0], factor=grid[0] / grid[1], max_expand=59,
                                 max_bisect=0, max_steps=59, known={grid[0]: (None, 0)})
        first = int(np.argmax(counts >= s))
        assert len(found.steps) == first
        best = found.at_least()
        assert best.weight == pytest.approx(grid[first], rel=1e-12) and best.nnz == counts[first]


def test_known_fits_seed_the_bracket_and_warm_starts_come_from_the_nearest_larger_weight():
    points = entry_points(40, seed=5)
    known, log = {}, []
    first = search_l1_weight(counting(points, log), 8, start=1.0, known=known)
    assert len(known) == len(first.steps)
    second = search_l1_weight(counting(points, log), 20, start=1.0, known=known)
    assert second.exact and second.at_most().nnz == 20
    assert len(log) == len(first.steps) + len(second.steps)
    assert all(w not in dict(first.path) for w, _ in second.path)      # nothing fitted twice
    assert second.steps[0].phase != "start"                            # the bracket came from the first
    for i, (weight, warm) in enumerate(log):
        before = [w for w, _ in log[:i] if w > weight]
        assert warm == (f"model at {min(before)}" if before else None)


def test_found_lambda_meets_the_budget_rule_on_a_brute_force_lasso_grid():
    """The Lasso on a small problem: on a fine grid of alphas, the largest count <= s is reached at
    the alpha the search returns, and the count there is what an independent fit gives."""
    from sklearn.linear_model import Lasso
    rng = np.random.default_rng(7)
    n, p = 120, 12
    X = rng.normal(size=(n, p))
    y = X @ (rng.normal(size=p) * (rng.random(p) < 0.7)) + 0.5 * rng.normal(size=n)
    alpha_max = np.abs(X.T @ y).max() / n

    def lasso(alpha, warm=None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            coef = Lasso(alpha=alpha, fit_intercept=False, tol=1e-10, max_iter=100_000).fit(X, y).coef_
        return coef, int(np.count_nonzero(coef))

    grid = alpha_max * np.geomspace(1.0, 1e-4, 400)
    counts = np.array([lasso(a)[1] for a in grid])
    for s in (1, 3, 6, 9):
        found = search_l1_weight(lasso, s, start=alpha_max, factor=2.0, precision=1e-8, max_steps=100)
        best = found.at_most()
        reachable = counts[counts <= s].max()
        assert best.nnz == reachable and lasso(best.weight)[1] == best.nnz <= s
        assert found.exact == (s in counts)
