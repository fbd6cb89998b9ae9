"""Online Substitution against the strongest peers on every real data set, at equal feature budgets.

Question: on each real data set, with the same number ``k`` of features, how good is asyos's Online
Substitution (OS) selection compared with the best of abess, an l1 path tuned to ``k`` and univariate
filtering, in test accuracy (classification) or test ``R^2`` (regression), and at what fit time?

Data (``../shared/datasets`` next to the repository, ``$ASYOS_DATASETS`` or ``--data-dir``; see its
README.md), each read with ``asyos.data.io.load_dataset`` and, where a train/test split is given,
pooled (train rows, then test rows); sparse sets stay CSR:

* classification (labels in {-1, +1}): arcene, madelon (dense), dexter, basehock, pcmac, farm_ads
  (sparse), sklearn_breast_cancer (dense);
* regression: cpu_act, satellite_image, sklearn_diabetes (dense);
* two generated sets (said so in the output): ``digits-0-vs-rest`` (scikit-learn's bundled digits,
  +1 for a 0 and -1 otherwise, about 10 % positive, dense) and ``pcmac-imbalanced`` (pcmac with the
  positive class subsampled, ``numpy.random.default_rng(0)``, to 1/9 of the negatives, about 10 %
  positive, sparse).

p >> n sets (the ``small-n`` profile, ``--small-n``; each is classification with labels in {-1, +1},
made with ``numpy.random.default_rng`` and a fixed seed per set, and said to be generated in the output):

* gene-expression-like, dense (``gene_expression``): ``genes-62x2000`` (5 informative genes, 35 %
  positive), ``genes-102x6000`` (8, 50 %) and ``genes-200x20000`` (10, 20 %). About 80 % of the genes
  lie in blocks of 10-50, each block one latent factor ``f`` with gene ``j`` = ``a_j f + sqrt(1 - a_j^2)
  e_j``, ``a_j`` uniform in [0.5, 0.9] (within-block correlations ``a_i a_j``, 0.25-0.81), the rest are
  independent noise; every gene is then shifted and scaled (mean ``N(7, 2^2)``, log-normal standard
  deviation) and the columns are shuffled. The informative genes come from ``ceil(n_informative / 2)``
  blocks; the label is +1 for the ``round(positive_rate * n)`` rows of largest score (their unit-variance
  values times weights of random sign and size 0.5-1.5, plus noise of a quarter of the signal's
  variance);
* ``fingerprints-350x100000`` (``fingerprints``): CSR 0/1 bits, 350 rows (35 positive), 100,000 bits,
  each bit's frequency drawn from Beta(0.2, 25) (most bits rare, density about 0.8 %), except 15
  informative bits, frequency 0.05-0.2 among the negatives and an odds ratio 5-20 among the
  positives; built in chunks of bits, never as a dense ``n x p`` array; ``fingerprints-weak-350x100000``
  the same with odds ratios 2-5, where selectors fit the training rows and end below the 0.90 of always
  predicting the majority class (as on a drug-discovery set of 280 training rows and 100,000 bits);
* stratified row subsamples of shared sets, ``default_rng(0)``, the class ratio kept to within a row
  (``stratified_subsample``; sparse stays CSR): ``basehock-n200``, ``pcmac-n100``, ``farm_ads-n300``,
  ``dexter-n100``, ``madelon-n100``, ``arcene-n60`` (the number is the rows kept of the pooled set).

Protocol: 5-fold cross-validation (``StratifiedKFold`` for classification, ``KFold`` for regression,
``shuffle=True, random_state=0``); ``k`` in {10, 50}, each taken as ``min(k, p)`` (a ``k`` that then
equals another is run once); seed of fold ``f`` = ``f``. Score: test accuracy, or test
``R^2 = 1 - mean((y - pred)^2) / var(y_test)``; mean ± std over the folds; fit time per method is
the mean over the folds. Methods (each evaluates its own fitted model on the test fold):

* ``os``: ``OnlineSubstitution(budget=k)`` with its defaults (the exchange variant, the loss from
  the labels: squared for regression, squared hinge for classification, ``passes="auto"``,
  ``ridge="auto"``: chosen by cross-validation on the training fold when ``p >= 5 n``, else none);
  ``os-no-ridge``: the same with ``ridge=0`` (the default before ``auto``; runs of earlier versions
  called ``os-ridge-auto`` what is now ``os``); ``os-kdd16``: the same with ``variant="kdd16"`` (KDD'16
  Alg. 1 literally); ``os-sim12``: ``AsyncOnlineSubstitution`` with ``min(12, p)`` simulated workers
  (staleness simulator, its defaults);
* ``os-mpi5``: ``mpiexec -n 5 python -m asyos.run --data FOLD --budget k --seed f`` (4 workers and
  the central process) on ``--mpi-sets`` only (default pcmac and satellite_image): each fold's
  train and test split is written to a temporary file that ``load_dataset`` reads, and the test
  fold is predicted from the run's ``selected``, ``coef`` (and ``intercept`` when the record has
  one); ``os-mpi5-no-ridge`` the same with ``--ridge 0``. Its time is the run's
  ``timing.async_s`` (the asynchronous phase; ``wall_s`` when absent): start-up and data loading
  are not counted. On a 2-core machine 5 ranks are oversubscribed, so
  these times say little about the method's speed;
* ``b-arda`` (``BudgetedARDA``, classification only) and ``ofsa`` (``OFSA`` on the running averages;
  fitted on the columns not constant on the training fold, skipped where their ``p x p`` averages
  would exceed 2 GB);
* peers: ``abess`` (``abess.linear`` with ``support_size=[k]`` on a dense copy of the columns not
  constant on the training fold, its own fitted model; skipped where that copy would exceed
  2 GB), ``l1+refit`` (Lasso or l1 logistic regression on scaled columns, bisection on the log of
  the l1 weight until exactly ``k`` non-zeros, else the ``k`` largest of the nearest path point
  above ``k``) and ``kbest+refit`` (``SelectKBest`` with the F statistic); both refit with asyos's
  ``refit_with_intercept`` (squared loss, or squared hinge for classification).

Each method is fitted once on a tiny problem before the measured fits, so that imports and compilation
are not timed. Each method is a function ``(X_train, y_train, k, task, seed) -> (predict, support,
seconds, info)``; a fit that fails is recorded with its error and the run goes on.

Printed: one table of scores per task, with the best peer and the gaps of ``os`` and ``os-sim12``
to it, then one table of fit times as ratios to ``kbest+refit``'s time in the same run, and one of
the process CPU time of each method's call (its fit and what it needs first: abess's dense copy,
OFSA's column scan; ``time.process_time``) as a ratio to abess's on the same fold. Every side runs
single-threaded (``OPENBLAS_NUM_THREADS`` = ``OMP_NUM_THREADS`` = 1 unless set, abess's ``thread=1``);
``os-mpi5``'s work is done by its ranks, so it has no CPU entry.

    python benchmarks/bench_real_selection.py                   # every set, k in {10, 50}, 5 folds
    python benchmarks/bench_real_selection.py --quick           # seconds, for CI
    python benchmarks/bench_real_selection.py --small-n         # the 11 p >> n sets, k in {10, 50}, 5 folds
    python benchmarks/bench_real_selection.py --sets cpu_act,madelon --methods os,abess,kbest+refit
    python benchmarks/bench_real_selection.py --column-order --methods os,os-sim12,os-kdd16
    python benchmarks/bench_real_selection.py --summarise first.jsonl rerun.jsonl   # merge logs
"""
from __future__ import annotations

import inspect
import math
import os

# every side single-threaded (BLAS, OpenMP), set before numpy loads; a value the user set stays
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")
import shutil
import tempfile
import time
import warnings

