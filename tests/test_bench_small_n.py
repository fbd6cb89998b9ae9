"""The p >> n data sets of ``benchmarks/bench_real_selection.py`` (its ``small-n`` profile): the
generators are deterministic and make what their docstrings say, the subsamples keep the class ratio,
and the profile is the one chosen by ``--small-n``. The subsamples of shared sets need the shared data
(``find_datasets``); the rest runs anywhere."""
import argparse
import importlib.util
import os

import numpy as np
import pytest
import scipy.sparse as sp

from tests.conftest import REPO, find_datasets

DATASETS = find_datasets()
NEEDS_DATA = pytest.mark.skipif(DATASETS is None, reason="no shared data sets (../shared/datasets or ASYOS_DATASETS)")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("_benchmark_small_n",
                                                  os.path.join(REPO, "benchmarks", "bench_real_selection.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _positives_within_a_row(y, rate):
    assert set(np.unique(y)) <= {-1.0, 1.0}
    assert abs(int(np.sum(y > 0)) - rate * y.size) <= 1


def _same(a, b):
    if sp.issparse(a):
        assert sp.issparse(b) and a.shape == b.shape and (a != b).nnz == 0
    else:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["genes-62x2000", "genes-102x6000", "genes-200x20000"])
def test_gene_sets_are_deterministic_with_their_shape_and_positive_rate(bench, name):
    spec = bench.GENES[name]
    X, y = bench.gene_expression(**spec)
    X2, y2 = bench.gene_expression(**spec)
    _same(X, X2)
    _same(y, y2)
    assert X.shape == (spec["n"], spec["p"]) and X.dtype == np.float64 and not sp.issparse(X)
    _positives_within_a_row(y, spec["positive_rate"])
    other, _ = bench.gene_expression(**{**spec, "seed": spec["seed"] + 1})
    assert not np.array_equal(X, other)


def test_gene_blocks_are_correlated_and_independent_of_each_other(bench):
    X, y, blocks, informative = bench.gene_expression(**bench.GENES["genes-62x2000"], structure=True)
    assert all(10 <= b.size <= 50 for b in blocks)
    in_blocks = np.concatenate(blocks)
    assert np.unique(in_blocks).size == in_blocks.size and 0.7 * X.shape[1] <= in_blocks.size < X.shape[1]
    within = []
    for b in blocks:
        C = np.corrcoef(X[:, b], rowvar=False)
        within.append(C[np.triu_indices(b.size, 1)].mean())
    assert np.mean(within) > 0.2
    rng = np.random.default_rng(1)
    between = []
    for _ in range(300):
        i, j = rng.choice(len(blocks), 2, replace=False)
        between.append(np.corrcoef(X[:, rng.choice(blocks[i])], X[:, rng.choice(blocks[j])])[0, 1])
    assert abs(np.mean(between)) < 0.05
    # the informative genes come from several blocks and carry the label
    assert len({next(b for b, cols in enumerate(blocks) if g in cols) for g in informative}) >= 2
    Z = (X[:, informative] - X[:, informative].mean(axis=0)) / X[:, informative].std(axis=0)
    gaps = np.abs(Z[y > 0].mean(axis=0) - Z[y < 0].mean(axis=0))
    assert gaps.max() > 0.5


@pytest.mark.parametrize("name, least_ratio", [("fingerprints-350x100000", 3.0),
                                               ("fingerprints-weak-350x100000", 1.5)])
def test_fingerprints_are_sparse_bits_with_informative_ones(bench, name, least_ratio):
    spec = bench.FINGERPRINTS[name]
    X, y, informative = bench.fingerprints(**spec, structure=True)
    X2, y2 = bench.fingerprints(**spec)
    _same(X, X2)
    _same(y, y2)
    assert sp.issparse(X) and X.format == "csr" and X.dtype == np.float64
    assert X.shape == (spec["n"], spec["p"]) and informative.size == spec["n_informative"]
    assert np.array_equal(np.unique(X.data), [1.0]) and X.has_canonical_format
    density = X.nnz / (X.shape[0] * X.shape[1])
    assert 0.005 <= density <= 0.011, density
    _positives_within_a_row(y, spec["positive_rate"])
    freq_pos = np.asarray(X[y > 0].mean(axis=0)).ravel()
    freq_neg = np.asarray(X[y < 0].mean(axis=0)).ravel()
    assert np.sum(freq_pos[informative] > freq_neg[informative]) >= 0.8 * informative.size
    assert freq_pos[informative].mean() > least_ratio * freq_neg[informative].mean()
    rest = np.setdiff1d(np.arange(X.shape[1]), informative)     # the others are as frequent in either class
    assert abs(freq_pos[rest].mean() / freq_neg[rest].mean() - 1) < 0.1


def test_a_stratified_subsample_keeps_the_class_ratio(bench):
    rng = np.random.default_rng(0)
    X = sp.hstack([sp.csr_matrix(np.arange(1.0, 501.0)[:, None]),          # column 0: the row's number + 1
                   sp.random(500, 40, density=0.1, random_state=0)]).tocsr()
    y = np.where(rng.random(500) < 0.3, 1.0, -1.0)
    Xs, ys = bench.stratified_subsample(X, y, 77)
    assert Xs.shape == (77, 41) and sp.issparse(Xs) and Xs.format == "csr"
    assert abs(np.sum(ys > 0) - 77 * np.mean(y > 0)) <= 1
    _same(Xs, bench.stratified_subsample(X, y, 77)[0])
    rows = Xs[:, 0].toarray().ravel().astype(int) - 1
    assert np.all(np.diff(rows) > 0) and np.array_equal(y[rows], ys)    # distinct rows of X, in their order
    _same(Xs, X[rows])


@NEEDS_DATA
@pytest.mark.parametrize("name", ["basehock-n200", "pcmac-n100", "farm_ads-n300", "dexter-n100", "madelon-n100",
                                  "arcene-n60"])
def test_subsamples_of_shared_sets(bench, name):
    source, rows = bench.SUBSAMPLES[name]
    assert bench.missing_data(DATASETS, [name]) is None
    X_full, y_full, _ = bench.load(DATASETS, source)
    X, y, origin = bench.load(DATASETS, name)
    assert origin.startswith("generated:") and X.shape == (rows, X_full.shape[1])
    assert sp.issparse(X) == sp.issparse(X_full)
    assert abs(np.sum(y > 0) - rows * np.mean(y_full > 0)) <= 1
    _same(X, bench.load(DATASETS, name)[0])


@pytest.mark.parametrize("name", ["genes-62x2000", "fingerprints-350x100000",
                                  pytest.param("madelon-n100", marks=NEEDS_DATA),
                                  pytest.param("arcene-n60", marks=NEEDS_DATA)])
def test_each_fold_has_both_classes_on_both_sides(bench, name):
    X, y, _ = bench.load(DATASETS, name)
    for train, test in bench.folds_of(X, y, "classification", bench.PROFILES["small-n"]["folds"]):
        for part in (train, test):
            assert np.sum(y[part] > 0) >= 2 and np.sum(y[part] < 0) >= 2


def test_the_small_n_profile(bench):
    small = bench.PROFILES["small-n"]
    assert small["datasets"] == ["genes-62x2000", "genes-102x6000", "genes-200x20000", "fingerprints-350x100000",
                                 "fingerprints-weak-350x100000", "basehock-n200", "pcmac-n100", "farm_ads-n300",
                                 "dexter-n100", "madelon-n100",
                                 "arcene-n60"]
    assert small["ks"] == [10, 50] and small["folds"] == 5 and small["mpi_sets"] == [] and small["mpi_folds"] is None
    assert small["methods"] == bench.PROFILES["paper"]["methods"]
    assert not set(small["datasets"]) & set(bench.PROFILES["paper"]["datasets"])
    for name in small["datasets"]:
        assert name in bench.DATASETS and bench.task_of(name) == "classification"
        assert bench.GENERATED[name].startswith("generated:")
    args = argparse.Namespace(small_n=True, quick=False, smoke=False, seeds=None)
    assert bench.pick_profile(args) == small
    assert bench.pick_profile(argparse.Namespace(small_n=False, quick=False, seeds=None)) == bench.PROFILES["paper"]
    with pytest.raises(SystemExit):
        bench.pick_profile(argparse.Namespace(small_n=True, quick=True, seeds=None))


def test_draws_name_other_seeds_of_the_generated_sets_and_other_rows_of_the_subsamples(bench):
    """``--draws N``: ``NAME~d`` is draw ``d`` (generator seed ``1000 (d - 1) + seed``, subsample seed ``d - 1``);
    draw 1 is the set as listed; only the small-n sets have draws."""
    assert bench.drawn(["genes-62x2000", "arcene"], 3) == ["genes-62x2000", "arcene", "genes-62x2000~2",
                                                           "genes-62x2000~3"]
    assert bench.split_draw("genes-62x2000~2") == ("genes-62x2000", 2) and bench.split_draw("arcene") == ("arcene", 1)
    for bad in ("arcene~2", "genes-62x2000~1", "genes-62x2000~x"):
        with pytest.raises(SystemExit, match="draws"):
            bench.split_draw(bad)
    first, second = bench.load(None, "genes-62x2000")[:2], bench.load(None, "genes-62x2000~2")[:2]
    again = bench.gene_expression(**{**bench.GENES["genes-62x2000"], "seed": 1062})
    assert first[0].shape == second[0].shape and not np.array_equal(first[0], second[0])
    np.testing.assert_array_equal(second[0], again[0])
    assert "draw 2 (seed 1062)" in bench.load(None, "genes-62x2000~2")[2]
    assert bench.task_of("genes-62x2000~2") == "classification" and bench.task_of("cpu_act") == "regression"


def test_the_standing_counts_the_cells_where_a_method_is_at_or_above_the_best_other_peer(bench):
    def cell(**scores):
        return {m: {"mean": v} for m, v in scores.items()}
    summary = {"a": {"task": "classification", "ks": [10], "results": {"10": {"methods": cell(
                   os=0.8, abess=0.7, **{"l1+refit": 0.75, "kbest+refit": 0.6})}}},
               "b": {"task": "classification", "ks": [10], "results": {"10": {"methods": cell(
                   os=0.5, abess=0.7, **{"l1+refit": 0.6, "kbest+refit": 0.65})}}}}
    table = bench.standing(summary, ["os", "abess", "l1+refit", "kbest+refit"])["classification"]["all"]
    assert table["os"]["cells"] == 2 and table["os"]["mean"] == pytest.approx(0.65)
    assert table["os"]["at_or_above_best_peer"] == 1 and table["os"]["mean_gap"] == pytest.approx((0.05 - 0.2) / 2)
    assert table["abess"]["at_or_above_best_peer"] == 1                   # b: 0.7 against the others' 0.65
