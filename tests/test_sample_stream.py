"""Sample-stream learners: oracles (dense, per-sample transcriptions of the published updates, written
here independently of the compiled row loops), the stream face, and the staleness simulator."""
import json
import math
import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from asyos.learners.stream.stream_simulator import AsyncSampleStream, worker_streams
from asyos.errors import InputError, SelectionWarning
from asyos.learners.stream.budgeted import AdaptiveTruncation, BudgetedAMD, BudgetedARDA
from asyos.learners.stream.l1 import L1ARDA, OPG, RDA, AdaFOBOS
from asyos.learners.stream.ofs import OFS, SOFS
from asyos.learners.stream.stream_learners import all_stream_learners
from asyos.learners.stream.sfsa import SFSA, TSGD
from asyos.truncation import annealing_schedule
from tests.conftest import REPO
from tests.inprocess import run_asyos

PASSES = 3
SEED = 1


# -- the oracles --------------------------------------------------------------------------------
def dloss(loss, y, u):
    if loss == "squared":
        return u - y
    if loss == "squared_hinge":
        return -y * max(0.0, 1.0 - y * u)
    if loss == "logistic":
        return -y / (1.0 + math.exp(y * u))
    return -y if y * u < 1 else 0.0                                   # hinge


def top(score, k, eligible):
    """The k best scores among the eligible, ties to the lower index."""
    return np.argsort(-np.where(eligible, score, -np.inf), kind="stable")[:k]


def orders(n, passes=PASSES, seed=SEED):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.permutation(n) for _ in range(passes)])


def barda(X, y, order, B, eta, lam, delta, loss, power=2):
    d = X.shape[1]
    sg, sq, w, touched = np.zeros(d), np.zeros(d), np.zeros(d), np.zeros(d, bool)
    for t, r in enumerate(order, start=1):
        x = X[r]
        g = dloss(loss, y[r], w @ x)
        if g != 0:
            sg += g * x
            sq += (g * x) ** 2
            touched |= x != 0
        H = delta + np.sqrt(sq)
        z = -eta * sg / (lam * eta * t + H)                           # ECML'18 eq. 1
        keep = top(H * np.abs(z) ** power, B, touched)                # eq. 2 (power 2)
        w = np.zeros(d)
        w[keep] = z[keep]
    return w


def bamd(X, y, order, B, eta, lam, delta, loss, power=1):
    d = X.shape[1]
    sq, w = np.zeros(d), np.zeros(d)
    for r in order:
        x = X[r]
        g = lam * w + dloss(loss, y[r], w @ x) * x
        sq += g ** 2
        H = delta + np.sqrt(sq)
        z = w - eta * g / H                                           # eq. 3
        w = z
        if np.count_nonzero(z) > B:                                   # eq. 4
            keep = top(H * np.abs(z) ** power, B, z != 0)
            w = np.zeros(d)
            w[keep] = z[keep]
    return w


def bamd_accumulate(X, y, order, B, eta, lam, delta, loss, power=1):
    """B-AMD with ``outside="accumulate"``: every coordinate keeps its ``z``; ``w`` is ``z`` on the kept
    set, which is revised on rows with a non-zero loss gradient among its members and the row's
    coordinates (the ``B`` largest ``H |z|^power``); members whose ``z`` is exactly 0 leave."""
    d = X.shape[1]
    sq, z, kept = np.zeros(d), np.zeros(d), np.zeros(d, bool)
    for r in order:
        x = X[r]
        w = np.where(kept, z, 0.0)
        gl = dloss(loss, y[r], w @ x)
        g = lam * w + gl * x
        sq += g ** 2
        H = delta + np.sqrt(sq)
        z = z - eta * g / H
        kept &= z != 0
        if gl != 0:
            cand = kept | ((x != 0) & (z != 0))
            if np.count_nonzero(cand) > B:
                kept = np.zeros(d, bool)
                kept[top(H * np.abs(z) ** power, B, cand)] = True
            else:
                kept = cand
    return np.where(kept, z, 0.0)


def ofs(X, y, order, B, eta, lam, loss):
    w = np.zeros(X.shape[1])
    for r in order:
        x = X[r]
        g = dloss(loss, y[r], w @ x)
        w = (1 - lam * eta) * w
        if g != 0:
            w = w - eta * g * x
            norm = np.linalg.norm(w)
            if lam > 0 and norm > 0:
                w = min(1.0, 1.0 / (math.sqrt(lam) * norm)) * w
            if np.count_nonzero(w) > B:
                keep = top(np.abs(w), B, w != 0)
                kept = np.zeros_like(w)
                kept[keep] = w[keep]
                w = kept
    return w


def sofs(X, y, order, B, gamma):
    mu, sigma = np.zeros(X.shape[1]), np.ones(X.shape[1])
    for r in order:
        x, yr = X[r], y[r]
        u = mu @ x
        if yr * u < 1:
            alpha = (1 - yr * u) / (x ** 2 @ sigma + gamma)
            mu = mu + alpha * yr * sigma * x
            sigma = 1 / (1 / sigma + x ** 2 / gamma)
            drop = np.ones(X.shape[1], bool)
            drop[np.argsort(sigma, kind="stable")[:B]] = False
            mu[drop] = 0.0
    return mu