import numpy as np
import scipy.sparse as sp

from asyos.benchmarking.common import (Run, choose_profile, datasets_dir, fmt, mean_std, mpiexec_path, parser,
                                       plot, print_table, run_asyos, sparse_stand_in)

# p >> n sets, all classification: generated gene-expression-like and fingerprint sets (keyword arguments of
# gene_expression and fingerprints), and stratified row subsamples of shared sets (source, rows kept)
GENES = {"genes-62x2000": {"n": 62, "p": 2000, "n_informative": 5, "positive_rate": 0.35, "seed": 62},
         "genes-102x6000": {"n": 102, "p": 6000, "n_informative": 8, "positive_rate": 0.5, "seed": 102},
         "genes-200x20000": {"n": 200, "p": 20000, "n_informative": 10, "positive_rate": 0.2, "seed": 200}}
FINGERPRINTS = {"fingerprints-350x100000": {"n": 350, "p": 100_000, "n_informative": 15, "positive_rate": 0.10,
                                            "seed": 350},
                # weaker bits (odds ratio 2-5): every selector ends below always predicting the majority class
                "fingerprints-weak-350x100000": {"n": 350, "p": 100_000, "n_informative": 15, "positive_rate": 0.10,
                                                 "seed": 351, "odds": (2.0, 5.0)}}
SUBSAMPLES = {"basehock-n200": ("basehock", 200), "pcmac-n100": ("pcmac", 100), "farm_ads-n300": ("farm_ads", 300),
              "dexter-n100": ("dexter", 100), "madelon-n100": ("madelon", 100), "arcene-n60": ("arcene", 60)}
SMALL_N = tuple(GENES) + tuple(FINGERPRINTS) + tuple(SUBSAMPLES)

CLASSIFICATION = ("arcene", "dexter", "basehock", "pcmac", "pcmac-imbalanced", "farm_ads", "madelon",
                  "sklearn_breast_cancer", "digits-0-vs-rest") + SMALL_N
REGRESSION = ("cpu_act", "satellite_image", "sklearn_diabetes")
DATASETS = CLASSIFICATION + REGRESSION                                  # what --sets accepts
PAPER_SETS = tuple(n for n in DATASETS if n not in SMALL_N)             # the p >> n sets have their own profile
STAND_IN = "stand-in"
# where each shared set lives under the data directory
FILES = {"arcene": "arcene/arcene.npz", "madelon": "madelon/madelon.npz", "cpu_act": "cpu_act/cpu_act.npz",
         "satellite_image": "satellite_image/satellite_image.npz",
         "sklearn_breast_cancer": "sklearn_breast_cancer/breast_cancer.npz",
         "sklearn_diabetes": "sklearn_diabetes/diabetes.npz",
         "dexter": "dexter", "basehock": "basehock", "pcmac": "pcmac", "farm_ads": "farm_ads",
         "pcmac-imbalanced": "pcmac"}
FILES.update({name: FILES[source] for name, (source, _) in SUBSAMPLES.items()})
GENERATED = {"digits-0-vs-rest": "generated: scikit-learn digits, 0 vs the rest",
             "pcmac-imbalanced": "generated: pcmac, positives subsampled to 1/9 of the negatives",
             **{name: (f"generated: gene-expression-like, {g['n']} x {g['p']} dense, correlated gene blocks, "
                       f"{g['n_informative']} informative genes, {g['positive_rate']:.0%} positive")
                for name, g in GENES.items()},
             **{name: (f"generated: sparse binary fingerprints, {f['n']} x {f['p']}, rare bits, "
                       f"{f['n_informative']} informative bits (odds ratio {f.get('odds', (5, 20))[0]:g}-"
                       f"{f.get('odds', (5, 20))[1]:g}), {f['positive_rate']:.0%} positive")
                for name, f in FINGERPRINTS.items()},
             **{name: f"generated: {source}, stratified subsample of {rows} rows (default_rng(0))"
                for name, (source, rows) in SUBSAMPLES.items()},
             STAND_IN: "synthetic sparse stand-in (NOT real data)"}

OS_FAMILY = ("os", "os-no-ridge", "os-filter-end", "os-kdd16", "os-sim12", "os-mpi5", "os-mpi5-no-ridge",
             "b-arda", "ofsa")
MPI_FLAGS = {"os-mpi5": (), "os-mpi5-no-ridge": ("--ridge", "0")}     # the runs under mpiexec, their flags
PEERS = ("abess", "l1+refit", "kbest+refit")
METHODS = OS_FAMILY + PEERS
BASELINE = "kbest+refit"
CPU_BASELINE = "abess"          # the process CPU table's reference (issue: OS at or below abess's CPU)
GAP_METHODS = ("os", "os-no-ridge", "os-sim12", "os-mpi5", "os-mpi5-no-ridge")   # the gap columns, where run
DENSE_LIMIT_BYTES = 2e9         # largest dense copy (abess) or p x p averages (OFSA) made
L1_STEPS = 30                   # bisection steps on log(l1 weight)
L1_RANGE = 1e4                  # the l1 weight is searched over [w_max / L1_RANGE, w_max] ...
L1_EXTEND = 2                   # ... widened by L1_RANGE at most this often when that end has < k features

PROFILES = {
    "paper": {"datasets": list(PAPER_SETS), "ks": [10, 50], "folds": 5, "methods": list(METHODS),
              "mpi_sets": ["pcmac", "satellite_image"], "mpi_folds": None},
    "small-n": {"datasets": list(SMALL_N), "ks": [10, 50], "folds": 5, "methods": list(METHODS),
                "mpi_sets": [], "mpi_folds": None},
    "quick": {"datasets": ["sklearn_breast_cancer", "sklearn_diabetes"], "ks": [5], "folds": 2,
              "methods": list(METHODS), "mpi_sets": ["sklearn_diabetes"], "mpi_folds": 1},
}


# -- data -------------------------------------------------------------------------------------------
def task_of(name):
    return "regression" if split_draw(name)[0] in REGRESSION else "classification"


def missing_data(data_dir, names):
    """Why ``names`` cannot be read from ``data_dir`` (``None`` when they can)."""
    if not os.path.isdir(data_dir):
        return (f"data directory not found: {data_dir} (the shared datasets are expected at ../shared/datasets "
                f"next to the repository root; pass --data-dir DIR or set ASYOS_DATASETS)")
    missing = [n for n in names if n in FILES and not os.path.exists(os.path.join(data_dir, FILES[n]))]
    if missing:
        return f"data directory {data_dir} lacks {', '.join(missing)} (see its README.md)"
    return None


def pooled(path):
    """``(X, y)`` of a shared data set, its train and test rows stacked when it has a split."""
    from asyos.data.io import load_dataset
    d = load_dataset(path)
    if not d.has_test:
        return d.X, d.y
    if sp.issparse(d.X):
        return sp.vstack([d.X, d.X_test]).tocsr(), np.concatenate([d.y, d.y_test])
    return np.vstack([d.X, d.X_test]), np.concatenate([d.y, d.y_test])


def top_rows(score, positive_rate):
    """Labels in {-1, +1}: +1 for the ``round(positive_rate * n)`` rows of largest ``score``."""
    y = np.full(score.size, -1.0)
    y[np.argsort(-score, kind="stable")[:int(round(positive_rate * score.size))]] = 1.0
    return y


