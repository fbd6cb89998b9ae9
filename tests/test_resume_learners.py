"""Checkpoints and resume of the sample-stream learners (``fit``, the staleness simulator, the file
stream), the running averages and DFLS: each interrupted at seeded random polls, resumed, and equal
to the uninterrupted run bit for bit; and each CLI stopped by SIGTERM, then continued with ``--resume``."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from asyos import make_classification, make_regression
from asyos.records.checkpoint import Checkpointer, RunInterrupted
from asyos.learners.stream.stream_simulator import AsyncSampleStream
from asyos.learners.stream import ALGORITHMS
from asyos.learners.stream import resumable
from tests.inprocess import run_asyos

CLASSIFICATION = make_classification(n_samples=90, n_features=200, n_informative=6, seed=2)
REGRESSION = make_regression(n_samples=90, n_features=200, n_informative=6, seed=1)
IDENTITY = {"problem": 1}
STREAM = {spec.name: spec for spec in ALGORITHMS}


def problem_for(spec):
    return CLASSIFICATION if "classification" in spec.tasks and spec.name not in ("sfsa", "tsgd") else REGRESSION


def fitted(estimator):
    """Every fitted attribute a sample-stream learner has."""
    out = {name: getattr(estimator, name) for name in ("coef_", "support_", "n_samples_seen_", "n_updates_",
                                                       "scale_")}
    for name in ("lam_", "lam_path_", "online_accuracy_", "classes_"):
        if hasattr(estimator, name):
            out[name] = getattr(estimator, name)
    return out


def assert_same(a, b):
    assert a.keys() == b.keys()
    for name in a:
        if isinstance(a[name], np.ndarray):
            assert np.array_equal(a[name], b[name]), name
        else:
            assert a[name] == b[name], name


def stop_then_resume(fit, stop_after, path):
    """``fit(checkpointer)`` stopped at poll ``stop_after`` (``None`` if it finished first), then resumed."""
    try:
        fit(Checkpointer(path, None, IDENTITY, stop_after=stop_after))
        return None
    except RunInterrupted as exc:
        assert exc.path == path and os.path.exists(path)
    return fit(Checkpointer(path, None, IDENTITY, resume=True))


def polls_of(fit, path):
    checkpoint = Checkpointer(path, None, IDENTITY)
    fit(checkpoint)
    return checkpoint.polls


@pytest.fixture
def one_row_chunks(monkeypatch):
    """A poll before every row (every mini-batch for SFSA/TSGD): every interruption point there is."""
    monkeypatch.setattr(resumable, "POLL_SECONDS", 0.0)
    monkeypatch.setattr(resumable, "FIRST_CHUNK", 1)


@pytest.mark.parametrize("name", sorted(STREAM))
def test_stream_learners_resume_bit_for_bit(name, one_row_chunks, tmp_path):
    spec = STREAM[name]
    data = problem_for(spec)
    params = dict(spec.test_params, budget=5)

    def fit(checkpoint=None):
        return spec.estimator_class(**params).fit(data.X, data.y, checkpoint=checkpoint)

    reference = fitted(fit())
    path = str(tmp_path / "cp.pkl")
    total = polls_of(fit, path)
    assert_same(fitted(fit(Checkpointer(path, None, IDENTITY))), reference)     # in chunks, never stopped
    rng = np.random.default_rng(sum(map(ord, name)))
    for k in [1, total] + list(rng.integers(2, total, 3)):
        resumed = stop_then_resume(fit, int(k), path)
        assert resumed is not None, k
        assert_same(fitted(resumed), reference)
    assert stop_then_resume(fit, total + 1, path) is None          # no poll after the last chunk


def test_the_l1_search_replays_its_diverged_fits(one_row_chunks, tmp_path, monkeypatch):
    """Fits of the ``lam="auto"`` search that diverge (here: made to, below an l1 weight of 0.05) are
    replayed on resume with their message, and the search takes the same path."""
    from asyos.errors import DivergenceError
    from asyos.learners.stream.l1 import L1ARDA
    real = resumable.fit_in_chunks

    def diverging(learner, *args, **kwargs):
        if learner.lam_ < 0.05:
            raise DivergenceError(f"diverged at {learner.lam_}")
        return real(learner, *args, **kwargs)

    monkeypatch.setattr(resumable, "fit_in_chunks", diverging)
    X, y = CLASSIFICATION.X, CLASSIFICATION.y

    def fit(checkpoint):
        return L1ARDA(budget=5, passes=1).fit(X, y, checkpoint=checkpoint)

    path = str(tmp_path / "cp.pkl")
    reference = fitted(fit(Checkpointer(path, None, IDENTITY)))
    assert any(nnz is None for _, nnz in reference["lam_path_"])
    total = polls_of(fit, path)
    for k in [total] + list(np.random.default_rng(11).integers(1, total, 4)):
        assert_same(fitted(stop_then_resume(fit, int(k), path)), reference)


@pytest.mark.parametrize("name", ["b-arda", "sfsa"])
def test_chunks_adapted_to_the_clock_change_nothing(name, tmp_path):
    """The default chunks (256 rows, then adapted to ``POLL_SECONDS``) on 3000 rows: several per pass."""
    spec = STREAM[name]
    data = make_classification(n_samples=3000, n_features=50, n_informative=5, seed=4) if name == "b-arda" \
        else make_regression(n_samples=3000, n_features=50, n_informative=5, seed=4)

    def fit(checkpoint=None):
        return spec.estimator_class(budget=5, passes=2).fit(data.X, data.y, checkpoint=checkpoint)

    path = str(tmp_path / "cp.pkl")
    assert polls_of(fit, path) >= 4
    assert_same(fitted(stop_then_resume(fit, 3, path)), fitted(fit()))


@pytest.mark.parametrize("name,settings", [("b-arda", {}), ("sfsa", {"policy": "uniform", "schedule": "random"}),
                                           ("opg", {})])
def test_the_stream_simulator_resumes_bit_for_bit(name, settings, tmp_path):
    spec = STREAM[name]
    data = problem_for(spec)

    def fit(checkpoint=None):
        learner = spec.estimator_class(**dict(spec.test_params, budget=5))
        return AsyncSampleStream(learner, n_workers=3, random_state=4, **settings).fit(data.X, data.y,
                                                                                        checkpoint=checkpoint)

    reference = fit()
    path = str(tmp_path / "cp.pkl")
    rng = np.random.default_rng(len(name))
    for k in [1, reference.n_events_] + list(rng.integers(2, reference.n_events_, 3)):
        resumed = stop_then_resume(fit, int(k), path)
        assert_same(fitted(resumed.learner_), fitted(reference.learner_))
        assert resumed.staleness_ == reference.staleness_ and resumed.n_events_ == reference.n_events_


# -- running averages -------------------------------------------------------------------------------
def write_libsvm(path, n, p, nnz, seed, classification=True):
    """A libsvm file of ``n`` rows with ``nnz`` values each among ``p`` features (drawn a block of rows
    at a time: row by row, 40,000 rows took 5.7 s, 1.9 s so)."""
    rng = np.random.default_rng(seed)
    truth = np.zeros(p)
    truth[:10] = rng.normal(size=10)
    with open(path, "w") as fh:
        for start in range(0, n, 1000):
            m = min(1000, n - start)
            # increasing and distinct: a sorted draw from [0, p - nnz] plus 0, 1, ..., nnz - 1
            cols = np.sort(rng.integers(0, p - nnz + 1, size=(m, nnz)), axis=1) + np.arange(nnz)
            vals = np.round(rng.normal(size=(m, nnz)), 4)
            u = np.einsum("ij,ij->i", vals, truth[cols]) + 0.1 * rng.normal(size=m)
            labels = np.where(u >= 0, 1, -1) if classification else np.round(u, 4)
            fh.writelines(f"{label} " + " ".join(map("{}:{}".format, c.tolist(), v.tolist())) + "\n"
                          for label, c, v in zip(labels.tolist(), cols, vals))
    return path


@pytest.mark.parametrize("settings", [{}, {"forgetting": 0.999}, {"forgetting": 0.99, "forget_by": "batch"}],
                         ids=["plain", "forget-sample", "forget-batch"])
def test_running_averages_resume_bit_for_bit(settings, tmp_path):
    from asyos.data.io import open_source
    from asyos.runs.accumulate import accumulate
    source = open_source(write_libsvm(str(tmp_path / "a.svm"), 700, 40, 6, seed=len(settings),
                                      classification=False), None)

    def run(checkpoint=None):
        return accumulate(source, 40, 0, source.n_train, 64, checkpoint=checkpoint, **settings)

    reference = run()
    path = str(tmp_path / "cp.pkl")
    total = polls_of(run, path)
    assert total == 700 // 64 + 2                      # before each chunk and after the last
    for k in [1, total] + list(np.random.default_rng(len(settings)).integers(2, total, 3)):
        resumed = stop_then_resume(run, int(k), path)
        for name in ("n_seen", "weight", "shift_x", "shift_y", "sum_x", "sum_y", "_sxx", "sxy", "syy"):
            assert np.array_equal(getattr(resumed, name), getattr(reference, name)), (k, name)


# -- DFLS ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("direction,params", [("add", None), ("remove", None), ("add", "penalty=lp")])
def test_dfls_resumes_after_a_phase_or_a_fista_iteration(direction, params, tmp_path, monkeypatch):
    """The CLI's five phases (``run_dfls`` in this process), stopped at seeded polls (after a phase,
    or, for the group lasso, between two FISTA iterations of a solve), then resumed."""
    import asyos.records.resume
    from asyos.runs.config import build_config
    from asyos.runs.run_dfls import run_dfls
    flags = {"algorithm": "dfls", "n_samples": 150, "n_features": 24, "n_informative": 5, "seed": 3,
             "quiet": True, f"{direction}_features": "25%", "params": params}
    real = asyos.records.resume.checkpointer_for
    made = []

    def results(output, stop_after=None, resume=False):
        config = build_config({**flags, "output": output, "resume": resume}, {})

        def checkpointer(c):
            resume_module = asyos.records.resume
            made.append(Checkpointer(resume_module.checkpoint_path(c), None, resume_module.run_identity(c),
                                     resume=resume, stop_after=stop_after))
            return made[-1]
        monkeypatch.setattr(asyos.records.resume, "checkpointer_for", checkpointer)
        try:
            run_dfls(config)
        finally:
            monkeypatch.setattr(asyos.records.resume, "checkpointer_for", real)
        with open(os.path.join(output, "results.json")) as fh:
            return json.load(fh)

    reference = results(str(tmp_path / "whole"))
    total = made[-1].polls
    lp = params is not None
    assert total == 5 if lp else total > 5              # the phases (and the group-lasso solves' iterations)
    where = []
    rng = np.random.default_rng(len(direction))
    for i, k in enumerate((1, 3, 5) if lp else [1, 2, total] + list(rng.integers(3, total, 5))):
        out = str(tmp_path / f"stopped{i}-{k}")          # (a point drawn twice: a directory each)
        with pytest.raises(RunInterrupted) as stopped:
            results(out, stop_after=int(k))
        where.append(stopped.value.progress)
        resumed = results(out, resume=True)
        assert not os.path.exists(os.path.join(out, "checkpoint.pkl"))
        same_dfls(resumed, reference)
    inside = [w for w in where if "in" in w]
    assert not inside if lp else inside and len(inside) < len(where), where


def same_dfls(a, b):
    """Two DFLS records of two runs equal but for the clock (each phase's seconds)."""
    for key in ("coef", "support", "intercept", "block", "reference", "n_samples", "n_features"):
        assert a[key] == b[key], key
    for key in ("dfls", "retrain_cold", "retrain_warm"):
        assert {k: v for k, v in a[key].items() if k != "seconds"} == \
            {k: v for k, v in b[key].items() if k != "seconds"}, key


# -- the CLI --------------------------------------------------------------------------------------
def cli(*args):
    """``python -m asyos.run *args`` inside this process (``tests/inprocess.py``); the runs that
    receive a signal are real processes (``stopped_then_resumed``)."""
    status, out, err = run_asyos(*args)
    return subprocess.CompletedProcess(["python", "-m", "asyos.run", *args], status, out, err)


def stopped_then_resumed(args, tmp_path, stop_after=None):
    """Run ``args`` with ``--output``, SIGTERM it once its checkpoint is on disk (or, with
    ``stop_after``, stop it at that poll as SIGTERM would: ``ASYOS_STOP_AFTER_POLLS``), check what it
    left, resume it, and run it whole: the two ``results.json``."""
    stopped, whole = str(tmp_path / "stopped"), str(tmp_path / "whole")
    env = dict(os.environ, **({"ASYOS_STOP_AFTER_POLLS": str(stop_after)} if stop_after else {}))
    proc = subprocess.Popen([sys.executable, "-m", "asyos.run", *args, "--output", stopped, "--checkpoint-every",
                             "0.2", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while stop_after is None and not os.path.exists(os.path.join(stopped, "checkpoint.pkl")) and proc.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint was written"
        time.sleep(0.02)
    if stop_after is None:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("asyos: stopped by SIGTERM after "), err
    assert f"continue with: python -m asyos.run --resume {stopped}" in lines[0]
    with open(os.path.join(stopped, "results.json")) as fh:
        partial = json.load(fh)
    assert partial["status"] == "interrupted" and partial["exit_status"] == 143
    resumed = cli("--resume", stopped, "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert not os.path.exists(os.path.join(stopped, "checkpoint.pkl"))
    assert cli(*args, "--output", whole, "--quiet").returncode == 0
    return [json.load(open(os.path.join(d, "results.json"))) for d in (stopped, whole)]


def test_cli_stream_file_sigterm_then_resume(tmp_path):
    data = write_libsvm(str(tmp_path / "s.svm"), 20000, 3000, 40, seed=5)     # 6 passes: about 1.4 s
    a, b = stopped_then_resumed(["--algorithm", "b-arda", "--data", data, "--budget", "10", "--passes", "6",
                                 "--chunk-rows", "256"], tmp_path)
    for key in ("selected", "coef", "metrics", "intercept", "n_samples_seen", "n_updates", "online_accuracy"):
        assert a[key] == b[key], key


def test_cli_running_averages_sigterm_then_resume(tmp_path):
    data = write_libsvm(str(tmp_path / "a.svm"), 15000, 400, 30, seed=6, classification=False)
    a, b = stopped_then_resumed(["--algorithm", "ofsa", "--data", data, "--budget", "10", "--chunk-rows", "256"],
                                tmp_path)
    for key in ("selected", "coef", "metrics", "intercept", "n_samples_seen"):
        assert a[key] == b[key], key


def test_cli_dfls_sigterm_then_resume(tmp_path):
    a, b = stopped_then_resumed(["--algorithm", "dfls", "--n-samples", "1500", "--n-features", "250",
                                 "--n-informative", "30"], tmp_path, stop_after=3)    # (DFLS runs for 0.3 s)
    same_dfls(a, b)