def l1arda(X, y, order, eta, lam, delta, loss):
    d = X.shape[1]
    sg, sq, w = np.zeros(d), np.zeros(d), np.zeros(d)
    for t, r in enumerate(order, start=1):
        x = X[r]
        g = dloss(loss, y[r], w @ x)
        if g != 0:
            sg += g * x
            sq += (g * x) ** 2
        w = eta * t * np.sign(-sg) / (delta + np.sqrt(sq)) * np.maximum(0, np.abs(sg) / t - lam)
    return w


def proximal(X, y, order, eta, lam1, lam2, delta, adaptive, loss):
    d = X.shape[1]
    sq, w = np.zeros(d), np.zeros(d)
    for r in order:
        x = X[r]
        g = dloss(loss, y[r], w @ x) * x
        sq += g ** 2
        H = delta + np.sqrt(sq) if adaptive else np.ones(d)
        v = w - eta * g / H
        w = np.sign(v) * np.maximum(0, np.abs(v) - eta * lam1 / H) / (1 + eta * lam2 / H)
    return w


def rda(X, y, order, lam1, lam2, gamma, loss):
    d = X.shape[1]
    sg, w = np.zeros(d), np.zeros(d)
    for t, r in enumerate(order, start=1):
        x = X[r]
        g = dloss(loss, y[r], w @ x)
        sg += g * x
        gbar = sg / t
        w = -np.sign(gbar) * np.maximum(0, np.abs(gbar) - lam1) / (lam2 + gamma / math.sqrt(t))
    return w


def minibatch(X, y, order, k, eta, lam, b, loss, mu=None, horizon=None, every=False, intercept=False):
    """SFSA (``mu`` given: annealing, removed features gone) or TSGD (``every``: hard threshold). With
    ``intercept``, ``(weights, intercept)``: for the squared loss the rows are centred by the running
    means (``c = mean(y) - mean(x) . beta``), for the others ``c`` takes the step with ``mean(l')``."""
    n, p = X.shape
    beta, active = np.zeros(p), np.ones(p, bool)
    sx, sx2, seen, sy, c = np.zeros(p), np.zeros(p), 0, 0.0, 0.0
    for t, start in enumerate(range(0, len(order), b), start=1):
        rows = order[start:start + b]
        Xb = X[rows]
        sx += Xb.sum(0)
        sx2 += (Xb ** 2).sum(0)
        seen += len(rows)
        sy += y[rows].sum()
        centred = intercept and loss == "squared"
        if centred:
            c = (sy - sx @ beta) / seen
        dl = np.array([dloss(loss, y[r], Xb[i] @ beta + c) for i, r in enumerate(rows)])
        g = Xb.T @ dl / len(rows) + lam * beta
        if centred:
            g -= sx / seen * dl.mean()
        g[~active] = 0
        beta = beta - eta * g
        beta[~active] = 0
        if intercept and not centred:
            c -= eta * dl.mean()
        score = np.sqrt(np.maximum(sx2 / seen - (sx / seen) ** 2, 0)) * np.abs(beta)
        if mu is not None:
            M = annealing_schedule(t, k, p, horizon, mu)
            if active.sum() > M:
                keep = top(score, M, active)
                active[:] = False
                active[keep] = True
                beta[~active] = 0
        elif every:
            drop = np.ones(p, bool)
            drop[top(score, k, np.ones(p, bool))] = False
            beta[drop] = 0
    score = np.sqrt(np.maximum(sx2 / seen - (sx / seen) ** 2, 0)) * np.abs(beta)
    out = np.zeros(p)
    keep = top(score, k, np.ones(p, bool))
    out[keep] = beta[keep]
    if not intercept:
        return out
    shown = (sy - sx @ out) / seen if loss == "squared" else c + sx / seen @ (beta - out)
    return out, shown


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n, d = 70, 40
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.35)
    y_cls = np.sign(X[:, :4].sum(1) + 0.05)
    y_cls[y_cls == 0] = 1
    y_reg = X[:, :4] @ np.array([2.0, -1.0, 1.5, 1.0]) + 0.1 * rng.normal(size=n)
    return X, y_cls, y_reg