def gene_expression(n, p, n_informative, positive_rate, seed, structure=False):
    """Gene-expression-like data: ``(X, y)``, dense float64 ``n x p``, labels in {-1, +1}.

    About 80 % of the genes lie in blocks of 10-50 genes; a block is a latent factor ``f`` (one value a
    row) and its gene ``j`` is ``a_j f + sqrt(1 - a_j^2) e_j`` with ``a_j`` uniform in [0.5, 0.9], so two
    genes of a block correlate ``a_i a_j`` (0.25-0.81) and genes of different blocks not at all; the
    other genes are independent noise. Each gene is then shifted and scaled (mean ``N(7, 2^2)``, standard
    deviation ``exp(N(-0.5, 0.5^2))``) and the columns are shuffled, so neither the blocks nor the
    informative genes are adjacent. The ``n_informative`` informative genes are taken round-robin from
    ``ceil(n_informative / 2)`` blocks; the score is their unit-variance values (before the shift and
    scale) times weights of random sign and size in [0.5, 1.5], plus Gaussian noise with a quarter of
    that signal's variance, and the label is +1 for the ``round(positive_rate * n)`` rows of largest score.

    ``structure=True`` also returns the blocks (a list of column index arrays) and the informative
    columns: ``(X, y, blocks, informative)``."""
    rng = np.random.default_rng(seed)
    sizes, left = [], int(0.8 * p)
    while left >= 10:
        sizes.append(min(int(rng.integers(10, 51)), left))
        left -= sizes[-1]
    order = rng.permutation(p)
    bounds = np.cumsum([0] + sizes)
    blocks = [np.sort(order[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    block_of = np.full(p, -1)
    for b, cols in enumerate(blocks):
        block_of[cols] = b
    in_block = np.flatnonzero(block_of >= 0)
    loading = rng.uniform(0.5, 0.9, p)[in_block]
    factors = rng.standard_normal((n, len(blocks)))
    Z = rng.standard_normal((n, p))
    Z[:, in_block] = loading * factors[:, block_of[in_block]] + np.sqrt(1.0 - loading ** 2) * Z[:, in_block]
    if blocks:
        chosen = rng.choice(len(blocks), min(len(blocks), math.ceil(n_informative / 2)), replace=False)
        counts = np.bincount(np.arange(n_informative) % chosen.size, minlength=chosen.size)
        informative = np.concatenate([rng.choice(blocks[b], c, replace=False) for b, c in zip(chosen, counts)])
    else:                                       # too few genes for a block
        informative = rng.choice(p, n_informative, replace=False)
    weights = rng.choice([-1.0, 1.0], informative.size) * rng.uniform(0.5, 1.5, informative.size)
    signal = Z[:, informative] @ weights
    score = signal + 0.5 * signal.std() * rng.standard_normal(n)
    X = rng.normal(7.0, 2.0, p) + np.exp(rng.normal(-0.5, 0.5, p)) * Z
    y = top_rows(score, positive_rate)
    return (X, y, blocks, np.sort(informative)) if structure else (X, y)


FINGERPRINT_CHUNK = 8192        # bits drawn at once: an n x FINGERPRINT_CHUNK block of uniforms


def fingerprints(n, p, n_informative, positive_rate, seed, structure=False, odds=(5.0, 20.0)):
    """Sparse binary fingerprints: ``(X, y)``, CSR float64 0/1 ``n x p``, labels in {-1, +1}.

    The ``round(positive_rate * n)`` positives are rows drawn at random. Each bit is set independently,
    with a frequency drawn from Beta(0.2, 25) (most bits rare, a few common; density about 0.8 %),
    except the ``n_informative`` informative bits: frequency ``q0`` uniform in [0.05, 0.2] among the
    negatives and the one of odds ratio ``r`` (log-uniform in ``odds``, [5, 20] unless given) among the positives,
    ``r q0 / (1 - q0 + r q0)``. The bits are drawn ``FINGERPRINT_CHUNK`` at a time and only the set ones
    kept, so no dense ``n x p`` array is made.

    ``structure=True`` also returns the informative columns: ``(X, y, informative)``."""
    rng = np.random.default_rng(seed)
    y = np.full(n, -1.0)
    y[rng.choice(n, int(round(positive_rate * n)), replace=False)] = 1.0
    freq = rng.beta(0.2, 25.0, p)
    informative = np.sort(rng.choice(p, n_informative, replace=False))
    q0 = rng.uniform(0.05, 0.2, n_informative)
    ratio = np.exp(rng.uniform(math.log(odds[0]), math.log(odds[1]), n_informative)) * q0 / (1.0 - q0)
    q1 = ratio / (1.0 + ratio)
    rows, cols = [], []
    for start in range(0, p, FINGERPRINT_CHUNK):
        stop = min(start + FINGERPRINT_CHUNK, p)
        threshold = np.broadcast_to(freq[start:stop], (n, stop - start))
        here = (informative >= start) & (informative < stop)
        if here.any():                          # the informative bits' frequency depends on the label
            threshold = threshold.copy()
            threshold[:, informative[here] - start] = np.where(y[:, None] > 0, q1[here], q0[here])
        r, c = np.nonzero(rng.random((n, stop - start)) < threshold)
        rows.append(r)
        cols.append(c + start)
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    X = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, p))
    X.sort_indices()
    return (X, y, informative) if structure else (X, y)


def stratified_subsample(X, y, rows, seed=0):
    """``rows`` rows of ``(X, y)`` drawn without replacement (``default_rng(seed)``) from each class in
    proportion, the class ratio kept to within a row; the rows stay in their order, CSR stays CSR."""
    rng = np.random.default_rng(seed)
    pos, neg = np.flatnonzero(y > 0), np.flatnonzero(y <= 0)
    n_pos = min(pos.size, max(1, int(round(rows * pos.size / y.size))))
    keep = np.sort(np.concatenate([rng.choice(pos, n_pos, replace=False),
                                   rng.choice(neg, rows - n_pos, replace=False)]))
    return X[keep], y[keep]


DRAW = "~"      # ``genes-62x2000~2``: the second draw of a generated or subsampled p >> n set (``--draws``)


def drawn(names, draws):
    """``names`` followed by draws 2..``draws`` of each generated or subsampled p >> n set among them."""
    extra = [f"{n}{DRAW}{d}" for d in range(2, draws + 1) for n in names if n in GENES or n in FINGERPRINTS
             or n in SUBSAMPLES]
    return list(names) + extra


def split_draw(name):
    """``(base name, draw)``: draw 1 is the set as listed (its fixed seed); draw ``d`` > 1 takes the
    generator seed ``1000 (d - 1) + seed`` or the subsample seed ``d - 1``."""
    base, _, d = name.partition(DRAW)
    if not d:
        return name, 1
    if base not in GENES and base not in FINGERPRINTS and base not in SUBSAMPLES or not d.isdigit() or int(d) < 2:
        raise SystemExit(f"unknown data set {name!r}: draws ({DRAW}2, {DRAW}3, ...) exist of the small-n sets")
    return base, int(d)


def load(data_dir, name):
    """``(X, y, source)``: float64 dense or CSR ``X``, float labels, and where the data came from."""
    if DRAW in name:
        base, d = split_draw(name)
        if base in GENES:
            g = {**GENES[base], "seed": 1000 * (d - 1) + GENES[base]["seed"]}
            return (*gene_expression(**g), f"{GENERATED[base]}, draw {d} (seed {g['seed']})")
        if base in FINGERPRINTS:
            f = {**FINGERPRINTS[base], "seed": 1000 * (d - 1) + FINGERPRINTS[base]["seed"]}
            return (*fingerprints(**f), f"{GENERATED[base]}, draw {d} (seed {f['seed']})")
        source, rows = SUBSAMPLES[base]
        X, y = stratified_subsample(*pooled(os.path.join(data_dir, FILES[source])), rows, seed=d - 1)
        if sp.issparse(X):
            X = sp.csr_matrix(X, dtype=np.float64)
            X.sum_duplicates()
            X.sort_indices()
        return (X, np.asarray(y, dtype=np.float64),
                f"generated: {source}, stratified subsample of {rows} rows, draw {d} (default_rng({d - 1}))")
    if name == STAND_IN:
        X, y, Xt, yt = sparse_stand_in()
        return sp.vstack([X, Xt]).tocsr(), np.concatenate([y, yt]), GENERATED[name]
    if name == "digits-0-vs-rest":
        from sklearn.datasets import load_digits
        digits = load_digits()
        return digits.data.astype(np.float64), np.where(digits.target == 0, 1.0, -1.0), GENERATED[name]
    if name in GENES:
        return (*gene_expression(**GENES[name]), GENERATED[name])
    if name in FINGERPRINTS:
        return (*fingerprints(**FINGERPRINTS[name]), GENERATED[name])
    if name == "sklearn_diabetes" and (data_dir is None or not os.path.exists(os.path.join(data_dir, FILES[name]))):
        from sklearn.datasets import load_diabetes
        X, y = load_diabetes(return_X_y=True, scaled=False)
        return X.astype(np.float64), y.astype(np.float64), "real (scikit-learn's bundled copy)"
    X, y = pooled(os.path.join(data_dir, FILES[name]))
    if name == "pcmac-imbalanced":
        rng = np.random.default_rng(0)
        pos, neg = np.flatnonzero(y > 0), np.flatnonzero(y < 0)
        keep = np.sort(np.concatenate([neg, rng.choice(pos, max(1, round(neg.size / 9)), replace=False)]))
        X, y = X[keep], y[keep]
    if name in SUBSAMPLES:
        X, y = stratified_subsample(X, y, SUBSAMPLES[name][1], seed=0)
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float64)
        X.sum_duplicates()
        X.sort_indices()
    else:
        X = np.asarray(X, dtype=np.float64)
    return X, np.asarray(y, dtype=np.float64), GENERATED.get(name, "real")


def folds_of(X, y, task, n_folds):
    from sklearn.model_selection import KFold, StratifiedKFold
    cv = (StratifiedKFold if task == "classification" else KFold)(n_splits=n_folds, shuffle=True, random_state=0)
    return list(cv.split(np.zeros(X.shape[0]), y))


def budgets_for(ks, p):
    """``min(k, p)`` for each ``k``, without repeats, in order."""
    out = []
    for k in ks:
        k = min(int(k), p)
        if k not in out:
            out.append(k)
    return out


# -- helpers ----------------------------------------------------------------------------------------
def columns(X, support):
    """Dense ``(n, len(support))`` block of the given columns."""
    block = X[:, np.asarray(support, dtype=np.intp)]
    return block.toarray() if sp.issparse(block) else np.asarray(block)


def non_constant(X):
    """Indices of the columns of ``X`` that are not constant (implicit zeros counted for CSR)."""
    if sp.issparse(X):
        X = X.tocsc()
        lo = X.min(axis=0).toarray().ravel()
        hi = X.max(axis=0).toarray().ravel()
        return np.flatnonzero(hi > lo)
    return np.flatnonzero(np.ptp(X, axis=0) > 0)


def loss_name(task):
    return "squared" if task == "regression" else "squared_hinge"


def sign(u):
    return np.where(np.asarray(u) >= 0, 1.0, -1.0)


def score(task, y, pred):
    """Accuracy, or ``R^2 = 1 - mean((y - pred)^2) / var(y)``."""
    pred = np.asarray(pred, dtype=float).ravel()
    if task == "classification":
        return float(np.mean(sign(pred) == y))
    var = float(np.var(y))
    return 1.0 - float(np.mean((y - pred) ** 2)) / var if var > 0 else float("nan")


class Skip(Exception):
    """A method that does not apply here (the reason is printed and kept in the summary)."""


def refit_predictor(X_train, y_train, support, task):
    """asyos's refit with intercept on ``support``; returns the test predictor."""
    from asyos.learners.refit import refit_with_intercept
    from asyos.losses import get_loss
    support = np.asarray(support, dtype=np.intp)
    coef, b = refit_with_intercept(columns(X_train, support), y_train, get_loss(loss_name(task)))
    return lambda X: columns(X, support) @ coef + b


def own_model(est):
    return lambda X: est.predict(X)


# -- methods: (X_train, y_train, k, task, seed) -> (predict, support, seconds, info) -----------------
def fit_os(X, y, k, task, seed, **params):
    """The estimator's defaults (the loss from the labels: squared, or the squared hinge on +-1)."""
    from asyos import OnlineSubstitution
    est = OnlineSubstitution(budget=k, random_state=seed, **params)
    t0 = time.perf_counter()
    est.fit(X, y)
    assert est.loss_ == loss_name(task)
    return own_model(est), est.support_, time.perf_counter() - t0, {"passes": est.n_passes_, "ridge": est.ridge_}


def fit_os_no_ridge(X, y, k, task, seed):
    return fit_os(X, y, k, task, seed, ridge=0.0)


def fit_os_filter_end(X, y, k, task, seed):
    """OS's selection under a ridge of 1000 (its exchange then ranks features by marginal signal, as a
    univariate filter does), refit without a ridge: the "filter end" of docs/results.md's p >> n study."""
    from asyos import OnlineSubstitution
    t0 = time.perf_counter()
    est = OnlineSubstitution(budget=k, random_state=seed, ridge=1000.0).fit(X, y)
    support = np.sort(est.support_)
    return refit_predictor(X, y, support, task), support, time.perf_counter() - t0, {"ridge": 1000.0}


def fit_os_kdd16(X, y, k, task, seed):
    return fit_os(X, y, k, task, seed, variant="kdd16")


def fit_os_sim12(X, y, k, task, seed):
    from asyos import AsyncOnlineSubstitution
    est = AsyncOnlineSubstitution(budget=k, n_workers=min(12, X.shape[1]), random_state=seed)
    t0 = time.perf_counter()
    est.fit(X, y)
    return own_model(est), est.support_, time.perf_counter() - t0, {"candidates": est.n_candidates_,
                                                                    "finish": est.finish_, "passes": est.n_passes_}


def fit_b_arda(X, y, k, task, seed):
    if task != "classification":
        raise Skip("B-ARDA is a classifier")
    from asyos import BudgetedARDA
    est = BudgetedARDA(budget=k, random_state=seed)
    t0 = time.perf_counter()
    est.fit(X, y)
    seconds = time.perf_counter() - t0
    return own_model(est), np.flatnonzero(est.coef_), seconds, {}


def fit_ofsa(X, y, k, task, seed):
    from asyos import OFSA
    keep = non_constant(X)
    if keep.size ** 2 * 8 > DENSE_LIMIT_BYTES:
        raise Skip(f"its {keep.size} x {keep.size} running averages would take "
                   f"{keep.size ** 2 * 8 / 1e9:.1f} GB")
    est = OFSA(budget=min(k, keep.size), task=task)
    t0 = time.perf_counter()
    est.fit(X[:, keep], y)
    support = keep[est.support_]
    seconds = time.perf_counter() - t0
    return (lambda Xt: est.predict(Xt[:, keep])), support, seconds, {"columns_used": int(keep.size)}


def fit_abess(X, y, k, task, seed):
    try:
        from abess.linear import LinearRegression, LogisticRegression
    except ImportError:
        raise Skip("abess is not installed (pip install abess)") from None
    keep = non_constant(X)              # abess refuses constant columns
    if X.shape[0] * keep.size * 8 > DENSE_LIMIT_BYTES:
        raise Skip(f"a dense copy of its {X.shape[0]} x {keep.size} training columns would take "
                   f"{X.shape[0] * keep.size * 8 / 1e9:.1f} GB")
    t0 = time.perf_counter()
    D = columns(X, keep)
    size = min(k, keep.size)
    if task == "classification":
        est = LogisticRegression(support_size=[size])
        est.fit(D, (y > 0).astype(np.float64))
        predict = lambda Xt: np.where(est.predict(columns(Xt, keep)) > 0.5, 1.0, -1.0)  # noqa: E731
    else:
        est = LinearRegression(support_size=[size])
        est.fit(D, y)
        predict = lambda Xt: est.predict(columns(Xt, keep))  # noqa: E731
    seconds = time.perf_counter() - t0
    return predict, keep[np.flatnonzero(est.coef_)], seconds, {"columns_used": int(keep.size)}