ORACLE_CASES = [
    ("b-arda", lambda B, lam, loss: BudgetedARDA(budget=B, eta=0.5, lam=lam, loss=loss),
     lambda X, y, o, B, lam, loss: barda(X, y, o, B, 0.5, lam, 1e-2, loss)),
    ("b-amd", lambda B, lam, loss: BudgetedAMD(budget=B, eta=0.5, lam=lam, loss=loss, outside="reset"),
     lambda X, y, o, B, lam, loss: bamd(X, y, o, B, 0.5, lam, 1e-2, loss)),
    ("b-amd-accumulate", lambda B, lam, loss: BudgetedAMD(budget=B, eta=0.5, lam=lam, loss=loss),
     lambda X, y, o, B, lam, loss: bamd_accumulate(X, y, o, B, 0.5, lam, 1e-2, loss)),
    ("ofs", lambda B, lam, loss: OFS(budget=B, eta=0.3, lam=lam, loss=loss),
     lambda X, y, o, B, lam, loss: ofs(X, y, o, B, 0.3, lam, loss)),
    ("l1-arda", lambda B, lam, loss: L1ARDA(budget=None, lam=lam, eta=0.5, loss=loss),
     lambda X, y, o, B, lam, loss: l1arda(X, y, o, 0.5, lam, 1e-2, loss)),
    ("ada-fobos", lambda B, lam, loss: AdaFOBOS(budget=None, lam=lam, eta=0.5, lam2=0.1, loss=loss),
     lambda X, y, o, B, lam, loss: proximal(X, y, o, 0.5, lam, 0.1, 1e-2, True, loss)),
    ("opg", lambda B, lam, loss: OPG(budget=None, lam=lam, lam2=0.2, eta=0.05, loss=loss),
     lambda X, y, o, B, lam, loss: proximal(X, y, o, 0.05, lam, 0.2, 1.0, False, loss)),
    ("rda", lambda B, lam, loss: RDA(budget=None, lam=lam, lam2=0.1, gamma=3.0, loss=loss),
     lambda X, y, o, B, lam, loss: rda(X, y, o, lam, 0.1, 3.0, loss)),
]


@pytest.mark.parametrize("name,make,oracle", ORACLE_CASES, ids=[c[0] for c in ORACLE_CASES])
@pytest.mark.parametrize("loss", ["squared_hinge", "logistic", "hinge", "squared"])
@pytest.mark.parametrize("B,lam", [(3, 0.0), (6, 0.05), (40, 0.3)])
def test_row_loops_equal_the_dense_transcriptions(name, make, oracle, loss, B, lam, data):
    X, y_cls, y_reg = data
    y = y_reg if loss == "squared" else y_cls
    model = make(B, lam, loss).set_params(passes=PASSES, scale=None, random_state=SEED).fit(sp.csr_matrix(X), y)
    expected = oracle(X, y, orders(X.shape[0]), B, lam, loss)
    np.testing.assert_allclose(model.coef_, expected, rtol=1e-9, atol=1e-12)
    if name in ("b-arda", "b-amd", "b-amd-accumulate", "ofs"):
        assert np.count_nonzero(expected) <= B
        np.testing.assert_array_equal(model.support_, np.flatnonzero(expected))


@pytest.mark.parametrize("step,outside,oracle", [("dual-averaging", "accumulate", barda),
                                                ("mirror-descent", "reset", bamd),
                                                ("mirror-descent", "accumulate", bamd_accumulate)])