def l1_logistic(C, seed):
    """An l1-penalised logistic regression (liblinear), in the installed scikit-learn's own terms."""
    from sklearn.linear_model import LogisticRegression
    default = inspect.signature(LogisticRegression.__init__).parameters["penalty"].default
    kind = {"l1_ratio": 1.0} if default == "deprecated" else {"penalty": "l1"}
    return LogisticRegression(C=C, solver="liblinear", random_state=seed, max_iter=1000, **kind)


def fit_l1_refit(X, y, k, task, seed):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import Lasso
    from sklearn.preprocessing import MaxAbsScaler, StandardScaler
    from sklearn.svm import l1_min_c
    t0 = time.perf_counter()
    Xs = (MaxAbsScaler() if sp.issparse(X) else StandardScaler()).fit_transform(X)
    if task == "regression":
        w_max = float(np.max(np.abs(Xs.T @ (y - y.mean())))) / X.shape[0]
        lasso = Lasso(alpha=w_max, max_iter=10000, warm_start=True)

        def coef_at(log_w):             # a larger alpha gives fewer features
            lasso.set_params(alpha=math.exp(log_w))
            return lasso.fit(Xs, y).coef_.copy()
        dense_end, sparse_end = math.log(w_max / L1_RANGE), math.log(w_max)
    else:
        c_min = float(l1_min_c(Xs, y, loss="log"))

        def coef_at(log_w):             # a larger C gives more features
            return l1_logistic(math.exp(log_w), seed).fit(Xs, y).coef_.ravel().copy()
        dense_end, sparse_end = math.log(c_min * L1_RANGE), math.log(c_min)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        coef = coef_at(dense_end)
        steps = 1
        for _ in range(L1_EXTEND):      # e.g. k = p: the dense end may still miss a few columns
            if np.count_nonzero(coef) >= k:
                break
            sparse_end, dense_end = dense_end, dense_end + (1 if task == "classification" else -1) * math.log(L1_RANGE)
            coef = coef_at(dense_end)
            steps += 1
        above = coef                    # the path point nearest k from above seen so far
        lo, hi = dense_end, sparse_end  # nnz(lo) >= k > nnz(hi)
        while np.count_nonzero(coef) != k and np.count_nonzero(above) > k and steps < L1_STEPS + L1_EXTEND:
            mid = 0.5 * (lo + hi)
            coef = coef_at(mid)
            steps += 1
            if np.count_nonzero(coef) >= k:
                lo, above = mid, coef
            else:
                hi = mid
    nnz = int(np.count_nonzero(coef))
    if nnz != k:
        coef = above
    order = np.argsort(-np.abs(coef), kind="stable")
    support = np.sort(order[:min(k, int(np.count_nonzero(coef)))])
    predict = refit_predictor(X, y, support, task)
    seconds = time.perf_counter() - t0
    unconverged = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
    return predict, support, seconds, {"l1_fits": steps, "l1_nnz": int(np.count_nonzero(coef)),
                                       "l1_exact": nnz == k, "l1_unconverged": unconverged}


def fit_kbest_refit(X, y, k, task, seed):
    from sklearn.feature_selection import SelectKBest, f_classif, f_regression
    t0 = time.perf_counter()
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", UserWarning)        # "Features ... are constant"
        warnings.simplefilter("ignore", RuntimeWarning)
        selector = SelectKBest(f_classif if task == "classification" else f_regression, k=k).fit(X, y)
    support = selector.get_support(indices=True)
    predict = refit_predictor(X, y, support, task)
    return predict, support, time.perf_counter() - t0, {}


def fit_os_mpi5(X, y, k, task, seed, *, X_test, y_test, extra=()):
    """``asyos.run`` under ``mpiexec -n 5`` on this fold, written to a temporary file (``extra``: more
    flags)."""
    tmp = tempfile.mkdtemp(prefix="asyos-fold-")
    try:
        if sp.issparse(X):
            path = os.path.join(tmp, "fold")
            os.makedirs(path)
            sp.save_npz(os.path.join(path, "X_train.npz"), sp.csr_matrix(X))
            sp.save_npz(os.path.join(path, "X_test.npz"), sp.csr_matrix(X_test))
            np.save(os.path.join(path, "y_train.npy"), y)
            np.save(os.path.join(path, "y_test.npy"), y_test)
        else:
            path = os.path.join(tmp, "fold.npz")
            np.savez(path, X_train=X, y_train=y, X_test=X_test, y_test=y_test)
        try:
            record, command_s = run_asyos(["--data", path, "--budget", k, "--seed", seed, *extra], ranks=5)
        except SystemExit as exc:       # run_asyos reports a failed command this way
            raise RuntimeError(str(exc)) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    selected = np.asarray(record["selected"], dtype=np.intp)
    coef = np.asarray(record["coef"], dtype=float)
    intercept = float(record.get("intercept", 0.0))
    timing = record.get("timing", {})
    clock = "async_s" if "async_s" in timing else "wall_s"
    predict = lambda Xt: columns(Xt, selected) @ coef + intercept  # noqa: E731
    u = predict(X_test)             # cross-check: the run's own test error against this prediction's
    ours = (float(np.mean(sign(u) != y_test)) if task == "classification"
            else float(np.sqrt(np.mean((u - y_test) ** 2))))
    return predict, selected, float(timing[clock]), {
        "clock": clock, "command_s": command_s, "has_intercept": "intercept" in record,
        "record_test_error": record.get("metrics", {}).get("test_error"), "test_error_here": ours,
        "loss": record["problem"].get("loss")}


FITS = {"os": fit_os, "os-no-ridge": fit_os_no_ridge, "os-filter-end": fit_os_filter_end,
        "os-kdd16": fit_os_kdd16, "os-sim12": fit_os_sim12,
        "os-mpi5": fit_os_mpi5, "os-mpi5-no-ridge": fit_os_mpi5,
        "b-arda": fit_b_arda, "ofsa": fit_ofsa, "abess": fit_abess, "l1+refit": fit_l1_refit,
        "kbest+refit": fit_kbest_refit}