@pytest.mark.parametrize("truncation,power", [("quadratic", 2), ("linear", 1)])
def test_the_adagrad_core_takes_any_step_with_any_score(step, outside, oracle, truncation, power, data):
    X, y, _ = data
    model = AdaptiveTruncation(budget=5, step=step, truncation=truncation, eta=0.5, lam=0.05, passes=PASSES,
                               scale=None, outside=outside, random_state=SEED).fit(X, y)
    expected = oracle(X, y, orders(X.shape[0]), 5, 0.5, 0.05, 1e-2, "squared_hinge", power=power)
    np.testing.assert_allclose(model.coef_, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("lam", [0.0, 0.2, 5.0])
def test_barda_heap_under_many_swaps(lam):
    """A wider problem where the kept set changes often (and, with a large ``lam eta t``, the order of
    untouched coordinates too): the lazily refreshed heap still gives eq. 1-2 exactly."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(150, 300)) * (rng.random((150, 300)) < 0.1) * rng.lognormal(size=300)
    y = np.sign(X[:, :10].sum(1) + 0.01)
    for B in (1, 7, 25):
        model = BudgetedARDA(budget=B, eta=1.0, lam=lam, passes=2, scale=None, random_state=3).fit(X, y)
        expected = barda(X, y, orders(150, passes=2, seed=3), B, 1.0, lam, 1e-2, "squared_hinge")
        np.testing.assert_allclose(model.coef_, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("B,gamma", [(3, 1.0), (10, 0.1), (40, 5.0)])
def test_sofs_equals_the_dense_transcription(B, gamma, data):
    X, y, _ = data
    model = SOFS(budget=B, gamma=gamma, passes=PASSES, scale=None, random_state=SEED).fit(X, y)
    np.testing.assert_allclose(model.coef_, sofs(X, y, orders(X.shape[0]), B, gamma), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_sfsa_and_tsgd_equal_the_dense_transcriptions(loss, data):
    X, y_cls, y_reg = data
    y = y_reg if loss == "squared" else y_cls
    o = orders(X.shape[0])
    if loss == "squared":
        y = y + 3.0                              # not centred: the intercept has work to do
    sfsa = SFSA(budget=4, eta=0.05, lam=0.01, mu=10, horizon=12, batch_size=7, loss=loss, passes=PASSES,
                scale=None, random_state=SEED, fit_intercept=False).fit(X, y)
    np.testing.assert_allclose(sfsa.raw_coef_, minibatch(X, y, o, 4, 0.05, 0.01, 7, loss, mu=10, horizon=12),
                               rtol=1e-9, atol=1e-12)
    sfsa = SFSA(budget=4, eta=0.05, lam=0.01, mu=10, horizon=12, batch_size=7, loss=loss, passes=PASSES,
                scale=None, random_state=SEED, refit=False).fit(X, y)
    w, c = minibatch(X, y, o, 4, 0.05, 0.01, 7, loss, mu=10, horizon=12, intercept=True)
    np.testing.assert_allclose(sfsa.raw_coef_, w, rtol=1e-9, atol=1e-12)
    assert sfsa.intercept_ == pytest.approx(c, rel=1e-9, abs=1e-12) and c != 0.0
    for every in (False, True):
        tsgd = TSGD(budget=4, eta=0.05, lam=0.01, truncate="every" if every else "end", batch_size=7, loss=loss,
                    passes=PASSES, scale=None, random_state=SEED, fit_intercept=False).fit(X, y)
        np.testing.assert_allclose(tsgd.raw_coef_, minibatch(X, y, o, 4, 0.05, 0.01, 7, loss, every=every),
                                   rtol=1e-9, atol=1e-12)
        tsgd = TSGD(budget=4, eta=0.05, lam=0.01, truncate="every" if every else "end", batch_size=7, loss=loss,
                    passes=PASSES, scale=None, random_state=SEED, refit=False).fit(X, y)
        w, c = minibatch(X, y, o, 4, 0.05, 0.01, 7, loss, every=every, intercept=True)
        np.testing.assert_allclose(tsgd.raw_coef_, w, rtol=1e-9, atol=1e-12)
        assert tsgd.intercept_ == pytest.approx(c, rel=1e-9, abs=1e-12)


def test_sfsa_recovers_a_sparse_model():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 200))
    beta = np.zeros(200)
    beta[::20] = 1.0
    y = X @ beta + 0.3 * rng.normal(size=3000)
    for method, eta, found in (("sgd", 0.02, 10), ("nesterov", 0.02, 10), ("adam", 0.003, 8)):
        # the thesis' model (its data are centred); with the intercept, 9.0 and 9.1 of the 10 features on
        # average over ten draws of this set (sgd, one-off), 9 on this one
        model = SFSA(budget=10, eta=eta, method=method, passes=2, fit_intercept=False).fit(X, y)
        assert len(set(model.support_) & set(np.flatnonzero(beta))) >= found, method


# -- the stream face ---------------------------------------------------------------------------
def make(cls, **kw):
    params = {"budget": 5, "passes": 2}
    if cls in (L1ARDA, AdaFOBOS, OPG, RDA):
        params["lam"] = 0.01
    if cls in (SFSA, TSGD):
        params["batch_size"] = 4
    params.update(kw)
    return cls(**params)


LEARNERS = all_stream_learners()


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.algorithm_name)
def test_budget_holds_after_every_sample_and_learn_one_is_partial_fit(cls, data):
    """(``maxabs`` would take its scales from the first sample: compared on the data as given.)"""
    X, y, _ = data
    one = make(cls, loss="squared_hinge", scale=None)
    for i in range(X.shape[0]):
        one.learn_one(X[i], y[i])
        if cls.budgeted_every_step:
            assert np.count_nonzero(one.coef_) <= 5
    rows = make(cls, loss="squared_hinge", scale=None)
    if cls in (SFSA, TSGD):                      # learn_one is a mini-batch of one sample
        for i in range(X.shape[0]):
            rows.partial_fit(sp.csr_matrix(X[i:i + 1]), y[i:i + 1])
    else:
        rows.partial_fit(X[:30], y[:30]).partial_fit(sp.csr_matrix(X[30:]), y[30:])
    np.testing.assert_allclose(one.coef_, rows.coef_, rtol=1e-12, atol=1e-14)
    assert one.n_samples_seen_ == X.shape[0]


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.algorithm_name)
def test_learn_one_on_one_row_csr_matrices_is_learn_one_on_their_dense_rows(cls, data):
    """A canonical one-row CSR row is read as it is (its non-zeros only; a stored zero is dropped); a
    CSR row with its columns out of order and repeated takes the general path; both, and a
    ``csr_array``, learn the model the dense rows do, and ``predict_one`` reads them alike."""
    X, y, _ = data
    X = X.copy()
    X[np.abs(X) < 0.5] = 0.0                     # rows with zeros, so that the sparse form differs
    dense = make(cls, loss="squared_hinge")
    csr = make(cls, loss="squared_hinge")
    for i in range(X.shape[0]):
        dense.learn_one(X[i], y[i])
        row = sp.csr_matrix(X[i:i + 1])
        if i % 3 == 1:                           # the columns reversed, the first repeated with a 0 added
            cols = np.append(row.indices[::-1], row.indices[-1])
            row = sp.csr_matrix((np.append(row.data[::-1], 0.0), cols, [0, cols.size]), shape=row.shape)
            assert not row.has_canonical_format
        elif i % 3 == 2:                         # a csr_array with a stored zero
            cols = np.append(row.indices, X.shape[1] - 1) if X[i, -1] == 0.0 else row.indices
            vals = np.append(row.data, 0.0) if X[i, -1] == 0.0 else row.data
            row = sp.csr_array((vals, cols, [0, cols.size]), shape=row.shape)
        csr.learn_one(row, y[i])
    np.testing.assert_array_equal(csr.coef_, dense.coef_)
    assert csr.n_samples_seen_ == dense.n_samples_seen_ == X.shape[0]
    for i in range(5):
        assert csr.predict_one(sp.csr_matrix(X[i:i + 1])) == dense.predict_one(X[i])
    with pytest.raises(InputError, match="features"):
        csr.learn_one(sp.csr_matrix(X[:1, :-1]), y[0])


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.algorithm_name)
def test_pickle_mid_stream_then_continue(cls, data):
    X, y, _ = data
    straight = make(cls, loss="squared_hinge").partial_fit(X, y).partial_fit(X, y)
    half = make(cls, loss="squared_hinge").partial_fit(X, y)
    resumed = pickle.loads(pickle.dumps(half)).partial_fit(X, y)
    np.testing.assert_array_equal(resumed.coef_, straight.coef_)
    with pytest.raises(InputError, match="features"):
        resumed.partial_fit(X[:, :10], y)


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.algorithm_name)
def test_maxabs_scaling_makes_units_irrelevant(cls, data):
    """Columns in other units give the same support, and coef_ in those units (powers of two, so that
    the scaled data are bit for bit the same and truncation ties fall the same way)."""
    X, y, _ = data
    units = 2.0 ** np.arange(-20, 20, 40 / X.shape[1]).round()
    plain = make(cls, loss="squared_hinge").fit(X, y)
    scaled = make(cls, loss="squared_hinge").fit(X * units, y)
    np.testing.assert_array_equal(plain.support_, scaled.support_)
    np.testing.assert_allclose(scaled.coef_ * units, plain.coef_, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.algorithm_name)
def test_online_accuracy_counts_the_predictions_made_before_learning(cls, data):
    """(TSGD with ``truncate="end"`` predicts online with its whole iterate, not the visible top-k.)"""
    X, y, _ = data
    model = make(cls, loss="squared_hinge", scale=None, **({"truncate": "every"} if cls is TSGD else {}))
    model.learn_one(X[0], y[0])
    right = int(y[0] > 0)                             # the empty model predicts +1
    for i in range(1, X.shape[0]):
        right += int(model.predict(X[i:i + 1])[0] == y[i])
        model.learn_one(X[i], y[i])
    assert model.online_accuracy_ == pytest.approx(right / X.shape[0])


def test_bad_input_is_named(data):
    X, y, y_reg = data
    with pytest.raises(InputError, match="unknown loss"):
        BudgetedARDA(loss="hinge2").fit(X, y)
    with pytest.raises(InputError, match="NaN"):
        BudgetedARDA().fit(np.where(X > 1, np.nan, X), y)
    with pytest.raises(InputError, match="continuous values"):
        OFS().fit(X, y_reg)
    with pytest.raises(InputError, match="1-D"):
        OFS().learn_one(X[:2], 1.0)
    with pytest.raises(InputError, match="The 'step' parameter of BudgetedARDA must be a str among"):
        BudgetedARDA(step="newton").fit(X, y)
    with pytest.raises(InputError, match=r"'eta' parameter of BudgetedAMD must be a float in the range \(0.0, inf\)"):
        BudgetedAMD(eta=-1).fit(X, y)
    with pytest.raises(InputError, match="give budget, or a numeric lam"):
        L1ARDA(budget=None).partial_fit(X, y)


def test_divergence_is_named_not_returned(data):
    X, y, y_reg = data
    with pytest.raises(InputError, match="diverged .*smaller step"):
        SFSA(budget=3, eta=1e6, scale=None, loss="squared", passes=60).fit(X * 100, y_reg)
    model = OPG(budget=None, lam=0.0, eta=1e3, scale=None, loss="squared")
    with pytest.raises(InputError, match="diverged"):
        for i in range(X.shape[0]):
            model.learn_one(X[i] * 100, y_reg[i])
        model.coef_
    with pytest.raises(InputError, match="every fit that kept a feature diverged"):
        RDA(budget=5, gamma=1e-6, scale=None, loss="squared", passes=2).fit(X * 100, y_reg)


def test_l1_search_meets_the_budget_with_the_most_features(data):
    X, y, _ = data
    model = L1ARDA(budget=6, passes=2, budget_rule="at_most").fit(X, y)
    assert 0 < np.count_nonzero(model.coef_) <= 6
    counts = [c for _, c in model.lam_path_]
    assert np.count_nonzero(model.coef_) == max(c for c in counts if c <= 6)
    refit = L1ARDA(budget=6, lam=model.lam_, passes=2).fit(X, y)
    np.testing.assert_array_equal(refit.coef_, model.coef_)


@pytest.mark.parametrize("cls", [L1ARDA, AdaFOBOS, OPG, RDA], ids=lambda c: c.algorithm_name)
def test_l1_search_at_least_reports_the_budget_largest_weights(cls, data):
    """``budget_rule="at_least"``: exactly ``budget`` features when a fit had that many, else the fewest
    above it, cut to its ``budget`` strongest weights (``|w|``, times ``H`` for the AdaGrad learners; the
    online model at ``lam_`` computed afresh)."""
    X, y, _ = data
    model = cls(budget=6, passes=2, loss="squared_hinge").fit(X, y)
    counts = [c for _, c in model.lam_path_ if c is not None]
    assert max(counts) >= 6
    assert model.support_.size == 6 == np.count_nonzero(model.raw_coef_)
    online = cls(budget=6, lam=model.lam_, passes=2, loss="squared_hinge", refit=False).fit(X, y)
    raw = online.coef_
    assert np.count_nonzero(raw) == (6 if 6 in counts else min(c for c in counts if c > 6))
    strength = np.abs(raw * online.scale_)
    if cls in (L1ARDA, AdaFOBOS):                 # AdaGrad's: weighed by H = delta + sqrt(sum g^2)
        strength = strength * (online.delta + np.sqrt(online._state.sq[:raw.size]))
    expected = np.sort(np.lexsort((np.arange(raw.size), -strength))[:6])
    np.testing.assert_array_equal(model.support_, expected)
    np.testing.assert_allclose(model.raw_coef_[expected], raw[expected], rtol=1e-12)


@pytest.mark.parametrize("cls", [AdaFOBOS, OPG], ids=lambda c: c.algorithm_name)
def test_l1_search_where_the_count_jumps_past_the_budget(cls):
    """0/1 features and the squared hinge: no feature moves for ``lam >= 1`` and dozens just below, so no
    ``lam`` leaves 10. The ECML'18 rule keeps none (the intercept's model); ``at_least`` keeps 10, whose refit's
    training loss is at most the intercept's."""
    rng = np.random.default_rng(0)
    dense = (rng.random((300, 2000)) < 0.02).astype(float)
    dense[:, :20] = rng.random((300, 20)) < 0.3                 # 20 informative words, frequent
    X = sp.csr_matrix(dense)
    w = np.zeros(2000)
    w[:20] = rng.choice([-1.0, 1.0], 20)
    y = np.sign(X @ w + 0.1 * rng.normal(size=300))
    y[y == 0] = 1.0
    with pytest.warns(SelectionWarning):
        paper = cls(budget=10, loss="squared_hinge", budget_rule="at_most").fit(X, y)
    assert paper.support_.size == 0
    counts = {c for _, c in paper.lam_path_ if c is not None}
    assert 10 not in counts and max(counts) > 10
    model = cls(budget=10, loss="squared_hinge").fit(X, y)
    assert model.support_.size == 10 and np.count_nonzero(model.raw_coef_) == 10
    assert paper.score(X, y) == max(np.mean(y == 1), np.mean(y == -1))

    def loss(est):                                  # the squared hinge the refits minimise
        return np.mean(0.5 * np.maximum(0.0, 1.0 - y * est.decision_function(X)) ** 2)
    assert loss(model) <= loss(paper) + 1e-9