# -- the protocol -----------------------------------------------------------------------------------
def warm_up(methods, tasks):
    """Fit every method once on a tiny problem, untimed, so that imports and compilation are not
    counted in the first measured fit."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 24))
    for task in tasks:
        y = X[:, :3].sum(axis=1) + 0.1 * rng.standard_normal(80)
        if task == "classification":
            y = sign(y)
        for method in methods:
            if method in MPI_FLAGS:
                continue
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    predict, *_ = FITS[method](X[:60], y[:60], 3, task, 0)
                    predict(X[60:])
            except Exception:           # Skip, or a real problem that the measured fits will report
                pass


def run_dataset(run, profile, name, X, y, source, notes):
    task = task_of(name)
    n, p = X.shape
    ks = budgets_for(profile["ks"], p)
    folds = folds_of(X, y, task, profile["folds"])
    mpi_here = bool(MPI_FLAGS.keys() & set(profile["methods"])) and name in profile["mpi_sets"]
    if mpi_here and profile["mpiexec"] is None:
        note(notes, name, "os-mpi5", "mpiexec not found (pip install 'asyos[mpi]')")
        mpi_here = False
    mpi_folds = len(folds) if profile["mpi_folds"] is None else profile["mpi_folds"]
    skipped = set()
    t_set = time.perf_counter()
    for fold, (train, test) in enumerate(folds):
        Xtr, ytr, Xte, yte = X[train], y[train], X[test], y[test]
        for k in ks:
            for method in profile["methods"]:
                if method in MPI_FLAGS:
                    if not mpi_here or fold >= mpi_folds:
                        continue
                    fn = lambda *a, m=method: fit_os_mpi5(*a, X_test=Xte, y_test=yte, extra=MPI_FLAGS[m])  # noqa: E731
                else:
                    fn = FITS[method]
                if method in skipped:
                    continue
                rec = {"dataset": name, "task": task, "source": source, "k": k, "method": method, "fold": fold,
                       "seed": fold, "n_train": int(train.size), "n_test": int(test.size), "p": p,
                       "sparse": bool(sp.issparse(X))}
                try:
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        c0 = time.process_time()
                        predict, support, seconds, info = fn(Xtr, ytr, k, task, fold)
                        cpu = None if method in MPI_FLAGS else time.process_time() - c0
                        pred = predict(Xte)
                except Skip as why:
                    note(notes, name, method, str(why))
                    skipped.add(method)
                    continue
                except Exception as exc:     # keep going: the failure is recorded with the unit
                    rec.update(score=None, seconds=None, error=f"{type(exc).__name__}: {exc}"[:2000])
                    print(f"   {name} k={k} fold {fold} {method}: FAILED {rec['error'][:300]}", flush=True)
                    run.unit(rec)
                    continue
                rec.update(score=score(task, yte, pred), seconds=float(seconds), cpu_s=cpu,
                           n_selected=int(len(support)), support=[int(j) for j in support], **info)
                messages = sorted({f"{w.category.__name__}: {str(w.message)[:200]}" for w in caught})
                if messages:
                    rec["warnings"] = messages[:5]
                run.unit(rec)
    print(f"{name} ({source}): {task}, n = {n}, p = {p}{' (sparse)' if sp.issparse(X) else ''}, "
          f"k in {ks}, {len(folds)} folds in {time.perf_counter() - t_set:.1f} s", flush=True)
    remarks(run.units, name, notes)
    return {"task": task, "source": source, "n": n, "p": p, "ks": ks, "sparse": bool(sp.issparse(X)),
            "positive_fraction": float(np.mean(y > 0)) if task == "classification" else None}


def column_order(run, profile, name, X, y, shuffles=2):
    """Fold 0 of each set, each budget: OS fitted on the columns as stored and on ``shuffles``
    random permutations of them; how many selected features the shuffled fits share with the
    stored order's (mapped back), and their test scores."""
    task = task_of(name)
    train, test = folds_of(X, y, task, profile["folds"])[0]
    Xtr, ytr, Xte, yte = X[train], y[train], X[test], y[test]
    rows = []
    for k in budgets_for(profile["ks"], X.shape[1]):
        for method in [m for m in ("os", "os-sim12", "os-kdd16") if m in profile["methods"]]:
            fits = []
            for shuffle in range(shuffles + 1):
                perm = (np.arange(X.shape[1]) if shuffle == 0
                        else np.random.default_rng(1000 + shuffle).permutation(X.shape[1]))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    predict, support, seconds, _ = FITS[method](Xtr[:, perm], ytr, k, task, 0)
                    fits.append((set(perm[np.asarray(support, dtype=np.intp)].tolist()),
                                 score(task, yte, predict(Xte[:, perm]))))
            base_support, base_score = fits[0]
            shared = [len(base_support & f[0]) for f in fits[1:]]
            scores = [f[1] for f in fits[1:]]
            rec = {"part": "column-order", "dataset": name, "task": task, "k": k, "method": method,
                   "score": base_score, "shuffled_scores": scores, "shared": shared,
                   "n_selected": len(base_support)}
            run.unit(rec)
            rows.append([name, k, method, f"{base_score:.3f}", " ".join(f"{v:.3f}" for v in scores),
                         f"{max(abs(v - base_score) for v in scores):.3f}",
                         " ".join(f"{v}/{len(base_support)}" for v in shared)])
    return rows


def remarks(units, name, notes):
    """Notes on what the scores hide: l1 paths short of k, warnings raised during the fits."""
    mine = [u for u in units if u["dataset"] == name and u.get("score") is not None]
    short = [u for u in mine if u["method"] == "l1+refit" and u["n_selected"] < u["k"]]
    if short:
        line = (f"{name}: l1+refit selected fewer than k on {len(short)} fold-budget pair(s) (the path did not "
                f"reach k: " + ", ".join(f"k={u['k']}: {u['n_selected']}" for u in short[:4]) + ")")
        notes.append(line)
        print(f"   NOTE {line}", flush=True)
    for method in dict.fromkeys(u["method"] for u in mine):
        warned = [u for u in mine if u["method"] == method and u.get("warnings")]
        if warned:
            total = sum(u["method"] == method for u in mine)
            line = (f"{name}: {method} warned on {len(warned)} of {total} fits, e.g. "
                    f"{warned[0]['warnings'][0][:160]}")
            notes.append(line)
            print(f"   NOTE {line}", flush=True)


def note(notes, name, method, text):
    line = f"{name}: {method} skipped: {text}"
    if line not in notes:
        notes.append(line)
        print(f"   NOTE {line}", flush=True)


# -- summary and tables -----------------------------------------------------------------------------
def summarise(units, datasets, methods):
    out = {}
    for name, meta in datasets.items():
        per_k = {}
        for k in meta["ks"]:
            cell = {}
            for m in methods:
                mine = [u for u in units if u["dataset"] == name and u["k"] == k and u["method"] == m]
                if not mine:
                    continue
                mean, std = mean_std([u["score"] for u in mine])
                sec = mean_std([u["seconds"] for u in mine])[0]
                cpu = mean_std([u.get("cpu_s") for u in mine])[0]
                cell[m] = {"mean": mean, "std": std, "seconds": sec, "cpu_s": cpu,
                           "folds": sum(u["score"] is not None for u in mine),
                           "failed": sum(u["score"] is None for u in mine),
                           "n_selected": mean_std([u.get("n_selected") for u in mine])[0]}
            peers = [(cell[m]["mean"], m) for m in PEERS if m in cell and cell[m]["mean"] is not None]
            best = max(peers) if peers else None
            gaps = {m: cell[m]["mean"] - best[0] for m in OS_FAMILY
                    if best and m in cell and cell[m]["mean"] is not None}
            base = cell.get(BASELINE, {}).get("seconds")
            ratios = {m: c["seconds"] / base for m, c in cell.items() if base and c["seconds"] is not None}
            per_k[str(k)] = {"methods": cell, "best_peer": {"method": best[1], "score": best[0]} if best else None,
                             "gaps_to_best_peer": gaps, "time_ratio_to_baseline": ratios,
                             "cpu_ratio_to_abess": cpu_ratios(units, name, k)}
        out[name] = {**meta, "results": per_k}
    return out


def standing(summary, methods):
    """Each method's standing over the cells (data set x k) of a task where every method of ``methods`` and
    every peer has a score: ``{task: {"all" | k: {method: {"cells", "mean", "at_or_above_best_peer",
    "mean_gap"}}}}``; a method's own standing counts it against the best of the peers (a peer against the
    best of the others)."""
    out = {}
    for task in ("classification", "regression"):
        cells = [(n, k, summary[n]["results"][str(k)]["methods"]) for n in summary if summary[n]["task"] == task
                 for k in summary[n]["ks"]]
        cells = [(n, k, c) for n, k, c in cells
                 if all(m in c and c[m]["mean"] is not None for m in methods)]
        if not cells:
            continue
        groups = {"all": cells, **{str(k): [c for c in cells if c[1] == k] for k in sorted({c[1] for c in cells})}}
        out[task] = {}
        for group, members in groups.items():
            table = {}
            for m in methods:
                gaps = []
                for _, _, c in members:
                    others = [c[q]["mean"] for q in PEERS if q != m and q in c and c[q]["mean"] is not None]
                    if others:
                        gaps.append(c[m]["mean"] - max(others))
                table[m] = {"cells": len(members), "mean": float(np.mean([c[m]["mean"] for _, _, c in members])),
                            "at_or_above_best_peer": int(sum(g >= -1e-12 for g in gaps)),
                            "mean_gap": float(np.mean(gaps)) if gaps else None}
            out[task][group] = table
    return out


def print_standing(table):
    for task, groups in table.items():
        rows = [[group, m, t["cells"], f"{t['mean']:.4f}", t["at_or_above_best_peer"],
                 f"{t['mean_gap']:+.4f}" if t["mean_gap"] is not None else "-"]
                for group, methods in groups.items() for m, t in methods.items()]
        print_table(f"{task}: standing over the cells where every method ran (k = all, or one budget); at or above = "
                    "cells where the method's mean is at least the best other peer's",
                    ["k", "method", "cells", "mean", "at or above best peer", "mean gap"], rows)


def cpu_ratios(units, name, k):
    """Each method's process CPU over abess's, fold by fold (the mean of the per-fold ratios)."""
    mine = [u for u in units if u["dataset"] == name and u["k"] == k and u.get("cpu_s") is not None]
    base = {u["fold"]: u["cpu_s"] for u in mine if u["method"] == CPU_BASELINE and u["cpu_s"] > 0}
    out = {}
    for method in dict.fromkeys(u["method"] for u in mine):
        ratios = [u["cpu_s"] / base[u["fold"]] for u in mine if u["method"] == method and u["fold"] in base]
        if ratios:
            out[method] = mean_std(ratios)[0]
    return out


def print_tables(summary, methods, profile):
    for task, metric in (("classification", "test accuracy"), ("regression", "test R^2")):
        names = [n for n in summary if summary[n]["task"] == task]
        if not names:
            continue
        shown = [m for m in methods if any(m in summary[n]["results"][str(k)]["methods"]
                                           for n in names for k in summary[n]["ks"])]
        gap_cols = [m for m in GAP_METHODS if m in shown]
        rows, trows, crows = [], [], []
        for n in names:
            for k in summary[n]["ks"]:
                r = summary[n]["results"][str(k)]
                cell = r["methods"]
                best = r["best_peer"]
                rows.append([label(n, summary), k] + [cell_text(cell.get(m)) for m in shown]
                            + [f"{best['method']} {best['score']:.3f}" if best else "-"]
                            + [f"{r['gaps_to_best_peer'][m]:+.3f}" if m in r["gaps_to_best_peer"] else "-"
                               for m in gap_cols])
                base = cell.get(BASELINE, {}).get("seconds")
                trows.append([label(n, summary), k]
                             + [(f"{cell[m]['seconds'] / base:.1f}x" if base else f"{cell[m]['seconds']:.3f}s")
                                if m in cell and cell[m]["seconds"] is not None else "-" for m in shown]
                             + [f"{base:.3f}" if base else "-"])
                over = r.get("cpu_ratio_to_abess", {})
                abess_cpu = cell.get(CPU_BASELINE, {}).get("cpu_s")
                crows.append([label(n, summary), k] + [f"{over[m]:.2f}x" if m in over else "-" for m in shown]
                             + [f"{abess_cpu:.3f}" if abess_cpu is not None else "-"])
        print_table(f"{task}: {metric}, mean over {profile['folds']} folds (std in the JSON); gap = method - best "
                    f"peer", ["data set", "k", *shown, "best peer", *(f"{m} gap" for m in gap_cols)], rows)
        print_table(f"{task}: fit time per fold as a ratio to {BASELINE}'s (same run), and {BASELINE}'s seconds",
                    ["data set", "k", *shown, f"{BASELINE} s"], trows)
        if any(summary[n]["results"][str(k)].get("cpu_ratio_to_abess") for n in names for k in summary[n]["ks"]):
            print_table(f"{task}: process CPU per fold as a ratio to {CPU_BASELINE}'s on the same fold (mean of the "
                        f"ratios; single-threaded), and {CPU_BASELINE}'s CPU seconds",
                        ["data set", "k", *shown, f"{CPU_BASELINE} CPU s"], crows)
    mpi = (f" os-mpi5: only on --mpi-sets ({', '.join(profile['mpi_sets']) or 'none'}); its time is the run's "
           "timing.async_s (the asynchronous phase; wall_s when absent), start-up and data loading excluded; 5 ranks "
           "on a 2-core machine are oversubscribed." if "os-mpi5" in methods else "")
    print("Footnotes: '-' = not run (see the notes), 'failed' = every fold failed (the error is in the unit)." + mpi +
          " abess's time includes its dense copy; l1+refit's the whole bisection and the refit; kbest+refit's the "
          "F statistics and the refit.", flush=True)


def cell_text(cell):
    """A method's mean score; '-' when it did not run, 'failed' when every fold failed."""
    if cell is None:
        return "-"
    return "failed" if cell["mean"] is None else fmt(cell["mean"])


def label(name, summary):
    return f"{name} (gen.)" if summary[name]["source"].startswith(("generated", "synthetic")) else name


def draw(run, summary, methods):
    markers = dict(zip(METHODS, "o<^v>DsPxh*d"))
    assert len(markers) == len(METHODS), "a marker for every method"
    colors = {m: f"C{i}" for i, m in enumerate(METHODS)}        # the same in every panel

    def draw_fn(plt):
        tasks = [t for t in ("classification", "regression") if any(s["task"] == t for s in summary.values())]
        rows = {t: [(n, k) for n, s in summary.items() if s["task"] == t for k in s["ks"]] for t in tasks}
        fig, axes = plt.subplots(len(tasks), 1, figsize=(max(7.0, 0.7 * max(len(r) for r in rows.values())),
                                                          4.0 * len(tasks)), squeeze=False)
        for ax, task in zip(axes[:, 0], tasks):
            for i, m in enumerate(methods):
                xs, ys = [], []
                for x, (n, k) in enumerate(rows[task]):
                    c = summary[n]["results"][str(k)]["methods"].get(m)
                    if c and c["mean"] is not None:
                        xs.append(x + (i - (len(methods) - 1) / 2) * 0.06)
                        ys.append(c["mean"])
                if xs:
                    ax.plot(xs, ys, ls="none", marker=markers[m], markersize=6, label=m, color=colors[m],
                            fillstyle="none" if m in PEERS else "full")
            ax.set_xticks(range(len(rows[task])))
            ax.set_xticklabels([f"{n}\nk={k}" for n, k in rows[task]], fontsize=7, rotation=30)
            ax.set_ylabel("test accuracy" if task == "classification" else "test R^2")
            ax.set_title(f"{task}: each method's mean over the folds (open markers: peers)", fontsize=9)
            ax.grid(axis="y", alpha=0.3)
            ax.legend(fontsize=7, ncol=3)
    plot(os.path.join(run.args.output, "real_selection.png"), draw_fn)