@pytest.mark.parametrize("cls", [L1ARDA, AdaFOBOS, OPG, RDA], ids=lambda c: c.algorithm_name)
def test_l1_partial_fit_searches_lam_on_the_first_batch_then_keeps_it(cls, data):
    X, y, _ = data
    first = cls(budget=6, loss="squared_hinge", budget_rule="at_most").partial_fit(X[:35], y[:35])
    lam, path = first.lam_, list(first.lam_path_)
    counts = [c for _, c in path if c is not None]
    assert np.count_nonzero(first.coef_) == max(c for c in counts if c <= 6)
    assert len(first.lam_path_) > 1
    # the model kept is the one-pass partial_fit of the first batch at the lam found
    fixed = cls(budget=6, lam=lam, loss="squared_hinge").partial_fit(X[:35], y[:35])
    np.testing.assert_array_equal(first.coef_, fixed.coef_)
    # later batches (and learn_one) continue with that lam, searching nothing
    first.partial_fit(X[35:60], y[35:60]).learn_one(X[60], y[60])
    fixed.partial_fit(X[35:60], y[35:60]).learn_one(X[60], y[60])
    assert first.lam_ == lam and first.lam_path_ == path
    np.testing.assert_array_equal(first.coef_, fixed.coef_)
    # a partial_fit after a searched fit continues with the fit's lam_
    fitted = cls(budget=6, loss="squared_hinge", passes=2, budget_rule="at_most").fit(X, y)
    again = cls(budget=6, lam=fitted.lam_, loss="squared_hinge", passes=2).fit(X, y)
    fitted.partial_fit(X[:20], y[:20])
    again.partial_fit(X[:20], y[:20])
    assert fitted.lam_ == again.lam_
    np.testing.assert_array_equal(fitted.coef_, again.coef_)


def test_compiled_loops_equal_the_interpreted_ones(tmp_path, data):
    """The row loops run as plain Python (ASYOS_KERNELS=numpy) give what numba's compilation gives."""
    X, y, _ = data
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    script = (
        "import json, numpy as np, sys\n"
        "from asyos.learners.stream.stream_learners import all_stream_learners\n"
        "from asyos.learners.stream import _stream_kernels as K\n"
        "assert not K.COMPILED\n"
        f"X = np.load('{tmp_path}/X.npy'); y = np.load('{tmp_path}/y.npy')\n"
        "out = {}\n"
        "for cls in all_stream_learners():\n"
        "    kw = {'budget': 5, 'passes': 1}\n"
        "    if cls.algorithm_name in ('l1-arda', 'ada-fobos', 'opg', 'rda'): kw['lam'] = 0.01\n"
        "    out[cls.algorithm_name] = cls(loss='squared_hinge', **kw).fit(X, y).coef_.tolist()\n"
        "print(json.dumps(out))\n")
    env = dict(os.environ, ASYOS_KERNELS="numpy")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    interpreted = json.loads(proc.stdout)
    for cls in LEARNERS:
        kw = {"lam": 0.01} if cls.algorithm_name in ("l1-arda", "ada-fobos", "opg", "rda") else {}
        compiled = cls(loss="squared_hinge", budget=5, passes=1, **kw).fit(X, y).coef_
        np.testing.assert_allclose(compiled, interpreted[cls.algorithm_name], rtol=1e-12, atol=1e-14)