# -- main -------------------------------------------------------------------------------------------
def report_from_logs(run, profile, paths):
    """``--summarise``: the report of the cross-validation units in ``paths`` (later files win)."""
    import json
    units, starts = {}, []
    for path in paths:
        with open(path) as fh:
            for line in fh:
                unit = json.loads(line)
                if unit.get("event") == "start":
                    starts.append(unit.get("profile", {}))
                elif unit.get("part") != "column-order":
                    units[(unit["dataset"], unit["k"], unit["method"], unit["fold"])] = unit
    units = list(units.values())
    for unit in units:
        run.unit(unit)
    methods = [m for m in METHODS if any(u["method"] == m for u in units)]
    datasets = {}
    for unit in units:
        meta = datasets.setdefault(unit["dataset"], {"task": unit["task"], "source": unit["source"],
                                                     "n": unit["n_train"] + unit["n_test"], "p": unit["p"],
                                                     "ks": [], "sparse": unit["sparse"], "positive_fraction": None})
        if unit["k"] not in meta["ks"]:
            meta["ks"].append(unit["k"])
    for meta in datasets.values():
        meta["ks"].sort()
    profile["folds"] = max((u["fold"] for u in units), default=-1) + 1
    profile["mpi_sets"] = sorted({u["dataset"] for u in units if u["method"] in MPI_FLAGS})
    summary = summarise(units, datasets, methods)
    print_tables(summary, methods, profile)
    ranked = standing(summary, [m for m in methods if m not in MPI_FLAGS])
    print_standing(ranked)
    path = run.finish({"datasets": summary, "standing": ranked, "from_logs": list(paths), "baseline": BASELINE,
                       "peers": list(PEERS)})
    draw(run, summary, methods)
    print(f"results: {path}")


def names_option(text, allowed, option):
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise SystemExit(f"{option}: unknown {', '.join(unknown)}; choose from {', '.join(allowed)}")
    return names


def pick_profile(args):
    """The ``small-n`` profile with ``--small-n``, else ``choose_profile``'s (paper, quick or smoke)."""
    if getattr(args, "small_n", False):
        if args.quick:
            raise SystemExit("--small-n is a profile of its own: not with --quick or --smoke")
        return dict(PROFILES["small-n"])
    return choose_profile(args, PROFILES)


def main():
    p = parser(__doc__.splitlines()[0], prog="bench_real_selection.py", data_dir=True)
    p.add_argument("--small-n", action="store_true",
                   help=f"the p >> n profile: {','.join(SMALL_N)} (generated gene-expression-like and fingerprint "
                        f"sets, stratified subsamples of shared sets), k in {{10, 50}}, 5 folds")
    p.add_argument("--draws", type=int, default=1,
                   help="with --small-n: also draws 2..N of each generated set (other generator seeds) and "
                        "subsample (other rows), as data sets NAME~2, NAME~3, ... (default 1: the sets as listed)")
    p.add_argument("--sets", help=f"comma-separated subset of {','.join(DATASETS)} (default: the profile's)")
    p.add_argument("--ks", help="comma-separated feature budgets (default 10,50; quick 5)")
    p.add_argument("--methods", help=f"comma-separated subset of {','.join(METHODS)} (default: all)")
    p.add_argument("--mpi-sets", help="sets on which os-mpi5 runs (default pcmac,satellite_image; '' for none)")
    p.add_argument("--folds", type=int, help="cross-validation folds (default 5; quick 2)")
    p.add_argument("--summarise", nargs="+", metavar="JSONL",
                   help="instead of running: the tables, JSON and plot of earlier runs' JSON-lines logs (a unit "
                        "of a later file replaces the same data set, k, method and fold of an earlier one)")
    p.add_argument("--column-order", action="store_true",
                   help="instead of the cross-validation: on each set's first fold, OS (os, os-sim12, os-kdd16 "
                        "among --methods) fitted on the stored columns and on 2 permutations of them: features "
                        "shared with the stored order's selection, and test scores")
    args = p.parse_args()
    if args.seeds:
        raise SystemExit("--seeds: this benchmark repeats over cross-validation folds; use --folds")
    profile = pick_profile(args)
    if args.sets:
        profile["datasets"] = names_option(args.sets, DATASETS, "--sets")
    if args.ks:
        profile["ks"] = [int(k) for k in args.ks.split(",") if k.strip()]
    if args.methods:
        profile["methods"] = names_option(args.methods, METHODS, "--methods")
    if args.mpi_sets is not None:
        profile["mpi_sets"] = names_option(args.mpi_sets, DATASETS + (STAND_IN,), "--mpi-sets")
    if args.folds:
        if args.folds < 2:
            raise SystemExit("--folds must be at least 2")
        profile["folds"] = args.folds
    if args.draws < 1 or args.draws > 1 and not args.small_n:
        raise SystemExit("--draws takes a count of at least 1, and more than 1 only with --small-n")
    profile["datasets"] = drawn(profile["datasets"], args.draws)
    if not profile["datasets"] or not profile["methods"] or not profile["ks"]:
        raise SystemExit("nothing to run: --sets, --methods and --ks must each name something")
    try:
        import sklearn  # noqa: F401
    except ImportError:
        raise SystemExit("scikit-learn is needed (cross-validation and the peers): pip install scikit-learn") from None
    data_dir = datasets_dir(args.data_dir)
    shared = sorted({split_draw(n)[0] for n in profile["datasets"] if split_draw(n)[0] in FILES})
    problem = missing_data(data_dir, shared) if shared else None        # generated sets need no data directory
    if problem and not args.quick:
        raise SystemExit(problem)
    if problem:                      # --quick on a machine without the data
        print(f"NOTE: {problem}; the quick profile runs on a synthetic sparse stand-in "
              f"(asyos.benchmarking.common.sparse_stand_in) and scikit-learn's bundled diabetes data instead\n")
        profile["datasets"] = [STAND_IN, "sklearn_diabetes"]
        if args.mpi_sets is None:
            profile["mpi_sets"] = [STAND_IN]
    profile["data_dir"] = data_dir
    profile["mpiexec"] = mpiexec_path()
    if args.quick and profile["mpiexec"] is None:
        profile["mpi_sets"] = []
    run = Run("real_selection", args, profile)
    print(f"{profile['folds']}-fold CV, k in {profile['ks']} (min(k, p)), methods {', '.join(profile['methods'])}; "
          f"data: {data_dir if not problem else 'stand-ins'}"
          + (f"; os-mpi5 on {', '.join(profile['mpi_sets']) or 'none'}"
             f"{' (first fold only)' if profile['mpi_folds'] else ''}" if "os-mpi5" in profile["methods"] else "")
          + "\n", flush=True)
    if args.summarise:
        return report_from_logs(run, profile, args.summarise)
    warm_up(profile["methods"], sorted({task_of(n) for n in profile["datasets"]}))
    if args.column_order:
        rows = []
        for name in profile["datasets"]:
            X, y, source = load(None if problem else data_dir, name)
            rows += column_order(run, profile, name, X, y)
        print_table("Column order: fold 0, the stored columns against 2 random permutations of them "
                    "(scores: accuracy or R^2 on the test fold; shared: selected features in common)",
                    ["data set", "k", "method", "stored", "shuffled", "max |diff|", "shared"], rows)
        path = run.finish({"column_order": [u for u in run.units if u.get("part") == "column-order"]})
        print(f"results: {path}")
        return
    notes, datasets = [], {}
    for name in profile["datasets"]:
        X, y, source = load(None if problem else data_dir, name)
        datasets[name] = run_dataset(run, profile, name, X, y, source, notes)
    print()
    summary = summarise(run.units, datasets, profile["methods"])
    print_tables(summary, profile["methods"], profile)
    ranked = standing(summary, [m for m in profile["methods"] if m not in MPI_FLAGS])      # MPI: some sets only
    print_standing(ranked)
    if notes:
        print("Notes:\n" + "\n".join(f"  * {n}" for n in notes))
    path = run.finish({"datasets": summary, "standing": ranked, "notes": notes, "baseline": BASELINE,
                       "peers": list(PEERS),
                       "seconds": time.time() - run.started})
    draw(run, summary, profile["methods"])
    print(f"total time: {time.time() - run.started:.0f} s")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