# -- the staleness simulator ---------------------------------------------------------------------
@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.algorithm_name)
def test_one_fresh_worker_is_the_sequential_fit(cls, data):
    X, y, _ = data
    sequential = make(cls, loss="squared_hinge").fit(X, y)
    simulated = AsyncSampleStream(make(cls, loss="squared_hinge"), n_workers=1, max_staleness=0).fit(X, y)
    np.testing.assert_array_equal(simulated.coef_, sequential.coef_)
    assert simulated.staleness_["max"] == 0


@pytest.mark.parametrize("cls", [BudgetedARDA, BudgetedAMD, OFS, SOFS, RDA], ids=lambda c: c.algorithm_name)
def test_fresh_workers_equal_the_interleaved_stream(cls, data):
    """q workers with tau = 0 are one learner reading the workers' samples in round-robin order."""
    X, y, _ = data
    q = 3
    model = make(cls, loss="squared_hinge")
    streams = [np.concatenate(s) for s in worker_streams(X.shape[0], model._n_passes(X.shape[0], X.shape[1]), q,
                                                         np.random.default_rng(model.random_state))]
    interleaved = [s[i] for i in range(max(map(len, streams))) for s in streams if i < len(s)]
    expected = make(cls, loss="squared_hinge").partial_fit(X[interleaved], y[interleaved])
    simulated = AsyncSampleStream(model, n_workers=q, max_staleness=0).fit(X, y)
    np.testing.assert_allclose(simulated.coef_, expected.coef_, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("policy", ["max", "uniform"])
def test_staleness_is_bounded_and_deterministic(policy, data):
    X, y, _ = data
    runs = [AsyncSampleStream(make(BudgetedARDA), n_workers=4, max_staleness=3, policy=policy, schedule="random",
                              random_state=5).fit(X, y) for _ in range(2)]
    assert runs[0].staleness_["max"] <= 3
    assert runs[0].staleness_["mean"] > 0
    np.testing.assert_array_equal(runs[0].coef_, runs[1].coef_)
    fresh = AsyncSampleStream(make(BudgetedARDA), n_workers=4, max_staleness=0).fit(X, y)
    assert not np.array_equal(fresh.coef_, runs[0].coef_)


def test_stale_updates_use_the_old_model(data):
    """With tau = q - 1 under the ``max`` policy every worker reads the model as of its own last update."""
    X, y, _ = data
    q = 3
    sim = AsyncSampleStream(make(OFS, passes=1), n_workers=q, max_staleness=q - 1).fit(X, y)
    hist = sim.staleness_["histogram"]
    assert max(hist) == q - 1 and hist[q - 1] >= X.shape[0] - 2 * q


# -- the command line ---------------------------------------------------------------------------
def run_cli(args, tmp_path):
    """``python -m asyos.run`` inside this process (``tests/inprocess.py``)."""
    out = tmp_path / "out"
    args = [*args, "--output", str(out), "--overwrite"]                              # tests rerun into out
    status, stdout, stderr = run_asyos(*args, cwd=REPO)
    proc = subprocess.CompletedProcess(["python", "-m", "asyos.run", *args], status, stdout, stderr)
    return proc, (json.loads((out / "results.json").read_text()) if status == 0 else None)


def test_cli_runs_a_learner_simulated_and_tuned(tmp_path):
    args = ["--synthetic", "classification", "--n-features", "60", "--n-informative", "5", "--n-samples", "120"]
    proc, rec = run_cli([*args, "--algorithm", "b-arda", "--budget", "5", "--simulate", "--workers", "3",
                         "--max-staleness", "3"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert rec["algorithm"] == "b-arda" and rec["mode"] == "simulated" and len(rec["selected"]) <= 5
    assert rec["staleness"]["max"] <= 3 and rec["n_workers"] == 3
    for algorithm in ("ofs", "b-arda"):
        proc, rec = run_cli([*args, "--algorithm", algorithm, "--budget", "5", "--tune", "--passes", "1"], tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert set(rec["tuned_params"]) == {"eta", "lam"} and len(rec["tuning"]) == 15 * 15
        rows = [r for r in rec["tuning"] if r["train_score"] is not None]
        best = max((r["train_score"], r["online_accuracy"]) for r in rows)
        assert rec["metrics"]["train_error"] == pytest.approx(1 - best[0])
        chosen = next(r for r in rows if (r["train_score"], r["online_accuracy"]) == best)
        assert rec["tuned_params"] == {"eta": chosen["eta"], "lam": chosen["lam"]}
    proc, _ = run_cli([*args, "--algorithm", "sofs", "--budget", "5", "--loss", "squared"], tmp_path)
    assert proc.returncode == 2 and "sofs is a classification learner" in proc.stderr
    proc, _ = run_cli([*args, "--algorithm", "b-amd", "--budget", "5", "--param", "eta"], tmp_path)
    assert proc.returncode == 2 and "--param takes name=value" in proc.stderr


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.algorithm_name)
def test_every_learner_names_its_tuning_grid(cls):
    from asyos.learners.stream.tuning import ECML_GRID, tuning_grid
    grid = tuning_grid(cls())
    assert grid and set(grid) <= set(cls().get_params())
    for name, how in cls.tuned_parameters.items():
        expected = [1.0 / v for v in ECML_GRID] if how == "inverse" else list(ECML_GRID)
        assert grid[name] == expected


def test_sofs_gamma_is_checked_before_the_fit():
    """gamma divides the confidence update: 0 raised ZeroDivisionError inside the fit, a string a bare
    ValueError; both are parameter errors now."""
    from asyos import SOFS
    X = np.random.default_rng(0).standard_normal((20, 4))
    for gamma in (0, -1.0, "x"):
        with pytest.raises(InputError, match="'gamma' parameter of SOFS"):
            SOFS(budget=2, gamma=gamma).fit(X, np.sign(X[:, 0]))


def test_sfsa_default_step_backs_off_where_the_former_default_blows_up():
    """500 dense [0, 1) columns (``||x||^2`` ~ 170 after maxabs): SFSA's former default ``eta = 0.1`` ends
    with an online model far worse than predicting the mean; the default ``"auto"`` sees the blow-up,
    settles on a smaller step and its online model is no worse than the mean."""
    rng = np.random.default_rng(0)
    X = rng.random((600, 500))
    y = np.where(X[:, :5].sum(1) > 2.5, 1.0, -1.0)
    fixed = SFSA(budget=10, eta=0.1, refit=False, fit_intercept=False).fit(X, y)
    assert fixed.score(X, y) < -10
    model = SFSA(budget=10, refit=False, fit_intercept=False).fit(X, y)
    assert model.eta == "auto" and model.eta_ < 0.1
    assert model.score(X, y) > -0.01
    centred = SFSA(budget=10, refit=False).fit(X, y)        # the intercept centres the rows: 0.1 holds
    assert centred.eta_ == 0.1 and centred.score(X, y) > 0.0


@pytest.mark.parametrize("cls, params", [(TSGD, {"eta": 1.0}), (SFSA, {"method": "adam"}),
                                         (SFSA, {"method": "nesterov", "eta": 1.0})])
def test_sfsa_and_tsgd_learn_an_intercept_for_a_margin_loss(cls, params):
    # the label is x_0 + x_1 / 2 > 1 on features uniform on [0, 1] (a quarter positive): no linear model
    # through the origin separates it; the intercept takes its own step, as a feature of value 1
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(4000, 20))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] > 1.0, 1, -1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SelectionWarning)
        model = cls(budget=3, loss="logistic", refit=False, passes=5, **params).fit(X, y)
        plain = cls(budget=3, loss="logistic", refit=False, passes=5, fit_intercept=False, **params).fit(X, y)
    assert model.intercept_ < 0 and model.score(X, y) > 0.85
    assert plain.score(X, y) < 0.8 and not hasattr(plain, "intercept_")
    u = X @ model.coef_ + model.intercept_
    np.testing.assert_allclose(model.decision_function(X), u, rtol=1e-12, atol=1e-12)
    assert model.predict_one(X[0]) == model.predict(X[:1])[0]            # the one-row path adds it too
